"""The lint engine: load, run the selected rules, apply configuration and suppressions."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._errors import error_text, expect, expect_names
from toolflow._lint._config import LintConfig, RuleSet
from toolflow._lint._rule import LintContext, PluginFacts, Rule
from toolflow._lint._summarize import summarize_file
from toolflow._lint._summary import FileSummary, ProjectSummary
from toolflow._lint._suppress import Suppression, find_suppressions
from toolflow._lint.rules import builtin_rules
from toolflow._loader import Includes, gc_paused, iter_spec_sources, load_file
from toolflow._model import SpecFile, ToolSpec
from toolflow._provenance import Interpolated, Redactor

__all__ = ["CONNECT_RULES", "REMOTE_RULES", "LintReport", "ServerListing", "lint_paths"]

REMOTE_RULES = frozenset(
    {
        *("TF201", "TF204", "TF205", "TF206", "TF207", "TF209"),
        *("TF301", "TF302", "TF303", "TF304", "TF305"),
        *("TF501", "TF502", "TF503", "TF504"),
    }
)
"""The per-file rules ``toolflow lint --connect`` runs on the tools the MCP servers list: names,
schemas, ``--target`` limits and descriptions (what the server, not the spec, decides)."""

CONNECT_RULES = frozenset({"TF245", "TF246"})
"""The rules that report only what ``toolflow lint --connect`` found (``listings``)."""

UNUSED_SUPPRESSION = "TF901"
UNKNOWN_RULE = "TF902"


@attrs.frozen(kw_only=True)
class ServerListing:
    """What an MCP server listed when ``toolflow lint --connect`` asked it, or why it could not.

    Attributes:
        names: The server's own names of every tool it listed.
        specs: The specs of those its entry imports (``toolflow._mcp_specs.remote_tool_spec``).
        error: Why the server could not be started, reached or listed ('' when it was).
    """

    names: tuple[str, ...] = ()
    specs: tuple[ToolSpec, ...] = ()
    error: str = ""


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
    packs: Mapping[str, Sequence[str]] | None = None,
    listings: Mapping[str, ServerListing] | None = None,
) -> LintReport:
    """Lint the spec files named by *paths* (files or directories).

    Each file is loaded, checked by the rules' ``check`` and summarised, then dropped; the
    rules' ``check_project`` then run on the summary of every file (see ``Rule``). A built-in
    rule that raises is a bug and propagates; a plugin's rule that raises is reported in
    ``LintReport.crashed`` and the run goes on.

    Args:
        paths: Spec files and directories.
        config: Selection, severities, targets; default: every rule, no target.
        rules: The rules to choose from (default: the built-in rules).
        plugins: Facts about loaded plugins for the TF4xx rules (default: none loaded).
        kinds: Implementation kinds added by plugins (spec key to schema), passed to the loader.
        environ: Variables for ``${VAR}`` interpolation (default: ``os.environ``).
        packs: Tool packs of plugins (name to files): the files of those the linted files
            ``include`` are linted too, at their own paths.
        listings: What ``toolflow lint --connect`` found, by MCP server name. The listed tools'
            specs are checked by the rules of :data:`REMOTE_RULES`, at the server's entry, and
            references to them resolve (TF245, TF246 report the rest). Default: no server was asked.

    Returns:
        The report; its ``exit_code`` is what ``toolflow lint`` exits with.

    Raises:
        TypeError: *paths* is a single path rather than a list of them, or *environ* or *kinds*
            is not a mapping.
    """
    expect_names(paths, "paths", what="spec files and directories")
    expect(environ, (Mapping, type(None)), "environ", "a mapping of variable names to values, or None")
    expect(kinds, (Mapping, type(None)), "kinds", "a mapping of spec keys to JSON Schemas, or None")
    config = config or LintConfig()
    ruleset = RuleSet(rules if rules is not None else builtin_rules())
    run = _Run(ruleset=ruleset, config=config, enabled=ruleset.enabled(config), plugins=plugins, listings=listings)
    includes = Includes(packs)
    for path, problem in includes.following(iter_spec_sources(paths)):
        if problem is None:
            # As while loading (see gc_paused): what checking one file makes dies with the file.
            with gc_paused():
                spec_file, loaded = load_file(path, environ=environ, kinds=kinds, packs=packs)
                includes.note(spec_file)
                run.add_file(spec_file, loaded)
        else:
            run.found.append(problem)
    return run.report()


@attrs.define(kw_only=True)
class _Run:
    """One lint run: what is kept of the files already linted, and the diagnostics found so far."""

    ruleset: RuleSet
    config: LintConfig
    enabled: tuple[Rule, ...]
    plugins: PluginFacts | None
    listings: Mapping[str, ServerListing] | None = None
    found: list[Diagnostic] = attrs.field(factory=list)
    """Every diagnostic, before configuration and suppressions apply."""
    crashed: dict[str, str] = attrs.field(factory=dict)
    """Plugin rule code to the message of its crash; its diagnostics are dropped at the end."""
    summaries: list[FileSummary] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)
    suppressions: dict[str, list[Suppression]] = attrs.field(factory=dict)
    strings: dict[str, tuple[Interpolated, ...]] = attrs.field(factory=dict)
    """Path to the strings from ``${...}`` of that file, whose values the rules' messages must not show."""
    interpolated: dict[tuple[str, tuple[tuple[str, str], ...]], Interpolated] = attrs.field(factory=dict)
    """Each distinct string from ``${...}`` of every file, to mask in the crash messages."""
    tool_count: int = 0

    def add_file(self, spec_file: SpecFile, loaded: list[Diagnostic]) -> None:
        """Check one loaded file with the per-file rules and keep its summary; drop the rest of it."""
        self.paths.append(spec_file.path)
        self.tool_count += len(spec_file.tools)
        self.found.extend(loaded)  # the loader masked its own diagnostics already
        context = LintContext(files=(spec_file,), targets=self.config.target, plugins=self.plugins)
        checked: list[Diagnostic] = []
        for rule in self.enabled:
            if rule.check is not None and rule.code not in self.crashed:
                checked.extend(self._run(rule, rule.check, context))
        if self.listings:
            checked.extend(self._remote(spec_file))
        if spec_file.interpolated:
            self.strings[spec_file.path] = tuple(string for _, string in spec_file.interpolated)
            for _, string in spec_file.interpolated:
                self.interpolated.setdefault((str(string), string.substitutions), string)
        # Rules name values with !r, which shows a ${...} string's reference; this masks a value that
        # reached a message another way (a template's syntax error quoting its source, a plugin's text).
        self.found.extend(self._redacted(spec_file.path, checked))
        if spec_file.text:
            comments = find_suppressions(spec_file.text, spec_file.locator.in_string if spec_file.locator else None)
            self.suppressions[spec_file.path] = comments
        self.summaries.append(summarize_file(spec_file))

    def _remote(self, spec_file: SpecFile) -> list[Diagnostic]:
        """The :data:`REMOTE_RULES` on the listed tools of *spec_file*'s servers, located at their entries."""
        assert self.listings is not None
        tools = tuple(
            attrs.evolve(spec, locator=spec_file.locator)
            for server in spec_file.mcp_servers
            for spec in self.listings.get(server.name, ServerListing()).specs
        )
        if not tools:
            return []
        remote = SpecFile(path=spec_file.path, tools=tools, text=spec_file.text, locator=spec_file.locator)
        context = LintContext(files=(remote,), targets=self.config.target, plugins=self.plugins)
        found = []
        for rule in self.enabled:
            if rule.check is not None and rule.code in REMOTE_RULES and rule.code not in self.crashed:
                found.extend(self._run(rule, rule.check, context))
        return found

    def _run(self, rule: Rule, check: Callable[[Any], Iterable[Diagnostic]], argument: object) -> list[Diagnostic]:
        if rule.plugin is None:
            return list(check(argument))
        try:
            return list(check(argument))
        except Exception as exc:  # noqa: BLE001 - a crashing plugin rule must not stop the run
            message = f"lint rule {rule.code} of plugin {rule.plugin!r} crashed: {error_text(exc)}"
            self.crashed[rule.code] = message
            return []

    def _redacted(self, path: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        strings = self.strings.get(path) if diagnostics else None
        redact = Redactor(strings) if strings else None
        if not redact:
            return diagnostics
        return [
            d if (message := redact(d.message)) == d.message else attrs.evolve(d, message=message) for d in diagnostics
        ]

    def report(self) -> LintReport:
        """Run the rules that need every file, apply configuration and suppressions, and report."""
        listed = None
        if self.listings is not None:
            listed = {name: found.error or found.names for name, found in self.listings.items()}
        summary = ProjectSummary(
            files=tuple(self.summaries),
            targets=self.config.target,
            plugins=self.plugins,
            listed=listed,
            max_tools=self.config.max_tools,
        )
        for rule in self.enabled:
            if rule.check_project is not None and rule.code not in self.crashed:
                for path, found in _by_file(self._run(rule, rule.check_project, summary)).items():
                    self.found.extend(self._redacted(path, found))
        crashed = list(self.crashed.values())
        if self.interpolated:
            everything = Redactor(self.interpolated.values())
            crashed = [everything(message) for message in crashed]
        kept = [d for d in self.found if d.code not in self.crashed]
        return LintReport(
            diagnostics=tuple(sorted(self._configured(kept), key=Diagnostic.sort_key)),
            files=tuple(self.paths),
            tool_count=self.tool_count,
            rules=self.enabled,
            config=self.config,
            crashed=tuple(crashed),
        )

    def _configured(self, found: list[Diagnostic]) -> list[Diagnostic]:
        """*found* as configured, less what comments suppress; then the comments' own problems."""
        ruleset, config = self.ruleset, self.config
        enabled_codes = {r.code for r in self.enabled}
        kept: list[Diagnostic] = []
        for diagnostic in found:
            rule = ruleset.by_code.get(diagnostic.code)
            if rule is None or rule.code not in enabled_codes or ruleset.ignored_in_file(config, diagnostic.file, rule):
                continue
            if _suppressed(diagnostic, rule, self.suppressions.get(diagnostic.file, ()), ruleset):
                continue
            severity = ruleset.severity(config, rule)
            if diagnostic.name == rule.name and diagnostic.severity is severity:
                kept.append(diagnostic)  # rules set both already; evolving thousands of records is not free
            else:
                kept.append(attrs.evolve(diagnostic, name=rule.name, severity=severity))
        for path, comments in self.suppressions.items():
            kept.extend(_suppression_problems(path, comments, ruleset, enabled_codes, config))
        return kept


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
