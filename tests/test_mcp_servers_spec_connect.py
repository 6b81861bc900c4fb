"""``toolflow lint --connect``: real MCP servers (written with the ``mcp`` SDK) asked over stdio for their tools."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import trio

from toolflow._cli_lint_connect import list_servers
from toolflow._diagnostics import Severity
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import LintReport, ServerListing, lint_paths
from toolflow._loader import load_specs

SERVER = """\
from typing import Annotated

from pydantic import Field
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("files")
Path = Annotated[str, Field(description="A path in the workspace")]


@server.tool(description="Read a file of the workspace.", annotations=ToolAnnotations(readOnlyHint=True))
def read_file(path: Path) -> str:
    return path


@server.tool(description="List a directory of the workspace.")
def list_directory(path: Path) -> str:
    return path


@server.tool(name="web.search", description="Search the web.")
def search(query: Annotated[str, Field(description="What to look for")]) -> str:
    return query


server.run()
"""

SPEC = """\
toolflow: 1
mcp_servers:
  files:
    command: ["{python}", "{server}"]
    prefix: fs_
    tools: [read_file, list_directry]
  everything:
    command: ["{python}", "{server}"]
    prefix: all_
    overrides:
      read_file: {{category: safe_chain}}
      delete_file: {{category: dangerous}}
  broken:
    command: ["{missing}"]
    prefix: gone_
policy:
  allow: [fs_read_file, all_list_directory, all_nothing, gone_tool]
"""


def _project(tmp_path: Path) -> Path:
    server = tmp_path / "server.py"
    server.write_text(SERVER, encoding="utf-8")
    spec = tmp_path / "spec.yaml"
    text = SPEC.format(python=sys.executable, server=server, missing=tmp_path / "no-such-server")
    spec.write_text(text, encoding="utf-8")
    return spec


def _found(report: LintReport) -> list[tuple[str, int, int, Severity]]:
    return [(d.code, d.line, d.column, d.severity) for d in report.diagnostics]


async def test_servers_list_their_tools_or_say_why_not(tmp_path: Path) -> None:
    """Each server is started over stdio and listed; one that cannot start is an error, not an exception."""
    spec = _project(tmp_path)
    with trio.fail_after(60):
        listings = await list_servers(load_specs([spec]).mcp_servers, connect_timeout=50)
    files, everything, broken = listings["files"], listings["everything"], listings["broken"]
    assert files.names == ("read_file", "list_directory", "web.search")
    assert [s.name for s in files.specs] == ["fs_read_file"]  # what its tools: imports
    assert [s.name for s in everything.specs] == ["all_read_file", "all_list_directory", "all_web.search"]
    read = everything.specs[0]
    assert (read.category, read.parameters["properties"]["path"]["description"]) == (
        "safe_chain",
        "A path in the workspace",
    )
    assert everything.specs[1].category == "dangerous"  # annotations are not trusted
    assert broken.error
    assert not broken.specs


def test_lint_with_listings_decides_what_may_be_remote(tmp_path: Path) -> None:
    """Listed tools resolve references, unlisted names are errors, schemas are linted at the server's entry."""
    spec = _project(tmp_path)
    without = lint_paths([spec], LintConfig())
    assert _found(without) == [
        ("TF244", 17, 25, Severity.WARNING),
        ("TF244", 17, 45, Severity.WARNING),
        ("TF244", 17, 58, Severity.WARNING),
    ]

    async def listed() -> dict[str, ServerListing]:
        with trio.fail_after(60):
            return await list_servers(load_specs([spec]).mcp_servers, connect_timeout=50)

    report = lint_paths([spec], LintConfig(), listings=trio.run(listed))
    found = {(d.code, d.line, d.column): d.message for d in report.diagnostics}
    assert sorted(found) == [
        ("TF201", 7, 3),  # all_web.search, at the server's entry
        ("TF224", 17, 45),  # all_nothing: everything lists no such tool
        ("TF244", 17, 58),  # gone_tool: the broken server could not say
        ("TF245", 6, 24),  # list_directry
        ("TF245", 12, 7),  # the override of delete_file
        ("TF246", 13, 3),  # broken
    ]
    assert "'all_web.search'" in found[("TF201", 7, 3)]
    assert "did you mean 'list_directory'?" in found[("TF245", 6, 24)]
    assert "could not list the tools of MCP server 'broken'" in found[("TF246", 13, 3)]


