"""The plugin: what it binds, that it binds lazily, and the repository's example specs running through a registry."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolflow_assistant.plugin
import trio
from toolflow_assistant.plugin import IMPLEMENTATIONS
from toolflow_assistant.world import current

import toolflow
from toolflow import RegisteredTool, Registry, ToolResult, invoke, load_specs
from toolflow.testing import IsolatedPlugins, ToolflowProject

SPECS = Path(__file__).resolve().parents[3] / "specs"
"""The repository's example specs, which this plugin makes runnable."""

PLUGIN = "assistant"


@pytest.fixture
def plugins(toolflow_plugins: IsolatedPlugins) -> IsolatedPlugins:
    """The isolated plugin manager with this plugin registered (besides the built-in kinds)."""
    toolflow_plugins.register(toolflow_assistant.plugin, PLUGIN)
    return toolflow_plugins


@pytest.fixture
def registry(plugins: IsolatedPlugins) -> Registry:
    """The registry of the repository's ``specs/``."""
    return Registry.build(load_specs([SPECS]), plugins)


async def call(tool: RegisteredTool, arguments: dict[str, Any]) -> ToolResult:
    """Validate, run and normalise one call with ``toolflow.invoke``, as ``toolflow call`` does."""
    with trio.fail_after(10):
        return await invoke(tool, arguments)


def test_binds_every_implementation_name_of_the_example_specs() -> None:
    """Each ``implementation:`` of ``specs/`` is bound by this plugin, and nothing else is."""
    loaded = load_specs([SPECS])
    assert loaded.ok, loaded.diagnostics
    used = {i.config for tool in loaded.tools for i in tool.implementations if i.kind == "implementation"}
    assert used == set(IMPLEMENTATIONS)


def test_bindings_are_lazy_strings_that_resolve(plugins: IsolatedPlugins) -> None:
    """Every binding is a ``module:attr`` string of this plugin that imports to a callable."""
    bindings = plugins.bindings()
    for name in IMPLEMENTATIONS:
        (binding,) = bindings[name]
        assert binding.plugin == PLUGIN
        assert binding.lazy
        assert callable(binding.resolve())


def test_loading_the_plugin_imports_no_tools() -> None:
    """Importing the plugin module (as lint does) leaves the tool modules and trio unimported."""
    code = (
        "import sys, toolflow_assistant.plugin as p; "
        "print(sorted(m for m in sys.modules if m.startswith('toolflow_assistant.') or m == 'trio'))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(output.replace("'", '"')) == ["toolflow_assistant.plugin"]


def test_signatures_take_the_spec_parameters_by_keyword() -> None:
    """Each implementation accepts exactly its tool's parameters as keyword-only arguments."""
    loaded = load_specs([SPECS])
    for tool in loaded.tools:
        implementation = tool.implementation
        if implementation is None or implementation.kind != "implementation":
            continue
        module, _, attribute = IMPLEMENTATIONS[implementation.config].partition(":")
        signature = inspect.signature(getattr(importlib.import_module(module), attribute))
        assert set(signature.parameters) == set(tool.parameters["properties"]), tool.name
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in signature.parameters.values())
        required = {n for n, p in signature.parameters.items() if p.default is inspect.Parameter.empty}
        assert required == set(tool.parameters.get("required", [])), tool.name


def test_sync_and_async_implementations_are_mixed(registry: Registry) -> None:
    """The world and talking tools are plain functions; memory, delegation and worker tools are async."""
    kinds = {tool.name: tool.is_async for tool in registry if tool.kind == "implementation"}
    assert not kinds["inspect_location"]
    assert not kinds["page"]
    assert kinds["store_memory"]
    assert kinds["write_file"]


def test_installed_entry_point() -> None:
    """The distribution declares the ``assistant`` entry point of group ``toolflow``."""
    found = [ep for ep in importlib.metadata.entry_points(group="toolflow") if ep.name == PLUGIN]
    assert [(ep.value, ep.dist.name if ep.dist else None) for ep in found] == [
        ("toolflow_assistant.plugin", "toolflow-assistant")
    ]


