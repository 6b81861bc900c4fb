"""A tool's own ``approval:`` (issue 20, section 4) through the Python API: ``Engine.call`` and pipeline steps.

The tools are ``template:`` tools, so what ran is what the results say. The other doors
(``toolflow call``, ``toolflow run``, ``toolflow serve``) are in ``tests/test_approval_tools_doors.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import toolflow
from toolflow._mcp_specs import remote_tool_spec
from toolflow._model import RemoteTool

SPEC = """\
toolflow: 1
policy:
  categories:
    dangerous: {approval: true}
tools:
  refund:
    description: Refund an order.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
        amount: {type: number, description: How much.}
        note: {type: string, description: A note.}
      required: [order_id, amount]
    approval: "{{ amount > 100 }}"
    template: "refunded {{ amount }} on {{ order_id }}"
  noted_refund:
    description: Refund, asking when the note says so.
    parameters:
      type: object
      properties:
        note: {type: string, description: A note.}
    approval: "{{ note == 'ask' }}"
    template: "refunded"
  wipe:
    description: Wipe the disk.
    approval: true
    template: "wiped"
  erase:
    description: Erase everything.
    category: dangerous
    approval: false
    template: "erased"
  look:
    description: Look around.
    approval: false
    template: "looked"
  refund_twice:
    description: Two refunds, then a wipe.
    parameters:
      type: object
      properties:
        first: {type: number, description: The first amount.}
        second: {type: number, description: The second amount.}
      required: [first, second]
    pipeline:
      steps:
        one: {tool: refund, with: {order_id: A, amount: "{{ first }}"}}
        two: {tool: refund, with: {order_id: B, amount: "{{ second }}"}, needs: [one]}
  risky_pipeline:
    description: A dangerous pipeline over a wipe and a refund.
    category: dangerous
    pipeline:
      steps:
        wipe: {tool: wipe}
        refund: {tool: refund, with: {order_id: C, amount: 500}, needs: [wipe]}
"""


class Asked:
    """An approver answering from a script, recording each call and its ApprovalReason."""

    def __init__(self, *answers: bool | None) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any], str]] = []
        self.reasons: list[toolflow.ApprovalReason] = []

    def __call__(self, call: toolflow.ToolCall, category: str) -> bool | None:
        assert isinstance(category, toolflow.ApprovalReason)
        self.asked.append((call.name, dict(call.arguments), category.text))
        self.reasons.append(category)
        return self.answers.pop(0)


@pytest.fixture
def registry(tmp_path: Path) -> tuple[toolflow.Registry, toolflow.Policy]:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    plugins = toolflow.load_plugins(entry_points=False)
    specs = toolflow.load_specs([tmp_path / "tools.yaml"], kinds=plugins.kind_schemas())
    assert specs.ok, [d.render() for d in specs.diagnostics]
    return toolflow.Registry.build(specs, plugins), toolflow.Policy.from_specs(specs)


async def _calls(
    setup: tuple[toolflow.Registry, toolflow.Policy], approver: Any, *calls: tuple[str, dict[str, Any]]
) -> list[toolflow.ToolResult]:
    registry, policy = setup
    with trio.fail_after(60):
        async with toolflow.open_engine(registry, policy=policy, approve=approver) as engine:
            return [await engine.call(name, arguments) for name, arguments in calls]


async def test_a_false_condition_runs_without_asking(registry: Any) -> None:
    """amount 50 is under the condition: the call runs and nobody is asked."""
    asked = Asked()
    [result] = await _calls(registry, asked, ("refund", {"order_id": "A", "amount": 50}))
    assert (result.success, result.data) == (True, "refunded 50 on A")
    assert asked.asked == []


async def test_a_true_condition_asks_with_the_arguments_and_the_condition(registry: Any) -> None:
    """amount 500: the approver sees the arguments and why; no refuses (denied), yes runs."""
    asked = Asked(False, True)
    refused, approved = await _calls(
        registry,
        asked,
        ("refund", {"order_id": "A", "amount": 500}),
        ("refund", {"order_id": "B", "amount": 600}),
    )
    assert (refused.success, refused.extra["status"]) == (False, "denied")
    assert refused.error == "Error: 'refund' was not approved, so it did not run; do not retry it unchanged"
    assert (approved.success, approved.data) == (True, "refunded 600 on B")
    assert asked.asked == [
        ("refund", {"order_id": "A", "amount": 500}, "refund needs approval when {{ amount > 100 }}"),
        ("refund", {"order_id": "B", "amount": 600}, "refund needs approval when {{ amount > 100 }}"),
    ]
    reason = asked.reasons[0]
    assert (str(reason), reason.by_tool, reason.condition) == ("safe_chain", True, "{{ amount > 100 }}")


async def test_approval_true_asks_every_call(registry: Any) -> None:
    """`approval: true` on a safe_chain tool: every call is asked about, the reason naming the tool."""
    asked = Asked(True)
    [result] = await _calls(registry, asked, ("wipe", {}))
    assert result.success
    assert asked.asked == [("wipe", {}, "wipe needs approval (approval: true)")]


async def test_approval_false_does_not_take_away_the_categorys(registry: Any) -> None:
    """`approval: false` under a category that needs approval changes nothing: the policy's reason is asked."""
    asked = Asked(False)
    erase, look = await _calls(registry, asked, ("erase", {}), ("look", {}))
    assert erase.extra["status"] == "denied"
    assert look.success  # approval: false on a category without approval: nothing to ask
    assert asked.asked == [("erase", {}, "dangerous calls need approval")]
    assert asked.reasons[0].by_tool is False


