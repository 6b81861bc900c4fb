"""`toolflow run` with a background call (issue 21 section 1): a real process whose run ends after the outcome came."""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from toolflow._cli import run

SPECS = """\
toolflow: 1
tools:
  fetch:
    description: Waits until it may go on, then fetches.
    category: async_required
    parameters: {type: object, properties: {}}
    command: [sh, -c, "while [ ! -e go ]; do sleep 0.05; done; echo fetched"]
    timeout: 60s
    retry: false
policy:
  categories:
    async_required:
      background: true
"""

TURNS = [
    {"text": "fetching", "tool_calls": [{"name": "fetch", "arguments": {}}]},
    {"text": "I will answer when the page is here."},
    {"text": "The page says fetched."},
]


def _read_until(process: subprocess.Popen[bytes], wanted: str) -> bytes:
    """Read the trace until a line starts with *wanted* (at most 60 s); return what was read.

    The pipe is read with ``os.read``: a buffered reader would keep lines that ``select`` cannot see.
    """
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + 60
    read = b""
    while not any(line.startswith(wanted.encode()) for line in read.splitlines()):
        assert time.monotonic() < deadline, read
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, (read, process.communicate())
            read += chunk
    return read


def test_a_run_waits_for_a_background_call_and_the_model_reads_its_outcome(tmp_path: Path) -> None:
    """The model answers while the fetch runs; the loop waits (on_exit: wait), then the model reads the outcome."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"prompt": "fetch", "turns": TURNS}), encoding="utf-8")
    command = [sys.executable, "-m", "toolflow", "run", "--specs", "specs", "--model", "scripted:session.yaml"]
    env = {**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"}
    with subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        # The fetch cannot end before `go` exists: the model's first answer comes while it runs.
        seen = _read_until(process, "turn 2 ")
        (tmp_path / "go").touch()
        out, err = process.communicate(timeout=60)
    lines = (seen + out).decode().splitlines()
    assert process.returncode == 0, (lines, err)
    assert '    ok: {"status": "started", "task_id": "task-1"}' in lines, lines
    turn_3 = lines.index(next(line for line in lines if line.startswith("turn 3 ")))
    assert lines[turn_3 + 1].startswith('  background task-1 → fetch {}: ok: {"exit_code": 0, "stdout": "fetched'), (
        lines
    )
    assert lines[-2:] == [
        "final answer: The page says fetched.",
        "loop ended: final_answer (the model answered without calling tools) after 3 turns, 1 tool call",
    ]


def test_the_json_document_has_the_outcome_on_its_turn(tmp_path: Path) -> None:
    """`--output-format json`: the outcome is on the turn whose request carried it, and in the history."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS.replace("while [ ! -e go ]; do sleep 0.05; done; ", ""))
    turns = [TURNS[0], {"text": "the page"}, {"text": "the page, read"}]
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"prompt": "fetch", "turns": turns}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "toolflow", "run", "--model", "scripted:session.yaml", "--output-format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    outcomes = [o for turn in document["turns"] for o in turn["outcomes"]] + document["outcomes"]
    assert [(o["task_id"], o["tool"], o["result"]["data"]["stdout"]) for o in outcomes] == [
        ("task-1", "fetch", "fetched\n")
    ]
    notes = [m for m in document["history"] if m["role"] == "user" and m["content"].startswith("Background task")]
    assert len(notes) == 1


def test_toolflow_call_runs_a_background_tool_in_the_foreground(tmp_path: Path, monkeypatch: Any) -> None:
    """`toolflow call` waits for the call of a background category and prints its result, not `started`."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS.replace("while [ ! -e go ]; do sleep 0.05; done; ", ""))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    out, err = io.StringIO(), io.StringIO()
    code = run(["call", "fetch", "{}", "--specs", "specs"], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    result = json.loads(out.getvalue())
    assert result["data"]["stdout"] == "fetched\n"
