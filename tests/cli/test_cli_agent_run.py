"""`toolflow run`: the trace, `--output-format json`, exit codes, usage errors, and Ctrl-C (stop, then kill).

In-process through `toolflow._cli.run` where possible; real `toolflow` processes for signals.
"""

from __future__ import annotations

import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolflow._cli import run

ROOT = Path(__file__).resolve().parent.parent.parent

SPECS = """\
toolflow: 1
tools:
  echo:
    description: Echo a word.
    parameters:
      type: object
      properties:
        word: {type: string, description: The word}
      required: [word]
    template: "echo {{ word }}"
  done:
    description: Say goodbye; ends the loop.
    category: terminal
    parameters: {type: object, properties: {}}
    template: "goodbye"
  nap:
    description: Note that it started, then sleep.
    parameters:
      type: object
      properties:
        seconds: {type: number, description: How long}
      required: [seconds]
    command: [sh, -c, "touch started; sleep {{ seconds }}; echo slept"]
    timeout: 60s
    retry: false
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the specs above and nothing else; the working directory."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    return tmp_path


def transcript(project: Path, turns: Sequence[Any], **top: Any) -> str:
    path = project / "session.yaml"
    path.write_text(yaml.safe_dump({**top, "turns": turns}), encoding="utf-8")
    return "scripted:session.yaml"


def toolflow(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


TURNS = [
    {"text": "echoing", "tool_calls": [{"name": "echo", "arguments": {"word": "hi"}}], "usage": {"prompt_tokens": 10}},
    {"tool_calls": [{"name": "done", "arguments": {}}]},
]


def test_text_trace_and_terminal_end(project: Path) -> None:
    """The trace shows each turn, call, arguments and outcome, then the answer and why the loop ended."""
    code, out, err = toolflow("run", "--model", transcript(project, TURNS, prompt="go"))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("turn 1 · 10 tokens · ")
    assert "  model: echoing" in lines
    assert '  → echo {"word": "hi"}' in lines
    assert any(re.fullmatch(r'    ok: "echo hi" \([0-9.]+ ms\)', line) for line in lines), lines
    assert lines[-1] == "loop ended: terminal ('done' ended the loop) after 2 turns, 2 tool calls"


def test_the_end_names_the_call_that_ended_the_loop(project: Path) -> None:
    """After a turn [terminal call, other call], the end shows the terminal call's result, not the last one's."""
    turns = [{"tool_calls": [{"name": "done", "arguments": {}}, {"name": "echo", "arguments": {"word": "hi"}}]}]
    code, out, _ = toolflow("run", "--model", transcript(project, turns, prompt="go"))
    assert code == 0
    assert out.splitlines()[-2:] == [
        "done: goodbye",
        "loop ended: terminal ('done' ended the loop) after 1 turn, 2 tool calls",
    ]


def test_specs_default_to_the_project_setting(project: Path) -> None:
    """Without --specs, `run` reads `[tool.toolflow] specs` of pyproject.toml, as every other command does."""
    (project / "specs").rename(project / "tools")
    (project / "pyproject.toml").write_text('[tool.toolflow]\nspecs = ["tools"]\n', encoding="utf-8")
    code, out, err = toolflow("run", "--model", transcript(project, TURNS, prompt="go"))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "loop ended: terminal ('done' ended the loop) after 2 turns, 2 tool calls"


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "fallback", "text", "gemini"])
def test_json_output_has_the_history(project: Path, fmt: str) -> None:
    """`--output-format json` is one document: answer, reason, turns with calls and results, the whole history."""
    code, out, _ = toolflow(
        "run", "--model", transcript(project, TURNS), "--prompt", "go", "--output-format", "json", "--format", fmt
    )
    assert code == 0
    document = json.loads(out)
    assert document["reason"] == "terminal"
    assert document["format"] == fmt
    assert [c["tool"] for t in document["turns"] for c in t["calls"]] == ["echo", "done"]
    assert document["turns"][0]["calls"][0]["result"]["data"] == "echo hi"
    durations = [c["duration_ms"] for t in document["turns"] for c in t["calls"]]
    assert all(isinstance(ms, float) and ms >= 0 for ms in durations), durations
    assert document["history"][0]["role"] == "user"
    assert len(document["history"]) >= 4


def test_exit_codes_follow_the_end(project: Path) -> None:
    """An error cap exits 1; a final answer or the iteration limit exits 0."""
    bad = [{"tool_calls": [{"name": "nope", "arguments": {}}]}] * 3
    code, out, _ = toolflow("run", "--model", transcript(project, bad), "--prompt", "go")
    assert code == 1
    assert "loop ended: error_cap" in out
    many = [{"tool_calls": [{"name": "echo", "arguments": {"word": "x"}}]}] * 3
    code, out, _ = toolflow("run", "--model", transcript(project, many), "--prompt", "go", "--max-iterations", "2")
    assert code == 0
    assert "loop ended: max_iterations" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "scripted"], "--model must be PROVIDER:TARGET"),
        (["--model", "scripte:x.yaml"], "no model provider 'scripte'"),
        (["--model", "scripted:missing.yaml"], "missing.yaml: cannot read the transcript"),
        (["--model", "scripted:session.yaml", "--base-url", "http://x"], "does not take these options"),
        (["--model", "scripted:session.yaml", "--response-timeout", "5"], "does not take these options"),
        (["--model", "openai:m", "--response-timeout", "0"], "response_timeout must be a positive number of seconds"),
        (["--model", "openai:m", "--response-timeout", "inf"], "response_timeout must be a positive number of seconds"),
        (["--model", "scripted:session.yaml", "--max-iterations", "0"], "--max-iterations must be at least 1"),
        (["--model", "scripted:session.yaml", "--toolset", "nope"], "policy 'toolset'"),
    ],
)
def test_usage_errors_exit_2(project: Path, args: list[str], message: str) -> None:
    """Bad options and missing files are one-line usage errors, exit 2, no traceback."""
    transcript(project, TURNS)
    code, _, err = toolflow("run", "--prompt", "go", *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_a_broken_transcript_names_the_line(project: Path) -> None:
    """A transcript that is not YAML is a usage error with file:line:col."""
    (project / "session.yaml").write_text("turns:\n  - text: [unclosed\n", encoding="utf-8")
    code, _, err = toolflow("run", "--model", "scripted:session.yaml", "--prompt", "go")
    assert code == 2
    assert "session.yaml:3:1: YAML syntax error" in err


def test_a_transcript_nested_too_deeply_is_refused(project: Path) -> None:
    """A transcript nested deeper than a spec may be is a usage error at its line and column, not a traceback."""
    (project / "session.yaml").write_text("turns: " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    code, _, err = toolflow("run", "--model", "scripted:session.yaml", "--prompt", "go")
    assert code == 2
    assert err.strip() == "toolflow: error: session.yaml:1:71: the document nests more than 64 collections deep"


def test_no_prompt_is_a_usage_error(project: Path) -> None:
    """Without --prompt and without a prompt in the transcript there is nothing to ask."""
    code, _, err = toolflow("run", "--model", transcript(project, TURNS))
    assert code == 2
    assert "--prompt" in err


def _start(project: Path, seconds: float) -> subprocess.Popen[str]:
    turns = [{"tool_calls": [{"name": "nap", "arguments": {"seconds": seconds}}]}, {"text": "never"}]
    model = transcript(project, turns, prompt="nap")
    process = subprocess.Popen(
        [sys.executable, "-m", "toolflow", "run", "--model", model, "--output-format", "json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )
    deadline = time.monotonic() + 30
    while not (project / "started").exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the tool never started"
        time.sleep(0.02)
    return process


def _check_history(history: list[dict[str, Any]]) -> None:
    pending: list[str] = []
    for message in history:
        if message["role"] == "assistant":
            assert not pending
            pending = [c["id"] for c in message.get("tool_calls") or []]
        elif message["role"] == "tool":
            pending.remove(message["tool_call_id"])
    assert not pending


def test_first_ctrl_c_stops_after_the_call_in_flight(project: Path) -> None:
    """One SIGINT: the running tool finishes, the loop ends `stopped` (exit 130), the history is whole."""
    process = _start(project, 1)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "stopping after the calls in flight" in err
    document = json.loads(out)
    assert document["reason"] == "stopped"
    assert document["turns"][0]["calls"][0]["result"]["data"]["stdout"] == "slept\n"
    _check_history(document["history"])


def test_second_ctrl_c_kills_the_call_in_flight(project: Path) -> None:
    """Two SIGINTs: the running tool is cancelled at once and recorded as cancelled; exit 130."""
    process = _start(project, 30)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert time.monotonic() - started < 20
    assert process.returncode == 130, err
    document = json.loads(out)
    assert document["reason"] == "killed"
    assert document["turns"][0]["calls"][0]["result"]["status"] == "cancelled"
    _check_history(document["history"])


def test_ctrl_c_ends_a_pending_approval(project: Path) -> None:
    """One SIGINT while `--approve ask` waits for an answer: the call is not run, the loop ends `stopped` (exit 130)."""
    (project / "specs" / "policy.yaml").write_text(
        "toolflow: 1\npolicy:\n  categories:\n    terminal: {approval: true}\n", encoding="utf-8"
    )
    turns = [{"tool_calls": [{"name": "done", "arguments": {}}]}, {"text": "never"}]
    model = transcript(project, turns, prompt="go")
    process = subprocess.Popen(
        [sys.executable, "-m", "toolflow", "run", "--model", model, "--approve", "ask"],
        cwd=project,
        stdin=subprocess.PIPE,  # left open and never written: the prompt waits for good
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )
    try:
        assert process.stdout is not None
        shown = b""
        deadline = time.monotonic() + 30
        while b"[y/N] " not in shown:
            assert time.monotonic() < deadline, f"no approval prompt: {shown!r}"
            if select.select([process.stdout], [], [], 0.1)[0]:
                shown += os.read(process.stdout.fileno(), 4096)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        out = (shown + process.stdout.read()).decode()
    finally:
        process.kill()
        process.communicate()
    assert "approve terminal call done {}? [y/N] \n" in out
    assert "    stopped: Error: not run - the user stopped the turn before this call" in out
    assert out.splitlines()[-1] == "loop ended: stopped (stopped by the user) after 1 turn, 1 tool call"


def test_the_shipped_session_runs_end_to_end() -> None:
    """The README's main job: the game assistant's scripted session ends with `say`, through every case."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolflow",
            "run",
            "--specs",
            "specs",
            "--model",
            "scripted:examples/assistant-session.yaml",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"→ recall_memories .*\n    ok: .*\(cached, [0-9.]+ ms\)", out), out
    assert re.search(r"→ get_system_status .*\n    ok: .*\(2 attempts, [0-9.]+ ms\)\n", out), out
    # a call the allowlist refused was never dispatched, so it has no duration
    assert re.search(r"blocked: Error: tool 'execute_command' is not available now[^\n]*'whisper'\n", out), out
    assert "→ set_attribute" in out
    assert out.splitlines()[-1].startswith("loop ended: terminal ('say' ended the loop)")


def test_the_cli_lists_the_history_formats_of_the_loop() -> None:
    """`--format`'s choices (kept in the CLI so `--help` imports no loop code) are the loop's formats."""
    from toolflow._cli import HISTORY_FORMATS
    from toolflow._providers import HISTORY_FORMATS as LOOP_FORMATS

    assert HISTORY_FORMATS == LOOP_FORMATS
