"""The compact summary of the linted files that rules needing every file look at.

``toolflow lint`` runs the per-file rules on each file as it is loaded, then drops the file: its
documents and node trees never wait for the end of the run. What the rules that need every file
(duplicate names, dependencies, toolsets, policies) look at is this summary, kept for every file:
names, categories, parameters, output shapes, dependencies, pipelines' steps, toolsets and policy
references, each with its :class:`Place` so that a diagnostic points where the file says it. Later
cross-file rules (loop rules, remote tools) extend these records with what they need.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

import attrs

from toolflow._categories import DEFAULT_CATEGORY_POLICIES
from toolflow._diagnostics import Locator, Span


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
    "CategoryFacts",
    "CategorySettings",
    "DependencySummary",
    "FieldRead",
    "FileSummary",
    "Named",
    "PipelineSummary",
    "Place",
    "PolicySummary",
    "ProjectSummary",
    "RuleSummary",
    "ServerSummary",
    "Shape",
    "StepSummary",
    "ToolReference",
    "ToolSummary",
    "ToolsetSummary",
]

POLICY_LISTS = ("allow", "deny", "deliberate")
"""The keys of a policy that list tool names."""

DEFAULT_MAX_TOOLS = 10
"""TF252's default: the most tools a model is offered at once (seed 003: "10 tools max")."""


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
        return cls.at(path, pointer, locator.locate(pointer, key=key))

    @property
    def position(self) -> str:
        """``path:line:col``, as messages name another place (the path alone when not located)."""
        return f"{self.file}:{self.line}:{self.column}" if self.located else self.file

    @classmethod
    def at(cls, path: str, pointer: str, span: Span) -> Place:
        """The place of *span*, in (or inside) the value at *pointer*."""
        return cls(
            file=path,
            pointer=pointer,
            line=span.line,
            column=span.column,
            end_line=span.end_line,
            end_column=span.end_column,
        )


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
class Shape:
    """What a tool's ``output_schema`` says of one value of its result data, as far as it says it.

    Attributes:
        types: The JSON types its ``type`` allows; ``None``: not said.
        properties: A closed object's fields (``properties`` without ``additionalProperties``
            true or a schema, nor ``patternProperties``); ``None``: any field may be there.
        items: The shape of an array's elements; ``None``: not said.
    """

    types: tuple[str, ...] | None = None
    properties: Mapping[str, Shape] | None = None
    items: Shape | None = None


@attrs.frozen(kw_only=True)
class FieldRead:
    """A read of a step's data in a pipeline's template: ``steps.order.items[0]``.

    Attributes:
        step: The step read.
        path: The constant field names and indexes read from its data, outermost first.
        places: Where the step's name and each part of *path* are written (the string's place
            when the part cannot be found inside it).
    """

    step: str
    path: tuple[str | int, ...]
    places: tuple[Place, ...]


@attrs.frozen(kw_only=True)
class StepSummary:
    """One step of a pipeline, as the rules that need every file see it.

    Attributes:
        arguments: The keys of its ``with:``, each at its key.
        arguments_place: Its ``with`` key, or its own key when it has none (where a missing
            argument is reported).
        reads: Its templates' reads of other steps' data that follow a field or an index.
        for_each: Its ``for_each:``, when that is exactly one ``{{ steps.NAME... }}``.
        waits_for: The steps it waits for (read, or listed in ``needs``); every earlier step when a
            template picks one at run time.
        conditional: Whether it has a ``when:``.
    """

    name: str
    tool: str
    place: Place
    tool_place: Place
    arguments: tuple[Named, ...]
    arguments_place: Place
    reads: tuple[FieldRead, ...]
    for_each: FieldRead | None
    repeated: bool
    """Whether it has a ``for_each`` (its data is then a list of its tool's results)."""
    waits_for: tuple[str, ...]
    conditional: bool


@attrs.frozen(kw_only=True)
class PipelineSummary:
    """A tool's pipeline: its steps in order, its result's reads, and where the tool's category is written."""

    steps: tuple[StepSummary, ...]
    result_reads: tuple[FieldRead, ...]
    category_place: Place
    """The tool's ``category`` value, or its key when the category is defaulted."""

    def step(self, name: str) -> StepSummary | None:
        """The step called *name*, or ``None``."""
        return next((step for step in self.steps if step.name == name), None)


