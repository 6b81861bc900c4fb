"""Building the :class:`~toolflow._lint._summary.FileSummary` of one loaded file.

Apart from the records (``_summary``) so that the summary of a pipeline, which needs Jinja2
(``_pipeline_summary``), is imported only when some tool has a pipeline, without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from toolflow._lint._summary import (
    POLICY_LISTS,
    CategorySettings,
    DependencySummary,
    FileSummary,
    Named,
    PipelineSummary,
    Place,
    PolicySummary,
    RuleSummary,
    ServerSummary,
    Shape,
    ToolsetSummary,
    ToolSummary,
)
from toolflow._model import BUILTIN_CATEGORIES, McpServer, SpecFile, Toolset, ToolSpec
from toolflow._schemas import json_pointer

__all__ = ["shape_of", "summarize_file"]


def summarize_file(spec_file: SpecFile) -> FileSummary:
    """The summary of one loaded file (what remains of it once the per-file rules have run)."""
    return FileSummary(
        path=spec_file.path,
        tools=tuple(_tool(tool, spec_file.text) for tool in spec_file.tools),
        toolsets=tuple(_toolset(spec_file, toolset) for toolset in spec_file.toolsets),
        policy=_policy(spec_file),
        servers=tuple(_server(spec_file, server) for server in spec_file.mcp_servers),
    )


def _server(spec_file: SpecFile, server: McpServer) -> ServerSummary:
    def place(pointer: str, *, key: bool = False) -> Place:
        return Place.of(spec_file.path, spec_file.locator, pointer, key=key)

    listed = None
    if server.tools is not None:
        listed = tuple(
            Named(name=server.local_name(name), place=place(f"{server.pointer}/tools/{index}"))
            for index, name in enumerate(server.tools)
        )
    overrides = []
    depends_on = []
    categories = []
    hidden = []
    for remote, keys in server.overrides.items():
        pointer = f"{server.pointer}/overrides{json_pointer([remote])}"
        overrides.append(Named(name=remote, place=place(pointer, key=True)))
        if isinstance(keys.get("category"), str):
            categories.append((server.local_name(remote), keys["category"]))
        if keys.get("expose") is False:
            hidden.append(server.local_name(remote))
        for index, item in enumerate(keys.get("depends_on", ())):
            tool, scope = (item, "loop") if isinstance(item, str) else (item["tool"], item.get("scope", "loop"))
            where = place(f"{pointer}/depends_on/{index}")
            depends_on.append((server.local_name(remote), DependencySummary(tool=tool, scope=scope, place=where)))
    return ServerSummary(
        name=server.name,
        place=place(server.pointer, key=True),
        prefix=server.prefix,
        tools=listed,
        overrides=tuple(overrides),
        depends_on=tuple(depends_on),
        trusted=server.trust_annotations,
        categories=tuple(categories),
        hidden=tuple(hidden),
    )


def _tool(tool: ToolSpec, text: str) -> ToolSummary:
    return ToolSummary(
        name=tool.name,
        category=tool.category,
        **_parameters(tool.parameters),
        output=None if tool.output_schema is None else shape_of(tool.output_schema),
        depends_on=tuple(
            DependencySummary(tool=d.tool, scope=d.scope, place=Place.of(tool.file, tool.locator, d.pointer))
            for d in tool.depends_on
        ),
        place=Place.of(tool.file, tool.locator, tool.pointer, key=True),
        category_place=None
        if tool.category in BUILTIN_CATEGORIES
        else Place.of(tool.file, tool.locator, f"{tool.pointer}/category"),
        pipeline=None if tool.pipeline is None else _pipeline(tool, text),
        approval_off=None
        if tool.approval is not False
        else Place.of(tool.file, tool.locator, f"{tool.pointer}/approval"),
        exposed=tool.expose,
        bound=tuple(tool.context),
        deferred=Place.of(tool.file, tool.locator, f"{tool.pointer}/deferred") if tool.deferred else None,
        approval=None
        if tool.approval in (None, False)
        else Place.of(tool.file, tool.locator, f"{tool.pointer}/approval"),
    )


def _parameters(schema: Any) -> dict[str, Any]:
    """The ``parameters``, ``required``, ``defaulted`` and ``closed`` of a tool's summary."""
    parameters = schema if isinstance(schema, Mapping) else {}
    properties = parameters.get("properties")
    required = parameters.get("required")
    if not isinstance(properties, Mapping):
        properties = None
    return {
        "parameters": tuple(str(n) for n in properties) if properties is not None else (),
        "required": tuple(n for n in required if isinstance(n, str)) if isinstance(required, list) else (),
        "defaulted": tuple(str(n) for n, p in (properties or {}).items() if isinstance(p, Mapping) and "default" in p),
        "closed": properties is not None
        and "patternProperties" not in parameters
        and all(parameters.get(k, False) is False for k in ("additionalProperties", "unevaluatedProperties")),
    }


def _pipeline(tool: ToolSpec, text: str) -> PipelineSummary:
    # Imported here: Jinja2 is loaded only when some tool has a pipeline.
    from toolflow._lint._pipeline_summary import summarize_pipeline  # noqa: PLC0415

    return summarize_pipeline(tool, text)


