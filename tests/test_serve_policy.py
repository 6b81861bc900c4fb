"""``toolflow serve`` obeys the spec files' policy: exposure, approval, ``depends_on`` first, one turn per request.

The service under test is the one ``toolflow serve`` builds (:meth:`ToolService.under_policy`),
connected in-process to the ``mcp`` SDK's own ``Client``: over the 2025-11-25 handshake
(``mode="legacy"``, where the server asks the client with an ``elicitation/create`` request)
and over 2026-07-28 (where the server answers ``input_required`` and the client retries the
call with its answer). A few tests run the real command in a subprocess over stdio.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client, types
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError

import toolflow
from toolflow._serve import ToolService, build_server

SPEC = """\
toolflow: 1
toolsets:
  desk:
    tools: [lookup_order, refund_order, note, admin_reset]
tools:
  lookup_order:
    description: Look an order up.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    implementation: shop.lookup_order
  refund_order:
    description: Refund an order.
    category: dangerous
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
        amount: {type: integer, minimum: 1, description: Cents to refund.}
      required: [order_id, amount]
    depends_on:
      - {tool: lookup_order, scope: session}
    implementation: shop.refund_order
  note:
    description: Write a note.
    category: dangerous
    parameters:
      type: object
      properties:
        text: {type: string, description: The note.}
      required: [text]
    implementation: shop.note
  admin_reset:
    description: Reset the shop.
    category: dangerous
    implementation: shop.admin_reset
  stock:
    description: Count the stock (outside the toolset).
    implementation: shop.stock
  note_twice:
    description: Write two notes (a pipeline, outside the toolset).
    category: dangerous
    pipeline:
      steps:
        first: {tool: note, with: {text: one}}
        second: {tool: note, with: {text: two}, needs: [first]}
policy:
  toolset: desk
  deny: [admin_reset]
  categories:
    dangerous:
      approval: true
"""

PLUGIN = '''\
"""The served shop's tools: each run is counted in a file, so the test sees what ran."""

import json
import pathlib

import toolflow

RUNS = pathlib.Path(__file__).with_name("runs.jsonl")


def _ran(name, **arguments):
    with RUNS.open("a", encoding="utf-8") as runs:
        runs.write(json.dumps({"tool": name, **arguments}) + "\\n")


def lookup_order(order_id):
    _ran("lookup_order", order_id=order_id)
    return {"order_id": order_id, "status": "damaged"}


def refund_order(order_id, amount):
    _ran("refund_order", order_id=order_id, amount=amount)
    return {"refunded": amount}


def note(text):
    _ran("note", text=text)
    return "noted"


def admin_reset():
    _ran("admin_reset")
    return "reset"


def stock():
    _ran("stock")
    return 3


@toolflow.hookimpl
def toolflow_register_implementations(register):
    for function in (lookup_order, refund_order, note, admin_reset, stock):
        register(f"shop.{function.__name__}", function)
'''

SMALL_REFUNDS = '''\
"""An approval plugin: refunds under 10 euros pass, others are refused; notes are left to others."""

import toolflow


@toolflow.hookimpl
def toolflow_approve_call(call, category):
    if call.name == "refund_order":
        return call.arguments["amount"] < 1000
    return None
