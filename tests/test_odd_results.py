"""A tool's data that JSON cannot write as it is reaches every door as text, never as a traceback.

An integer longer than Python writes in digits (``sys.get_int_max_str_digits``, 4,300 by
default: a factorial tool's answer), data nested deeper than the encoder recurses (an API's
answer from a hostile service), an object whose ``__str__`` raises (a plugin's bug): the engine
returns the tool's result, and every writer of it (the model's history, ``toolflow call``,
``toolflow run``, ``toolflow serve``, a saved run) goes through ``json_text``.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _mcp_project import serve_argv
from _odd_values import nested
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from toolflow._cli import run
from toolflow._results import MAX_WRITTEN_DEPTH, ToolResult, json_text

BIG = 10**5000
"""5,001 digits: more than Python writes by default."""


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")

    __repr__ = __str__


class _Unreadable(Mapping[str, Any]):
    """A mapping whose items cannot be read."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("cannot iterate")

    def __len__(self) -> int:
        return 1

    def __str__(self) -> str:
        return "<unreadable mapping>"


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, list) and value:
        depth += 1
        value = value[0]
    return depth + (1 if isinstance(value, list) else 0)


# --- json_text ------------------------------------------------------------------------------


@pytest.mark.parametrize("indent", [None, 2])
def test_an_integer_too_long_for_digits_is_a_note_of_its_length(indent: int | None) -> None:
    """10**5000 is written as a note of about how many digits it has; the rest stays as it is."""
    written = json.loads(json_text({"n": BIG, "m": 7}, indent=indent))
    assert written == {"n": "<an integer of about 5,001 digits>", "m": 7}


def test_an_integer_python_writes_is_written_in_digits() -> None:
    """An integer within Python's limit keeps its digits, however long, even beside odd data."""
    long = 10**4000
    assert json.loads(json_text({"n": long, "x": float("nan")})) == {"n": long, "x": "nan"}


def test_data_nested_deeper_than_the_encoder_recurses_is_cut_at_the_depth() -> None:
    """5,000 nested lists are written down to MAX_WRITTEN_DEPTH levels, then '<too deep>'."""
    written = json.loads(json_text({"deep": nested(5000)}))
    inner = written["deep"]
    for _ in range(MAX_WRITTEN_DEPTH - 1):
        inner = inner[0]
    assert inner == "<too deep>"


def test_objects_whose_text_fails_are_named_by_their_type() -> None:
    """A value or a key whose __str__ raises is written as '<TypeName object>'."""
    written = json.loads(json_text({"x": _Unprintable(), "rows": [1, {_Unprintable(): 2}]}))
    assert written == {"x": "<_Unprintable object>", "rows": [1, {"<_Unprintable object>": 2}]}


def test_a_mapping_that_cannot_be_read_is_written_as_its_text() -> None:
    """A mapping whose iteration raises is written as its str()."""
    assert json.loads(json_text({"m": _Unreadable()})) == {"m": "<unreadable mapping>"}


def test_a_result_with_odd_data_still_gives_the_model_json() -> None:
    """text_for_model of each odd value is valid JSON with the value written as text."""
    for data, shown in ((BIG, "<an integer of about 5,001 digits>"), (_Unprintable(), "<_Unprintable object>")):
        assert json.loads(ToolResult(success=True, data=data).text_for_model())["data"] == shown


# --- the doors ------------------------------------------------------------------------------

SPECS = """\
toolflow: 1
tools:
  odd:
    description: Return an odd value.
    category: terminal
    parameters:
      type: object
      properties:
        kind: {type: string, enum: [big, deep, unprintable], description: Which value}
      required: [kind]
    implementation: odd.value
"""

PLUGIN = """\
import toolflow


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text")

    __repr__ = __str__


def _nested(levels):
    outer = inner = []
    for _ in range(levels - 1):
        deeper = []
        inner.append(deeper)
        inner = deeper
    return outer


def value(kind):
    if kind == "big":
        return {"n": 10**5000}
    if kind == "deep":
        return {"deep": _nested(5000)}
    return {"x": Unprintable()}


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("odd.value", value)
"""

SHOWN = {
    "big": '"<an integer of about 5,001 digits>"',
    "deep": '"<too deep>"',
    "unprintable": '"<Unprintable object>"',
}
"""What each kind's data shows in the JSON text."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The spec and its plugin in a project that is the working directory."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (tmp_path / "odd_tools.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "odd"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["odd_tools"]\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "odd_tools")
    yield tmp_path
    sys.modules.pop("odd_tools", None)


def _toolflow(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("kind", sorted(SHOWN))
def test_toolflow_call_prints_odd_data_as_text(project: Path, kind: str) -> None:
    """`toolflow call` exits 0 and prints JSON in which the odd value is text."""
    code, out, err = _toolflow("call", "odd", json.dumps({"kind": kind}))
    assert code == 0, err
    assert json.loads(out)["success"] is True
    assert SHOWN[kind] in out


@pytest.mark.parametrize("kind", sorted(SHOWN))
def test_toolflow_run_hands_the_model_odd_data_as_text(project: Path, kind: str) -> None:
    """The loop writes the result into the history, ends terminal, and the JSON output holds the text."""
    session = {"prompt": "go", "turns": [{"tool_calls": [{"name": "odd", "arguments": {"kind": kind}}]}]}
    (project / "session.yaml").write_text(yaml.safe_dump(session), encoding="utf-8")
    code, out, err = _toolflow("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["reason"] == "terminal"
    assert SHOWN[kind] in out
    code, out, err = _toolflow("run", "--model", "scripted:session.yaml")
    assert code == 0, err
    assert SHOWN[kind].strip('"') in out


async def test_toolflow_serve_answers_odd_data_as_text(project: Path) -> None:
    """An MCP client's tools/call of each kind gets a success whose text and structured content hold the text."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv()[1:],
        cwd=project,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "odd_tools", "PYTHONPATH": str(project)},
    )
    answers: dict[str, types.CallToolResult] = {}
    with trio.fail_after(60):
        with (project / "serve.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for kind in SHOWN:
                    answers[kind] = await session.call_tool("odd", {"kind": kind})
    for kind, answer in answers.items():
        assert not answer.is_error, answer
        text = "".join(block.text for block in answer.content if isinstance(block, types.TextContent))
        assert SHOWN[kind] in text
        assert SHOWN[kind] in json.dumps(answer.structured_content)
