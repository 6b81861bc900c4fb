"""What a lint rule is, and the context every rule's ``check`` receives."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, overload

import attrs

from toolflow._checking import _DIALECT as _KNOWN_DIALECT  # the dialects the runtime validators accept
from toolflow._diagnostics import Diagnostic, Severity, Span
from toolflow._lint._memo import ToolMemo
from toolflow._lint._summary import Place, PluginFacts, ProjectSummary
from toolflow._model import SpecFile, ToolSpec
from toolflow._schemas import iter_schema_problems, json_pointer
from toolflow._validation import ArgumentValidator, ResultValidator

__all__ = ["DOCS_URL", "LintContext", "LintRule", "PluginFacts", "Rule", "ToolMemo", "duplicate_declarations"]

DOCS_URL = "https://toolflow.dev/docs/rules"
"""Base of each rule's documentation page; ``{DOCS_URL}#tf203`` names one rule."""

_DIALECT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

TARGETS = ("openai", "anthropic", "gemini", "mcp")
"""Providers and clients that ``--target`` can check specs against."""


@attrs.define(kw_only=True)
class LintContext:
    """Everything a rule's ``check`` may look at: the file being linted, its tools, the chosen targets.

    ``toolflow lint`` runs each ``check`` on one file at a time (``files`` holds that file), as
    the file is loaded; a rule that needs every file has a ``check_project`` instead, which
    sees the :class:`~toolflow._lint._summary.ProjectSummary` of all of them.

    Expensive facts that several rules need (is a tool's parameter schema valid
    JSON Schema? its compiled validator) are computed once here and shared.
    """

    files: tuple[SpecFile, ...]
    targets: tuple[str, ...] = ()
    plugins: PluginFacts | None = None
    """Facts about plugins, or ``None`` when plugins were not loaded (TF4xx rules then stay silent)."""
    _schema_ok: dict[tuple[int, str], bool] = attrs.field(factory=dict, alias="_schema_ok")
    _validators: dict[tuple[int, str], Any] = attrs.field(factory=dict, alias="_validators")

    @functools.cached_property
    def tools(self) -> tuple[ToolSpec, ...]:
        """Every tool of every file."""
        return tuple(tool for f in self.files for tool in f.tools)

    @functools.cached_property
    def tools_by_name(self) -> Mapping[str, tuple[ToolSpec, ...]]:
        """Tools grouped by name; more than one entry means a duplicate name."""
        grouped: dict[str, list[ToolSpec]] = {}
        for tool in self.tools:
            grouped.setdefault(tool.name, []).append(tool)
        return {name: tuple(tools) for name, tools in grouped.items()}

    def schema_ok(self, tool: ToolSpec, field: str = "parameters") -> bool:
        """True when the tool's ``parameters`` (or ``output_schema``) is valid JSON Schema.

        Valid in the dialect its ``$schema`` names, 2020-12 when it names none. A ``$schema`` the
        validators do not know is never fetched: the schema is not ok, as no call could use it.
        """
        key = (id(tool), field)
        if key not in self._schema_ok:
            schema = getattr(tool, field)
            dialect = schema.get("$schema", _DIALECT_2020_12) if isinstance(schema, Mapping) else _DIALECT_2020_12
            self._schema_ok[key] = (
                schema is not None
                and isinstance(dialect, str)
                and _KNOWN_DIALECT.fullmatch(dialect) is not None
                and next(iter_schema_problems(schema), None) is None
            )
        return self._schema_ok[key]

    @overload
    def validator(self, tool: ToolSpec, field: Literal["parameters"] = ...) -> ArgumentValidator | None: ...
    @overload
    def validator(self, tool: ToolSpec, field: Literal["output_schema"]) -> ResultValidator | None: ...
    @overload
    def validator(self, tool: ToolSpec, field: str) -> ArgumentValidator | ResultValidator | None: ...
    def validator(self, tool: ToolSpec, field: str = "parameters") -> ArgumentValidator | ResultValidator | None:
        """The runtime's own validator of the tool's calls, compiled once per lint run and shared.

        For ``parameters``, the :class:`~toolflow._validation.ArgumentValidator` every call's
        arguments go through (``parameter_rules``, coercion, defaults, unknown keys, ``format``
        asserted, ECMA-262 patterns); for ``output_schema``, the
        :class:`~toolflow._validation.ResultValidator` of its results. ``None`` when the schema is
        not :meth:`schema_ok` (TF204 reports it). The validator's own ``problem`` is left for the
        rules to judge: the ``parameter_rules`` may make valid ``parameters`` unusable.
        """
        key = (id(tool), field)
        if key not in self._validators:
            found: ArgumentValidator | ResultValidator | None = None
            if self.schema_ok(tool, field):  # for_spec never raises
                if field == "parameters":
                    found = ArgumentValidator.for_spec(tool)
                elif field == "output_schema":
                    found = ResultValidator.for_spec(tool)
            self._validators[key] = found
        shared: ArgumentValidator | ResultValidator | None = self._validators[key]
        return shared