@attrs.frozen(kw_only=True)
class ToolSummary:
    """What rules that need every file know of one tool; nothing of it holds the document.

    Attributes:
        name: The tool's name.
        category: Its category, as written or defaulted.
        parameters: The names of its declared parameters (``parameters.properties``), in order.
        required: The parameters its ``parameters.required`` lists.
        defaulted: The parameters with a ``default`` (a call may leave them out, required or not).
        closed: Whether a call's keys must be among *parameters*: ``properties`` is declared, with
            no ``patternProperties`` and no ``additionalProperties`` (or ``unevaluatedProperties``)
            other than false.
        output: What its ``output_schema`` says of its result data; ``None``: it declares none.
        depends_on: Its dependencies, in order.
        place: The tool's key (where a duplicate name is reported).
        category_place: Its ``category`` value, when the category is not built in (built-in ones
            are always known; locating each would cost every tool a look-up).
        pipeline: Its pipeline, when it is implemented by one.
        approval_off: Its ``approval: false``, when it writes one (which cannot take away its
            category's approval).
        exposed: False for ``expose: false``: it serves only as a pipeline step, never offered
            to a model.
        bound: The parameters its ``context:`` binds to the caller's context.
        deferred: Its ``deferred: true``, when it writes one (issue 21).
        approval: Its own ``approval:``, when it is ``true`` or a condition.
    """

    name: str
    category: str
    parameters: tuple[str, ...]
    required: tuple[str, ...]
    defaulted: tuple[str, ...]
    closed: bool
    output: Shape | None
    depends_on: tuple[DependencySummary, ...]
    place: Place
    category_place: Place | None
    pipeline: PipelineSummary | None = None
    approval_off: Place | None = None
    exposed: bool = True
    bound: tuple[str, ...] = ()
    deferred: Place | None = None
    approval: Place | None = None

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
class CategorySettings:
    """What a ``policy.categories`` entry sets of the properties lint checks; ``None``: not set.

    ``places`` holds where the entry writes ``background``, ``ends_loop`` and ``deferred`` (TF258).
    """

    name: str
    approval: bool | None = None
    per_turn: int | None = None
    background: bool | None = None
    ends_loop: str | None = None
    deferred: bool | None = None
    places: Mapping[str, Place] = attrs.field(factory=dict)
    place: Place | None = None
    """The entry's key (where a conflict of its settings is reported)."""


@attrs.frozen(kw_only=True)
class CategoryFacts:
    """A category as the linted files leave it: the properties lint checks, and where they were set.

    ``places`` holds where the last file to write ``background``, ``ends_loop`` and ``deferred``
    wrote each (a built-in default has none).
    """

    approval: bool = False
    per_turn: int | None = None
    background: bool = False
    ends_loop: str = "never"
    deferred: bool = False
    places: Mapping[str, Place] = attrs.field(factory=dict)

    def over(self, settings: CategorySettings) -> CategoryFacts:
        """These facts with what *settings* writes over them, key by key."""
        written = {key: value for key in _CHECKED_KEYS if (value := getattr(settings, key)) is not None}
        return attrs.evolve(self, **written, places={**self.places, **settings.places})


_CHECKED_KEYS = ("approval", "per_turn", "background", "ends_loop", "deferred")


@attrs.frozen(kw_only=True)
class RuleSummary:
    """One entry of a policy's ``rules:`` list (issue 20), as far as it is well formed.

    Attributes:
        kind: ``first``, ``before_exit``, ``after`` or ``max_calls``.
        place: The key that says what the rule allows (``first``, ``before_exit``, the ``only``
            of an ``after`` rule, ``max_calls``): where a contradiction is reported.
        tools: The tools of ``first``, ``before_exit`` and ``only``, each at its entry.
        tool: The tool of ``after`` and of ``max_calls`` (its ``tool``), at its value.
        per_turn: ``max_calls.per_turn``, at its value.
        per_run: ``max_calls.per_run``.
    """

    kind: str
    place: Place
    tools: tuple[Named, ...] = ()
    tool: Named | None = None
    per_turn: tuple[int, Place] | None = None
    per_run: int | None = None

    @property
    def names(self) -> frozenset[str]:
        """The names of :attr:`tools`."""
        return frozenset(entry.name for entry in self.tools)


