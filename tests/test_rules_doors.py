"""The policy's order rules and call limits through each door: `toolflow serve` (per session), `run`, `call`, `test`.

Serve runs the real command: over streamable HTTP each client session (``Mcp-Session-Id``) is
one conversation with counts of its own; over stdio the connection is. ``toolflow run`` runs a
scripted session; ``toolflow call`` and the examples of ``toolflow test`` run one call outside any
conversation, which the rules do not govern.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
import yaml
from _mcp_project import HTTPServer, serve_argv, server_environment
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolflow._cli import run

# The SDK's HTTP client (httpx2) leaves its SSE streams' async generators to the garbage
# collector when a session ends under trio; trio's finalizer warns about each one.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

SPECS = """\
toolflow: 1
tools:
  lookup_order:
    description: Look an order up.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    template: "order {{ order_id }}: 2 items"
    examples:
      - args: {order_id: A1}
        expect: "order A1: 2 items"
  refund_order:
    description: Refund an order.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The order.}
      required: [order_id]
    template: "refunded {{ order_id }}"
    examples:
      - args: {order_id: A1}
        expect: "refunded A1"
  say:
    description: Tell the customer something.
    category: terminal
    parameters:
      type: object
      properties:
        text: {type: string, description: What to say.}
      required: [text]
    template: "{{ text }}"
  web_search:
    description: Search the web.
    parameters:
      type: object
      properties:
        q: {type: string, description: The query.}
      required: [q]
    template: "results for {{ q }}"
policy:
  rules:
    - first: [lookup_order, web_search]
    - after: lookup_order
      only: [refund_order, say]
    - tool: web_search
      max_calls: {per_run: 2}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rules")
    (root / "specs").mkdir()
    (root / "specs" / "shop.yaml").write_text(SPECS, encoding="utf-8")
    (root / "pyproject.toml").write_text('[project]\nname = "rules"\n\n[tool.toolflow]\nspecs = ["specs"]\n')
    return root


@pytest.fixture(scope="module")
def http_server(project: Path) -> Iterator[HTTPServer]:
    server = HTTPServer(project)
    try:
        yield server
    finally:
        server.close()


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _answer(result: types.CallToolResult) -> tuple[bool, str]:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return result.is_error or False, block.text


async def test_serve_over_http_keeps_the_counts_per_session(http_server: HTTPServer) -> None:
    """Each HTTP session is a conversation: `first`, `after` and `per_run` count per session; tools/list is unchanged."""
    with trio.fail_after(60):
        async with http_session(http_server.url) as alice, http_session(http_server.url) as bob:
            listed = [tool.name for tool in (await alice.list_tools()).tools]
            assert listed == ["lookup_order", "refund_order", "say", "web_search"]  # not narrowed per session
            refused, text = _answer(await alice.call_tool("refund_order", {"order_id": "A1"}))
            assert refused
            assert text == (
                "Error: 'refund_order' breaks the rule: your first tool call must be one of "
                "'lookup_order', 'web_search'. Allowed now: 'lookup_order', 'web_search'"
            )
            assert _answer(await alice.call_tool("lookup_order", {"order_id": "A1"})) == (False, "order A1: 2 items")
            refused, text = _answer(await alice.call_tool("web_search", {"q": "refund policy"}))
            assert refused
            assert "after 'lookup_order', call only 'refund_order', 'say' next" in text
            assert _answer(await alice.call_tool("refund_order", {"order_id": "A1"})) == (False, "refunded A1")
            # Bob's session has counts of its own: his first call must still be a `first` tool.
            refused, _ = _answer(await bob.call_tool("say", {"text": "hi"}))
            assert refused
            for query in ("a", "b"):
                assert _answer(await bob.call_tool("web_search", {"q": query})) == (False, f"results for {query}")
            refused, text = _answer(await bob.call_tool("web_search", {"q": "c"}))
            assert refused
            assert text.startswith("Error: 'web_search' was called 2 time(s) in this run, its limit.")
            # Alice has not searched yet in her session.
            assert _answer(await alice.call_tool("web_search", {"q": "x"})) == (False, "results for x")


async def test_serve_over_stdio_counts_over_the_connection(project: Path) -> None:
    """Over stdio the process serves one client: the connection is the conversation."""
    argv = serve_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=project, env=server_environment())
    with trio.fail_after(60), (project / "stdio.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            assert (await session.call_tool("say", {"text": "hi"})).is_error
            assert not (await session.call_tool("web_search", {"q": "a"})).is_error
            assert not (await session.call_tool("say", {"text": "hi"})).is_error  # no after rule for web_search


def test_run_with_a_scripted_session_follows_the_rules(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`toolflow run`: the blocked call is in the JSON output with its rule; the next turn offers what is allowed."""
    session = tmp_path / "session.yaml"
    turns = [
        {"tool_calls": [{"name": "say", "arguments": {"text": "hi"}}]},
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A1"}}]},
        {"tool_calls": [{"name": "say", "arguments": {"text": "Your order has 2 items."}}]},
    ]
    session.write_text(yaml.safe_dump({"prompt": "Where is my order A1?", "turns": turns}), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.chdir(project)
    code = run(["run", "--model", f"scripted:{session}", "--output", "json"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    document = json.loads(out.getvalue())
    assert document["reason"] == "terminal"
    calls = [call for turn in document["turns"] for call in turn["calls"]]
    assert [(call["tool"], call["result"]["success"]) for call in calls] == [
        ("say", False),
        ("lookup_order", True),
        ("say", True),
    ]
    blocked = calls[0]["result"]
    assert (blocked["status"], blocked["rule"], blocked["allowed"]) == (
        "blocked",
        "first",
        ["lookup_order", "web_search"],
    )
    assert "## Tool rules" in document["system"]


def test_call_and_the_examples_of_test_are_not_a_conversation(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow call refund_order` runs (no `first` rule for one call by hand); so do `toolflow test`'s examples."""
    done = subprocess.run(
        [sys.executable, "-m", "toolflow", "call", "refund_order", '{"order_id": "A1"}'],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=server_environment(),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"success": True, "data": "refunded A1"}
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.chdir(project)
    assert run(["test"], stdout=out, stderr=err) == 0, out.getvalue() + err.getvalue()
