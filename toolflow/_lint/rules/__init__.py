"""The built-in lint rules, one module each, named ``tf<code>_<name>.py``."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from toolflow._lint._rule import Rule

__all__ = ["builtin_rules"]


@functools.cache
def builtin_rules() -> tuple[Rule, ...]:
    """Return every built-in rule, sorted by code."""
    rules = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("tf"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            rules.append(module.RULE)
    return tuple(sorted(rules, key=lambda r: r.code))
