"""Pipelines (issue 16): steps through the caller's engine, data between steps, for_each, when, on_error, endings."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import yaml

import toolflow
from toolflow._executor import open_engine
from toolflow._pipeline_plan import pipeline_cycles
from toolflow._policy import Policy
from toolflow._registry import RegistryError

SPEC = """\
toolflow: 1
tools:
  lookup_order:
    description: Looks an order up.
    expose: false
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    implementation: p.order
  lookup_customer:
    description: Looks a customer up.
    cache: {scope: session}
    parameters:
      type: object
      properties:
        customer_id: {type: string, description: The customer.}
      required: [customer_id]
    implementation: p.customer
  item_notes:
    description: The notes of an item.
    parameters:
      type: object
      properties:
        sku: {type: string, description: The item.}
        delay: {type: number, description: Seconds to take.}
      required: [sku]
    implementation: p.note
  refund_order:
    description: Refunds an order.
    category: dangerous
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    implementation: p.refund
  nap:
    description: Sleeps.
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long.}
        name: {type: string, description: A label.}
      required: [seconds]
    implementation: p.nap
  broken:
    description: Always fails.
    retry: {attempts: 1}
    implementation: p.broken
  count:
    description: Counts.
    parameters:
      type: object
      properties:
        n: {type: integer, description: A number.}
        items: {type: array, description: A list.}
    implementation: p.count
  order_report:
    description: Summarises an order; refunds it when it arrived damaged.
    category: dangerous
    timeout: 20s
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        order:
          tool: lookup_order
          with: {order_id: "{{ order_id }}"}
        customer:
          tool: lookup_customer
          with: {customer_id: "{{ steps.order.customer_id }}"}
        notes:
          for_each: "{{ steps.order.items }}"
          as: line
          concurrency: 2
          tool: item_notes
          with: {sku: "{{ line.sku }}"}
        refund:
          when: "{{ steps.order.status == 'damaged' }}"
          tool: refund_order
          with: {order_id: "{{ order_id }}"}
          on_error: continue
      result:
        customer: "{{ steps.customer.name }}"
        notes: "{{ steps.notes }}"
        refunded: "{{ steps.refund }}"
        summary: "{{ steps.customer.name }} has {{ steps.notes | length }} notes"
  typed:
    description: Passes typed values on.
    parameters:
      type: object
      properties:
        n: {type: integer, description: A number.}
    pipeline:
      steps:
        first:
          tool: count
          with: {n: "{{ n + 1 }}", items: "{{ [n, n * 2] }}"}
  many_items:
    description: Ten items of which one fails, and a slow step beside them.
    pipeline:
      steps:
        slow: {tool: nap, with: {seconds: 5, name: slow}}
        each:
          for_each: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
          tool: nap
          with: {seconds: 0.5}
        bad: {tool: broken, needs: [each]}
  checks_errors:
    description: Reads errors of a step that succeeded.
    pipeline:
      steps:
        first: {tool: item_notes, with: {sku: x}}
        second:
          when: "{{ errors.first is none }}"
          tool: item_notes
          with: {sku: ok}
  one_at_a_time:
    description: A 1 s nap; one call at a time.
    concurrency: 1
    pipeline:
      steps:
        a: {tool: nap, with: {seconds: 1, name: a}}
  three_naps:
    description: Three independent naps.
    pipeline:
      steps:
        a: {tool: nap, with: {seconds: 0.1, name: a}}
        b: {tool: nap, with: {seconds: 0.1, name: b}}
        c: {tool: nap, with: {seconds: 0.1, name: c}}
  fails_fast:
    description: A failing step next to a slow one, and a step after both.
    pipeline:
      steps:
        slow: {tool: nap, with: {seconds: 5, name: slow}}
        first: {tool: nap, with: {seconds: 0.1, name: first}}
        bad: {tool: broken, needs: [first]}
        after: {tool: nap, with: {seconds: 0.1, name: after}, needs: [slow, bad]}
  goes_on:
    description: A failing step that the pipeline goes past.
    pipeline:
      steps:
        bad: {tool: broken, on_error: continue}
        after:
          tool: item_notes
          with: {sku: "{{ errors.bad }}"}
  slow_chain:
    description: Two naps, one after the other, under a short timeout.
    timeout: 3s
    pipeline:
      steps:
        first: {tool: nap, with: {seconds: 2, name: first}}
        second: {tool: nap, with: {seconds: 2, name: second}, needs: [first]}
  outer:
    description: Calls a pipeline.
    pipeline:
      steps:
        inner: {tool: three_naps}
  odd:
    description: Returns data that is not JSON.
    implementation: p.odd
  reads_odd:
    description: Reads a step whose data cannot be pickled.
    pipeline:
      steps:
        first: {tool: odd}
        second: {tool: item_notes, with: {sku: "{{ steps.first }}"}}
  bad_args:
    description: Passes text where a number belongs.
    parameters:
      type: object
      properties:
        label: {type: string, description: A label.}
    pipeline:
      steps:
        first: {tool: count, with: {n: "{{ label }}"}}
  refund_now:
    description: Refunds at once.
    category: dangerous
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    pipeline:
      steps:
        refund: {tool: refund_order, with: {order_id: "{{ order_id }}"}}
