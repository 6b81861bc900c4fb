"""Values ``jsonschema_rs`` cannot read are checked by ``jsonschema``, at every door that checks a schema.

``jsonschema_rs`` reads an integer longer than Python writes in digits as 0 (``10**5000``
passed ``maximum: 5``) and recurses on the native stack along a recursive ``$ref`` (data nested
some tens of thousands of levels ended the process). The fast check now leaves such values to
``jsonschema``: arguments from the Python API and from a pipeline's step, and a tool's result
against its ``output_schema``, through ``Engine.call``, ``toolflow.invoke``, ``toolflow call``
and ``toolflow run``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _cli_project import plugin_project
from _cli_project import toolflow as toolflow_in_process
from _odd_values import nested

import toolflow
from toolflow._checking import MAX_FAST_DEPTH, CompiledSchema

BIG = 10**5000
"""5,001 digits: more than Python writes by default."""

SPECS = """\
toolflow: 1
tools:
  small:
    description: Take a small number.
    category: terminal
    parameters:
      type: object
      properties:
        n: {type: integer, maximum: 5, description: A small number}
      required: [n]
    implementation: odd.took
  tree:
    description: Take a tree of lists.
    category: terminal
    parameters:
      type: object
      properties:
        t: {$ref: "#/$defs/node", description: A tree}
      required: [t]
      $defs:
        node: {type: array, items: {$ref: "#/$defs/node"}}
    implementation: odd.took
  answer:
    description: Return an odd value, checked by an output schema.
    category: terminal
    parameters:
      type: object
      properties:
        kind: {type: string, description: Which value}
      required: [kind]
    output_schema:
      type: object
      properties:
        n: {type: integer, maximum: 5}
        t: {$ref: "#/$defs/node"}
      $defs:
        node: {type: array, items: {$ref: "#/$defs/node"}}
    implementation: odd.answer
  unchecked:
    description: Return an odd value, unchecked.
    category: terminal
    parameters:
      type: object
      properties:
        kind: {type: string, description: Which value}
      required: [kind]
    implementation: odd.answer
  piped:
    description: A pipeline handing a step's big number to a tool that takes a small one.
    category: terminal
    parameters: {type: object, properties: {}}
    pipeline:
      steps:
        first: {tool: unchecked, with: {kind: big}}
        second: {tool: small, with: {n: "{{ steps.first.n }}"}}
"""

PLUGIN = """\
import toolflow

TOOK = []


def _nested(levels):
    outer = inner = []
    for _ in range(levels - 1):
        deeper = []
        inner.append(deeper)
        inner = deeper
    return outer


def took(**arguments):
    TOOK.append(sorted(arguments))
    return "ran"


def answer(kind):
    if kind == "big":
        return {"n": 10**5000}
    if kind == "deep":
        return {"t": _nested(50_000)}
    return {"n": 3}


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("odd.took", took)
    register("odd.answer", answer)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The spec and its plugin in a project that is the working directory."""
    with plugin_project(tmp_path, monkeypatch, specs=SPECS, module="odd_checked", plugin=PLUGIN) as path:
        yield path


def _registry(project: Path) -> tuple[toolflow.Registry, toolflow.Plugins, Any]:
    import odd_checked  # type: ignore[import-not-found]  # the fixture writes it

    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(odd_checked, "odd_checked")
    return toolflow.load_registry([project / "specs"], plugins=plugins), plugins, odd_checked


# --- the check ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "valid"),
    [({"n": BIG}, False), ({"n": -BIG}, True), ({"n": 3, "m": BIG}, False), ({"n": 3}, True), ({"n": 7}, False)],
)
def test_a_long_integer_is_checked_as_it_is(instance: Any, valid: bool) -> None:
    """maximum: 5 refuses 10**5000 and takes -10**5000, however long they are."""
    schema = CompiledSchema.compile({"type": "object", "additionalProperties": {"maximum": 5}})
    assert schema.is_valid(instance) is valid


def test_data_deeper_than_the_fast_check_reads_is_not_given_to_it() -> None:
    """A recursive schema checks data MAX_FAST_DEPTH deep itself and fails what is deeper, as a result."""
    schema = CompiledSchema.compile(
        {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"}
    )
    assert schema.is_valid(nested(MAX_FAST_DEPTH))
    assert not schema.is_valid(nested(50_000))
    looped: list[Any] = []
    looped.append(looped)
    assert not schema.is_valid(looped)


# --- the doors ------------------------------------------------------------------------------


async def test_engine_call_and_invoke_refuse_a_long_integer_over_the_maximum(project: Path) -> None:
    """Engine.call and toolflow.invoke fail the call and never run the tool; a long negative one runs."""
    registry, plugins, module = _registry(project)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            called = await engine.call("small", {"n": BIG})
            negative = await engine.call("small", {"n": -BIG})
        invoked = await toolflow.invoke(registry.get("small"), {"n": BIG}, plugins=plugins)
    for result in (called, invoked):
        assert (result.error or "").startswith("Error: Parameter validation failed for 'small'")
    assert negative.success
    assert module.TOOK == [["n"]]  # the negative one only


async def test_engine_call_fails_arguments_nested_past_a_recursive_schema(project: Path) -> None:
    """50,000 nested lists for a recursive schema are a failed validation, and the process lives on."""
    registry, plugins, module = _registry(project)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("tree", {"t": nested(50_000)})
            shallow = await engine.call("tree", {"t": nested(10)})
    assert result.error is not None
    assert result.error.startswith("Error: Parameter validation failed for 'tree'")
    assert shallow.success
    assert module.TOOK == [["t"]]


def test_toolflow_call_fails_a_result_over_its_output_schema(project: Path) -> None:
    """A result holding 10**5000 where the output schema says maximum: 5 is a failure, exit 1."""
    code, out, err = toolflow_in_process("call", "answer", json.dumps({"kind": "big"}))
    assert code == 1, err
    assert "does not match its output_schema" in json.loads(out)["error"]


async def test_toolflow_call_fails_a_result_nested_past_its_recursive_output_schema(project: Path) -> None:
    """A real toolflow process checking 50,000 nested lists prints a failure and exits 1, not a crash."""
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-m", "toolflow", "call", "answer", json.dumps({"kind": "deep"})],
            cwd=project,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "does not match its output_schema" in json.loads(done.stdout)["error"]


def test_toolflow_run_fails_the_step_given_a_long_integer_over_the_maximum(project: Path) -> None:
    """A pipeline's step handing 10**5000 to small fails that step; small never runs."""
    session = {"prompt": "go", "turns": [{"tool_calls": [{"name": "piped", "arguments": {}}]}, {"text": "done"}]}
    (project / "session.yaml").write_text(yaml.safe_dump(session), encoding="utf-8")
    code, out, err = toolflow_in_process("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert code == 0, err
    assert "step 'second' (small) failed: Parameter validation failed for 'small'" in out
