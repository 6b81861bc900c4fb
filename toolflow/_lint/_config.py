"""Lint configuration: ``[tool.toolflow.lint]`` in ``pyproject.toml``, and rule selection.

Everywhere a rule is named, its code (``TF203``), a code prefix (``TF2``,
``TF``), its kebab name (``missing-parameter-description``) or ``ALL`` is accepted.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from toolflow._diagnostics import Severity
from toolflow._errors import ConfigError, UsageError
from toolflow._lint._rule import TARGETS, Rule
from toolflow._lint._summary import DEFAULT_MAX_TOOLS
from toolflow._project import find_pyproject, read_pyproject
from toolflow._schemas import did_you_mean

__all__ = ["LintConfig", "RuleSet", "find_pyproject", "load_config"]

_KEYS = ("select", "extend-select", "ignore", "per-file-ignores", "severity", "target", "fail-on", "max-tools")


@attrs.frozen(kw_only=True)
class LintConfig:
    """What to check and how to judge it.

    Attributes:
        select: Rule selectors to enable (default: every rule).
        ignore: Rule selectors to disable; wins over ``select``.
        per_file_ignores: Glob (relative to ``root``) to selectors disabled in matching files.
        severity: Rule selector to severity override.
        target: Providers to check compatibility with (``--target``).
        fail_on: ``error`` (default) or ``warning``: the lowest severity that fails the run.
        root: Directory that ``per_file_ignores`` globs are relative to.
        max_tools: The most tools a model may be offered at once before TF252 warns.
    """

    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    severity: Mapping[str, Severity] = attrs.field(factory=dict)
    target: tuple[str, ...] = ()
    fail_on: Severity = Severity.ERROR
    root: str = "."
    source: str | None = None
    max_tools: int = DEFAULT_MAX_TOOLS


def load_config(path: str | os.PathLike[str] | None = None, *, rules: Sequence[Rule] = ()) -> LintConfig:
    """Read ``[tool.toolflow.lint]`` from *path* (default: the nearest ``pyproject.toml``).

    Raises:
        ConfigError: The file cannot be read, or the table is invalid.
    """
    pyproject = Path(path) if path is not None else find_pyproject()
    if pyproject is None:
        return LintConfig()
    where = os.fspath(pyproject)
    table: Any = read_pyproject(pyproject)
    for key in ("tool", "toolflow", "lint"):
        if not isinstance(table, dict):
            break
        table = table.get(key, {})
    if not isinstance(table, dict):
        raise ConfigError("[tool.toolflow.lint] must be a table (and so must [tool] and [tool.toolflow])", path=where)
    return config_from_mapping(table, rules=rules, root=os.fspath(pyproject.parent), source=where)


def config_from_mapping(
    table: Mapping[str, Any], *, rules: Sequence[Rule] = (), root: str = ".", source: str | None = None
) -> LintConfig:
    """Build a :class:`LintConfig` from a ``[tool.toolflow.lint]``-shaped mapping.

    Raises:
        ConfigError: A key, selector, severity or target is invalid.
    """
    table = {key.replace("_", "-"): value for key, value in table.items()}
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r} in [tool.toolflow.lint]{did_you_mean(key, _KEYS)}", path=source)
    ruleset = RuleSet(rules)

    def selectors(key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key!r} must be a list of rule codes or names", path=source)
        for selector in value:
            ruleset.check_selector(selector, source=source)
        return tuple(value)

    select = selectors("select") if "select" in table else ("ALL",)
    select = (*select, *selectors("extend-select"))
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError("'per-file-ignores' must be a table of glob = [codes]", path=source)
    per_file_ignores: dict[str, tuple[str, ...]] = {}
    for glob, codes in per_file.items():
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(f"'per-file-ignores' entry {glob!r} must be a list of rule codes or names", path=source)
        for code in codes:
            ruleset.check_selector(code, source=source)
        per_file_ignores[glob] = tuple(codes)
    severity_table = table.get("severity", {})
    if not isinstance(severity_table, dict):
        raise ConfigError("'severity' must be a table of rule = 'error' | 'warning'", path=source)
    severity = {}
    for selector, level in severity_table.items():
        ruleset.check_selector(selector, source=source)
        severity[selector] = parse_severity(level, source=source)
    targets = table.get("target", [])
    if isinstance(targets, str):
        targets = [targets]
    return LintConfig(
        select=select,
        ignore=selectors("ignore"),
        per_file_ignores=per_file_ignores,
        severity=severity,
        target=tuple(check_target(t, source=source) for t in targets),
        fail_on=parse_severity(table.get("fail-on", "error"), source=source),
        root=root,
        source=source,
        max_tools=_max_tools(table.get("max-tools", DEFAULT_MAX_TOOLS), source=source),
    )


def _max_tools(value: object, *, source: str | None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"'max-tools' must be a whole number of at least 1, got {value!r}", path=source)
    return value


def parse_severity(value: object, *, source: str | None = None) -> Severity:
    """Parse ``error`` or ``warning``."""
    try:
        return Severity(value)
    except ValueError:
        msg = f"severity must be 'error' or 'warning', got {value!r}"
        raise ConfigError(msg, path=source) from None


def check_target(value: object, *, source: str | None = None) -> str:
    """Return *value* if it is a known ``--target``."""
    if value not in TARGETS:
        hint = did_you_mean(str(value), TARGETS)
        msg = f"unknown target {value!r}; choose from {', '.join(TARGETS)}{hint}"
        raise (ConfigError(msg, path=source) if source else UsageError(msg))
    return str(value)


class RuleSet:
    """Resolves rule selectors (code, code prefix, kebab name, ``ALL``) against a set of rules."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self.by_code = {r.code: r for r in self.rules}
        self.by_name = {r.name: r for r in self.rules}

    def lookup(self, code_or_name: str) -> Rule | None:
        """Return the rule with this code or name, or ``None``."""
        return self.by_code.get(code_or_name.upper()) or self.by_name.get(code_or_name.lower())

    def matches(self, selector: str, rule: Rule) -> bool:
        """True when *selector* selects *rule*."""
        if selector.upper() == "ALL":
            return True
        if selector.lower() == rule.name:
            return True
        return rule.code.startswith(selector.upper())

    def check_selector(self, selector: str, *, source: str | None = None) -> None:
        """Raise unless *selector* selects at least one rule."""
        if not self.rules or any(self.matches(selector, r) for r in self.rules):
            return
        choices = [r.code for r in self.rules] + [r.name for r in self.rules]
        msg = f"unknown rule {selector!r}{did_you_mean(selector, choices)}"
        raise (ConfigError(msg, path=source) if source else UsageError(msg))

    def enabled(self, config: LintConfig) -> tuple[Rule, ...]:
        """The rules *config* selects and does not ignore."""
        return tuple(
            r
            for r in self.rules
            if any(self.matches(s, r) for s in config.select) and not any(self.matches(s, r) for s in config.ignore)
        )

    def severity(self, config: LintConfig, rule: Rule) -> Severity:
        """The severity of *rule* under *config*: the most specific override, else its default."""
        best: tuple[int, Severity] | None = None
        for selector, level in config.severity.items():
            if self.matches(selector, rule):
                specificity = (
                    100 if selector.lower() == rule.name else len(selector) if selector.upper() != "ALL" else 0
                )
                if best is None or specificity > best[0]:
                    best = (specificity, level)
        return best[1] if best else rule.severity

    def ignored_in_file(self, config: LintConfig, path: str, rule: Rule) -> bool:
        """True when a ``per-file-ignores`` glob matching *path* disables *rule*."""
        if not config.per_file_ignores:
            return False
        relative = os.path.relpath(os.path.abspath(path), os.path.abspath(config.root)).replace(os.sep, "/")
        return any(
            fnmatch.fnmatch(relative, glob) and any(self.matches(s, rule) for s in selectors)
            for glob, selectors in config.per_file_ignores.items()
        )
