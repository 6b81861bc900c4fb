"""MCP servers as hostile tool sources: a hand-written server (tests/_mcp_hostile_server.py) sends what the SDK's never would.

Each test starts its own server process over stdio; what it lists and answers is in that file.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from _mcp_project import announced_url, serve_argv, server_environment
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolflow import LoadResult, McpServer, SpecFile, ToolResult, ToolSourceWarning, open_engine, open_registry
from toolflow._cli import run
from toolflow._mcp_http import MAX_JSON_BYTES
from toolflow._mcp_sources import MAX_REMOTE_DESCRIPTION
from toolflow._mcp_stdio import MAX_MESSAGE_BYTES, Lines

SERVER = Path(__file__).with_name("_mcp_hostile_server.py")
GUARD = 60  # seconds: a server process starts in well under one


def hostile(listing: str = "results", **entry: object) -> McpServer:
    """The hostile server listing *listing*, as an mcp_servers entry with *entry*'s keys."""
    return McpServer(name="hostile", command=(sys.executable, str(SERVER), listing), **entry)  # type: ignore[arg-type]


def specs_of(server: McpServer) -> LoadResult:
    """Specs with *server*, as the loader builds them."""
    return LoadResult(files=(SpecFile(path="specs/hostile.yaml", mcp_servers=(server,)),))


