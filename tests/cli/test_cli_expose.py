"""`expose: false` through every door of the CLI: `list` marks it, `schema` leaves it out unless `--all`,
`call` (the operator) may call it, and a model's call of it in `run` is refused. `serve` is in
tests/test_serve_pipelines.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolflow._cli import run

SPECS = """\
toolflow: 1
tools:
  lookup_order:
    description: Look an order up.
    expose: false
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id.}
      required: [order_id]
    template:
      output: json
      source: '{"customer_id": "c-{{ order_id }}"}'
  order_summary:
    description: The customer of an order; ends the loop.
    category: terminal
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order's id.}
      required: [order_id]
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
      result: "{{ steps.order.customer_id }}"
"""


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose specs/ holds a hidden step tool and the pipeline that calls it; the working directory."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "orders.yaml").write_text(SPECS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    return tmp_path


def toolflow(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_list_marks_a_hidden_tool_in_the_table() -> None:
    """The table names a hidden tool `(hidden)` and the count line says how many are."""
    code, out, err = toolflow("list")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1].startswith("lookup_order (hidden)  safe_chain")
    assert lines[2].startswith("order_summary          terminal")
    assert lines[-1] == "2 tools in 1 file; 1 hidden from models (expose: false)"


def test_list_json_has_expose() -> None:
    """`list --output-format json` gives each tool's `expose`."""
    code, out, err = toolflow("list", "--output-format", "json")
    assert (code, err) == (0, "")
    assert {tool["name"]: tool["expose"] for tool in json.loads(out)["tools"]} == {
        "lookup_order": False,
        "order_summary": True,
    }


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_schema_leaves_a_hidden_tool_out_unless_all(fmt: str) -> None:
    """Definitions are for models: `schema` leaves out `expose: false` tools; `--all` includes them."""
    code, out, err = toolflow("schema", "--format", fmt)
    assert (code, err) == (0, "")
    assert len(json.loads(out)) == 1
    assert "lookup_order" not in out
    code, out, err = toolflow("schema", "--format", fmt, "--all")
    assert (code, err) == (0, "")
    assert len(json.loads(out)) == 2
    assert "lookup_order" in out


def test_schema_help_says_hidden_tools_are_left_out() -> None:
    """`schema --help` says what `--all` adds."""
    code, out, _ = toolflow("schema", "--help")
    assert code == 0
    assert "also the tools hidden from models (expose: false)" in " ".join(out.split())


def test_schema_annotates_a_pipeline_from_its_hidden_steps() -> None:
    """The MCP annotations of a pipeline come from its step tools, even those the export leaves out."""
    code, out, _ = toolflow("schema", "--format", "mcp")
    assert code == 0
    (summary,) = json.loads(out)
    assert summary["annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }


def test_call_of_a_hidden_tool_runs_it() -> None:
    """`toolflow call` is the operator's: it calls a hidden tool directly, as it calls any tool of the specs."""
    code, out, err = toolflow("call", "lookup_order", '{"order_id": "7"}')
    assert (code, err) == (0, "")
    assert json.loads(out) == {"success": True, "data": {"customer_id": "c-7"}}


def test_run_refuses_a_models_call_of_a_hidden_tool(project: Path) -> None:
    """In `toolflow run` the model is not offered a hidden tool, and its call of it is blocked; the pipeline runs."""
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "1"}}]},
        {"tool_calls": [{"name": "order_summary", "arguments": {"order_id": "1"}}]},
    ]
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    code, out, err = toolflow("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert (code, err) == (0, "")
    document = json.loads(out)
    results = [call["result"] for turn in document["turns"] for call in turn["calls"]]
    assert results[0]["status"] == "blocked"
    assert results[0]["error"] == "Error: tool 'lookup_order' is not available now; allowed tools: 'order_summary'"
    assert (results[1]["success"], results[1]["data"]) == (True, "c-1")