_OPAQUE = Shape()
_COMBINATORS = ("$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "patternProperties")
_DEEPEST_SHAPE = 32
"""Shapes deeper than this are not followed (output schemas are rarely deeper than a few levels)."""


def shape_of(schema: Any, depth: int = 0) -> Shape:
    """What *schema* says of a value, as far as rules can follow it without resolving anything."""
    if not isinstance(schema, Mapping) or depth > _DEEPEST_SHAPE or any(k in schema for k in _COMBINATORS):
        return _OPAQUE
    declared = schema.get("type")
    types: tuple[str, ...] | None = None
    if isinstance(declared, str):
        types = (declared,)
    elif isinstance(declared, list):
        types = tuple(t for t in declared if isinstance(t, str))
    properties = schema.get("properties")
    additional = schema.get("additionalProperties", False)
    items = schema.get("items")
    return Shape(
        types=types,
        properties={str(n): shape_of(s, depth + 1) for n, s in properties.items()}
        if isinstance(properties, Mapping) and additional is False
        else None,
        items=shape_of(items, depth + 1) if isinstance(items, Mapping) else None,
    )


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

    def place(pointer: str, *, key: bool = False) -> Place:
        return Place.of(path, locator, pointer, key=key)

    toolset = policy.get("toolset")
    deliberate = policy.get("deliberate")
    triggers = deliberate.get("triggers") if isinstance(deliberate, Mapping) else None
    categories = policy.get("categories")
    rules = policy.get("rules")
    return PolicySummary(
        toolset=Named(name=toolset, place=place("/policy/toolset")) if isinstance(toolset, str) else None,
        lists=_lists(policy, place),
        categories=tuple(str(name) for name in categories) if isinstance(categories, Mapping) else (),
        settings=_settings(categories, place),
        place=place("/policy", key=True),
        keys={key: place(f"/policy/{key}", key=True) for key in ("allow", "deliberate") if key in policy},
        rules=tuple(_rules(rules, place)) if isinstance(rules, list) else None,
        triggers=tuple(
            Named(name=str(name), place=place(f"/policy/deliberate/triggers{json_pointer([name])}", key=True))
            for name in (triggers if isinstance(triggers, Mapping) else ())
        ),
    )


def _lists(policy: Mapping[str, Any], place: Callable[[str], Place]) -> tuple[tuple[str, tuple[Named, ...]], ...]:
    """The string entries of ``allow``, ``deny`` and ``deliberate`` (its ``tools`` in the object form)."""
    lists = []
    for key in POLICY_LISTS:
        names, pointer = policy.get(key), f"/policy/{key}"
        if key == "deliberate" and isinstance(names, Mapping):  # the object form
            names, pointer = names.get("tools"), f"/policy/{key}/tools"
        if isinstance(names, list):
            lists.append((key, _named(names, pointer, place)))
    return tuple(lists)


def _settings(categories: Any, place: Callable[..., Place]) -> tuple[CategorySettings, ...]:
    """What each ``policy.categories`` entry sets, as written."""
    settings = []
    for name, own in categories.items() if isinstance(categories, Mapping) else ():
        if not isinstance(own, Mapping):
            continue
        flags = {key: own[key] if isinstance(own.get(key), bool) else None for key in ("background", "deferred")}
        ends_loop = own.get("ends_loop")
        written = [key for key in ("background", "ends_loop", "deferred") if key in own]
        settings.append(
            CategorySettings(
                name=str(name),
                approval=own.get("approval") if isinstance(own.get("approval"), bool) else None,
                per_turn=own.get("per_turn") if _is_count(own.get("per_turn")) else None,
                ends_loop=ends_loop if isinstance(ends_loop, str) else None,
                places={key: place(f"/policy/categories{json_pointer([name, key])}") for key in written},
                place=place(f"/policy/categories{json_pointer([name])}", key=True),
                **flags,
            )
        )
    return tuple(settings)


def _named(names: list[Any], pointer: str, place: Callable[[str], Place]) -> tuple[Named, ...]:
    """The string entries of the list at *pointer*, each at its entry."""
    return tuple(
        Named(name=name, place=place(f"{pointer}/{index}")) for index, name in enumerate(names) if isinstance(name, str)
    )


def _rules(rules: list[Any], place: Callable[..., Place]) -> Iterator[RuleSummary]:
    """The well-formed entries of a ``rules:`` list (the loader reports the others)."""
    for index, rule in enumerate(rules):
        pointer = f"/policy/rules/{index}"
        if not isinstance(rule, Mapping):
            continue
        kind = next((k for k in ("first", "before_exit", "after") if k in rule), "max_calls")
        listed = "only" if kind == "after" else kind
        if kind != "max_calls" and isinstance(rule.get(listed), list):
            tool = rule.get("after")
            yield RuleSummary(
                kind=kind,
                place=place(f"{pointer}/{listed}", key=True),
                tools=_named(rule[listed], f"{pointer}/{listed}", place),
                tool=Named(name=tool, place=place(f"{pointer}/after")) if isinstance(tool, str) else None,
            )
        elif kind == "max_calls" and isinstance(rule.get("tool"), str) and isinstance(rule.get("max_calls"), Mapping):
            limits = rule["max_calls"]
            per_turn, per_run = limits.get("per_turn"), limits.get("per_run")
            yield RuleSummary(
                kind=kind,
                place=place(f"{pointer}/max_calls", key=True),
                tool=Named(name=rule["tool"], place=place(f"{pointer}/tool")),
                per_turn=(per_turn, place(f"{pointer}/max_calls/per_turn")) if _is_count(per_turn) else None,
                per_run=per_run if _is_count(per_run) else None,
            )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
