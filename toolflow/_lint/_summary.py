"""The compact summary of the linted files that rules needing every file look at.

``toolflow lint`` runs the per-file rules on each file as it is loaded, then drops the file: its
documents and node trees never wait for the end of the run. What the rules that need every file
(duplicate names, dependencies, toolsets, policies) look at is this summary, kept for every file:
names, categories, parameters, output fields, dependencies, toolsets and policy references, each
with its :class:`Place` so that a diagnostic points where the file says it. Later cross-file rules
(pipelines, loop rules, remote tools) extend these records with what they need.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from toolflow._diagnostics import Locator
from toolflow._model import BUILTIN_CATEGORIES, SpecFile, Toolset, ToolSpec


@attrs.frozen(kw_only=True)
class PluginFacts:
    """What the TF4xx rules need to know about plugins, as plain data (lint never imports plugins).

    Attributes:
        bindings: Implementation name to the names of the plugins that bind it.
        targets: Implementation name to its target: the callable, or the lazy ``"module:attr"`` string.
        failed: Plugin name to the error that stopped it loading.
        kinds: Implementation kind to the names of the plugins that provide it.
    """

    bindings: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    targets: Mapping[str, object] = attrs.field(factory=dict)
    failed: Mapping[str, str] = attrs.field(factory=dict)
    kinds: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)


__all__ = [
    "DependencySummary",
    "FileSummary",
    "Named",
    "Place",
    "PolicySummary",
    "ProjectSummary",
    "ToolSummary",
    "ToolsetSummary",
    "summarize_file",
]

POLICY_LISTS = ("allow", "deny", "deliberate")
"""The keys of a policy that list tool names."""


@attrs.frozen(kw_only=True)
class Place:
    """Where something is written: its file, its JSON pointer, and the span a diagnostic there covers.

    Attributes:
        located: False when the file had no locator (a spec built in code): the span is then 1:1
            and :attr:`position` is the path alone.
    """

    file: str
    pointer: str
    line: int = 1
    column: int = 1
    end_line: int = 1
    end_column: int = 1
    located: bool = True

    @classmethod
    def of(cls, path: str, locator: Locator | None, pointer: str, *, key: bool = False) -> Place:
        """The place of *pointer* (of its key, with *key*) in the file at *path*."""
        if locator is None:
            return cls(file=path, pointer=pointer, located=False)
        span = locator.locate(pointer, key=key)
        return cls(
            file=path,
            pointer=pointer,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
        )

    @property
    def position(self) -> str:
        """``path:line:col``, as messages name another place (the path alone when not located)."""
        return f"{self.file}:{self.line}:{self.column}" if self.located else self.file


@attrs.frozen(kw_only=True)
class Named:
    """A name written in a list (a toolset's tools, a policy's ``allow``), and where."""

    name: str
    place: Place


@attrs.frozen(kw_only=True)
class DependencySummary:
    """One ``depends_on`` entry: the tool waited for, its scope, and the entry's place."""

    tool: str
    scope: str
    place: Place


@attrs.frozen(kw_only=True)
class ToolSummary:
    """What rules that need every file know of one tool; nothing of it holds the document.

    Attributes:
        name: The tool's name.
        category: Its category, as written or defaulted.
        parameters: The names of its declared parameters (``parameters.properties``), in order.
        required: The parameters its ``parameters.required`` lists.
        output_fields: The field paths its ``output_schema`` declares: ``("items", "*", "id")`` for
            the ``id`` of each element of an ``items`` array.
        depends_on: Its dependencies, in order.
        place: The tool's key (where a duplicate name is reported).
        category_place: Its ``category`` value, when the category is not built in (built-in ones
            are always known; locating each would cost every tool a look-up).
    """

    name: str
    category: str
    parameters: tuple[str, ...]
    required: tuple[str, ...]
    output_fields: tuple[tuple[str, ...], ...]
    depends_on: tuple[DependencySummary, ...]
    place: Place
    category_place: Place | None

    @property
    def file(self) -> str:
        """The tool's file."""
        return self.place.file


@attrs.frozen(kw_only=True)
class ToolsetSummary:
    """A toolset: its name and key's place, and the names it lists with their places."""

    name: str
    place: Place
    tools: tuple[Named, ...]
    exclude: tuple[Named, ...]
    categories: tuple[Named, ...]


@attrs.frozen(kw_only=True)
class PolicySummary:
    """The names a file's ``policy`` refers to.

    Attributes:
        toolset: ``policy.toolset``, when it is a string.
        lists: For each of ``allow``, ``deny`` and ``deliberate`` that is a list, its string entries.
        categories: The categories ``policy.categories`` declares.
    """

    toolset: Named | None
    lists: tuple[tuple[str, tuple[Named, ...]], ...]
    categories: tuple[str, ...]


