"""MCP servers as tool sources: a real server (the `mcp` SDK, tests/_mcp_remote_server.py) over stdio and HTTP.

Each test starts its own server process; the engine calls the remote tools as it calls local ones.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from _mcp_project import announced_url

from toolflow import (
    LoadResult,
    McpServer,
    SpecFile,
    ToolSourceError,
    ToolSourceWarning,
    load_registry,
    open_engine,
    open_registry,
)
from toolflow._context import reporting_progress
from toolflow._policy import CategoryPolicy, Policy

SERVER = Path(__file__).with_name("_mcp_remote_server.py")
GUARD = 60  # seconds: a server process starts in about one


def stdio(**entry: Any) -> McpServer:
    """The test server over stdio, as an mcp_servers entry with *entry*'s keys."""
    entry.setdefault("name", "remote")
    return McpServer(command=(sys.executable, str(SERVER), "stdio"), **entry)


def specs_of(*servers: McpServer, tools: tuple[Any, ...] = ()) -> LoadResult:
    """Specs with *servers* (and *tools*), as the loader builds them."""
    return LoadResult(files=(SpecFile(path="specs/remote.yaml", mcp_servers=servers, tools=tools),))


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's event log (``started PID``, ``cancelled TOOL``), passed through its environment."""
    log = tmp_path / "events.log"
    log.touch()
    monkeypatch.setenv("MCP_REMOTE_LOG", str(log))
    return log


def stdio_logged(events: Path, **entry: Any) -> McpServer:
    """The stdio server with the event log in its environment (the SDK passes only a safe set of variables)."""
    return stdio(env={"MCP_REMOTE_LOG": str(events)}, **entry)


async def logged(events: Path, text: str, *, times: int = 1) -> None:
    """Wait until the server's event log holds *text* *times* times."""
    while (await trio.Path(events).read_text(encoding="utf-8")).count(text) < times:  # noqa: ASYNC110 - another process writes it
        await trio.sleep(0.05)


async def test_remote_tools_join_the_registry_with_their_schemas() -> None:
    """Every listed tool is registered under prefix + name, with the server's schema and description."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio(prefix="r_"))) as registry:
            assert "r_add" in registry
            assert "r_echo" in registry
            add = registry.get("r_add")
    assert add.description == "Add two numbers."
    assert add.spec.parameters["required"] == ["a", "b"]
    assert add.kind == "mcp"


async def test_tools_imports_only_the_names_listed_and_warns_about_missing_ones() -> None:
    """tools: [...] imports those; a name the server does not list is a warning, not a failure."""
    with trio.fail_after(GUARD), pytest.warns(ToolSourceWarning, match="lists no tool 'nope'"):
        async with open_registry(specs_of(stdio(tools=("echo", "nope")))) as registry:
            assert registry.names() == ("echo",)


async def test_annotations_are_hints_unless_trusted() -> None:
    """Untrusted: every remote tool is dangerous; trusted: read-only tools are safe_chain."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio(), stdio(name="trusted", prefix="t_", trust_annotations=True))) as r:
            assert {r.get("add").category, r.get("delete_everything").category} == {"dangerous"}
            assert (r.get("t_add").category, r.get("t_add").spec.idempotent) == ("safe_chain", True)
            assert r.get("t_delete_everything").category == "dangerous"


async def test_results_structured_text_and_errors() -> None:
    """structuredContent is the data, text content a string, isError a failure with the server's text."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio())) as registry, open_engine(registry) as engine:
            added = await engine.call("add", {"a": 1, "b": 2.5})
            echoed = await engine.call("echo", {"text": "hello"})
            failed = await engine.call("fail", {"reason": "the disk is full"})
    assert (added.success, added.data) == (True, {"sum": 3.5})
    assert (echoed.success, echoed.data) == (True, "hello")
    assert not failed.success
    assert "the disk is full" in (failed.error or "")


async def test_arguments_are_validated_before_they_are_sent(events: Path) -> None:
    """A call whose arguments break the inputSchema gets toolflow's validation failure; the server sees nothing."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio_logged(events))) as registry, open_engine(registry) as engine:
            bad = await engine.call("add", {"a": "one"})
            count = await engine.call("counter", {})
    assert not bad.success
    assert "Parameter validation failed for 'add'" in (bad.error or "")
    assert count.data == "1"  # the invalid call never reached the server


