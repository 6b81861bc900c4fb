"""Every command exits quietly when its output is closed early (`toolflow run ... | head -1`).

Real processes with a real pipe on standard output, closed by the reader: the command exits 141
(128 + SIGPIPE, what a shell shows for `yes | head -1`) with nothing on standard error, neither a
traceback nor Python's "Exception ignored" note at exit.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SPECS = """\
toolflow: 1
tools:
  greet:
    description: Greet someone by name.
    category: safe_chain
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet.}
      required: [name]
    template: "Hello, {{ name }}!"
  done:
    description: End the conversation.
    category: terminal
    parameters: {type: object, properties: {}}
    template: "goodbye"
  Bad Name:
    description: x
    template: "x"
"""

TRANSCRIPT = {
    "prompt": "greet everyone",
    "turns": [
        *({"tool_calls": [{"name": "greet", "arguments": {"name": f"guest {n}"}}]} for n in range(100)),
        {"tool_calls": [{"name": "done", "arguments": {}}]},
    ],
}

COMMANDS = {
    "lint": ["lint", "specs"],
    "rule": ["rule", "--all"],
    "list": ["list", "specs"],
    "graph": ["graph", "specs"],
    "spec-schema": ["spec-schema"],
    "schema": ["schema", "--format", "openai", "--specs", "specs/good.yaml"],
    "plugins": ["plugins"],
    "call": ["call", "greet", '{"name": "Ada"}', "--specs", "specs/good.yaml"],
    "run": ["run", "--specs", "specs/good.yaml", "--model", "scripted:session.yaml"],
    "run --output-format json": [
        "run",
        "--specs",
        "specs/good.yaml",
        "--model",
        "scripted:session.yaml",
        "--output-format",
        "json",
    ],
}


ENV = {
    **{name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"},
    "TOOLFLOW_DISABLE_PLUGINS": "assistant,http",
}
"""Without PYTHONUNBUFFERED: unbuffered, Python drops what a partial write to a full pipe left over, without an error."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "all.yaml").write_text(SPECS, encoding="utf-8")
    good = SPECS.split("  Bad Name:", maxsplit=1)[0]
    (tmp_path / "specs" / "good.yaml").write_text(good, encoding="utf-8")
    (tmp_path / "session.yaml").write_text(json.dumps(TRANSCRIPT), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "pipes"\n', encoding="utf-8")
    return tmp_path


def _run(project: Path, args: list[str], *, read: int) -> tuple[int, bytes]:
    """Run `toolflow *args*` into a pipe whose reader takes *read* bytes, then closes it; exit code and stderr."""
    reader, writer = os.pipe()
    fcntl.fcntl(writer, fcntl.F_SETPIPE_SZ, 4096)  # a small pipe: the command cannot write it all before we leave
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolflow", *args],
            cwd=project,
            stdout=writer,
            stderr=subprocess.PIPE,
            env=ENV,
        )
        os.close(writer)
        if read:
            os.read(reader, read)
    finally:
        os.close(reader)
    assert process.stderr is not None
    err = process.stderr.read()
    process.stderr.close()
    return process.wait(timeout=120), err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_output_closed_before_anything_is_written(project: Path, command: str) -> None:
    """The reader is gone before the command writes: exit 141, nothing on standard error."""
    assert _run(project, COMMANDS[command], read=0) == (141, b"")


@pytest.mark.parametrize("command", ["run", "rule", "spec-schema"])
def test_output_closed_after_the_first_line(project: Path, command: str) -> None:
    """`| head -1`: the reader takes the first line and leaves; the command stops quietly."""
    code, err = _run(project, COMMANDS[command], read=1)
    assert (code, err) == (141, b"")