def project(root: Path, listing: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project at *root* whose specs import the hostile server's *listing* (timeout 10s)."""
    command = json.dumps([sys.executable, str(SERVER), listing])
    (root / "specs").mkdir()
    (root / "specs" / "hostile.yaml").write_text(
        f"toolflow: 1\nmcp_servers:\n  hostile:\n    command: {command}\n    defaults: {{timeout: 10s}}\n",
        encoding="utf-8",
    )
    (root / "pyproject.toml").write_text('[tool.toolflow]\nspecs = ["specs"]\n', encoding="utf-8")
    monkeypatch.chdir(root)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")


async def calls(*names: str) -> tuple[list[ToolResult], list[str]]:
    """Call the hostile server's tools *names* in turn, through open_registry: their results, and the warnings."""
    with trio.fail_after(GUARD), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with open_registry(specs_of(hostile())) as registry, open_engine(registry) as engine:
            results = [await engine.call(name, {}) for name in names]
    return results, [str(w.message) for w in caught]


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


async def test_names_mcp_does_not_allow_and_repeated_names_are_left_out() -> None:
    """Control characters, 10,000 characters, a name listed twice: left out with a warning each; the rest imported."""
    with trio.fail_after(GUARD), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with open_registry(specs_of(hostile("names"))) as registry, open_engine(registry) as engine:
            names = registry.names()
            result = await engine.call("fine", {})
    assert names == ("fine",)
    assert result.data == "fine done"
    messages = [str(w.message) for w in caught if issubclass(w.category, ToolSourceWarning)]
    assert any("'bell\\x07\\x1b[2J' is left out: its name is not" in m for m in messages)
    assert any("(10,000 characters) is left out" in m and len(m) < 400 for m in messages)
    assert any("'fine' is left out: the server lists that name more than once" in m for m in messages)


async def test_a_huge_description_is_cut_and_a_huge_schema_leaves_its_tool_out() -> None:
    """A 10 MB description is cut to MAX_REMOTE_DESCRIPTION characters; a 1 MB schema leaves its tool out; warnings say so."""
    for listing in ("huge_description", "huge_schema"):
        with trio.fail_after(GUARD), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with open_registry(specs_of(hostile(listing))) as registry:
                tools = {name: registry.get(name).spec for name in registry.names()}
        messages = [str(w.message) for w in caught if issubclass(w.category, ToolSourceWarning)]
        if listing == "huge_description":
            assert sorted(tools) == ["fine", "wordy"]
            assert tools["wordy"].description == "w" * MAX_REMOTE_DESCRIPTION + "..."
            assert any("'wordy': its description of 10,485,760 characters is cut to 10,000" in m for m in messages)
        else:
            assert sorted(tools) == ["fine"]
            assert any("'sprawling' is left out: its schemas take" in m for m in messages), messages


def test_list_shows_no_control_characters_and_each_name_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolflow list over the hostile names: no escape sequence reaches the terminal, 'fine' once."""
    project(tmp_path, "names", monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolSourceWarning)
        code, out, err = cli("list", "--output-format", "json")
    assert code == 0, err
    assert [row["name"] for row in json.loads(out)["tools"]] == ["fine"]


async def test_an_answer_the_sdk_cannot_read_fails_the_call_at_once() -> None:
    """A 5,000-digit number, nesting 10,000 deep: the call fails saying so, not after its timeout as 'timed out'."""
    (big, deep, after), caught = await calls("big_number", "deep_structured", "error_empty")
    assert any("sent a message toolflow cannot read" in message for message in caught)
    assert not big.success
    assert "sent a message toolflow cannot read during the call (Invalid JSON: number out of range" in (big.error or "")
    assert not deep.success
    assert "(Invalid JSON: recursion limit exceeded" in (deep.error or "")
    assert "the remote tool failed without saying why" in (after.error or "")  # the connection still serves


def test_call_says_so_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolflow call of a tool whose answer cannot be read: exit 1, the reason, nothing of the SDK's log on stderr."""
    project(tmp_path, "results", monkeypatch)
    done = subprocess.run(
        [sys.executable, "-m", "toolflow", "call", "big_number", "{}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=GUARD,
        env=dict(os.environ),
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "cannot read during the call (Invalid JSON: number out of range" in json.loads(done.stdout)["error"]
    assert "Traceback" not in done.stderr
    assert "ToolSourceWarning" in done.stderr or "cannot read" in done.stderr


def test_run_gets_the_failure_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolflow run with a scripted model: the unreadable answer is a failed call, and the loop's next call runs."""
    project(tmp_path, "results", monkeypatch)
    (tmp_path / "session.yaml").write_text(
        "prompt: Try.\nturns:\n  - tool_calls: [{name: deep_structured, arguments: {}}]\n"
        "  - tool_calls: [{name: error_empty, arguments: {}}]\n  - text: done\n",
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolSourceWarning)
        code, out, err = cli("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert code == 0, err
    calls = [call for turn in json.loads(out)["turns"] for call in turn["calls"]]
    assert "cannot read during the call (Invalid JSON: recursion limit exceeded" in calls[0]["result"]["error"]
    assert "failed without saying why" in calls[1]["result"]["error"]


async def test_serve_as_a_gateway_answers_with_the_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolflow serve in front of the hostile server: tools/call of big_number is an isError result saying why."""
    project(tmp_path, "results", monkeypatch)
    argv = serve_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=tmp_path, env=server_environment())
    with trio.fail_after(GUARD), (tmp_path / "serve.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            answer = await session.call_tool("big_number", {})
    assert answer.is_error
    assert "cannot read during the call (Invalid JSON: number out of range" in answer.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in (tmp_path / "serve.log").read_text(encoding="utf-8")


async def test_an_error_with_structured_content_only_says_it() -> None:
    """isError with no text but structuredContent: the failure carries that content, not 'without saying why'."""
    (failed, empty), _ = await calls("error_structured", "error_empty")
    assert (failed.success, failed.error) == (False, 'Error: {"why":"quota"}')
    assert (empty.success, empty.error) == (False, "Error: the remote tool failed without saying why")


def test_lines_are_split_across_chunks_and_a_long_one_is_skipped() -> None:
    """Lines that span chunks are joined; one longer than the limit is one error, and the next line is read."""
    lines = Lines(8)
    assert lines.feed(b'{"a"') == []
    assert lines.feed(b":1}\n{}\n12345") == [b'{"a":1}', b"{}"]
    out = lines.feed(b"6789")  # the ninth byte of the line
    assert [str(item) for item in out] == ["a message longer than 8 bytes, skipped"]
    assert lines.feed(b"more of it\nok\n") == [b"ok"]
    assert [type(item) for item in lines.feed(b"123456789\nx\n")] == [ValueError, bytes]


async def test_a_message_longer_than_the_limit_fails_the_call_and_the_connection_goes_on() -> None:
    """A 24 MB answer over stdio: skipped as it arrives, the call fails saying so, the next call is answered."""
    (long, after), caught = await calls("long_text", "error_structured")
    assert not long.success
    assert f"cannot read during the call (a message longer than {MAX_MESSAGE_BYTES:,} bytes, skipped)" in (
        long.error or ""
    )
    assert after.error == 'Error: {"why":"quota"}'
    assert any("longer than" in message for message in caught)


@pytest.fixture
def http_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The hostile server over streamable HTTP on a free loopback port, answering calls with 24 MB of JSON; its URL."""
    monkeypatch.setenv("HOSTILE_BODY_MB", "24")
    with announced_url([sys.executable, str(SERVER), "http"]) as url:
        yield url


# Reading stops mid-body: httpx2's and httpcore2's body generators are then left to the garbage
# collector, and trio's finalizer warns about each (as when an SSE session ends, tests/test_serve.py).
@pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning")
async def test_a_json_answer_over_http_longer_than_the_limit_fails_the_call(http_server: str) -> None:
    """A 24 MB application/json answer over streamable HTTP: reading stops at the limit, the call fails naming it."""
    server = McpServer(name="web", url=http_server)
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(server)) as registry, open_engine(registry) as engine:
            result = await engine.call("huge_json", {})
    assert not result.success
    assert f"the answer is longer than {MAX_JSON_BYTES:,} bytes" in (result.error or "")