"""


class Tools:
    """The implementations of SPEC's tools, counting their calls."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.running = 0
        self.most_running = 0
        self.naps: list[str] = []

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    @toolflow.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        async def order(order_id: str) -> dict[str, Any]:
            self._count("order")
            items = [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}]
            return {"customer_id": f"c-{order_id}", "status": "damaged" if order_id == "42" else "fine", "items": items}

        async def customer(customer_id: str) -> dict[str, Any]:
            self._count("customer")
            return {"name": f"Ann ({customer_id})"}

        async def note(sku: str, delay: float = 0.01) -> str:
            self._count("note")
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            try:
                await trio.sleep(delay)
            finally:
                self.running -= 1
            return f"note of {sku}"

        async def refund(order_id: str) -> str:
            self._count("refund")
            return f"refunded {order_id}"

        async def nap(seconds: float, name: str = "") -> str:
            await trio.sleep(seconds)
            self.naps.append(name)
            return name

        async def broken() -> None:
            msg = "the disk is on fire"
            raise RuntimeError(msg)

        async def count(n: int = 0, items: list[Any] | None = None) -> dict[str, Any]:
            return {"n": n, "items": items, "types": [type(n).__name__, type(items).__name__]}

        def odd() -> dict[str, Any]:
            return {"success": True, "data": {"lock": threading.Lock()}}

        for name, function in {
            "p.odd": odd,
            "p.order": order,
            "p.customer": customer,
            "p.note": note,
            "p.refund": refund,
            "p.nap": nap,
            "p.broken": broken,
            "p.count": count,
        }.items():
            register(name, function)


Setup = tuple[toolflow.Registry, toolflow.Plugins, Tools]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """The registry of SPEC, its plugins and the implementations."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    tools = Tools()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(tools, "p")
    return toolflow.load_registry([spec], plugins=plugins), plugins, tools


def _statuses(result: toolflow.ToolResult) -> list[tuple[str, int | None, str]]:
    return [(record.step, record.item, record.status) for record in result.steps]


async def test_data_passes_from_step_to_step(setup: Setup) -> None:
    """Each step reads earlier steps' data; for_each keeps the items' order; the result is `result:` rendered."""
    registry, plugins, tools = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("order_report", {"order_id": "42"})
    assert result.success, result.error
    assert result.data == {
        "customer": "Ann (c-42)",
        "notes": ["note of a", "note of b", "note of c"],
        "refunded": "refunded 42",
        "summary": "Ann (c-42) has 3 notes",
    }
    assert _statuses(result) == [
        ("order", None, "succeeded"),
        ("customer", None, "succeeded"),
        ("notes", 0, "succeeded"),
        ("notes", 1, "succeeded"),
        ("notes", 2, "succeeded"),
        ("refund", None, "succeeded"),
    ]
    notes = [record for record in result.steps if record.step == "notes"]
    assert [record.arguments for record in notes] == [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}]
    assert [record.call_id for record in notes] == ["call_0.notes[0]", "call_0.notes[1]", "call_0.notes[2]"]
    assert tools.most_running == 2  # the step's concurrency
    assert "steps" not in result.to_dict()  # models never see the records


async def test_when_false_skips_the_step(setup: Setup) -> None:
    """A false `when:` skips its step: it is not called, and `steps.NAME` is null."""
    registry, plugins, tools = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("order_report", {"order_id": "7"})
    assert result.success, result.error
    assert result.data["refunded"] is None
    assert ("refund", None, "skipped") in _statuses(result)
    assert "refund" not in tools.calls


async def test_a_single_expression_keeps_its_type(setup: Setup) -> None:
    """`{{ n + 1 }}` stays an integer and `{{ [n, n * 2] }}` a list; the default result is every step's data."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("typed", {"n": 4})
    assert result.success, result.error
    assert result.data == {"first": {"n": 5, "items": [4, 8], "types": ["int", "list"]}}


