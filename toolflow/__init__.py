"""toolflow: declarative YAML tool pipelines for LLM tool calling.

The public API is re-exported here (everything else lives in ``_private``
modules). Names are imported on first use, so that ``import toolflow`` and
``toolflow --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolflow._diagnostics import Diagnostic, Severity, Span
    from toolflow._errors import ConfigError, SpecError, ToolflowError, UsageError
    from toolflow._loader import load_specs, validate_specs
    from toolflow._model import (
        CachePolicy,
        CacheScope,
        Category,
        Example,
        Implementation,
        LoadResult,
        ParameterRule,
        RetryPolicy,
        SpecFile,
        ToolDependency,
        ToolSpec,
        parse_duration,
    )

__version__ = "0.1.0"

_EXPORTS = {
    "CachePolicy": "toolflow._model",
    "CacheScope": "toolflow._model",
    "Category": "toolflow._model",
    "ConfigError": "toolflow._errors",
    "Diagnostic": "toolflow._diagnostics",
    "Example": "toolflow._model",
    "Implementation": "toolflow._model",
    "LoadResult": "toolflow._model",
    "ParameterRule": "toolflow._model",
    "RetryPolicy": "toolflow._model",
    "Severity": "toolflow._diagnostics",
    "Span": "toolflow._diagnostics",
    "SpecError": "toolflow._errors",
    "SpecFile": "toolflow._model",
    "ToolDependency": "toolflow._model",
    "ToolSpec": "toolflow._model",
    "ToolflowError": "toolflow._errors",
    "UsageError": "toolflow._errors",
    "load_specs": "toolflow._loader",
    "parse_duration": "toolflow._model",
    "validate_specs": "toolflow._loader",
}

__all__ = [
    "CachePolicy",
    "CacheScope",
    "Category",
    "ConfigError",
    "Diagnostic",
    "Example",
    "Implementation",
    "LoadResult",
    "ParameterRule",
    "RetryPolicy",
    "Severity",
    "Span",
    "SpecError",
    "SpecFile",
    "ToolDependency",
    "ToolSpec",
    "ToolflowError",
    "UsageError",
    "__version__",
    "load_specs",
    "parse_duration",
    "validate_specs",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'toolflow' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
