"""The tool registry: loaded specs bound to their implementations, immutable once built.

:meth:`Registry.build` takes a :class:`~toolflow.LoadResult` and the loaded
:class:`~toolflow.Plugins`; for every tool it compiles the argument and result
validators and finds what runs it: the plugin binding of an ``implementation:``
name, or the :class:`~toolflow.ImplementationKind` of a ``template:``,
``command:`` or plugin-provided key. Nothing is imported or built for a tool
until :meth:`RegisteredTool.resolve` is first called.

Problems are collected and raised together: spec errors as
:class:`~toolflow.SpecError`; names no plugin binds, names two plugins bind,
kinds no plugin provides, duplicate tool or toolset names and toolsets naming
unknown tools or categories as one :class:`RegistryError`. Never is one plugin
silently preferred to another.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import types
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import attrs

from toolflow._errors import SpecError, ToolflowError, UsageError, error_message, expect
from toolflow._export import description, export_tools
from toolflow._loader import load_specs
from toolflow._mcp_specs import ToolSourceWarning
from toolflow._model import BUILTIN_CATEGORIES, LoadResult, Pipeline, Toolset, ToolSpec
from toolflow._pipeline_plan import CompiledPipeline, compile_pipeline, pipeline_cycles
from toolflow._plugins import Binding, ImplementationKind, PluginError, Plugins, load_plugins
from toolflow._policy import Policy
from toolflow._schemas import close_matches, did_you_mean
from toolflow._tool_references import position as _position
from toolflow._tool_references import server_problems, unknown_references
from toolflow._validation import ArgumentValidator, ResultValidator

__all__ = [
    "RegisteredTool",
    "Registry",
    "RegistryError",
    "UnknownCategoryError",
    "UnknownToolError",
    "UnknownToolsetError",
    "load_registry",
    "without_caches",
]

BINDING_KIND = "implementation"
"""The spec key whose value names an implementation bound by a plugin."""

MAX_LISTED = 10
"""How many available names an unknown-name message lists when none is close."""


class RegistryError(ToolflowError):
    """The specs and plugins do not fit together, so no registry can be built.

    Attributes:
        problems: One message per problem, each starting with the spec file position when known.
    """

    exit_code = 1

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            message = f"{len(self.problems)} problems building the tool registry:\n" + "\n".join(
                f"  - {problem}" for problem in self.problems
            )
        super().__init__(message)


class UnknownToolError(ToolflowError, LookupError):
    """A tool name the registry does not have; the message names the nearest ones.

    The message is written to be shown to a model as well as to a person:
    ``Unknown tool: 'serch' (did you mean 'search'?)``.

    Attributes:
        name: The name asked for.
        suggestions: The nearest known names, best first (possibly empty).
    """

    exit_code = 2
    what = "tool"

    def __init__(self, name: str, known: Collection[str]) -> None:
        self.name = name
        self.suggestions = tuple(close_matches(name, known, n=3))
        super().__init__(f"Unknown {self.what}: {name!r} ({_hint(self.suggestions, known)})")


class UnknownToolsetError(UnknownToolError):
    """A toolset name the registry does not have; the message names the nearest ones."""

    what = "toolset"


class UnknownCategoryError(UnknownToolError):
    """A category that is neither built in, nor declared by a policy, nor used by a tool."""

    what = "category"


def _hint(suggestions: Sequence[str], known: Collection[str]) -> str:
    if suggestions:
        return f"did you mean {_either(suggestions)}?"
    if not known:
        return "there are none"
    names = sorted(known)
    listed = ", ".join(repr(n) for n in names[:MAX_LISTED])
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return f"available: {listed}{more}"


def _either(names: Sequence[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def is_async_callable(value: object) -> bool:
    """True when calling *value* returns a coroutine: an async function, or an object with an async ``__call__``."""
    if inspect.iscoroutinefunction(value):
        return True
    if isinstance(value, type):  # calling a class makes an instance, whatever its __call__ does
        return False
    call = getattr(value, "__call__", None)  # noqa: B004 - the method itself is inspected, not callability
    return not inspect.isroutine(value) and call is not None and inspect.iscoroutinefunction(call)


class _Once:
    """A write-once cell for what :meth:`RegisteredTool.resolve` produced (thread-safe)."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value: tuple[Callable[..., Any], bool] | None = None

    def get(self, make: Callable[[], Callable[..., Any]]) -> tuple[Callable[..., Any], bool]:
        value = self.value
        if value is None:
            with self._lock:
                value = self.value
                if value is None:
                    function = make()
                    value = self.value = (function, is_async_callable(function))
        return value


