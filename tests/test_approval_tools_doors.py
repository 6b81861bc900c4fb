"""A tool's own ``approval:`` through every door: ``toolflow call``, ``toolflow run``, ``toolflow serve`` (MCP elicitation).

``refund`` asks for approval only above 100; ``wipe`` on every call (``approval: true``). The
engine-level cases (reasons, pipelines, conditions that fail) are in ``tests/test_approval_tools.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _cli_project import make_project
from _cli_project import toolflow as toolflow_in_process
from mcp import Client, types
from mcp.client.context import ClientRequestContext

import toolflow
from toolflow._serve import ToolService, build_server

SPEC = """\
toolflow: 1
tools:
  refund:
    description: Refund an order.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
        amount: {type: number, description: How much.}
      required: [order_id, amount]
    approval: "{{ amount > 100 }}"
    template: "refunded {{ amount }} on {{ order_id }}"
  wipe:
    description: Wipe the disk.
    approval: true
    template: "wiped"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the spec above in specs/; the working directory."""
    return make_project(tmp_path, monkeypatch, SPEC)


# --- toolflow call ------------------------------------------------------------------------------


def _call(project: Path, *args: str, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m toolflow call ARGS` in *project*; *answer* is typed on standard input."""
    return subprocess.run(
        [sys.executable, "-m", "toolflow", "call", *args],
        cwd=project,
        input=answer,
        stdin=subprocess.DEVNULL if answer is None else None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )


@pytest.mark.parametrize(
    ("option", "code", "said"),
    [
        ([], 1, "needs approval before it runs (refund needs approval when {{ amount > 100 }})"),
        (["--approve", "no"], 1, "was not approved"),
        (["--approve", "yes"], 0, "refunded 500 on A"),
    ],
)
def test_call_asks_when_the_condition_holds(project: Path, option: list[str], code: int, said: str) -> None:
    """500 is above the condition: unattended, nobody approves it; --approve no refuses, yes runs it."""
    done = _call(project, "refund", '{"order_id": "A", "amount": 500}', *option)
    assert done.returncode == code, done.stderr
    assert said in done.stdout


def test_call_runs_unasked_when_the_condition_is_false(project: Path) -> None:
    """50 is under the condition: the call runs even with --approve no, and nothing is asked."""
    done = _call(project, "refund", '{"order_id": "A", "amount": 50}', "--approve", "no")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["data"] == "refunded 50 on A"


def test_the_ask_prompt_says_why(project: Path) -> None:
    """`--approve ask` shows the arguments and the condition that asked."""
    done = _call(project, "refund", '{"order_id": "A", "amount": 500}', "--approve", "ask", answer="y\n")
    assert done.returncode == 0, done.stderr
    assert (
        'approve safe_chain call refund {"order_id": "A", "amount": 500} '
        "(refund needs approval when {{ amount > 100 }})? [y/N]"
    ) in done.stderr
    wiped = _call(project, "wipe", "--approve", "ask", answer="n\n")
    assert wiped.returncode == 1
    assert "approve safe_chain call wipe {} (wipe needs approval (approval: true))? [y/N]" in wiped.stderr


# --- toolflow run -------------------------------------------------------------------------------


def _run(project: Path, turns: list[Any], *args: str) -> dict[str, Any]:
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    code, out, err = toolflow_in_process("run", "--model", "scripted:session.yaml", "--output-format", "json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_run_refuses_above_the_condition_and_runs_below(project: Path) -> None:
    """A scripted session: with --approve no, the call of 500 is denied and the call of 50 runs."""
    turns = [
        {
            "tool_calls": [
                {"name": "refund", "arguments": {"order_id": "A", "amount": 500}},
                {"name": "refund", "arguments": {"order_id": "B", "amount": 50}},
            ]
        },
        {"text": "done"},
    ]
    document = _run(project, turns, "--approve", "no")
    results = [c["result"] for c in document["turns"][0]["calls"]]
    assert results[0]["status"] == "denied"
    assert results[1]["data"] == "refunded 50 on B"
    approved = _run(project, turns, "--approve", "yes")
    assert [c["result"]["data"] for c in approved["turns"][0]["calls"]] == ["refunded 500 on A", "refunded 50 on B"]


# --- toolflow serve -----------------------------------------------------------------------------


class Approver:
    """An MCP client's elicitation callback that answers from a script and records the questions."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": self.answers.pop(0)})


@contextlib.asynccontextmanager
async def _served(project: Path, mode: str, approver: Approver) -> AsyncIterator[Client]:
    plugins = toolflow.load_plugins(entry_points=False)
    specs = toolflow.load_specs([project / "specs"], kinds=plugins.kind_schemas())
    assert specs.ok, [d.render() for d in specs.diagnostics]
    registry = toolflow.Registry.build(specs, plugins)
    service = ToolService.under_policy(registry, policy=toolflow.Policy.from_specs(specs), plugins=plugins)
    async with service.open_engine() as engine:
        service.shared = engine
        async with Client(build_server(service), mode=mode, elicitation_callback=approver) as client:
            yield client


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_serve_asks_the_client_with_the_reason(project: Path, mode: str) -> None:
    """The client is asked about 500 (the question says why) and not about 50; its no refuses, its yes runs."""
    approver = Approver(False, True)
    with trio.fail_after(60):
        async with _served(project, mode, approver) as client:
            below = await client.call_tool("refund", {"order_id": "A", "amount": 50})
            refused = await client.call_tool("refund", {"order_id": "B", "amount": 500})
            wiped = await client.call_tool("wipe", {})
    assert (below.is_error, _text(below)) == (False, "refunded 50 on A")
    assert refused.is_error
    assert _text(refused) == "Error: 'refund' was not approved, so it did not run; do not retry it unchanged"
    assert (wiped.is_error, _text(wiped)) == (False, "wiped")
    assert approver.asked == [
        (
            'Approve the safe_chain call refund({"order_id":"B","amount":500})? (refund needs approval when '
            "{{ amount > 100 }}) It runs only if you say yes."
        ),
        "Approve the safe_chain call wipe({})? (wipe needs approval (approval: true)) It runs only if you say yes.",
    ]
