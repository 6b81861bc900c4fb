"""A model server's JSON nested past Python's recursion limit is a provider error, never a traceback.

Python's decoder refuses such JSON with a ``RecursionError``, which is not a ``ValueError``: the
``openai`` and ``anthropic`` providers caught only ``ValueError`` where they read an answer, an
error's body, a stream's event or a tool_use block's input, so a hostile or broken server ended
``toolflow run`` (and ``Agent.run``) with an internal error. Each is now the provider's error,
and the loop ends as ``provider_error``. Real servers on 127.0.0.1 (``tests/_openai_server.py``,
``tests/_anthropic_server.py``), ``toolflow run`` in-process.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import _anthropic_server
import _openai_server
import pytest
import trio
from _openai_server import Reply

from toolflow._cli import run

DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested past Python's recursion limit."""

SPECS = """\
toolflow: 1
tools:
  look:
    description: Look around.
    parameters: {type: object, properties: {}}
    template: "you see a door"
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with one template tool, no plugins and no provider keys, as the working directory."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(SPECS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ODD_TEST_KEY", "test")
    return tmp_path


def _deep_tool_input() -> Reply:
    """A streamed Anthropic answer whose tool_use input is DEEP."""
    events = _anthropic_server.stream_events(_anthropic_server.tool_use_block("toolu_1", "look", {}))
    for item in events:
        if item["type"] == "content_block_delta":
            item["delta"]["partial_json"] = DEEP
    return _anthropic_server.stream_message(events=events)


ANSWERS: dict[str, tuple[str, Callable[..., AbstractContextManager[Any]], Callable[[], Reply]]] = {
    "openai answer": ("openai", _openai_server.serve, lambda: Reply(body=DEEP, content_type="application/json")),
    "openai stream event": ("openai", _openai_server.serve, lambda: _openai_server.stream_reply(DEEP, done=False)),
    "anthropic answer": (
        "anthropic",
        _anthropic_server.serve,
        lambda: Reply(body=DEEP, content_type="application/json"),
    ),
    "anthropic stream event": (
        "anthropic",
        _anthropic_server.serve,
        lambda: Reply(chunks=[f"event: message_start\ndata: {DEEP}\n\n".encode()]),
    ),
    "anthropic tool input": ("anthropic", _anthropic_server.serve, _deep_tool_input),
    "openai error body": (
        "openai",
        _openai_server.serve,
        lambda: Reply(status=400, body=DEEP, content_type="application/json"),
    ),
    "anthropic error body": (
        "anthropic",
        _anthropic_server.serve,
        lambda: Reply(status=400, body=DEEP, content_type="application/json"),
    ),
}
"""Each provider's place that reads JSON from the server, with a reply putting DEEP there."""


@pytest.mark.parametrize("case", sorted(ANSWERS))
async def test_toolflow_run_ends_as_provider_error_on_json_nested_too_deeply(project: Path, case: str) -> None:
    """`toolflow run` against the server ends with provider_error (exit 1) and no traceback."""
    provider, serve, reply = ANSWERS[case]
    out, err = io.StringIO(), io.StringIO()
    with trio.fail_after(60), serve(*(reply() for _ in range(5))) as server:
        argv = ["run", "--specs", "tools.yaml", "--model", f"{provider}:test-model", "--base-url", server.base_url]
        argv += ["--api-key-env", "ODD_TEST_KEY", "--prompt", "look", "--output-format", "json", "--no-cache"]
        code = await trio.to_thread.run_sync(lambda: run(argv, stdout=out, stderr=err))
    assert "Traceback" not in err.getvalue()
    assert code == 1, err.getvalue()
    assert json.loads(out.getvalue())["reason"] == "provider_error"