async def test_remote_calls_are_cached_as_the_overrides_say() -> None:
    """overrides: {counter: {cache: {scope: session}}}: the second call is served from the cache."""
    server = stdio(overrides={"counter": {"category": "safe_chain", "cache": {"scope": "session"}}})
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(server)) as registry, open_engine(registry) as engine:
            first = await engine.call("counter", {})
            second = await engine.call("counter", {})
    assert (first.data, second.data) == ("1", "1")
    assert second.extra.get("cached") is True


async def test_the_policy_gates_remote_tools() -> None:
    """A remote tool is dangerous: with approval required and no approver, the call is refused unrun."""
    policy = Policy(categories={"dangerous": CategoryPolicy(approval=True)})
    with trio.fail_after(GUARD):
        async with (
            open_registry(specs_of(stdio())) as registry,
            open_engine(registry, policy=policy, allowlist=["echo", "counter"]) as engine,
        ):
            refused = await engine.call("counter", {})
            blocked = await engine.call("add", {"a": 1, "b": 2})
    assert not refused.success
    assert "approv" in (refused.error or "")
    assert not blocked.success
    assert blocked.extra.get("status") == "blocked"


async def test_a_timeout_cancels_the_remote_call(events: Path) -> None:
    """The tool's timeout ends the call; the server is told (notifications/cancelled) and stops the work."""
    server = stdio_logged(events, overrides={"slow": {"timeout": "300ms"}})
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(server)) as registry, open_engine(registry) as engine:
            result = await engine.call("slow", {"seconds": 30})
            assert not result.success
            assert "timed out" in (result.error or "")
            await logged(events, "cancelled slow")


