"""A project that `toolflow lint` passes builds: its registry builds and every tool's implementation resolves.

Random small projects of several spec files draw their names, schemas, templates, commands,
pipelines, toolsets, categories and dependencies from small pools, so that files collide with each other
and some parts are broken. Whenever lint (with the same plugins) reports no error, the registry
must build from the same files and every tool must resolve, as its first call would; a gap
between the two is a project that passes CI and then cannot run.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, event, given, settings

from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._loader import load_specs
from toolflow._plugins import load_plugins
from toolflow._policy import Policy
from toolflow._registry import Registry

TOOL_NAMES = ["look", "say", "search", "Search", "say-it"]
TOOLSET_NAMES = ["core", "chat"]  # policies may name them too
CATEGORIES = ["safe_chain", "terminal", "dangerous", "observe"]
TEMPLATES = [
    "pong",
    "{{ text }}",
    "{{ text | upper }}",
    "{{ text | shout }}",
    "{% if text %}{{ text }}{% endif %}",
    "{% for c in text %}{{ c }}{% endfor %}",
    "{% for c in text %}",
    "{{ missing }}",
    "".join(f"{{% for i{n} in text %}}" for n in range(21)) + "x" + "{% endfor %}" * 21,
]
PARAMETERS = [
    {"type": "object", "properties": {"text": {"type": "string", "description": "What to use"}}},
    {"type": "object", "properties": {"text": {"type": "string", "description": "What", "pattern": "("}}},
    {"type": "object", "properties": {"text": {"type": "strin", "description": "What"}}},
    {"type": "object", "properties": {}},
    {"type": "array"},
]


@st.composite
def _tool(draw: st.DrawFn) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "description": "Does one small thing for the test",
        "parameters": draw(st.sampled_from(PARAMETERS) if draw(st.booleans()) else st.just(PARAMETERS[0])),
    }
    # Mostly one implementation, sometimes none, two, or a name no plugin binds.
    kinds = draw(
        st.sampled_from(
            [("template",)] * 4
            + [("command",)] * 2
            + [("pipeline",)] * 2
            + [(), ("template", "command"), ("implementation",), ("template", "pipeline")]
        )
    )
    for kind in kinds:
        if kind == "pipeline":
            tool["pipeline"] = draw(_pipeline())
        elif kind == "template":
            tool["template"] = draw(st.sampled_from(TEMPLATES) if draw(st.booleans()) else st.just("{{ text }}"))
        elif kind == "command":
            tool["command"] = draw(st.sampled_from([["echo", "{{ text }}"], [], ["echo", "{% if %}"]]))
        else:
            tool["implementation"] = "nobody.binds.this"
    if draw(st.booleans()):
        tool["category"] = draw(st.sampled_from(CATEGORIES))
    if draw(st.integers(0, 3)) == 0:
        tool["depends_on"] = draw(st.lists(st.sampled_from(TOOL_NAMES), max_size=2, unique=True))
    return tool


STEP_NAMES = ["first", "second", "third"]
STEP_VALUES = [
    "{{ text }}",
    "plain",
    "{{ steps.first }}",
    "{{ steps.second.text }}",
    "{{ errors.third }}",
    "{{ steps[text] }}",
    "{{ item }}",
    "{{ text | shout }}",
    "{{ text",
]


@st.composite
def _pipeline(draw: st.DrawFn) -> dict[str, Any]:
    """A pipeline of steps calling tools from the pool, reading each other (in order or not) and the parameters."""
    names = draw(st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=3, unique=True))
    steps: dict[str, Any] = {}
    values = st.sampled_from(STEP_VALUES) if draw(st.booleans()) else st.just("{{ text }}")
    for name in names:
        step: dict[str, Any] = {"tool": draw(st.sampled_from(TOOL_NAMES[:2]))}
        if draw(st.booleans()):
            step["with"] = {"text": draw(values)}
        if draw(st.integers(0, 3)) == 0:
            step["when"] = draw(values)
        if draw(st.integers(0, 3)) == 0:
            step["for_each"] = draw(st.sampled_from([["a"], "{{ steps.first }}", "{{ [text] }}"]))
        if draw(st.integers(0, 3)) == 0:
            step["needs"] = draw(st.lists(st.sampled_from(STEP_NAMES), min_size=1, max_size=2, unique=True))
        steps[name] = step
    pipeline: dict[str, Any] = {"steps": steps}
    if draw(st.booleans()):
        pipeline["result"] = {"out": draw(values)}
    return pipeline


@st.composite
def _toolset(draw: st.DrawFn) -> dict[str, Any]:
    toolset: dict[str, Any] = {}
    if draw(st.booleans()):
        toolset["tools"] = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2, unique=True))
    if draw(st.booleans()) or not toolset:
        toolset["categories"] = draw(st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=2, unique=True))
    return toolset


@st.composite
def _file(draw: st.DrawFn) -> dict[str, Any]:
    document: dict[str, Any] = {"toolflow": 1}
    document["tools"] = draw(st.dictionaries(st.sampled_from(TOOL_NAMES), _tool(), max_size=2))
    if draw(st.booleans()):
        document["toolsets"] = draw(st.dictionaries(st.sampled_from(TOOLSET_NAMES), _toolset(), min_size=1, max_size=2))
    if draw(st.integers(0, 2)) == 0:
        document["policy"] = draw(_policy())
    return document


@st.composite
def _policy(draw: st.DrawFn) -> dict[str, Any]:
    """A policy naming toolsets and tools from the pools (some of which no file declares)."""
    names = st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2, unique=True)
    policy: dict[str, Any] = {}
    if draw(st.booleans()):
        policy["toolset"] = draw(st.sampled_from(TOOLSET_NAMES))
    for key in ("allow", "deny", "deliberate"):
        if draw(st.integers(0, 2)) == 0:
            policy[key] = draw(names)
    return policy


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(_file(), min_size=1, max_size=3))
def test_a_project_lint_passes_builds_and_resolves(files: list[dict[str, Any]]) -> None:
    """No lint error (with the built-in plugins) means the registry builds and every tool resolves."""
    plugins = load_plugins(entry_points=False, environ={})
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for n, document in enumerate(files):
            path = Path(folder) / f"spec{n}.yaml"
            path.write_text(json.dumps(document, indent=2), encoding="utf-8")
            paths.append(path)
        report = lint_paths(paths, LintConfig(), plugins=plugins.lint_facts(), kinds=plugins.kind_schemas())
        errors = [d.render() for d in report.diagnostics if d.severity.value == "error"]
        event("lint reports errors" if errors else "lint passes")
        if errors:
            return
        specs = load_specs(paths, kinds=plugins.kind_schemas())
        registry = Registry.build(specs, plugins)
        for tool in registry:
            if tool.pipeline is None:  # a pipeline runs through an engine, not a callable
                assert callable(tool.resolve()), tool.name
        # The agent loop takes the policy: its toolset and tool names must all exist.
        policy = Policy.from_specs(specs)
        tuple(registry.exposed(policy, deliberate=policy.deliberate is not None))
