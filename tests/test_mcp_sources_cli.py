"""The front ends see the tools of the specs' MCP servers: list, schema, call, run, and serve as a gateway.

The specs import the test server (tests/_mcp_remote_server.py, the `mcp` SDK, over stdio) with a
`mcp_servers:` entry, as a team would write it.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import trio
from _mcp_project import serve_argv, server_environment
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolflow._cli import run
from toolflow._registry import load_registry

SERVER = Path(__file__).with_name("_mcp_remote_server.py")
GUARD = 60


OVERRIDES = """\
      add: {category: safe_chain, idempotent: true}
      echo: {category: terminal}
"""


def _specs(project: Path, extra: str = "", overrides: str = OVERRIDES) -> None:
    command = json.dumps([sys.executable, str(SERVER), "stdio"])
    (project / "specs").mkdir()
    (project / "specs" / "remote.yaml").write_text(
        f"""\
toolflow: 1
mcp_servers:
  remote:
    command: {command}
    prefix: r_
    tools: [add, echo, fail, counter]
    overrides:
{overrides}tools:
  greet:
    description: Greet someone.
    parameters:
      type: object
      properties:
        name: {{type: string, description: Who}}
      required: [name]
    template: "Hello, {{{{ name }}}}!"
{extra}""",
        encoding="utf-8",
    )
    (project / "pyproject.toml").write_text('[tool.toolflow]\nspecs = ["specs"]\n', encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose specs import the test server's add, echo, fail and counter as r_*."""
    _specs(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    return tmp_path


def cli(*argv: str) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_list_shows_the_remote_tools(project: Path) -> None:
    """toolflow list connects, lists and shows each imported tool with its category."""
    code, out, err = cli("list", "--output-format", "json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)["tools"]}
    assert set(rows) == {"greet", "r_add", "r_echo", "r_fail", "r_counter"}
    assert (rows["r_add"]["category"], rows["r_counter"]["category"]) == ("safe_chain", "dangerous")
    assert rows["r_add"]["implementation"] == "mcp:remote"
    assert rows["r_add"]["location"] == "specs/remote.yaml:3:3"  # the server's entry


def test_schema_exports_the_remote_tools(project: Path) -> None:
    """toolflow schema gives a remote tool the server's inputSchema."""
    code, out, err = cli("schema", "--format", "openai")
    assert code == 0, err
    tools = {tool["function"]["name"]: tool["function"] for tool in json.loads(out)}
    assert tools["r_add"]["description"] == "Add two numbers."
    assert tools["r_add"]["parameters"]["required"] == ["a", "b"]


def test_call_runs_a_remote_tool(project: Path) -> None:
    """toolflow call of a remote tool prints its result; a remote failure exits 1 with the server's text."""
    code, out, err = cli("call", "r_add", '{"a": 2, "b": 3}')
    assert code == 0, err
    assert json.loads(out)["data"] == {"sum": 5.0}
    code, out, _ = cli("call", "r_fail", '{"reason": "no such file"}')
    assert code == 1
    assert "no such file" in json.loads(out)["error"]


def test_call_of_an_unknown_tool_is_still_a_usage_error(project: Path) -> None:
    """An unknown name (remote tools known) exits 2, naming the close remote tool."""
    code, _, err = cli("call", "r_ad", "{}")
    assert code == 2
    assert "r_add" in err


def test_a_server_that_cannot_start_is_exit_2(project: Path) -> None:
    """A command that does not exist: one error line naming the server, exit 2, no traceback."""
    text = (project / "specs" / "remote.yaml").read_text(encoding="utf-8")
    (project / "specs" / "remote.yaml").write_text(
        text.replace(json.dumps([sys.executable, str(SERVER), "stdio"]), '["/nonexistent/server"]'),
        encoding="utf-8",
    )
    code, _, err = cli("call", "greet", '{"name": "Ada"}')
    assert code == 2
    assert "MCP server 'remote'" in err
    assert "Traceback" not in err


def test_run_calls_remote_tools_in_the_loop(project: Path) -> None:
    """toolflow run with a scripted model: the remote calls run, the terminal remote tool ends the loop."""
    (project / "session.yaml").write_text(
        """\
prompt: Add two and three, then say it.
turns:
  - tool_calls:
      - {name: r_add, arguments: {a: 2, b: 3}}
  - tool_calls:
      - {name: r_echo, arguments: {text: "five"}}
""",
        encoding="utf-8",
    )
    code, out, err = cli("run", "--model", "scripted:session.yaml", "--output-format", "json")
    assert code == 0, err
    document = json.loads(out)
    assert document["reason"] == "terminal"
    calls = [call for turn in document["turns"] for call in turn["calls"]]
    assert [call["result"]["data"] for call in calls] == [{"sum": 5.0}, "five"]


def test_load_registry_warns_that_it_does_not_connect(project: Path) -> None:
    """The sync load_registry cannot connect: it warns, names open_registry, and keeps the YAML tools."""
    from toolflow import ToolSourceWarning

    with pytest.warns(ToolSourceWarning, match="use toolflow.open_registry"):
        registry = load_registry([project / "specs"])
    assert registry.names() == ("greet",)


async def test_serve_is_a_gateway_in_front_of_the_server(project: Path) -> None:
    """toolflow serve over stdio lists the remote tools with toolflow's own annotations and calls them."""
    argv = serve_argv()
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=project, env=server_environment())
    with trio.fail_after(GUARD), (project / "serve.log").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            added = await session.call_tool("r_add", {"a": 1, "b": 1})
            counted = await session.call_tool("r_counter", {})
            again = await session.call_tool("r_counter", {})
    assert set(listed) == {"greet", "r_add", "r_echo", "r_fail", "r_counter"}
    # The server claims nothing for counter; toolflow says what its category means: dangerous.
    assert listed["r_counter"].annotations is not None
    assert listed["r_counter"].annotations.destructive_hint is True
    assert listed["r_add"].annotations is not None
    assert listed["r_add"].annotations.read_only_hint is True
    assert added.structured_content == {"sum": 2.0}
    # One connection behind the gateway: the server counts both calls.
    assert [counted.content[0].text, again.content[0].text] == ["1", "2"]  # type: ignore[union-attr]


def test_toolflow_test_runs_sessions_that_call_remote_tools(project: Path) -> None:
    """toolflow test opens the specs' servers once for the run; a session calling remote tools passes."""
    (project / "tests").mkdir()
    (project / "tests" / "remote.toolflow.yaml").write_text(
        """\
description: The model adds remotely, then answers with the remote terminal tool.
prompt: Add two and three.
turns:
  - tool_calls:
      - {name: r_add, arguments: {a: 2, b: 3}}
  - tool_calls:
      - {name: r_echo, arguments: {text: "It is five."}}
expect:
  reason: terminal
  tools: [r_add, r_echo]
  answer_contains: five
""",
        encoding="utf-8",
    )
    code, out, err = cli("test", "specs", "tests/remote.toolflow.yaml")
    assert code == 0, out + err
    assert "1 passed" in out


def test_toolflow_test_runs_the_examples_of_remote_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Examples under a server's ``overrides:`` run against the tool the server lists, and point at their line."""
    _specs(
        tmp_path,
        overrides="""\
      add:
        category: safe_chain
        examples:
          - {args: {a: 2, b: 3}, expect: {sum: 5.0}}
          - {args: {a: 2, b: 2}, expect: {sum: 5.0}}
          - {args: {a: 1, b: 1}, description: documents only}
      echo:
        examples:
          - {args: {text: hi there}, expect_contains: there}
      restarter:
        examples:
          - {args: {}, expect_error: x}
""",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    code, out, err = cli("test", "specs")
    assert (code, err) == (1, ""), out + err
    lines = out.splitlines()
    assert lines[:3] == [
        "PASS r_add examples[0] (specs/remote.yaml:11:13)",
        "FAIL r_add examples[1] (specs/remote.yaml:12:13)",
        "PASS r_echo examples[0] (specs/remote.yaml:16:13)",
    ]
    assert 'specs/remote.yaml:12:13: r_add examples[1]: expected {"sum": 5.0}, got {"sum": 4.0}' in lines
    assert lines[-1].startswith("3 tests: 2 passed, 1 failed")  # restarter is not imported: not run


def test_the_shipped_remote_example_lints_lists_and_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/remote/ (the main job's MCP example): clean lint, its server's tools listed, a lookup answered."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)
    monkeypatch.setenv("PYTHON", sys.executable)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    assert cli("lint", "examples/remote/")[0] == 0
    code, out, err = cli("list", "examples/remote/", "--output-format", "json")
    assert code == 0, err
    categories = {row["name"]: row["category"] for row in json.loads(out)["tools"]}
    assert categories == {"lore_lookup": "safe_chain", "lore_roll": "safe_chain", "lore_forget": "dangerous"}
    code, out, err = cli("call", "--specs", "examples/remote/", "--no-cache", "lore_lookup", '{"term": "Brannoc"}')
    assert code == 0, err
    assert "smithy by the north gate" in json.loads(out)["data"]
