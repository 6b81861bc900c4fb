"""MCP servers as hostile tool sources: a hand-written server (tests/_mcp_hostile_server.py) sends what the SDK's never would.

Each test starts its own server process over stdio; what it lists and answers is in that file.
"""

from __future__ import annotations

import io
import json
import sys
import warnings
from pathlib import Path

import pytest
import trio

from toolflow import LoadResult, McpServer, SpecFile, ToolSourceWarning, open_engine, open_registry
from toolflow._cli import run

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


def test_list_shows_no_control_characters_and_each_name_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolflow list over the hostile names: no escape sequence reaches the terminal, 'fine' once."""
    project(tmp_path, "names", monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolSourceWarning)
        code, out, err = cli("list", "--output-format", "json")
    assert code == 0, err
    assert [row["name"] for row in json.loads(out)["tools"]] == ["fine"]
