"""Text UTF-8 cannot carry (a lone surrogate) leaves toolflow as U+FFFD, through every door.

Python makes a lone surrogate from a file name that is not UTF-8 (``os.listdir`` decodes it with
``surrogateescape``) and from a JSON escape such as ``"\\ud800"`` in a model's answer. Every
writer that sends text out (the model's requests, ``toolflow serve``'s answers, ``toolflow call``
and ``toolflow run`` on a terminal) must encode it, or it fails: serve closed the connection,
the loop ended with a provider error, the commands printed a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio
from _openai_server import Reply, completion, serve, tool_call
from mcp import ClientSession, StdioServerParameters, stdio_client, types

from toolflow._results import ToolResult, json_text, valid_text

ROOT = Path(__file__).resolve().parent.parent

LATIN1_NAME = b"caf\xe9.txt"
"""A file name that is not UTF-8: ``os.listdir`` gives ``'caf\\udce9.txt'``."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace holding one file whose name is Latin-1."""
    folder = tmp_path / "workspace"
    folder.mkdir()
    with open(os.fsencode(folder) + b"/" + LATIN1_NAME, "w", encoding="utf-8") as file:
        file.write("x")
    return folder


def test_valid_text_replaces_each_lone_surrogate() -> None:
    """Each lone surrogate becomes U+FFFD; other text, astral characters included, is kept."""
    assert valid_text("a\ud800b\udce9c \U0001f600") == "a\ufffdb\ufffdc \U0001f600"


def test_results_write_lone_surrogates_as_the_replacement_character() -> None:
    """A result's data, error and warnings are encodable as UTF-8 wherever they are written."""
    result = ToolResult(success=False, data={"name": "caf\udce9"}, error="no \ud800", warnings=["w\udfff"])
    assert result.error == "Error: no \ufffd"
    assert result.warnings == ("w\ufffd",)
    text = result.text_for_model()
    text.encode("utf-8")
    assert json.loads(text)["data"] == {"name": "caf\ufffd"}
    assert json_text({"k\ud800": ["\udce9"]}, indent=2).encode("utf-8")


async def test_serve_lists_a_directory_whose_file_name_is_not_utf8(workspace: Path) -> None:
    """The shipped list_directory over `toolflow serve` answers with U+FFFD for the byte UTF-8 lacks."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolflow", "serve", "--specs", str(ROOT / "specs" / "worker.yaml")],
        cwd=ROOT,
        env={**os.environ, "TOOLFLOW_WORKSPACE": str(workspace)},
    )
    with trio.fail_after(60):
        with (workspace.parent / "serve.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                answer = await session.call_tool("list_directory", {})
                again = await session.call_tool("list_directory", {"limit": 1})
    for result in (answer, again):
        assert not result.is_error, result
        text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
        assert json.loads(text)["entries"] == ["caf\ufffd.txt"]
        assert result.structured_content is not None
        assert result.structured_content["entries"] == ["caf\ufffd.txt"]


async def test_toolflow_call_prints_the_listing_as_utf8(workspace: Path) -> None:
    """`toolflow call list_directory` in a real process prints valid UTF-8 and exits 0."""
    with trio.fail_after(60):
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "toolflow",
                "call",
                "--specs",
                str(ROOT / "specs" / "worker.yaml"),
                "list_directory",
            ],
            cwd=ROOT,
            env={**os.environ, "TOOLFLOW_WORKSPACE": str(workspace)},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.decode("utf-8"))["data"]["entries"] == ["caf\ufffd.txt"]


RUN = [sys.executable, "-m", "toolflow", "run", "--specs", "tools.yaml", "--model", "openai:test-model"]

SPECS = """\
toolflow: 1
tools:
  echo:
    description: Echo a word.
    parameters: {type: object, properties: {word: {type: string, description: The word}}, required: [word]}
    template: "echo {{ word }}"
"""


async def test_a_models_lone_surrogates_reach_the_next_request_as_utf8(tmp_path: Path) -> None:
    """A model that escapes lone surrogates in its text and arguments gets its next turn; the answer prints."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(SPECS, encoding="utf-8")
    call = tool_call("call_1", "echo", '{"word": "a\\ud800b"}')
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"TOOLFLOW_LOAD_PLUGINS": "none"}
    with (
        trio.fail_after(60),
        serve(
            _ascii(completion(content="thinking \ud800", tool_calls=[call])),
            _ascii(completion(content="done \udce9")),
        ) as server,
    ):
        done = await trio.run_process(
            [*RUN, "--base-url", server.base_url, "--prompt", "go", "--no-cache"],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    assert "done \\udce9" in done.stdout.decode("utf-8")
    second = server.requests[1].body.decode("utf-8")
    messages = json.loads(second)["messages"]
    assert messages[1]["content"] == "thinking \ufffd"
    assert json.loads(messages[2]["content"])["data"] == "echo a\ufffdb"


def _ascii(body: dict[str, object]) -> Reply:
    """A JSON answer written as ASCII, its lone surrogates as escapes (``"\\ud800"``)."""
    return Reply(body=json.dumps(body).encode("ascii"), content_type="application/json")