async def test_independent_steps_run_concurrently(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """Three independent 100 ms steps take 100 ms together."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        started = trio.current_time()
        result = await engine.call("three_naps", {})
        elapsed = trio.current_time() - started
    assert result.success, result.error
    assert elapsed == pytest.approx(0.1)
    assert sorted(tools.naps) == ["a", "b", "c"]
    assert result.data == {"a": "a", "b": "b", "c": "c"}


async def test_a_failing_step_stops_the_pipeline_and_cancels_the_running_ones(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """on_error stop: the failure names the step and its error; a running step is cancelled, a later one never starts."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine:
        started = trio.current_time()
        result = await engine.call("fails_fast", {})
        elapsed = trio.current_time() - started
    assert not result.success
    assert result.error == (
        "Error: step 'bad' (broken) failed: tool 'broken' raised RuntimeError: the disk is on fire; "
        "ran: first, bad; cancelled: slow; not run: after"
    )
    assert result.extra["failed_step"] == "bad"
    assert _statuses(result) == [
        ("slow", None, "cancelled"),
        ("first", None, "succeeded"),
        ("bad", None, "failed"),
        ("after", None, "not_run"),
    ]
    assert elapsed == pytest.approx(0.1)
    assert tools.naps == ["first"]


async def test_on_error_continue_records_the_error_and_goes_on(setup: Setup) -> None:
    """on_error continue: `steps.NAME` is null, `errors.NAME` holds the message, and a warning says so."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("goes_on", {})
    assert result.success, result.error
    assert result.data == {
        "bad": None,
        "after": "note of Error: tool 'broken' raised RuntimeError: the disk is on fire",
    }
    assert result.warnings == ("step 'bad' failed: tool 'broken' raised RuntimeError: the disk is on fire",)


async def test_the_pipeline_timeout_bounds_the_whole(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """Two 2 s steps in a row under a 3 s timeout: the second is cancelled at 3 s and the failure says so."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        started = trio.current_time()
        result = await engine.call("slow_chain", {})
        elapsed = trio.current_time() - started
    assert elapsed == pytest.approx(3.0)
    assert not result.success
    assert result.error == "Error: pipeline 'slow_chain' timed out after 3s; ran: first; cancelled: second"
    assert _statuses(result) == [("first", None, "succeeded"), ("second", None, "cancelled")]


async def test_a_stop_lets_running_steps_finish_and_starts_no_new_one(
    setup: Setup, autojump_clock: trio.testing.MockClock
) -> None:
    """A stop while the first step runs: it finishes, the second never starts, and the result says so."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def stop_soon() -> None:
            await trio.sleep(1)
            engine.request_stop()

        nursery.start_soon(stop_soon)
        result = await engine.call("slow_chain", {})
    assert not result.success
    assert result.extra["status"] == "aborted"
    assert result.extra["reason"] == "stopped"
    assert (
        result.error
        == "Error: stop requested: the pipeline's remaining steps were not run; ran: first; not run: second"
    )
    assert tools.naps == ["first"]


async def test_a_kill_cancels_every_step(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A kill while the first step runs: it is cancelled, nothing after it runs, and the result is `killed`."""
    registry, plugins, tools = setup
    async with open_engine(registry, plugins=plugins) as engine, trio.open_nursery() as nursery:

        async def kill_soon() -> None:
            await trio.sleep(1)
            engine.kill()

        nursery.start_soon(kill_soon)
        started = trio.current_time()
        result = await engine.call("slow_chain", {})
        elapsed = trio.current_time() - started
    assert elapsed == pytest.approx(1.0)
    assert (result.success, result.extra["status"], result.extra["reason"]) == (False, "aborted", "killed")
    assert _statuses(result) == [("first", None, "cancelled"), ("second", None, "not_run")]
    assert tools.naps == []


async def test_steps_are_real_calls_through_the_engine(setup: Setup) -> None:
    """A step's cache works across pipeline calls, and a step's success counts for later `depends_on` checks."""
    registry, plugins, tools = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            first = await engine.call("order_report", {"order_id": "7"})
            second = await engine.call("order_report", {"order_id": "7"})
    assert first.success
    assert second.success
    assert tools.calls["customer"] == 1  # lookup_customer has a session cache
    (cached,) = [record for record in second.steps if record.step == "customer"]
    assert cached.result is not None
    assert cached.result.extra["cached"] is True


async def test_nested_pipelines_nest_their_records(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A pipeline step's record holds the inner pipeline's own records."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("outer", {})
    assert result.success, result.error
    assert result.data == {"inner": {"a": "a", "b": "b", "c": "c"}}
    (inner,) = result.steps
    assert inner.result is not None
    assert [record.step for record in inner.result.steps] == ["a", "b", "c"]
    assert [record.call_id for record in inner.result.steps] == ["call_0.inner.a", "call_0.inner.b", "call_0.inner.c"]


async def test_steps_pass_the_allowlist_of_their_pipeline_but_not_the_deny_list(setup: Setup) -> None:
    """With only the pipeline allowed, its steps run; a step whose tool the policy denies is blocked."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins, allowlist=["order_report"]) as engine:
            allowed = await engine.call("order_report", {"order_id": "7"})
            direct = await engine.call("lookup_order", {"order_id": "7"})
        policy = Policy(deny=("lookup_customer",))
        async with open_engine(registry, plugins=plugins, allowlist=["order_report"], policy=policy) as engine:
            denied = await engine.call("order_report", {"order_id": "7"})
    assert allowed.success, allowed.error
    assert direct.extra["status"] == "blocked"
    assert not denied.success
    assert denied.error is not None
    assert denied.error.startswith("Error: step 'customer' (lookup_customer) failed: tool 'lookup_customer' is denied")


async def test_invalid_step_arguments_fail_the_step_like_a_model_call(setup: Setup) -> None:
    """A `with:` that breaks the step tool's schema gets the validator's model-readable error."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("bad_args", {"label": "many"})
    assert not result.success
    assert result.error is not None
    assert result.error.startswith("Error: step 'first' (count) failed: Parameter validation failed for 'count'")
    assert "- n: Expected integer" in result.error
    assert _statuses(result) == [("first", None, "failed")]


async def test_invoke_runs_the_steps_in_a_temporary_engine(setup: Setup) -> None:
    """toolflow.invoke of a pipeline tool runs it with the registry's tools; without the registry it says so."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        result = await toolflow.invoke(registry.get("typed"), {"n": 1}, plugins=plugins, registry=registry)
        missing = await toolflow.invoke(registry.get("typed"), {"n": 1}, plugins=plugins)
    assert result.success, result.error
    assert result.data == {"first": {"n": 2, "items": [1, 2], "types": ["int", "list"]}}
    assert not missing.success
    assert missing.error is not None
    assert "registry" in missing.error


async def test_unconditional_steps_are_approved_with_the_pipeline(setup: Setup) -> None:
    """One question for the pipeline, listing its unconditional steps that need approval; a `when:` step is asked when reached."""
    registry, plugins, tools = setup
    asked: list[tuple[str, tuple[str, ...]]] = []

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        asked.append((call.name, call.approves))
        return True

    policy = Policy.from_mapping({"categories": {"dangerous": {"approval": True}}})
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins, policy=policy, approve=approve) as engine:
            result = await engine.call("order_report", {"order_id": "42"})
    assert result.success, result.error
    # refund has a `when:`: it was asked about when it was reached.
    assert asked == [("order_report", ()), ("refund_order", ())]
    assert tools.calls["refund"] == 1


async def test_one_question_approves_the_pipeline_and_its_unconditional_steps(setup: Setup) -> None:
    """The approver sees the pipeline call with the steps it covers, and is not asked again for them."""
    registry, plugins, tools = setup
    asked: list[tuple[str, tuple[str, ...]]] = []

    def approve(call: toolflow.ToolCall, category: str) -> bool:
        asked.append((call.name, call.approves))
        return True

    policy = Policy.from_mapping({"categories": {"dangerous": {"approval": True}}})
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins, policy=policy, approve=approve) as engine:
            result = await engine.call("refund_now", {"order_id": "9"})
            refused = await engine.call("refund_now", {"order_id": "9"}, call_id="again")
    assert result.success, result.error
    assert asked[0] == ("refund_now", ("refund (refund_order)",))
    assert len(asked) == 2  # once per pipeline call, never for the step
    assert tools.calls["refund"] == 2
    assert refused.success


async def test_a_refused_pipeline_runs_no_step(setup: Setup) -> None:
    """An approver's no for the pipeline: nothing runs, and the result is the usual denial."""
    registry, plugins, tools = setup
    policy = Policy.from_mapping({"categories": {"dangerous": {"approval": True}}})
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins, policy=policy, approve=lambda _c, _k: False) as engine:
            result = await engine.call("refund_now", {"order_id": "9"})
    assert not result.success
    assert result.extra["status"] == "denied"
    assert result.steps == ()
    assert "refund" not in tools.calls


def test_the_registry_refuses_broken_pipelines(tmp_path: Path) -> None:
    """Unknown step tools, references to later or unknown steps and pipelines calling each other are registry errors."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(
        """\
toolflow: 1
tools:
  echo:
    description: Echoes.
    template: "{{ x }}"
    parameters: {type: object, properties: {x: {type: string, description: X.}}}
  a:
    description: Calls b.
    pipeline:
      steps:
        one: {tool: b}
  b:
    description: Calls a.
    pipeline:
      steps:
        one: {tool: a}
  shadowed:
    description: A parameter the steps' results would hide.
    parameters:
      type: object
      properties:
        steps: {type: integer, description: How many.}
    pipeline:
      steps:
        one: {tool: echo}
  broken:
    description: Broken references.
    pipeline:
      steps:
        first: {tool: ech, with: {x: "{{ steps.second.x }}"}}
        second: {tool: echo, needs: [nowhere]}
""",
        encoding="utf-8",
    )
    with pytest.raises(RegistryError) as caught:
        toolflow.load_registry([spec], plugins=toolflow.load_plugins(entry_points=False))
    text = str(caught.value)
    assert "calls 'ech', no such tool; did you mean 'echo'?" in text
    assert "step 'first' reads step 'second', which comes later" in text
    assert "step 'second' needs step 'nowhere', which the pipeline does not have" in text
    assert "pipelines call each other in a cycle: a -> b -> a" in text
    assert "tool 'shadowed': a pipeline's parameter may not be called 'steps'" in text


async def test_the_agent_loop_sees_one_call_and_one_result(setup: Setup, tmp_path: Path) -> None:
    """In the loop a pipeline is one call: one result, counted once per turn, its steps never counted or offered."""
    registry, plugins, tools = setup
    session = tmp_path / "session.yaml"
    turns = [
        {"tool_calls": [{"name": "refund_now", "arguments": {"order_id": "5"}}]},
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "5"}}]},
        {"text": "done"},
    ]
    session.write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    provider = toolflow.load_provider(f"scripted:{session}", plugins=plugins, record_requests=True)
    policy = Policy.from_mapping({"categories": {"dangerous": {"per_turn": 1}}})
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            agent = toolflow.Agent(engine, provider, policy=policy, format="openai")
            result = await agent.run("refund order 5")
    assert result.reason == "final_answer"
    first, second = result.turns[0].entries, result.turns[1].entries
    assert [(entry.tool_name, entry.result.success) for entry in first] == [("refund_now", True)]
    assert tools.calls["refund"] == 1  # the dangerous step ran: only the pipeline counted against per_turn
    assert second[0].result.extra["status"] == "blocked"  # expose: false keeps lookup_order from the model
    offered = {tool["function"]["name"] for tool in provider.requests[0].tools}  # type: ignore[attr-defined]
    assert "refund_now" in offered
    assert "lookup_order" not in offered
    tool_messages = [message for message in result.messages if message["role"] == "tool"]
    assert len(tool_messages) == 2  # one result per model call, none per step


async def test_a_pipeline_tools_own_concurrency_holds(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """`concurrency: 1` on a pipeline tool: three calls at once take three seconds, one after another."""
    registry, plugins, _ = setup
    results: list[toolflow.ToolResult] = []
    async with open_engine(registry, plugins=plugins) as engine:
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            for index in range(3):

                async def one(call_id: str = f"call_{index}") -> None:
                    results.append(await engine.call("one_at_a_time", {}, call_id=call_id))

                nursery.start_soon(one)
        elapsed = trio.current_time() - started
    assert elapsed == pytest.approx(3.0)
    assert all(result.success for result in results)


async def test_data_that_cannot_reach_the_worker_fails_the_step(setup: Setup) -> None:
    """A step's data that cannot be pickled for the template worker fails the step that reads it, nothing more."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("reads_odd", {})
    assert not result.success
    assert result.error is not None
    assert result.error.startswith(
        "Error: step 'second' (item_notes) failed: the steps' data cannot reach the template worker"
    )
    assert _statuses(result) == [("first", None, "succeeded"), ("second", None, "failed")]


async def test_the_summary_counts_many_items(setup: Setup, autojump_clock: trio.testing.MockClock) -> None:
    """A for_each of ten items is counted in the failure's text, not listed item by item."""
    registry, plugins, _ = setup
    async with open_engine(registry, plugins=plugins) as engine:
        result = await engine.call("many_items", {})
    assert result.error == (
        "Error: step 'bad' (broken) failed: tool 'broken' raised RuntimeError: the disk is on fire; "
        "ran: each (10 items), bad; cancelled: slow"
    )


def test_cycles_are_found_in_a_chain_longer_than_the_recursion_limit() -> None:
    """pipeline_cycles walks a chain of 5,000 pipelines (and the cycle closing it) without recursing."""
    count = 5000

    def pipeline(name: str, calls: str) -> toolflow.ToolSpec:
        steps = (toolflow.PipelineStep(name="next", tool=calls),)
        return toolflow.ToolSpec(
            name=name,
            implementations=(toolflow.Implementation(kind="pipeline", config=toolflow.Pipeline(steps=steps)),),
        )

    chain = [pipeline(f"p{i}", f"p{i + 1}") for i in range(count)]
    assert pipeline_cycles(chain) == []
    closed = [*chain, pipeline(f"p{count}", "p0")]
    (cycle,) = pipeline_cycles(closed)
    assert (len(cycle), cycle[0], cycle[-1]) == (count + 2, "p0", "p0")


async def test_errors_of_a_step_that_succeeded_is_null(setup: Setup, tmp_path: Path) -> None:
    """`errors.NAME` is null for a step that succeeded, so `when: "{{ errors.first is none }}"` works."""
    registry, plugins, _ = setup
    with trio.fail_after(60):
        async with open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("checks_errors", {})
    assert result.success, result.error
    assert result.data == {"first": "note of x", "second": "note of ok"}