Check = Callable[[LintContext], Iterable[Diagnostic]]
ProjectCheck = Callable[[ProjectSummary], Iterable[Diagnostic]]


@attrs.frozen(kw_only=True)
class Rule:
    """A lint rule: stable code and kebab name, default severity, documentation, and its check.

    A rule has one of two checks. ``check(ctx)`` runs on each file as it is loaded, with a
    :class:`LintContext` of that file alone: most rules, and every rule a plugin adds, are
    such. ``check_project(summary)`` runs once, after every file, on the
    :class:`~toolflow._lint._summary.ProjectSummary` of all of them: rules that compare
    files (duplicate names, dependencies, toolsets, policies). Rules with neither are reported
    by the loader (parse and spec-schema problems); they are listed here so that they can be
    selected, ignored and documented like every other rule.
    """

    code: str
    name: str
    severity: Severity
    doc: str
    check: Check | None = None
    check_project: ProjectCheck | None = None
    plugin: str | None = None

    @property
    def summary(self) -> str:
        """The first line of the rule's documentation."""
        return self.doc.strip().splitlines()[0].strip() if self.doc.strip() else self.name

    @property
    def url(self) -> str:
        """Where the rule is documented."""
        return f"{DOCS_URL}#{self.code.lower()}"

    def diag_at(self, place: Place, message: str, *, severity: Severity | None = None) -> Diagnostic:
        """Build this rule's diagnostic at *place* (from a :class:`ProjectSummary`)."""
        return Diagnostic(
            code=self.code,
            name=self.name,
            message=message,
            file=place.file,
            line=place.line,
            column=place.column,
            end_line=place.end_line,
            end_column=place.end_column,
            pointer=place.pointer,
            severity=severity or self.severity,
        )

    def diag(
        self,
        where: ToolSpec | SpecFile,
        pointer: str | list[str | int],
        message: str,
        *,
        key: bool = False,
        severity: Severity | None = None,
    ) -> Diagnostic:
        """Build this rule's diagnostic at *pointer* (absolute, or a path list) of *where*'s file."""
        if not isinstance(pointer, str):
            pointer = json_pointer(pointer)
        path = _path(where)
        span = (
            where.locator.locate(pointer, key=key)
            if where.locator
            else Span(line=1, column=1, end_line=1, end_column=1)
        )
        return Diagnostic(
            code=self.code,
            name=self.name,
            message=message,
            file=path,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
            pointer=pointer,
            severity=severity or self.severity,
        )


LintRule = Rule
"""The public name of :class:`Rule`, for plugins that add lint rules."""


def duplicate_declarations(declared: Mapping[str, Iterable[Place]]) -> Iterator[tuple[str, Place, str]]:
    """For each name declared in more than one file: ``(name, place, others)`` per declaration.

    *others* lists the positions (``path:line:col``) of the same name in the other files. A
    file named twice (the same real path) does not declare its names twice.
    """
    for name, places in declared.items():
        places = list(places)  # noqa: PLW2901 - read twice below
        if len(places) < 2:  # most names: no file system look-up
            continue
        located = [(place, os.path.realpath(place.file)) for place in places]
        if len({real for _, real in located}) < 2:
            continue
        for place, real in located:
            others = dict.fromkeys(p.position for p, r in located if r != real)
            yield name, place, ", ".join(others)


def _path(where: ToolSpec | SpecFile) -> str:
    return where.file if isinstance(where, ToolSpec) else where.path