def test_the_command_line_connects_only_when_asked(tmp_path: Path) -> None:
    """toolflow lint --connect lists the servers (exit 1 for the errors it finds); without it, warnings only."""
    spec = _project(tmp_path)
    script = textwrap.dedent(
        """\
        import io, json, sys
        from toolflow._cli import run
        out, err = io.StringIO(), io.StringIO()
        code = run(["lint", "--output-format", "json", *sys.argv[1:]], stdout=out, stderr=err)
        print(json.dumps({"code": code, "out": json.loads(out.getvalue()), "trio": "trio" in sys.modules}))
        """
    )

    def lint(*args: str) -> dict[str, object]:
        result = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, check=False
        )
        assert result.returncode == 0, result.stderr
        answer: dict[str, object] = json.loads(result.stdout)
        return answer

    plain = lint(str(spec))
    assert (plain["code"], plain["trio"]) == (0, False)
    connected = lint("--connect", str(spec))
    assert (connected["code"], connected["trio"]) == (1, True)
    assert "TF246" in json.dumps(connected["out"])


HTTP_SERVER = """\
import asyncio, socket, sys
from typing import Annotated

import uvicorn
from pydantic import Field
from mcp.server.mcpserver import MCPServer

server = MCPServer("search")


@server.tool(description="Search the web.")
def search(query: Annotated[str, Field(description="What to look for")]) -> str:
    return query


app = server.streamable_http_app()
expected = ("Bearer " + sys.argv[1]).encode()


async def guarded(scope, receive, send):
    # The spec's headers must reach the server: anything else is refused.
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
        await send({"type": "http.response.start", "status": 401, "headers": []})
        await send({"type": "http.response.body", "body": b"no"})
        return
    await app(scope, receive, send)


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
# Listening before the port is announced: a client that connects while uvicorn still starts
# waits in the backlog instead of being refused (a flaky empty listing on a loaded machine).
sock.listen(128)
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
"""

TOKEN = "t0ken-for-the-search-server"


async def test_an_http_server_gets_the_specs_headers(tmp_path: Path) -> None:
    """Over streamable HTTP, the entry's ${VAR} header is sent: with it the server lists, without it refuses."""
    script = tmp_path / "http_server.py"
    script.write_text(HTTP_SERVER, encoding="utf-8")
    with trio.fail_after(90):
        process = await trio.lowlevel.open_process([sys.executable, str(script), TOKEN], stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None
            port = int((await process.stdout.receive_some()).decode().split()[0])
            spec = tmp_path / "spec.yaml"
            spec.write_text(
                "toolflow: 1\nmcp_servers:\n"
                f"  search: {{url: 'http://127.0.0.1:{port}/mcp', headers: {{Authorization: 'Bearer ${{TOKEN}}'}}}}\n"
                f"  refused: {{url: 'http://127.0.0.1:{port}/mcp', prefix: no_}}\n",
                encoding="utf-8",
            )
            servers = load_specs([spec], environ={"TOKEN": TOKEN}).mcp_servers
            listings = await list_servers(servers, connect_timeout=60)
        finally:
            process.kill()
            await process.wait()
    assert listings["search"].names == ("search",)
    assert listings["refused"].error
    report = lint_paths([spec], LintConfig(), environ={"TOKEN": TOKEN}, listings=listings)
    assert [d.code for d in report.diagnostics] == ["TF246"]
    assert TOKEN not in report.diagnostics[0].message