@attrs.frozen(kw_only=True)
class FileSummary:
    """One linted file as the rules that need every file see it."""

    path: str
    tools: tuple[ToolSummary, ...]
    toolsets: tuple[ToolsetSummary, ...]
    policy: PolicySummary | None


@attrs.define(kw_only=True)
class ProjectSummary:
    """Every linted file's summary, in load order: what a rule's ``check_project`` receives."""

    files: tuple[FileSummary, ...]
    targets: tuple[str, ...] = ()
    plugins: PluginFacts | None = None

    @functools.cached_property
    def tools(self) -> tuple[ToolSummary, ...]:
        """Every tool of every file."""
        return tuple(tool for f in self.files for tool in f.tools)

    @functools.cached_property
    def tools_by_name(self) -> Mapping[str, tuple[ToolSummary, ...]]:
        """Tools grouped by name; more than one entry means a duplicate name."""
        grouped: dict[str, list[ToolSummary]] = {}
        for tool in self.tools:
            grouped.setdefault(tool.name, []).append(tool)
        return {name: tuple(tools) for name, tools in grouped.items()}

    @functools.cached_property
    def declared_categories(self) -> frozenset[str]:
        """The categories the files' ``policy: categories:`` mappings declare."""
        return frozenset(c for f in self.files if f.policy is not None for c in f.policy.categories)


def summarize_file(spec_file: SpecFile) -> FileSummary:
    """The summary of one loaded file (what remains of it once the per-file rules have run)."""
    return FileSummary(
        path=spec_file.path,
        tools=tuple(_tool(tool) for tool in spec_file.tools),
        toolsets=tuple(_toolset(spec_file, toolset) for toolset in spec_file.toolsets),
        policy=_policy(spec_file),
    )


def _tool(tool: ToolSpec) -> ToolSummary:
    parameters = tool.parameters if isinstance(tool.parameters, Mapping) else {}
    properties = parameters.get("properties")
    required = parameters.get("required")
    return ToolSummary(
        name=tool.name,
        category=tool.category,
        parameters=tuple(str(n) for n in properties) if isinstance(properties, Mapping) else (),
        required=tuple(n for n in required if isinstance(n, str)) if isinstance(required, list) else (),
        output_fields=tuple(_fields(tool.output_schema, ())),
        depends_on=tuple(
            DependencySummary(tool=d.tool, scope=d.scope, place=Place.of(tool.file, tool.locator, d.pointer))
            for d in tool.depends_on
        ),
        place=Place.of(tool.file, tool.locator, tool.pointer, key=True),
        category_place=None
        if tool.category in BUILTIN_CATEGORIES
        else Place.of(tool.file, tool.locator, f"{tool.pointer}/category"),
    )


def _fields(schema: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    """The field paths under *schema*: its properties, and an array's elements as ``*``."""
    if not isinstance(schema, Mapping):
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            where = (*path, str(name))
            yield where
            yield from _fields(sub, where)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _fields(items, (*path, "*"))


def _toolset(spec_file: SpecFile, toolset: Toolset) -> ToolsetSummary:
    def named(key: str, names: tuple[str, ...]) -> tuple[Named, ...]:
        return tuple(
            Named(name=name, place=Place.of(spec_file.path, spec_file.locator, f"{toolset.pointer}/{key}/{index}"))
            for index, name in enumerate(names)
        )

    return ToolsetSummary(
        name=toolset.name,
        place=Place.of(spec_file.path, spec_file.locator, toolset.pointer, key=True),
        tools=named("tools", toolset.tools),
        exclude=named("exclude", toolset.exclude),
        categories=named("categories", toolset.categories),
    )


def _policy(spec_file: SpecFile) -> PolicySummary | None:
    policy = spec_file.policy
    if not isinstance(policy, Mapping):
        return None
    path, locator = spec_file.path, spec_file.locator
    toolset = policy.get("toolset")
    lists = []
    for key in POLICY_LISTS:
        names = policy.get(key)
        if isinstance(names, list):
            found = tuple(
                Named(name=name, place=Place.of(path, locator, f"/policy/{key}/{index}"))
                for index, name in enumerate(names)
                if isinstance(name, str)
            )
            lists.append((key, found))
    categories = policy.get("categories")
    return PolicySummary(
        toolset=Named(name=toolset, place=Place.of(path, locator, "/policy/toolset"))
        if isinstance(toolset, str)
        else None,
        lists=tuple(lists),
        categories=tuple(str(name) for name in categories) if isinstance(categories, Mapping) else (),
    )