@attrs.frozen(kw_only=True)
class RegisteredTool:
    """One tool of a registry: its spec, its compiled validators, and what runs it.

    Attributes:
        spec: The tool as declared.
        validator: Validates and cleans call arguments (compiled once, when the registry was built).
        result_validator: Normalises what the implementation returns.
        kind: ``"implementation"`` (a plugin binding), ``"template"``, ``"command"``,
            ``"pipeline"`` or a plugin kind.
        binding: The plugin binding, for kind ``"implementation"``.
        implementation_kind: The kind that builds the callable, for every kind but
            ``"implementation"`` and ``"pipeline"``.
        pipeline: The compiled pipeline, for kind ``"pipeline"`` (an engine runs it).
    """

    spec: ToolSpec
    validator: ArgumentValidator
    result_validator: ResultValidator
    kind: str
    binding: Binding | None = None
    implementation_kind: ImplementationKind | None = None
    pipeline: CompiledPipeline | None = None
    _resolved: _Once = attrs.field(init=False, factory=_Once, eq=False, repr=False)

    @property
    def name(self) -> str:
        """The tool's name."""
        return self.spec.name

    @property
    def category(self) -> str:
        """The tool's category."""
        return self.spec.category

    @property
    def description(self) -> str:
        """The tool's description, as the model is shown it (a string from ``${...}`` shows its reference)."""
        return description(self.spec)

    @property
    def plugin(self) -> str | None:
        """The name of the plugin that binds the implementation or provides the kind."""
        if self.binding is not None:
            return self.binding.plugin
        return self.implementation_kind.plugin if self.implementation_kind is not None else None

    def resolve(self) -> Callable[..., Any]:
        """Return the callable that runs the tool, importing or building it on first use.

        A lazy ``"module:attr"`` binding is imported once; a kind's ``build(spec)``
        is called once. A failure is not cached: the next call tries again.

        Raises:
            PluginError: The binding cannot be imported, or the kind failed to build the tool.
        """
        return self._resolved.get(self._make)[0]

    @property
    def is_async(self) -> bool:
        """True when the callable is a coroutine function (or has an async ``__call__``); resolves it."""
        return self._resolved.get(self._make)[1]

    def _make(self) -> Callable[..., Any]:
        if self.binding is not None:
            return self.binding.resolve()
        if self.pipeline is not None:
            msg = (
                f"tool {self.name!r} is a pipeline: its steps run through an engine "
                "(toolflow.open_engine, or toolflow.invoke with the registry)"
            )
            raise PluginError(msg)
        kind = self.implementation_kind
        if kind is None:  # pragma: no cover - build() never makes such a tool
            msg = f"tool {self.name!r} has nothing to run it"
            raise PluginError(msg)
        try:
            function = kind.build(self.spec)
        except Exception as exc:
            why = error_message(exc)
            msg = f"the {kind.name!r} kind of plugin {kind.plugin!r} cannot build tool {self.name!r}: {why}"
            raise PluginError(msg, plugin=kind.plugin) from exc
        if not callable(function):
            msg = (
                f"the {kind.name!r} kind of plugin {kind.plugin!r} built {function!r} for tool {self.name!r}, "
                "which is not callable"
            )
            raise PluginError(msg, plugin=kind.plugin)
        return function


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(mapping))


