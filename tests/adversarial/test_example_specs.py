"""The shipped example specs are safe to copy: they confine paths, quote argv and bound sizes (issue 14, section 7).

Two halves. A static audit of every tool in ``specs/``: each string parameter has a length
bound (or an enum), each array an item bound, each number both bounds, each path parameter a
pattern that refuses a leading ``/`` and ``-``, and no argv item lets a value become an option
(TF226). Then a corpus of hostile paths through the real tools (``toolflow-assistant``'s
implementations), called through the engine as the model would call them: absolute paths,
``..`` that climbs out, symbolic links out (a directory, a file, a link in the middle of a
path, a loop), option-like and control-character names, very long names. Each is refused, or
acts inside the workspace only: nothing outside is listed, written or named.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from _corpus import record

import toolflow
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint.rules.tf226_argv_option_injection import pattern_refuses_dash

pytest.importorskip("toolflow_assistant", reason="the example specs' implementations are toolflow-assistant's")

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
PATH_PARAMETERS = {"path", "script", "checkpoint"}
"""Parameters of the shipped tools that name a file or directory of the workspace."""


def _tools() -> list[toolflow.ToolSpec]:
    loaded = toolflow.load_specs([SPECS], kinds=toolflow.load_plugins().kind_schemas())
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    return list(loaded.tools)


def _schemas(schema: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every subschema of a parameter schema that constrains values, with where it is."""
    if not isinstance(schema, dict):
        return
    yield where, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _schemas(sub, f"{where}.{name}")
    if "items" in schema:
        yield from _schemas(schema["items"], f"{where}[]")


def _unbounded(schema: dict[str, Any]) -> str | None:
    types = schema.get("type")
    if "enum" in schema or "const" in schema:
        return None
    if types == "string" and "maxLength" not in schema:
        return "a string without maxLength"
    if types == "array" and "maxItems" not in schema:
        return "an array without maxItems"
    if types in ("integer", "number") and not {"minimum", "maximum"} <= schema.keys():
        return "a number without minimum and maximum"
    return None


@pytest.mark.parametrize("tool", _tools(), ids=lambda tool: tool.name)
def test_every_parameter_is_bounded(tool: toolflow.ToolSpec) -> None:
    """No shipped tool takes a string, list or number the model could make as large as it likes."""
    problems = [
        f"{where}: {problem}"
        for where, schema in _schemas(dict(tool.parameters), tool.name)
        if (problem := _unbounded(schema)) is not None
    ]
    assert problems == []


@pytest.mark.parametrize("tool", _tools(), ids=lambda tool: tool.name)
def test_path_parameters_refuse_absolute_and_option_like_names(tool: toolflow.ToolSpec) -> None:
    """A parameter naming a file of the workspace has a pattern refusing a leading '/' and a leading '-'."""
    properties = dict(tool.parameters).get("properties") or {}
    for name in PATH_PARAMETERS & set(properties):
        pattern = properties[name].get("pattern", "")
        assert pattern_refuses_dash(pattern), (tool.name, name, pattern)
        schema = toolflow.ArgumentValidator.for_spec(tool)
        for hostile in ("/etc/passwd", "-rf", "a\nb"):
            assert not schema.validate({**_required(tool), name: hostile}).valid, (tool.name, name, hostile)


def _required(tool: toolflow.ToolSpec) -> dict[str, Any]:
    return {"script": "a.py"} if tool.name == "launch_experiment" else {"path": "a", "content": "x"}


def test_no_argv_lets_a_value_become_an_option() -> None:
    """TF226 finds nothing in the shipped specs."""
    assert lint_paths([SPECS], LintConfig(select=("TF226",))).diagnostics == ()


# --- hostile paths through the real tools ---------------------------------------------------------

HOSTILE = [
    "/",
    "/etc",
    "/etc/passwd",
    "//etc",
    "..",
    "../",
    "../..",
    "./..",
    "a/../..",
    "a/../../outside",
    "sub/up",
    "sub/up/outside",
    "out",
    "out/",
    "out/inner",
    "out/inner/..",
    "outfile",
    "loop",
    "loop/x",
    "-r",
    "--help",
    "-",
    "a\nb",
    "a\rb",
    "\x1b[31m",
    "a\x00b",
    "~",
    "~/x",
    "$HOME",
    "..\\..\\outside",
    "\u2025/outside",
    "\uff0e\uff0e/outside",
    "x" * 300,
    "a/" * 600,
    "é" * 1000,
]
"""Paths relative to a workspace holding: ``a/``; ``sub/up`` -> ``../..``; ``out`` -> the outside
directory; ``outfile`` -> a file outside; ``loop`` -> itself."""


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A workspace with links out of it, and the outside directory they point to."""
    from toolflow_assistant import world  # imported after the skip above

    outside = tmp_path / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / "SECRET").write_text("not for the model", encoding="utf-8")
    workspace = tmp_path / "workspace"
    (workspace / "a").mkdir(parents=True)
    (workspace / "sub").mkdir()
    (workspace / "sub" / "up").symlink_to("../..")
    (workspace / "out").symlink_to(outside)
    (workspace / "outfile").symlink_to(outside / "SECRET")
    (workspace / "loop").symlink_to("loop")
    monkeypatch.setenv("TOOLFLOW_WORKSPACE", str(workspace))
    world.reset()
    return workspace, outside


def _outside_state(outside: Path) -> list[tuple[str, str]]:
    return sorted((str(p.relative_to(outside)), p.read_text() if p.is_file() else "/") for p in outside.rglob("*"))


async def test_hostile_paths_stay_in_the_workspace(places: tuple[Path, Path]) -> None:
    """list_directory, write_file and launch_experiment (script and checkpoint) never reach outside."""
    workspace, outside = places
    before = _outside_state(outside)
    registry = toolflow.load_registry([SPECS])
    ran = 0
    with trio.fail_after(120):
        async with toolflow.open_engine(registry) as engine:
            written = await engine.call("write_file", {"path": "a/run.py", "content": "pass\n"})
            assert written.success, written.error
            for path in HOSTILE:
                listed = await engine.call("list_directory", {"path": path})
                assert "SECRET" not in json.dumps(listed.to_dict()), path
                assert not listed.success, (path, listed.to_dict())  # none is a directory of the workspace
                wrote = await engine.call("write_file", {"path": f"{path}/x.py", "content": "owned"})
                wrote_plain = await engine.call("write_file", {"path": path, "content": "owned"})
                launched = await engine.call("launch_experiment", {"script": f"{path}.py"})
                resumed = await engine.call(
                    "launch_experiment", {"script": "a/run.py", "resume": True, "checkpoint": path}
                )
                for result in (wrote, wrote_plain, launched, resumed):
                    assert "SECRET" not in json.dumps(result.to_dict(), ensure_ascii=False), path
                ran += 5
    assert _outside_state(outside) == before
    assert not (workspace.parent / "x.py").exists()
    record("paths", ran)