def test_lint_of_the_example_specs_is_clean_with_the_plugin(toolflow_project: ToolflowProject) -> None:
    """``toolflow lint`` finds every implementation bound, with fitting signatures (TF4xx)."""
    importlib.import_module("toolflow_assistant.tools")  # imported, so TF403 inspects the signatures
    importlib.import_module("toolflow_assistant.worker")
    toolflow_project.pyproject(f'[tool.toolflow]\nspecs = ["{SPECS.as_posix()}"]\n')
    result = toolflow_project.lint(
        "--output-format", "json", env={"TOOLFLOW_LOAD_PLUGINS": "assistant", "TOOLFLOW_DISABLE_PLUGINS": None}
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    assert not [d for d in json.loads(result.stdout)["diagnostics"] if d["code"].startswith("TF4")]


async def test_every_example_of_the_specs_runs(registry: Registry) -> None:
    """Each example of each tool this plugin implements runs, in file order, and gives its result or expect_error."""
    ran = 0
    current().status_outages = 0  # the status service's dropped connection is the engine's to retry (below)
    for tool in registry:
        if tool.kind != "implementation":
            continue
        for example in tool.spec.examples:
            result = await call(tool, dict(example.args))
            if example.expect_error is not None:
                assert not result.success, (tool.name, example.args)
                assert example.expect_error in (result.error or ""), (tool.name, result.error)
                continue
            assert result.success, (tool.name, example.args, result.error)
            if example.has_result:
                assert result.data == example.result, tool.name
            ran += 1
    assert ran >= 20
    assert current().experiments[0].pid == 55555


async def test_the_status_service_drops_its_first_connection(registry: Registry) -> None:
    """get_system_status fails once with a transient connection error; the engine's retry absorbs it."""
    first = await call(registry.get("get_system_status"), {})
    assert not first.success
    assert first.error == (
        "Error: tool 'get_system_status' raised ConnectionError: status service unreachable: connection reset by peer "
        "(temporary, try again)"
    )
    current().status_outages = 1
    with trio.fail_after(10):
        async with toolflow.open_engine(registry) as engine:
            status = await engine.call("get_system_status", {})
    assert status.success, status.error
    assert status.extra["attempts"] == 2
    assert status.data["location"] == "Town Square"


async def test_an_assistant_session_through_the_registry(registry: Registry) -> None:
    """Look, remember, act and speak through the registry: validation, defaults and normalised results."""
    look = await call(registry.get("inspect_location"), {})
    assert look.data["location"]["name"] == "Town Square"
    recall = await call(registry.get("recall_memories"), {"tags": '["quest"]', "limit": "1"})  # coerced by validation
    assert recall.data["count"] == 1
    await call(registry.get("get_attributes"), {"target": "me", "names": ["mood"]})
    changed = await call(registry.get("set_attribute"), {"target": "me", "attribute": "mood", "value": "determined"})
    assert changed.data["previous"] == "curious"
    refused = await call(registry.get("execute_command"), {"command": "go north"})
    assert refused.to_dict() == {"success": False, "data": None, "error": "Error: the north door is closed"}
    said = await call(registry.get("say"), {"message": "The gate is shut.", "to": "Aldric"})
    assert said.data == 'You say to Aldric, "The gate is shut."'


async def test_output_schema_of_worker_tools_is_met(registry: Registry) -> None:
    """write_file and launch_experiment results satisfy their specs' output_schema."""
    written = await call(registry.get("write_file"), {"path": "run.py", "content": "pass\n"})
    assert written.data == {"path": "run.py", "bytes": 5}
    launched = await call(registry.get("launch_experiment"), {"script": "run.py"})
    assert launched.success
    assert launched.data == {"pid": 55555, "log_file": "logs/run.log"}


def test_toolflow_call_runs_the_example_tools(toolflow_project: ToolflowProject, workspace: Path) -> None:
    """``toolflow call`` finds the installed plugin and runs tools of ``specs/``; a failure exits 1."""
    toolflow_project.pyproject(f'[tool.toolflow]\nspecs = ["{SPECS.as_posix()}"]\n')
    env = {"TOOLFLOW_LOAD_PLUGINS": "assistant", "TOOLFLOW_DISABLE_PLUGINS": None}
    looked = toolflow_project.run("call", "inspect_location", '{"detail_level": "brief"}', env=env)
    assert looked.exit_code == 0, looked.stderr
    assert json.loads(looked.stdout)["data"]["characters"] == ["Aldric"]
    written = toolflow_project.run("call", "write_file", '{"path": "notes.txt", "content": "hi"}', env=env)
    assert json.loads(written.stdout) == {"success": True, "data": {"path": "notes.txt", "bytes": 2}}
    assert (workspace / "notes.txt").read_text() == "hi"
    refused = toolflow_project.run("call", "whisper", '{"target": "Mira", "message": "psst"}', env=env)
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["error"] == "Error: 'Mira' is not here to whisper to; here: Aldric"