@attrs.frozen(kw_only=True)
class PolicySummary:
    """The names a file's ``policy`` refers to.

    Attributes:
        toolset: ``policy.toolset``, when it is a string.
        lists: For each of ``allow``, ``deny`` and ``deliberate`` that is a list, its string entries
            (``deliberate``'s object form: its ``tools``).
        categories: The categories ``policy.categories`` declares.
        settings: Their ``approval`` and ``per_turn``, as written.
        place: The ``policy`` key.
        keys: The places of the keys ``allow`` and ``deliberate``, when the file writes them.
        rules: The ``rules:`` entries; ``None`` when the file has no ``rules:`` list.
        triggers: The keys of ``deliberate.triggers`` (the tools they are for), each at its key.
    """

    toolset: Named | None
    lists: tuple[tuple[str, tuple[Named, ...]], ...]
    categories: tuple[str, ...]
    settings: tuple[CategorySettings, ...] = ()
    place: Place | None = None
    keys: Mapping[str, Place] = attrs.field(factory=dict)
    rules: tuple[RuleSummary, ...] | None = None
    triggers: tuple[Named, ...] = ()

    def references(self) -> Iterator[tuple[str, Named]]:
        """Every tool name the policy writes, with what writes it (``policy 'allow' names``)."""
        for key, names in self.lists:
            for entry in names:
                yield f"policy {key!r} names", entry
        for entry in self.triggers:
            yield "policy 'deliberate' gives triggers for", entry
        for rule in self.rules or ():
            if rule.tool is not None:
                yield f"policy rule {rule.kind!r} names", rule.tool
            label = "only" if rule.kind == "after" else rule.kind
            for entry in rule.tools:
                yield f"policy rule {label!r} names", entry


@attrs.frozen(kw_only=True)
class ServerSummary:
    """An entry of ``mcp_servers:``: the names it declares and the names its overrides refer to.

    Attributes:
        place: The server's key.
        prefix: Its ``prefix`` (every tool it imports has a name that starts with it).
        tools: The registry names (``prefix + name``) of the tools its ``tools:`` lists, each at
            its entry; ``None``: it imports every tool the server lists, which lint cannot know.
        overrides: The server's names its ``overrides`` are given for, each at its key.
        depends_on: ``(registry name, dependency)`` for each ``depends_on`` entry of its overrides.
        trusted: Whether the entry trusts the server's annotations (``trust_annotations: true``).
        categories: ``(registry name, category)`` for each ``category`` its overrides set.
        hidden: The registry names its overrides give ``expose: false``.
    """

    name: str
    place: Place
    prefix: str
    tools: tuple[Named, ...] | None
    overrides: tuple[Named, ...] = ()
    depends_on: tuple[tuple[str, DependencySummary], ...] = ()
    trusted: bool = False
    categories: tuple[tuple[str, str], ...] = ()
    hidden: tuple[str, ...] = ()

    def category_of(self, name: str) -> str | None:
        """The category of its tool *name* (a registry name) as far as lint knows it without connecting.

        An override's category; else ``dangerous`` when the annotations are not trusted; else
        ``None`` (the server's annotations decide, which only ``lint --connect`` sees).
        """
        overridden = dict(self.categories).get(name)
        if overridden is not None:
            return overridden
        return None if self.trusted else "dangerous"


@attrs.frozen(kw_only=True)
class ToolReference:
    """A tool name that something refers to, and what: ``toolset 'chat' names``, ``policy 'allow' names``."""

    name: str
    place: Place
    by: str


@attrs.frozen(kw_only=True)
class FileSummary:
    """One linted file as the rules that need every file see it."""

    path: str
    tools: tuple[ToolSummary, ...]
    toolsets: tuple[ToolsetSummary, ...]
    policy: PolicySummary | None
    servers: tuple[ServerSummary, ...] = ()