async def test_nobody_to_ask_refuses_with_the_reason(registry: Any) -> None:
    """Without any approver the call is refused (no_approver), the message saying why it needed approval."""
    [result] = await _calls(registry, None, ("noted_refund", {"note": "ask"}))
    assert result.extra == {"status": "denied", "reason": "no_approver"}
    assert str(result.error).startswith(
        "Error: 'noted_refund' needs approval before it runs (noted_refund needs approval when {{ note == 'ask' }}),"
    )


async def test_a_condition_that_fails_refuses_the_call_unasked(registry: Any) -> None:
    """A condition that cannot be decided (it reads an optional parameter left out) refuses; the tool never runs."""
    asked = Asked()
    [result] = await _calls(registry, asked, ("noted_refund", {}))
    assert result.extra == {"status": "denied", "reason": "approval_condition"}
    assert str(result.error).startswith(
        "Error: 'noted_refund' needs approval when {{ note == 'ask' }}, and that could not"
    )
    assert "'note' is undefined" in str(result.error)
    assert asked.asked == []


async def test_a_pipeline_step_with_a_condition_is_asked_at_the_step(registry: Any) -> None:
    """A conditional step is decided with its own arguments: 50 runs unasked, 500 is asked (and refused)."""
    asked = Asked(False)
    [result] = await _calls(registry, asked, ("refund_twice", {"first": 50, "second": 500}))
    assert asked.asked == [
        ("refund", {"order_id": "B", "amount": 500}, "refund needs approval when {{ amount > 100 }}")
    ]
    assert not result.success
    assert "'refund' was not approved" in str(result.error)


async def test_a_pipelines_approval_covers_approval_true_steps_not_conditional_ones(registry: Any) -> None:
    """One answer covers the `approval: true` step (listed in ToolCall.approves); the conditional step asks itself."""
    approves: list[tuple[str, ...]] = []
    asked = Asked(True, True)

    def approver(call: toolflow.ToolCall, category: str) -> bool | None:
        approves.append(call.approves)
        return asked(call, category)

    [result] = await _calls(registry, approver, ("risky_pipeline", {}))
    assert result.success, result.error
    assert [name for name, _, _ in asked.asked] == ["risky_pipeline", "refund"]
    assert approves[0] == ("wipe (wipe)",)


async def test_runs_alone_and_needs_approval(registry: Any) -> None:
    """Tools with an approval of their own run one by one in a batch; needs_approval is True only for every-call approval."""
    reg, policy = registry
    async with toolflow.open_engine(reg, policy=policy) as engine:
        assert [engine.needs_approval(n) for n in ("refund", "wipe", "erase", "look")] == [False, True, True, False]
        assert [engine.runs_alone(n) for n in ("refund", "wipe", "look")] == [True, True, False]


def test_an_mcp_servers_overrides_may_add_approval(tmp_path: Path) -> None:
    """`overrides:` of an mcp_servers entry takes `approval:` (the schema and the remote tool's spec)."""
    (tmp_path / "remote.yaml").write_text(
        "toolflow: 1\nmcp_servers:\n  shop:\n    command: [srv]\n"
        "    overrides:\n      refund: {category: safe_chain, approval: '{{ amount > 100 }}'}\n",
        encoding="utf-8",
    )
    specs = toolflow.load_specs([tmp_path / "remote.yaml"])
    assert specs.ok, [d.render() for d in specs.diagnostics]
    [server] = specs.files[0].mcp_servers
    spec = remote_tool_spec(server, RemoteTool(name="refund"))
    assert (spec.category, spec.approval) == ("safe_chain", "{{ amount > 100 }}")


async def test_invoke_honours_the_tools_own_approval(registry: Any) -> None:
    """toolflow.invoke asks the request's asker about a call its condition covers; below it runs; nobody: refused."""
    reg, _ = registry
    asked = Asked(False)
    with trio.fail_after(60):
        below = await toolflow.invoke(reg.get("refund"), {"order_id": "A", "amount": 50})
        with toolflow.asking_approval(asked):
            refused = await toolflow.invoke(reg.get("refund"), {"order_id": "B", "amount": 500})
        nobody = await toolflow.invoke(reg.get("wipe"), {})
    assert (below.success, below.data) == (True, "refunded 50 on A")
    assert refused.extra == {"status": "denied"}
    assert nobody.extra == {"status": "denied", "reason": "no_approver"}
    assert asked.asked == [
        ("refund", {"order_id": "B", "amount": 500}, "refund needs approval when {{ amount > 100 }}")
    ]
