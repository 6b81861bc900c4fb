"""`toolflow run --save` / `--resume` / `--result` (issue 21, section 3): a run saved by one process goes on in another.

Real `toolflow` processes for the runs that stop and resume; in-process `run([...])` for usage errors.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolflow._cli import run

TOOLS = """\
toolflow: 1
tools:
  look:
    description: Look somewhere.
    parameters:
      type: object
      properties:
        where: {type: string, description: Where}
    template: "you see {{ where }}"
  ask_human:
    description: Ask the player.
    deferred: true
    parameters:
      type: object
      properties:
        question: {type: string, description: What to ask}
      required: [question]
    output_schema: {type: object, properties: {answer: {type: string}}, required: [answer]}
    template:
      source: '{"answer": "left"}'
      output: json
  say:
    description: Say something; ends the loop.
    category: terminal
    parameters:
      type: object
      properties:
        message: {type: string, description: What}
      required: [message]
    template: "You say {{ message }}"
"""


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call with its id, so that a transcript of the rest of a run gives the ids the whole one does."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


TURNS = [
    {"tool_calls": [_call("c1", "look", where="north"), _call("c2", "ask_human", question="left or right?")]},
    {"tool_calls": [_call("c3", "say", message="going left")]},
]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two spec directories: ``deferred/`` (ask_human waits for the caller) and ``ran/`` (it runs)."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    for name, text in (("deferred", TOOLS), ("ran", TOOLS.replace("    deferred: true\n", ""))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tools.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    return tmp_path


def _transcript(project: Path, name: str, turns: Sequence[Any]) -> str:
    (project / name).write_text(yaml.safe_dump({"prompt": "which way?", "turns": list(turns)}), encoding="utf-8")
    return f"scripted:{name}"


def _process(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``toolflow run ARGS`` in a process of its own (at most 60 s)."""
    return subprocess.run(
        [sys.executable, "-m", "toolflow", "run", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
        check=False,
    )


def _in_process(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("format_name", ["openai", "anthropic", "text"])
def test_a_deferred_run_saved_in_one_process_goes_on_in_another_as_if_it_never_stopped(
    project: Path, format_name: str
) -> None:
    """The first process ends `deferred` (exit 3); the second supplies --result: the history and decision of one run."""
    whole = _process(
        project, "--specs", "ran", "--model", _transcript(project, "all.yaml", TURNS), "--format", format_name,
        "--output-format", "json",
    )  # fmt: skip
    assert whole.returncode == 0, whole.stderr
    first = _process(
        project, "--specs", "deferred", "--model", _transcript(project, "all.yaml", TURNS), "--format", format_name,
        "--save", "run.json", "--output-format", "json",
    )  # fmt: skip
    assert first.returncode == 3, first.stderr
    pending = json.loads(first.stdout)["pending"]
    call_id = "call_1" if format_name == "text" else "c2"  # the text format writes no ids: they are positions
    expected = {"id": call_id, "tool": "ask_human", "arguments": {"question": "left or right?"}, "approval": False}
    assert pending == [expected]
    saved = json.loads((project / "run.json").read_text(encoding="utf-8"))
    assert saved["version"] == 1
    assert saved["format"] == format_name
    # The result the tool gives when it runs, with the attempt count the engine adds.
    result = json.dumps({"success": True, "data": {"answer": "left"}, "attempts": 1})
    second = _process(
        project, "--specs", "deferred", "--model", _transcript(project, "rest.yaml", TURNS[1:]),
        "--resume", "run.json", "--result", f"{call_id}={result}", "--output-format", "json",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    resumed, expected = json.loads(second.stdout), json.loads(whole.stdout)
    assert resumed["history"] == expected["history"]
    assert resumed["decision"] == expected["decision"]
    assert resumed["pending"] == []


def test_the_text_trace_names_the_waiting_calls_and_an_error_result_goes_on(project: Path) -> None:
    """The trace says how to resume; --result-error gives the model an error to read."""
    first = _process(
        project, "--specs", "deferred", "--model", _transcript(project, "all.yaml", TURNS), "--save", "r.json"
    )
    assert first.returncode == 3, first.stderr
    assert "deferred: Error: this call waits for its result" in first.stdout
    assert 'waiting: c2 → ask_human {"question": "left or right?"}' in first.stdout
    assert "resume with: toolflow run --resume r.json --result c2=JSON" in first.stdout
    assert "loop ended: deferred (1 deferred call(s) wait for their results: ask_human (c2))" in first.stdout
    second = _process(
        project, "--specs", "deferred", "--model", _transcript(project, "rest.yaml", TURNS[1:]),
        "--resume", "r.json", "--result-error", "c2=the player walked away", "--output-format", "json",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    history = json.loads(second.stdout)["history"]
    answer = next(m for m in history if m.get("tool_call_id") == "c2")
    assert json.loads(answer["content"])["error"] == "Error: the player walked away"


def test_a_finished_run_resumes_with_the_next_message(project: Path) -> None:
    """A saved run that waits for nothing takes --prompt: the conversation goes on from its history."""
    turns = [{"tool_calls": [_call("c1", "look", where="east")]}, {"text": "a door"}]
    first = _process(project, "--specs", "ran", "--model", _transcript(project, "a.yaml", turns), "--save", "r.json")
    assert first.returncode == 0, first.stderr
    saved = json.loads((project / "r.json").read_text(encoding="utf-8"))
    second = _process(
        project, "--specs", "ran", "--model", _transcript(project, "b.yaml", [{"text": "it is locked"}]),
        "--resume", "r.json", "--prompt", "open it", "--output-format", "json", "--save", "r.json",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    history = json.loads(second.stdout)["history"]
    assert history[: len(saved["history"])] == saved["history"]
    assert history[len(saved["history"]) :] == [
        {"role": "user", "content": "open it"},
        {"role": "assistant", "content": "it is locked"},
    ]
    assert json.loads((project / "r.json").read_text(encoding="utf-8"))["history"] == history


def _deferred_file(project: Path) -> None:
    code, _, err = _in_process(
        "--specs", "deferred", "--model", _transcript(project, "all.yaml", TURNS), "--save", "run.json"
    )
    assert code == 3, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--resume", "run.json"], "waits for the results of its deferred calls; give them"),
        (["--resume", "run.json", "--result", 'c1="x"'], "no call waits for a result under 'c1'; no result for 'c2'"),
        (["--resume", "run.json", "--prompt", "hi"], "waits for the results of its deferred calls; give them"),
        (["--resume", "run.json", "--result", "c2=3"], "the result of 'c2' (ask_human) is not a result of the tool"),
        (["--resume", "run.json", "--result", "c2={"], "--result c2: the result is not JSON"),
        (["--resume", "run.json", "--result", "nope"], "--result 'nope': expected CALL_ID=VALUE"),
        (["--resume", "run.json", "--result", 'c9="x"'], "no call waits for a result under 'c9'"),
        (["--resume", "run.json", "--result", 'c2="x"', "--result", 'c2="y"'], "a second result for the same call"),
        (["--result", 'c2="x"'], "add --resume FILE"),
        (["--resume", "missing.json", "--result", 'c2="x"'], "missing.json: cannot read the saved run"),
        (["--resume", "run.json", "--result", 'c2="x"', "--format", "anthropic"], "not this agent's 'anthropic'"),
        (["--resume", "bad.json", "--prompt", "hi"], "bad.json: a saved run of version 7"),
    ],
)
def test_bad_resumes_are_usage_errors(project: Path, args: list[str], message: str) -> None:
    """Exit 2 and one line saying what is wrong; nothing runs."""
    _deferred_file(project)
    (project / "bad.json").write_text('{"version": 7}', encoding="utf-8")
    code, _, err = _in_process("--specs", "deferred", "--model", _transcript(project, "rest.yaml", TURNS[1:]), *args)
    assert code == 2, err
    assert message in err
    assert "Traceback" not in err


APPROVED = """\
  notify:
    description: Tell the player; needs approval.
    category: notify
    parameters: {type: object, properties: {text: {type: string, description: What}}}
    template: "told {{ text }}"
policy:
  categories:
    notify: {approval: true}
"""


def test_approve_defer_ends_the_process_and_the_next_one_approves(project: Path) -> None:
    """--approve defer: the call waits for approval in the saved run; --approve-call runs it in the next process."""
    (project / "ran" / "tools.yaml").write_text(TOOLS.replace("    deferred: true\n", "") + APPROVED, encoding="utf-8")
    turns = [{"tool_calls": [_call("c1", "notify", text="hi"), _call("c2", "notify", text="bye")]}, {"text": "done"}]
    first = _process(
        project, "--specs", "ran", "--model", _transcript(project, "all.yaml", turns), "--approve", "defer",
        "--save", "r.json",
    )  # fmt: skip
    assert first.returncode == 3, first.stderr
    assert "awaiting_approval: Error: 'notify' waits for approval (notify calls need approval)" in first.stdout
    assert "resume with: toolflow run --resume r.json --approve-call c1 (or --refuse-call)" in first.stdout
    second = _process(
        project, "--specs", "ran", "--model", _transcript(project, "rest.yaml", turns[1:]), "--resume", "r.json",
        "--approve-call", "c1", "--refuse-call", "c2", "--output-format", "json",
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    history = json.loads(second.stdout)["history"]
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in history if m["role"] == "tool"}
    assert results["c1"]["data"] == "told hi"
    assert results["c2"]["status"] == "denied"
