"""The lint engine: load, run the selected rules, apply configuration and suppressions."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._config import LintConfig, RuleSet
from toolflow._lint._rule import LintContext, PluginFacts, Rule
from toolflow._lint._suppress import Suppression, find_suppressions
from toolflow._lint.rules import builtin_rules
from toolflow._loader import gc_paused, load_specs, redacted
from toolflow._provenance import Redactor

__all__ = ["LintReport", "lint_paths"]

UNUSED_SUPPRESSION = "TF901"
UNKNOWN_RULE = "TF902"


@attrs.frozen(kw_only=True)
class LintReport:
    """The outcome of linting: sorted diagnostics and what was looked at.

    The report is plain data: it keeps the paths of the files linted, not the
    loaded specs, so that everything loading built is freed when linting ends.
    """

    diagnostics: tuple[Diagnostic, ...]
    files: tuple[str, ...]
    """The spec files linted (readable or not), in load order."""
    tool_count: int
    """Number of tools declared across the files."""
    rules: tuple[Rule, ...]
    config: LintConfig
    crashed: tuple[str, ...] = ()
    """One message per plugin rule that raised; its diagnostics are lost, the run goes on."""

    def count(self, severity: Severity) -> int:
        """Number of diagnostics of *severity*."""
        return sum(1 for d in self.diagnostics if d.severity is severity)

    @property
    def failed(self) -> bool:
        """True when a diagnostic reaches the configured ``fail_on`` severity."""
        if self.config.fail_on is Severity.WARNING:
            return bool(self.diagnostics)
        return self.count(Severity.ERROR) > 0

    @property
    def exit_code(self) -> int:
        """0 when clean (or warnings only), 1 when the run fails."""
        return 1 if self.failed else 0


def lint_paths(
    paths: Iterable[str | os.PathLike[str]],
    config: LintConfig | None = None,
    *,
    rules: Sequence[Rule] | None = None,
    plugins: PluginFacts | None = None,
    kinds: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> LintReport:
    """Lint the spec files named by *paths* (files or directories).

    A built-in rule that raises is a bug and propagates; a plugin's rule that
    raises is reported in ``LintReport.crashed`` and the run goes on.

    Args:
        paths: Spec files and directories.
        config: Selection, severities, targets; default: every rule, no target.
        rules: The rules to choose from (default: the built-in rules).
        plugins: Facts about loaded plugins for the TF4xx rules (default: none loaded).
        kinds: Implementation kinds added by plugins (spec key to schema), passed to the loader.
        environ: Variables for ``${VAR}`` interpolation (default: ``os.environ``).

    Returns:
        The report; its ``exit_code`` is what ``toolflow lint`` exits with.
    """
    config = config or LintConfig()
    ruleset = RuleSet(rules if rules is not None else builtin_rules())
    with gc_paused():  # the rules create many short-lived objects while the node trees stay alive
        return _lint(paths, config, ruleset, plugins, kinds, environ=environ)


def _lint(
    paths: Iterable[str | os.PathLike[str]],
    config: LintConfig,
    ruleset: RuleSet,
    plugins: PluginFacts | None,
    kinds: Mapping[str, Mapping[str, Any]] | None,
    *,
    environ: Mapping[str, str] | None,
) -> LintReport:
    enabled = ruleset.enabled(config)
    enabled_codes = {r.code for r in enabled}
    loaded = load_specs(paths, kinds=kinds, environ=environ)
    context = LintContext(files=loaded.files, targets=config.target, plugins=plugins)

    checked: list[Diagnostic] = []
    crashed: list[str] = []
    for rule in enabled:
        if rule.check is None:
            continue
        if rule.plugin is None:
            checked.extend(rule.check(context))
            continue
        try:
            checked.extend(list(rule.check(context)))
        except Exception as exc:  # noqa: BLE001 - a crashing plugin rule must not stop the run
            crashed.append(f"lint rule {rule.code} of plugin {rule.plugin!r} crashed: {type(exc).__name__}: {exc}")
    # Rules name values with !r, which shows a ${...} string's reference; this masks a value that
    # reached a message another way (a template's syntax error quoting its source, a plugin's text).
    # The loader has masked its own diagnostics already.
    found = list(loaded.diagnostics)
    interpolated = [f for f in loaded.files if f.interpolated]
    if interpolated:
        by_file = {f.path: f.interpolated for f in interpolated}
        checked = [d for path, ds in _by_file(checked).items() for d in redacted(ds, by_file.get(path, ()))]
        everything = Redactor(s for f in interpolated for _, s in f.interpolated)
        crashed = [everything(message) for message in crashed]
    found.extend(checked)

    kept: list[Diagnostic] = []
    suppressions = {
        f.path: find_suppressions(f.text, f.locator.in_string if f.locator else None) for f in loaded.files if f.text
    }
    for diagnostic in found:
        found_rule = ruleset.by_code.get(diagnostic.code)
        if found_rule is None or found_rule.code not in enabled_codes:
            continue
        rule = found_rule
        if ruleset.ignored_in_file(config, diagnostic.file, rule):
            continue
        if _suppressed(diagnostic, rule, suppressions.get(diagnostic.file, ()), ruleset):
            continue
        severity = ruleset.severity(config, rule)
        if diagnostic.name == rule.name and diagnostic.severity is severity:
            kept.append(diagnostic)  # rules set both already; evolving thousands of records is not free
        else:
            kept.append(attrs.evolve(diagnostic, name=rule.name, severity=severity))

    for path, comments in suppressions.items():
        kept.extend(_suppression_problems(path, comments, ruleset, enabled_codes, config))
    return LintReport(
        diagnostics=tuple(sorted(kept, key=Diagnostic.sort_key)),
        files=tuple(f.path for f in loaded.files),
        tool_count=len(loaded.tools),
        rules=enabled,
        config=config,
        crashed=tuple(crashed),
    )


def _by_file(diagnostics: Iterable[Diagnostic]) -> dict[str, list[Diagnostic]]:
    grouped: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        grouped.setdefault(diagnostic.file, []).append(diagnostic)
    return grouped


def _suppressed(diagnostic: Diagnostic, rule: Rule, comments: Iterable[Suppression], ruleset: RuleSet) -> bool:
    for comment in comments:
        if comment.covers != diagnostic.line:
            continue
        if not comment.selectors:
            comment.used.add("*")
            return True
        for selector in comment.selectors:
            if ruleset.matches(selector, rule):
                comment.used.add(selector)
                return True
    return False


def _suppression_problems(
    path: str, comments: Iterable[Suppression], ruleset: RuleSet, enabled_codes: set[str], config: LintConfig
) -> Iterable[Diagnostic]:
    def make(code: str, message: str, comment: Suppression) -> Diagnostic | None:
        rule = ruleset.by_code.get(code)
        if rule is None or code not in enabled_codes or ruleset.ignored_in_file(config, path, rule):
            return None
        return Diagnostic(
            code=code,
            name=rule.name,
            message=message,
            file=path,
            line=comment.line,
            column=comment.column,
            end_line=comment.line,
            end_column=comment.column,
            severity=ruleset.severity(config, rule),
        )

    for comment in comments:
        problems: list[Diagnostic | None] = []
        if not comment.selectors and not comment.used:
            problems.append(make(UNUSED_SUPPRESSION, "unused suppression: no problem on the covered line", comment))
        for selector in comment.selectors:
            if not any(ruleset.matches(selector, r) for r in ruleset.rules):
                problems.append(make(UNKNOWN_RULE, f"suppression names unknown rule {selector!r}", comment))
            elif selector not in comment.used and any(
                ruleset.matches(selector, r) and r.code in enabled_codes for r in ruleset.rules
            ):
                problems.append(make(UNUSED_SUPPRESSION, f"unused suppression of {selector!r}", comment))
        yield from (p for p in problems if p is not None)