@attrs.define(kw_only=True)
class ProjectSummary:
    """Every linted file's summary, in load order: what a rule's ``check_project`` receives."""

    files: tuple[FileSummary, ...]
    targets: tuple[str, ...] = ()
    plugins: PluginFacts | None = None
    max_tools: int = DEFAULT_MAX_TOOLS
    """TF252's limit: ``max-tools`` of ``[tool.toolflow.lint]``."""
    listed: Mapping[str, tuple[str, ...] | str] | None = None
    """With ``toolflow lint --connect``: server name to the names of the tools it listed (its own
    names, without the prefix), or why it could not be listed; ``None``: no server was asked."""

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

    def step_targets(self) -> Iterator[tuple[StepSummary, ToolSummary]]:
        """Each pipeline step whose tool is declared exactly once, with that tool.

        A step of an unknown tool (TF227) or of one declared twice (TF203) is left out: what it
        calls is not known.
        """
        known = self.tools_by_name
        for tool in self.tools:
            for step in tool.pipeline.steps if tool.pipeline is not None else ():
                called = known.get(step.tool)
                if called is not None and len(called) == 1:
                    yield step, called[0]

    @functools.cached_property
    def declared_categories(self) -> frozenset[str]:
        """The categories the files' ``policy: categories:`` mappings declare."""
        return frozenset(c for f in self.files if f.policy is not None for c in f.policy.categories)

    @functools.cached_property
    def categories(self) -> Mapping[str, CategoryFacts]:
        """Each category's facts: the built-in defaults, then each file's ``policy: categories:`` in load order.

        A later file wins key by key, as in the runtime policy; a category that no file and no
        default describes is not here (it chains on, without limits: ``CategoryFacts()``).
        """
        merged = {
            name: CategoryFacts(**{key: getattr(default, key) for key in _CHECKED_KEYS})
            for name, default in DEFAULT_CATEGORY_POLICIES.items()
        }
        for spec_file in self.files:
            for settings in spec_file.policy.settings if spec_file.policy is not None else ():
                merged[settings.name] = merged.get(settings.name, CategoryFacts()).over(settings)
        return merged

    @functools.cached_property
    def servers(self) -> tuple[ServerSummary, ...]:
        """Every MCP server entry of every file."""
        return tuple(server for f in self.files for server in f.servers)

    @functools.cached_property
    def remote_by_name(self) -> Mapping[str, tuple[tuple[ServerSummary, Named], ...]]:
        """The registry names that servers' ``tools:`` lists declare, each with its servers and entries."""
        grouped: dict[str, list[tuple[ServerSummary, Named]]] = {}
        for server in self.servers:
            for entry in self.imported(server) or ():
                grouped.setdefault(entry.name, []).append((server, entry))
        return {name: tuple(found) for name, found in grouped.items()}

    @functools.cached_property
    def server_dependencies(self) -> tuple[tuple[str, DependencySummary], ...]:
        """``(registry name, dependency)`` for each ``depends_on`` of the servers' overrides."""
        return tuple(pair for server in self.servers for pair in server.depends_on)

    @functools.cached_property
    def importing_all(self) -> tuple[ServerSummary, ...]:
        """The servers without ``tools:``: whatever they list joins the registry."""
        return tuple(server for server in self.servers if self.imported(server) is None)

    def imported(self, server: ServerSummary) -> tuple[Named, ...] | None:
        """The tools *server* imports, as far as lint knows: its ``tools:``, else what it listed (at its key).

        ``None``: it imports every tool it lists, and it was not asked (or could not answer).
        """
        listed = self.listed.get(server.name) if self.listed is not None else None
        if server.tools is not None or listed is None or isinstance(listed, str):
            return server.tools
        return tuple(Named(name=server.prefix + name, place=server.place) for name in listed)

    @functools.cached_property
    def declared_names(self) -> list[str]:
        """Every tool name declared: the files' tools and the servers' listed tools, sorted (for hints)."""
        return sorted({*self.tools_by_name, *self.remote_by_name})

    def declares(self, name: str) -> bool:
        """Whether a file declares tool *name*, or a server's ``tools:`` lists it."""
        return name in self.tools_by_name or name in self.remote_by_name

    def may_be_remote(self, name: str) -> tuple[ServerSummary, ...]:
        """The servers importing all their tools that *name* may come from (none when it is declared).

        A server with a ``prefix`` gives only names that start with it.
        """
        if not self.importing_all or self.declares(name):
            return ()
        return tuple(server for server in self.importing_all if name.startswith(server.prefix))

    def may_exist(self, name: str) -> bool:
        """Whether tool *name* is declared or may be a remote tool; the rules of unknown names skip it if so."""
        return self.declares(name) or bool(self.may_be_remote(name))

    def iter_references(self) -> Iterator[ToolReference]:
        """Every tool name written where a tool is referred to.

        That is: ``depends_on`` (of tools and of servers' overrides), pipeline steps, toolsets'
        ``tools`` and ``exclude``, and the policies' ``allow``, ``deny``, ``deliberate`` (its
        ``tools`` and the keys of its ``triggers``) and ``rules``.
        """
        for tool in self.tools:
            for dependency in tool.depends_on:
                yield ToolReference(name=dependency.tool, place=dependency.place, by=f"tool {tool.name!r} depends on")
            for step in tool.pipeline.steps if tool.pipeline is not None else ():
                yield ToolReference(
                    name=step.tool, place=step.tool_place, by=f"step {step.name!r} of {tool.name!r} calls"
                )
        for name, dependency in self.server_dependencies:
            yield ToolReference(name=dependency.tool, place=dependency.place, by=f"tool {name!r} depends on")
        for spec_file in self.files:
            for toolset in spec_file.toolsets:
                for verb, names in (("names", toolset.tools), ("excludes", toolset.exclude)):
                    for entry in names:
                        yield ToolReference(name=entry.name, place=entry.place, by=f"toolset {toolset.name!r} {verb}")
            for by, entry in spec_file.policy.references() if spec_file.policy is not None else ():
                yield ToolReference(name=entry.name, place=entry.place, by=by)