def _frozenset(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


def _used_categories(tools: Iterable[RegisteredTool]) -> frozenset[str]:
    """The built-in categories and those of *tools*."""
    return BUILTIN_CATEGORIES | {tool.category for tool in tools}


@attrs.frozen(kw_only=True, eq=False, repr=False)
class Registry:
    """The tools of a project, bound to their implementations; immutable.

    Build one with :meth:`build` (or :func:`load_registry`). Selections
    (:meth:`filter`, :meth:`toolset`) return new registries that share the
    same :class:`RegisteredTool` objects. Iteration is in load order.
    """

    _tools: Mapping[str, RegisteredTool] = attrs.field(alias="tools", converter=_frozen)
    _toolsets: Mapping[str, Toolset] = attrs.field(alias="toolsets", converter=_frozen, factory=dict)
    _categories: frozenset[str] = attrs.field(
        alias="categories",
        converter=_frozenset,
        default=attrs.Factory(lambda self: _used_categories(self._tools.values()), takes_self=True),
    )

    @classmethod
    def build(
        cls, specs: LoadResult, plugins: Plugins, *, kinds: Mapping[str, ImplementationKind] | None = None
    ) -> Registry:
        """Bind every tool of *specs* to what *plugins* provide, and compile its validators.

        Nothing is started for the ``mcp_servers`` of *specs*: the tools their ``tools:`` lists
        count for the pipeline steps and toolsets that name them, and names that may be tools
        of a server importing all its tools are left to ``unknown_references`` (in
        ``toolflow._tool_references``), which :func:`~toolflow.open_registry` calls again once the
        servers have listed their tools.

        *kinds* are implementation kinds the caller provides besides the plugins' (the ``mcp``
        kind of remote tools, which :func:`~toolflow.open_registry` binds to its connections).

        Raises:
            TypeError: *specs* is not a :class:`~toolflow.LoadResult` or *plugins* not a
                :class:`~toolflow.Plugins`.
            SpecError: The load produced error diagnostics.
            RegistryError: Every problem found (see the module documentation), at once.
        """
        expect(specs, LoadResult, "Registry.build: specs", "a toolflow.LoadResult (from toolflow.load_specs())")
        expect(plugins, Plugins, "Registry.build: plugins", "a toolflow.Plugins (from toolflow.load_plugins())")
        if not specs.ok:
            raise SpecError(specs.diagnostics)
        bindings = plugins.bindings()
        known_kinds = plugins.kinds()
        if kinds:
            known_kinds = {**known_kinds, **{name: [kind] for name, kind in kinds.items()}}
        problems: list[str] = []
        unique: dict[str, ToolSpec] = {}
        for spec in specs.tools:
            first = unique.setdefault(spec.name, spec)
            if first is not spec:
                where = _where(spec, spec.pointer, key=True)
                problems.append(f"{where}: tool {spec.name!r} is declared twice (first in {first.file})")
        tools: dict[str, RegisteredTool] = {}
        for spec in unique.values():
            tool = _registered(spec, unique, bindings, known_kinds, problems)
            if tool is not None:
                tools[spec.name] = tool
        for cycle in pipeline_cycles(unique.values()):
            spec = unique[cycle[0]]
            where = _where(spec, f"{spec.pointer}/pipeline", key=True)
            problems.append(f"{where}: pipelines call each other in a cycle: {' -> '.join(cycle)}")
        categories = set(BUILTIN_CATEGORIES) | {spec.category for spec in unique.values()}
        categories |= _policy_categories(specs)
        # The remote tools join later (the engine lists the servers' tools): names that servers'
        # tools: lists declare count now, and those that may be remote wait for the listing.
        problems.extend(unknown_references(specs, {*unique, *(n for s in specs.mcp_servers for n in s.declared)}))
        toolsets = _toolsets(specs, categories, problems)
        problems.extend(server_problems(specs, unique))
        if problems:
            raise RegistryError(problems)
        return cls(tools=tools, toolsets=toolsets, categories=categories)

    # --- look-up -------------------------------------------------------------------------

    def get(self, name: str) -> RegisteredTool:
        """The tool called *name*.

        Raises:
            UnknownToolError: No such tool; the message names the nearest ones.
        """
        tool = self._tools.get(name)
        if tool is None:
            raise UnknownToolError(name, self._tools.keys())
        return tool

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._tools

    def __iter__(self) -> Iterator[RegisteredTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"<Registry of {len(self)} tool(s): {', '.join(repr(n) for n in self._tools)}>"

    def names(self) -> tuple[str, ...]:
        """The tool names, in load order."""
        return tuple(self._tools)

    def categories(self) -> tuple[str, ...]:
        """Every known category: built in, declared by a policy, or used by a tool of the specs, sorted."""
        return tuple(sorted(self._categories))

    def toolset_names(self) -> tuple[str, ...]:
        """The names of the toolsets the specs declare, in load order."""
        return tuple(self._toolsets)

    def by_category(self, category: str) -> tuple[RegisteredTool, ...]:
        """The tools of *category*, in load order.

        Raises:
            UnknownCategoryError: *category* is not known (a category known but unused gives ``()``).
        """
        self._check_categories((category,))
        return tuple(tool for tool in self if tool.category == category)

    # --- selections ----------------------------------------------------------------------

    def filter(
        self,
        *,
        include_categories: Iterable[str] | None = None,
        exclude_categories: Iterable[str] | None = None,
        names: Iterable[str] | None = None,
        exclude_names: Iterable[str] | None = None,
    ) -> Registry:
        """A registry of the tools that pass every criterion given (seed 001's ``filter_tools``).

        A tool is kept when its category is in *include_categories* (if given)
        and not in *exclude_categories*, and its name is in *names* (if given)
        and not in *exclude_names*.

        Raises:
            UnknownToolError: A name is not a tool of this registry.
            UnknownCategoryError: A category is not known.
        """
        include = None if include_categories is None else frozenset(include_categories)
        exclude = frozenset(exclude_categories or ())
        wanted = None if names is None else frozenset(names)
        unwanted = frozenset(exclude_names or ())
        self._check_categories((*(include or ()), *exclude))
        for name in sorted((wanted or frozenset()) | unwanted):
            if name not in self._tools:
                raise UnknownToolError(name, self._tools.keys())

        def keep(tool: RegisteredTool) -> bool:
            if include is not None and tool.category not in include:
                return False
            if wanted is not None and tool.name not in wanted:
                return False
            return tool.category not in exclude and tool.name not in unwanted

        return self._select(keep)

    def toolset(self, name: str) -> Registry:
        """A registry of the tools the toolset *name* selects (its tools and categories, minus its excludes).

        Raises:
            UnknownToolsetError: The specs declare no such toolset; the message names the nearest ones.
        """
        toolset = self._toolsets.get(name)
        if toolset is None:
            raise UnknownToolsetError(name, self._toolsets.keys())
        return self._select(lambda tool: toolset.selects(tool.spec))

    def exposed(
        self,
        policy: Policy,
        *,
        deliberate: bool = False,
        toolsets: Iterable[str] = (),
        tools: Iterable[str] = (),
    ) -> Registry:
        """The tools a model may see and call under *policy*: the agent loop's and ``toolflow serve``'s.

        1. The selection: the toolsets *toolsets* and the tools *tools* when either is given
           (the operator's choice, ``toolflow serve --toolset/--tool``), else the policy's
           ``toolset``, else every tool.
        2. The policy's ``allow`` list keeps only the tools it names.
        3. In *deliberate* mode, the policy's ``deliberate`` list replaces steps 1 and 2.
        4. The policy's ``deny`` list takes its tools out, always, and so does a tool's
           ``expose: false`` (it serves only as a pipeline step).

        Raises:
            UsageError: The policy's ``allow``, ``deny``, ``deliberate``, ``triggers`` or ``rules``
                name a tool that does not exist, its ``toolset`` does not exist, or *deliberate*
                is set without a ``deliberate`` list.
            UnknownToolsetError: One of *toolsets* does not exist.
            UnknownToolError: One of *tools* does not exist.
        """
        ruled = [name for rule in policy.rules for name in (*rule.tools, rule.tool) if name is not None]
        listed = (
            ("allow", policy.allow),
            ("deny", policy.deny),
            ("deliberate", policy.deliberate),
            ("triggers", policy.triggers),
            ("rules", ruled),
        )
        for key, names in listed:
            unknown = sorted(set(names or ()) - self._tools.keys())
            if unknown:
                msg = f"policy {key!r} names tools that do not exist: {', '.join(repr(n) for n in unknown)}"
                raise UsageError(msg)
        chosen = self._chosen(policy, deliberate=deliberate, toolsets=tuple(toolsets), tools=tuple(tools))
        if policy.allow is not None and not deliberate:
            chosen &= frozenset(policy.allow)
        denied = frozenset(policy.deny)
        return self._select(lambda tool: tool.name in chosen and tool.name not in denied and tool.spec.expose)

    def _chosen(
        self, policy: Policy, *, deliberate: bool, toolsets: tuple[str, ...], tools: tuple[str, ...]
    ) -> frozenset[str]:
        """Steps 1 and 3 of :meth:`exposed`: the names selected before ``allow`` and ``deny``."""
        if deliberate:
            if policy.deliberate is None:
                msg = "deliberate mode needs a 'deliberate' allowlist in the policy"
                raise UsageError(msg)
            return frozenset(policy.deliberate)
        if toolsets or tools:
            chosen = frozenset(self.filter(names=tools).names())
            for toolset in toolsets:
                chosen |= frozenset(self.toolset(toolset).names())
            return chosen
        if policy.toolset is not None:
            try:
                return frozenset(self.toolset(policy.toolset).names())
            except UnknownToolError as exc:
                msg = f"policy 'toolset': {exc}"
                raise UsageError(msg) from None
        return frozenset(self._tools)

    def schemas(self, format: str) -> list[dict[str, Any]]:  # noqa: A002 - the CLI option's name
        """The tools as OpenAI, Anthropic, MCP or Gemini tool definitions, in load order (see ``toolflow._export``).

        Raises:
            UsageError: *format* is not ``openai``, ``anthropic``, ``mcp`` or ``gemini``.
        """
        return export_tools((tool.spec for tool in self), format)

    def _select(self, keep: Callable[[RegisteredTool], bool]) -> Registry:
        tools = {name: tool for name, tool in self._tools.items() if keep(tool)}
        return Registry(tools=tools, toolsets=self._toolsets, categories=self._categories)

    def _check_categories(self, categories: Iterable[str]) -> None:
        for category in categories:
            if category not in self._categories:
                raise UnknownCategoryError(category, self._categories)


def without_caches(registry: Registry) -> Registry:
    """*registry* with every tool's ``cache`` removed (``--no-cache``); toolsets and categories are kept."""
    tools = {tool.name: attrs.evolve(tool, spec=attrs.evolve(tool.spec, cache=None)) for tool in registry}
    return attrs.evolve(registry, tools=tools)


def load_registry(
    paths: Iterable[str | os.PathLike[str]],
    *,
    plugins: Plugins | None = None,
    environ: Mapping[str, str] | None = None,
) -> Registry:
    """Load the spec files named by *paths* and build their registry.

    Args:
        paths: Spec files and directories.
        plugins: The plugins to bind with (default: :func:`~toolflow.load_plugins` with its defaults).
        environ: Variables for ``${VAR}`` interpolation (default: ``os.environ``).

    It does not connect to the MCP servers of the specs' ``mcp_servers:`` (it warns when there are
    some, with a :class:`~toolflow.ToolSourceWarning`): :func:`~toolflow.open_registry` does.

    Raises:
        TypeError: *paths* is a single path rather than a list, or *plugins* not a
            :class:`~toolflow.Plugins`.
        SpecError: The specs have errors.
        RegistryError: The specs and plugins do not fit together.
    """
    expect(plugins, (Plugins, type(None)), "load_registry: plugins", "a toolflow.Plugins or None")
    if plugins is None:
        plugins = load_plugins()
    specs = load_specs(paths, environ=environ, **plugins.loader_options())
    if specs.mcp_servers:
        names = ", ".join(repr(server.name) for server in specs.mcp_servers)
        warnings.warn(
            f"load_registry does not connect to the specs' MCP servers ({names}): their tools are not in the "
            "registry; use toolflow.open_registry",
            ToolSourceWarning,
            stacklevel=2,
        )
    return Registry.build(specs, plugins)


# --- building ---------------------------------------------------------------------------------


def _where(spec: ToolSpec, pointer: str, *, key: bool = False) -> str:
    """``file:line:col`` of *pointer* (or of its key) in *spec*'s file (or just the file)."""
    return _position(spec.file, spec.locator, pointer, key=key)


PIPELINE_KIND = "pipeline"


def _registered(
    spec: ToolSpec,
    specs: Mapping[str, ToolSpec],
    bindings: Mapping[str, list[Binding]],
    kinds: Mapping[str, list[ImplementationKind]],
    problems: list[str],
) -> RegisteredTool | None:
    """*spec* bound and with its validators compiled; ``None`` after reporting its problems."""
    pipeline = None
    found: tuple[str, Binding | ImplementationKind | None] | None
    if spec.pipeline is not None:
        pipeline = _pipeline(spec, specs, problems)
        found = (PIPELINE_KIND, None)
    else:
        found = _implementation(spec, bindings, kinds, problems)
    if found is None:
        return None
    validator = ArgumentValidator.for_spec(spec)
    result_validator = ResultValidator.for_spec(spec)
    unusable = [
        (field, compiled.problem)
        for field, compiled in (("parameters", validator.compiled), ("output_schema", result_validator.compiled))
        if compiled is not None and compiled.problem
    ]
    for field, problem in unusable:
        where = _where(spec, f"{spec.pointer}/{field}", key=True)
        problems.append(
            f"{where}: tool {spec.name!r}: its {field} cannot be used: {problem}; "
            "'toolflow lint' lists every problem of the specs"
        )
    if unusable:
        return None
    return RegisteredTool(
        spec=spec,
        validator=validator,
        result_validator=result_validator,
        kind=found[0],
        binding=found[1] if isinstance(found[1], Binding) else None,
        implementation_kind=found[1] if isinstance(found[1], ImplementationKind) else None,
        pipeline=pipeline,
    )


def _pipeline(spec: ToolSpec, specs: Mapping[str, ToolSpec], problems: list[str]) -> CompiledPipeline | None:
    """The compiled pipeline of *spec*; ``None`` after reporting its problems."""
    pipeline = cast("Pipeline", spec.pipeline)
    compiled = compile_pipeline(pipeline)
    found = len(problems)
    if isinstance(compiled, list):
        for pointer, message in compiled:
            problems.append(f"{_where(spec, pointer, key=True)}: tool {spec.name!r}: {message}")
    properties = spec.parameters.get("properties") if isinstance(spec.parameters, Mapping) else None
    for reserved in ("steps", "errors"):
        if isinstance(properties, Mapping) and reserved in properties:
            where = _where(spec, f"{spec.pointer}/parameters/properties/{reserved}", key=True)
            problems.append(
                f"{where}: tool {spec.name!r}: a pipeline's parameter may not be called {reserved!r}: "
                f"its templates read the steps' results as {reserved!r}"
            )
    return None if len(problems) > found or isinstance(compiled, list) else compiled


def _implementation(
    spec: ToolSpec,
    bindings: Mapping[str, list[Binding]],
    kinds: Mapping[str, list[ImplementationKind]],
    problems: list[str],
) -> tuple[str, Binding | ImplementationKind] | None:
    """The kind and the binding or implementation kind of *spec*; ``None`` after reporting a problem."""
    declared = spec.implementations
    if len(declared) != 1:
        where = _where(spec, spec.pointer, key=True)
        if declared:
            found = ", ".join(repr(i.kind) for i in declared)
            problems.append(f"{where}: tool {spec.name!r} has {len(declared)} implementations ({found}); keep one")
        else:
            problems.append(f"{where}: tool {spec.name!r} has no implementation")
        return None
    implementation = declared[0]
    # A bound name is pointed at itself; a kind at its key (its value may be a long mapping).
    where = _where(spec, implementation.pointer, key=implementation.kind != BINDING_KIND)
    if implementation.kind == BINDING_KIND:
        name = str(implementation.config)
        found_bindings = bindings.get(name, [])
        if not found_bindings:
            hint = did_you_mean(name, sorted(bindings))
            problems.append(f"{where}: tool {spec.name!r} uses implementation {name!r}, which no plugin binds{hint}")
            return None
        if len(found_bindings) > 1:
            owners = _either([b.plugin for b in found_bindings]).replace(" or ", " and ")
            problems.append(
                f"{where}: implementation {name!r} of tool {spec.name!r} is bound by "
                f"{len(found_bindings)} plugins: {owners}; uninstall or disable one of them"
            )
            return None
        return BINDING_KIND, found_bindings[0]
    found_kinds = kinds.get(implementation.kind, [])
    if not found_kinds:
        problems.append(f"{where}: tool {spec.name!r}: no plugin provides the {implementation.kind!r} kind")
        return None
    if len(found_kinds) > 1:
        owners = _either([k.plugin for k in found_kinds]).replace(" or ", " and ")
        problems.append(
            f"{where}: the {implementation.kind!r} kind of tool {spec.name!r} is provided by "
            f"{len(found_kinds)} plugins: {owners}; uninstall or disable one of them"
        )
        return None
    return implementation.kind, found_kinds[0]


def _policy_categories(specs: LoadResult) -> set[str]:
    """Categories the files' ``policy: categories:`` mappings declare."""
    found: set[str] = set()
    for spec_file in specs.files:
        policy = spec_file.policy
        declared = policy.get("categories") if isinstance(policy, Mapping) else None
        if isinstance(declared, Mapping):
            found.update(str(name) for name in declared)
    return found


def _toolsets(
    specs: LoadResult,
    categories: Collection[str],
    problems: list[str],
) -> dict[str, Toolset]:
    """The toolsets by name; duplicates and unknown categories are reported (as lint rules TF225, TF222 do)."""
    toolsets: dict[str, Toolset] = {}
    for spec_file in specs.files:
        for toolset in spec_file.toolsets:
            where = functools.partial(_position, spec_file.path, spec_file.locator)
            first = toolsets.setdefault(toolset.name, toolset)
            if first is not toolset:
                at = where(toolset.pointer, key=True)
                problems.append(f"{at}: toolset {toolset.name!r} is declared twice (first in {first.file})")
                continue
            for index, category in enumerate(toolset.categories):
                if category not in categories:
                    hint = did_you_mean(category, sorted(categories))
                    problems.append(
                        f"{where(f'{toolset.pointer}/categories/{index}')}: toolset {toolset.name!r} "
                        f"includes category {category!r}, which is not built in, declared by a policy "
                        f"or used by any tool{hint}"
                    )
    return toolsets
