"""A hostile service's answers are the same failure through every door: call, run and serve.

The ``http`` kind reads every response in one place (``toolflow_http._body``), so each door sees
the failure result it makes; these tests check that no door turns it into a traceback or an
internal error. The Python API's door is every other test of this folder (``toolflow.invoke``).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import socket
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest
import trio
import yaml
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from toolflow._cli import run

MiB = 1024 * 1024


class Hostile(Protocol):
    """The ``hostile`` fixture (see conftest.py)."""

    base: str
    answer: Callable[[socket.socket, str], None]


def _bomb() -> bytes:
    """64 MiB of zeros, gzipped twice: a few hundred bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    once = b"".join(packer.compress(bytes(MiB)) for _ in range(64)) + packer.flush()
    return gzip.compress(once, mtime=0)


ANSWERS = {
    "/bomb": ("text/plain", "gzip, gzip", _bomb()),
    "/deep": ("application/json", "identity", b"[" * 100_000 + b"]" * 100_000),
    "/brotli": ("application/json", "br", b'{"a": 1}'),
}


def _answer(conn: socket.socket, path: str) -> None:
    content_type, encoding, body = ANSWERS[path]
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Encoding: {encoding}\r\n"
    conn.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)


def _tool(url: str, **http: object) -> dict[str, object]:
    return {
        "description": "Fetch something.",
        "category": "terminal",
        "parameters": {"type": "object", "properties": {}},
        "http": {"url": url, **http},
    }


@pytest.fixture
def project(tmp_path: Path, hostile: Hostile, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose three tools fetch the hostile server's bomb, deep JSON and brotli; the working directory."""
    hostile.answer = _answer
    tools = {
        "bomb": _tool(f"{hostile.base}/bomb", max_bytes=MiB),
        "deep": _tool(f"{hostile.base}/deep", response="json"),
        "brotli": _tool(f"{hostile.base}/brotli"),
    }
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "http.yaml").write_text(yaml.safe_dump({"toolflow": 1, "tools": tools}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


ERRORS = {
    "bomb": "the response of GET {base}/bomb is larger than 1048576 bytes",
    "deep": "the response is not JSON: nested too deeply to read",
    "brotli": "the response's Content-Encoding 'br' is not one this tool reads (gzip, deflate) (GET {base}/brotli)",
}


def _toolflow(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_toolflow_call_prints_the_failure(name: str, project: Path, hostile: Hostile) -> None:
    """`toolflow call` prints the failure result, with no traceback."""
    code, out, err = _toolflow("call", "--specs", "specs", name, "{}")
    assert "Traceback" not in out + err
    result = json.loads(out)
    assert result["success"] is False
    assert result["error"] == "Error: " + ERRORS[name].format(base=hostile.base)
    assert code == 1


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_toolflow_run_hands_the_model_the_failure(name: str, project: Path, hostile: Hostile) -> None:
    """The agent loop gives the model the failure as the tool's result and carries on."""
    turns = [{"tool_calls": [{"name": name, "arguments": {}}]}, {"text": "It failed, as it should."}]
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    code, out, err = _toolflow("run", "--specs", "specs", "--model", "scripted:session.yaml", "--output-format", "json")
    assert "Traceback" not in out + err
    assert code == 0, err
    assert ERRORS[name].format(base=hostile.base) in out


async def test_toolflow_serve_answers_each_failure_as_an_error(project: Path, hostile: Hostile) -> None:
    """An MCP client's tools/call of each tool gets an error result whose text is the failure."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolflow", "serve", "--specs", "specs"], cwd=project, env=dict(os.environ)
    )
    answers: dict[str, types.CallToolResult] = {}
    with trio.fail_after(60):
        with (project / "serve.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for name in ERRORS:
                    answers[name] = await session.call_tool(name, {})
    assert "Traceback" not in (project / "serve.log").read_text(encoding="utf-8")
    for name, answer in answers.items():
        assert answer.is_error, answer
        text = "".join(block.text for block in answer.content if isinstance(block, types.TextContent))
        assert ERRORS[name].format(base=hostile.base) in text