async def test_a_kill_cancels_the_remote_call(events: Path) -> None:
    """engine.kill() ends a remote call in flight at once; the server is told and stops the work."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio_logged(events))) as registry, open_engine(registry) as engine:
            async with trio.open_nursery() as nursery:
                results = []

                async def call() -> None:
                    results.append(await engine.call("slow", {"seconds": 30}))

                nursery.start_soon(call)
                await logged(events, "running slow")
                engine.kill()
            await logged(events, "cancelled slow")
    assert not results[0].success
    assert results[0].extra.get("status") == "killed" or "kill" in (results[0].error or "")


async def test_progress_reaches_the_calls_progress_sink() -> None:
    """notifications/progress from the server arrive at the sink in force where the call runs."""
    reports: list[tuple[float, float | None, str | None]] = []
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio())) as registry, open_engine(registry) as engine:
            with reporting_progress(lambda done, total, message: reports.append((done, total, message))):
                result = await engine.call("steps", {"count": 3})
    assert result.data == "3 steps"
    assert reports == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def test_a_server_that_dies_is_restarted(events: Path) -> None:
    """The call in flight fails with a connection error; the server is started again and answers."""
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(stdio_logged(events))) as registry, open_engine(registry) as engine:
            before = await engine.call("whoami", {})
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                died = await engine.call("die", {})
                await logged(events, "started", times=2)
                after = await engine.call("whoami", {})
                while not after.success:  # up once it has listed its tools; the log line comes first
                    await trio.sleep(0.05)
                    after = await engine.call("whoami", {})
    assert any(issubclass(w.category, ToolSourceWarning) and "is down" in str(w.message) for w in caught)
    assert not died.success
    assert "ConnectionError" in (died.error or "")
    assert after.data != before.data


async def test_a_server_that_cannot_start_is_one_clear_error() -> None:
    """A command that does not exist: ToolSourceError naming the server, no traceback from the SDK."""
    broken = McpServer(name="ghost", command=("/nonexistent/server",), file="specs/remote.yaml")
    with trio.fail_after(GUARD), pytest.raises(ToolSourceError, match=r"MCP server 'ghost' \(declared in specs/"):
        async with open_registry(specs_of(broken)):
            pass


async def test_the_callers_own_exception_passes_unwrapped() -> None:
    """An exception raised inside the block is raised as itself, not inside an exception group."""
    with trio.fail_after(GUARD), pytest.raises(KeyError, match="mine"):
        async with open_registry(specs_of(stdio())):
            raise KeyError("mine")


async def test_specs_without_servers_connect_nothing(tmp_path: Path) -> None:
    """open_registry of plain YAML specs is load_registry's registry."""
    spec = tmp_path / "tools.yaml"
    spec.write_text("toolflow: 1\ntools:\n  hi:\n    description: Greet.\n    template: hi\n", encoding="utf-8")
    async with open_registry([spec]) as registry:
        assert registry.names() == load_registry([spec]).names() == ("hi",)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The test server over streamable HTTP on a free loopback port that wants a bearer token; its URL."""
    with announced_url([sys.executable, str(SERVER), "http", "s3cret"]) as url:
        yield url


async def test_streamable_http_with_headers(http_server: str) -> None:
    """A url: entry connects over streamable HTTP, sending its headers with every request."""
    server = McpServer(name="web", url=http_server, headers={"Authorization": "Bearer s3cret"}, prefix="web_")
    with trio.fail_after(GUARD):
        async with open_registry(specs_of(server)) as registry, open_engine(registry) as engine:
            result = await engine.call("web_add", {"a": 2, "b": 3})
    assert result.data == {"sum": 5.0}


async def test_http_without_the_token_is_refused_at_open(http_server: str) -> None:
    """A server that refuses us (401) is a ToolSourceError when the registry opens."""
    server = McpServer(name="web", url=http_server)
    with trio.fail_after(GUARD), pytest.raises(ToolSourceError, match="MCP server 'web'"):
        async with open_registry(specs_of(server)):
            pass


def test_the_sdk_is_imported_only_for_specs_with_servers(tmp_path: Path) -> None:
    """Loading the sources module, or opening specs without servers, imports nothing of `mcp`."""
    spec = tmp_path / "tools.yaml"
    spec.write_text("toolflow: 1\ntools:\n  hi:\n    description: Greet.\n    template: hi\n", encoding="utf-8")
    code = (
        "import sys, trio, toolflow\n"
        "async def main():\n"
        f"    async with toolflow.open_registry([{str(spec)!r}]) as r: assert r.names() == ('hi',)\n"
        "trio.run(main)\n"
        "assert not any(m == 'mcp' or m.startswith(('mcp.', 'mcp_types')) for m in sys.modules), 'mcp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=GUARD)


def test_without_the_sdk_specs_with_servers_say_how_to_install_it(tmp_path: Path) -> None:
    """With `mcp` unimportable, opening specs with servers is one error naming the extra."""
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import trio, toolflow\n"
        "from toolflow import LoadResult, SpecFile, McpServer\n"
        "specs = LoadResult(files=(SpecFile(path='s.yaml', mcp_servers=(McpServer(name='x', command=('x',)),)),))\n"
        "async def main():\n"
        "    async with toolflow.open_registry(specs): pass\n"
        "try:\n    trio.run(main)\n"
        "except toolflow.ToolflowError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=GUARD)
    assert "pip install 'toolflow-yaml[mcp]'" in out.stdout


REFERENCE = "@modelcontextprotocol/server-filesystem@2026.8.31"
"""The reference filesystem server, pinned; npx fetches it from the npm registry on first use."""


async def test_the_reference_filesystem_server(tmp_path: Path) -> None:
    """The MCP project's own filesystem server (Node.js, via npx): listed, trusted annotations, called, refusing."""
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed: the reference server (Node.js) cannot run here")
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    server = McpServer(
        name="files",
        command=("npx", "-y", REFERENCE, str(tmp_path)),
        tools=("read_text_file", "write_file"),
        prefix="fs_",
        trust_annotations=True,
    )
    with trio.fail_after(300):
        try:
            async with (
                open_registry(specs_of(server), connect_timeout=240, errlog=subprocess.DEVNULL) as registry,
                open_engine(registry) as engine,
            ):
                categories = {tool.name: tool.category for tool in registry}
                read = await engine.call("fs_read_text_file", {"path": str(tmp_path / "notes.txt")})
                outside = await engine.call("fs_read_text_file", {"path": "/etc/hostname"})
        except ToolSourceError as exc:
            pytest.skip(f"the reference server could not be started (no npm registry?): {exc}")
    assert categories == {"fs_read_text_file": "safe_chain", "fs_write_file": "dangerous"}
    assert read.data == {"content": "hello\n"}
    assert not outside.success
    assert "outside allowed directories" in (outside.error or "")