'''


class Shop:
    """The project on disk, its registry and plugins, and what its tools ran."""

    def __init__(self, root: Path, *, small_refunds: bool = False) -> None:
        self.root = root
        # Module names of their own: a plugin module stays in sys.modules, with its RUNS path.
        suffix = re.sub(r"\W", "_", root.name)
        (root / "specs").mkdir(exist_ok=True)
        (root / "specs" / "shop.yaml").write_text(SPEC.replace("shop.", f"shop_{suffix}."), encoding="utf-8")
        (root / f"shop_{suffix}.py").write_text(PLUGIN.replace("shop.", f"shop_{suffix}."), encoding="utf-8")
        (root / f"refunds_{suffix}.py").write_text(SMALL_REFUNDS, encoding="utf-8")
        plugins = (f"shop_{suffix}", f"refunds_{suffix}") if small_refunds else (f"shop_{suffix}",)
        listed = ", ".join(json.dumps(name) for name in plugins)
        (root / "pyproject.toml").write_text(
            f'[project]\nname = "shop"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = [{listed}]\n',
            encoding="utf-8",
        )
        self.plugins = toolflow.load_plugins(entry_points=False, project_plugins=plugins, project_root=root)
        self.specs = toolflow.load_specs([root / "specs"], kinds=self.plugins.kind_schemas())
        assert self.specs.ok, [d.render() for d in self.specs.diagnostics]
        self.registry = toolflow.Registry.build(self.specs, self.plugins)
        self.policy = toolflow.Policy.from_specs(self.specs)

    def runs(self) -> list[dict[str, Any]]:
        path = self.root / "runs.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def service(self, **options: Any) -> ToolService:
        return ToolService.under_policy(self.registry, policy=self.policy, plugins=self.plugins, **options)


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    return Shop(tmp_path)


class Approver:
    """An MCP client's elicitation callback that answers from a script and records what it was asked."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if answer == "yes":
            return types.ElicitResult(action="accept", content={"approve": True})
        if answer == "no":
            return types.ElicitResult(action="accept", content={"approve": False})
        return types.ElicitResult(action="decline")


ELICITING_MODES = ["legacy", "2026-07-28"]


@contextlib.asynccontextmanager
async def connect(service: ToolService, mode: str, approver: Callable[..., Any] | None = None) -> AsyncIterator[Client]:
    """The SDK's client, in-process, speaking *mode*; with *approver*, it declares form elicitation.

    One engine serves every request, as over stdio (a 2026-07-28 request over HTTP has no
    session to share an engine with: ``depends_on`` across such requests is issue 19's).
    """
    async with service.open_engine() as engine:
        service.shared = engine
        async with Client(build_server(service), mode=mode, elicitation_callback=approver) as client:
            yield client


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# --- exposure ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ELICITING_MODES)
async def test_only_the_exposed_tools_are_listed_and_called(shop: Shop, mode: str) -> None:
    """tools/list holds the policy's toolset minus `deny`; a call of any other tool is an isError that runs nothing."""
    with trio.fail_after(30):
        async with connect(shop.service(), mode) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            assert listed == ["lookup_order", "refund_order", "note"]
            for hidden in ("admin_reset", "stock"):
                refused = await client.call_tool(hidden, {})
                assert refused.is_error
                assert text(refused) == (
                    f"Error: tool {hidden!r} is not available now; allowed tools: 'lookup_order', 'note', 'refund_order'"
                )
    assert shop.runs() == []


async def test_the_operators_selection_replaces_the_toolset_and_the_policy_still_denies(shop: Shop) -> None:
    """--tool/--toolset choose among all tools; deny still applies, and naming a denied tool is an error."""
    service = shop.service(tools=["stock", "lookup_order"])
    assert service.registry.names() == ("lookup_order", "stock")
    with pytest.raises(toolflow.UsageError, match="policy keeps 'admin_reset' from the model"):
        shop.service(tools=["admin_reset"])


# --- approval ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ELICITING_MODES)
async def test_without_elicitation_a_call_needing_approval_is_refused(shop: Shop, mode: str) -> None:
    """A client that cannot be asked gets an isError saying approval is required; the tool never runs."""
    with trio.fail_after(30):
        async with connect(shop.service(), mode) as client:
            refused = await client.call_tool("note", {"text": "hi"})
    assert refused.is_error
    assert text(refused).startswith("Error: 'note' needs approval before it runs (dangerous calls do)")
    assert shop.runs() == []


@pytest.mark.parametrize("mode", ELICITING_MODES)
async def test_the_client_is_asked_by_elicitation(shop: Shop, mode: str) -> None:
    """With form elicitation the client decides each call: yes runs it once, no and decline refuse it."""
    approver = Approver("yes", "no", "decline")
    with trio.fail_after(30):
        async with connect(shop.service(), mode, approver) as client:
            approved = await client.call_tool("note", {"text": "first"})
            refused = await client.call_tool("note", {"text": "second"})
            declined = await client.call_tool("note", {"text": "third"})
    assert (approved.is_error, text(approved)) == (False, "noted")
    assert refused.is_error
    assert declined.is_error
    assert text(refused) == "Error: 'note' was not approved, so it did not run; do not retry it unchanged"
    assert shop.runs() == [{"tool": "note", "text": "first"}]
    assert approver.asked[0] == 'Approve the dangerous call note({"text":"first"})? It runs only if you say yes.'


@pytest.mark.parametrize("mode", ELICITING_MODES)
async def test_one_elicitation_approves_a_pipeline_and_its_steps(shop: Shop, mode: str) -> None:
    """A served pipeline is asked about once, the question naming the steps it covers; its steps run unasked."""
    approver = Approver("yes")
    with trio.fail_after(30):
        async with connect(shop.service(tools=["note_twice"]), mode, approver) as client:
            done = await client.call_tool("note_twice", {})
    assert not done.is_error, text(done)
    question = (
        "Approve the dangerous call note_twice({})? Your answer covers its steps first (note), second (note) too."
        " It runs only if you say yes."
    )
    assert approver.asked == [question]
    assert shop.runs() == [{"tool": "note", "text": "one"}, {"tool": "note", "text": "two"}]


@pytest.mark.parametrize("mode", ELICITING_MODES)
async def test_depends_on_is_checked_before_anybody_is_asked(shop: Shop, mode: str) -> None:
    """A refund whose lookup never ran is refused by depends_on, and nobody is asked to approve it."""
    approver = Approver("yes")
    with trio.fail_after(30):
        async with connect(shop.service(), mode, approver) as client:
            early = await client.call_tool("refund_order", {"order_id": "A1", "amount": 500})
            assert early.is_error
            assert text(early) == "Error: 'refund_order' cannot run yet - run 'lookup_order' successfully first"
            assert approver.asked == []
            assert not (await client.call_tool("lookup_order", {"order_id": "A1"})).is_error
            refunded = await client.call_tool("refund_order", {"order_id": "A1", "amount": 500})
    assert (refunded.is_error, refunded.structured_content) == (False, {"refunded": 500})
    assert len(approver.asked) == 1
    assert [run["tool"] for run in shop.runs()] == ["lookup_order", "refund_order"]


async def test_invalid_arguments_are_refused_before_anybody_is_asked(shop: Shop) -> None:
    """Validation comes before approval too: the client is never asked about a call that cannot run."""
    approver = Approver()
    with trio.fail_after(30):
        async with connect(shop.service(), "legacy", approver) as client:
            invalid = await client.call_tool("note", {"txt": "typo"})
    assert invalid.is_error
    assert text(invalid).startswith("Error: Parameter validation failed for 'note'")
    assert approver.asked == []


@pytest.mark.parametrize(("answer", "runs"), [(True, ["note"]), (False, [])])
async def test_the_operators_fixed_answer_comes_first(shop: Shop, answer: bool, runs: list[str]) -> None:
    """`--approve yes|no` answers every approval; the client is not asked."""
    approver = Approver()
    with trio.fail_after(30):
        async with connect(shop.service(approve=answer), "legacy", approver) as client:
            result = await client.call_tool("note", {"text": "x"})
    assert result.is_error is not answer
    assert [run["tool"] for run in shop.runs()] == runs
    assert approver.asked == []


async def test_a_plugin_decides_before_the_client(tmp_path: Path) -> None:
    """`toolflow_approve_call` answers before the client; where it has no opinion, the client is asked."""
    shop = Shop(tmp_path, small_refunds=True)
    approver = Approver("no")
    with trio.fail_after(30):
        async with connect(shop.service(), "legacy", approver) as client:
            await client.call_tool("lookup_order", {"order_id": "A1"})
            small = await client.call_tool("refund_order", {"order_id": "A1", "amount": 500})
            large = await client.call_tool("refund_order", {"order_id": "A1", "amount": 5000})
            noted = await client.call_tool("note", {"text": "x"})
    assert (small.is_error, large.is_error, noted.is_error) == (False, True, True)
    assert len(approver.asked) == 1
    assert approver.asked[0].startswith("Approve the dangerous call note(")
    assert [run["tool"] for run in shop.runs()] == ["lookup_order", "refund_order"]


async def test_an_answer_counts_only_for_the_call_it_was_asked_about(shop: Shop) -> None:
    """2026-07-28: a retry with the sealed state of another call's question is refused; an answer without it is ignored."""
    with trio.fail_after(30):
        async with connect(shop.service(), "2026-07-28", Approver()) as client:
            first = await client.session.call_tool("note", {"text": "harmless"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None
            assert list(first.input_requests) == ["toolflow.approval"]
            yes: dict[str, types.InputResponse] = {
                "toolflow.approval": types.ElicitResult(action="accept", content={"approve": True})
            }
            with pytest.raises(MCPError, match="Invalid or expired requestState"):
                await client.session.call_tool(
                    "note",
                    {"text": "something else"},
                    input_responses=yes,
                    request_state=first.request_state,
                    allow_input_required=True,
                )
            unsealed = await client.session.call_tool(
                "note", {"text": "harmless"}, input_responses=yes, allow_input_required=True
            )
            assert isinstance(unsealed, types.InputRequiredResult)
    assert shop.runs() == []


async def test_one_request_is_one_turn(shop: Shop) -> None:
    """`dangerous` is one call per turn; each request is a turn, so successive requests all run."""
    with trio.fail_after(30):
        async with connect(shop.service(approve=True), "legacy") as client:
            results = [await client.call_tool("note", {"text": str(n)}) for n in range(3)]
    assert [result.is_error for result in results] == [False, False, False]
    assert [run["text"] for run in shop.runs()] == ["0", "1", "2"]


# --- the command -------------------------------------------------------------------------------


def _serve(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolflow", "serve", *args],
        cwd=root,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "TOOLFLOW_DISABLE_PLUGINS": "assistant,http"},
    )


def test_serving_a_tool_the_policy_denies_is_a_usage_error(shop: Shop) -> None:
    """`toolflow serve --tool admin_reset` stops with exit 2 and says why, before serving anything."""
    done = _serve(shop.root, "--tool", "admin_reset")
    assert done.returncode == 2
    assert "policy keeps 'admin_reset' from the model" in done.stderr


async def test_the_command_serves_the_policy_over_stdio(shop: Shop) -> None:
    """The real `toolflow serve --approve yes` over stdio: only exposed tools, and dangerous calls approved."""
    from mcp import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolflow", "serve", "--approve", "yes"],
        cwd=shop.root,
        env={**os.environ, "TOOLFLOW_DISABLE_PLUGINS": "assistant,http"},
    )
    with trio.fail_after(60):
        async with Client(params) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            hidden = await client.call_tool("admin_reset", {})
            noted = await client.call_tool("note", {"text": "via stdio"})
    assert listed == ["lookup_order", "refund_order", "note"]
    assert hidden.is_error
    assert (noted.is_error, text(noted)) == (False, "noted")
    assert shop.runs() == [{"tool": "note", "text": "via stdio"}]
