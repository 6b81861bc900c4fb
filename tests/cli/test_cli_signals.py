"""SIGTERM, Ctrl-C and SIGHUP to `toolflow call` and `run`: stop, grace period, kill, and no process left.

Real `toolflow` processes run a command tool that starts a process tree (`tests/_process_tree.py`);
each test sends real signals and checks the exit code, what each call in flight got (its own
result, or `cancelled`), and that no process of the tree survives.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio
from _mcp_project import server_environment
from _process_tree import assert_gone, wait_for_file, wait_for_tree, write_tree_project

from toolflow import load_plugins, load_registry, open_engine

ENV = {**server_environment(), "TOOLFLOW_LOAD_PLUGINS": "none"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_tree_project(tmp_path)


def toolflow(project: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "toolflow", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=60)
    assert "Traceback" not in err, err
    return process.returncode, out, err


# --- toolflow call -----------------------------------------------------------------------------


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_call_kills_the_process_tree_after_the_grace_period(project: Path, sent: signal.Signals, code: int) -> None:
    """A stop signal: the call may finish for the grace period, then it is `cancelled` and its tree is gone."""
    pids_file = project / "pids"
    process = toolflow(project, "call", "tree", json.dumps({"pids": str(pids_file)}), "--shutdown-grace", "300ms")
    pids = wait_for_tree(pids_file)
    process.send_signal(sent)
    returncode, out, err = finish(process)
    assert returncode == code
    assert json.loads(out) == {
        "success": False,
        "data": None,
        "error": f"Error: cancelled - toolflow was stopped ({sent.name}) and the call did not finish"
        " within the grace period (0.3s)",
        "status": "cancelled",
    }
    assert err.splitlines() == [
        f"toolflow: {sent.name}: stopping after the call in flight (at most 0.3s; a second signal kills it)",
        "toolflow: the grace period (0.3s) is over: killing the calls in flight",
    ]
    assert_gone(pids)


def test_call_in_flight_finishes_within_the_grace_period(project: Path) -> None:
    """SIGTERM while a call runs: it finishes within the grace period and its own result is printed."""
    marker = project / "started"
    process = toolflow(project, "call", "nap", json.dumps({"marker": str(marker), "seconds": 0.5}))
    wait_for_file(marker)
    process.send_signal(signal.SIGTERM)
    returncode, out, err = finish(process)
    assert returncode == 143
    result = json.loads(out)
    assert (result["success"], result["data"]["stdout"]) == (True, "rested\n")
    assert err.splitlines() == [
        "toolflow: SIGTERM: stopping after the call in flight (at most 10s; a second signal kills it)"
    ]


def test_second_signal_kills_at_once(project: Path) -> None:
    """SIGTERM, then Ctrl-C: the call is killed at once, whatever the grace period, and its tree is gone."""
    pids_file = project / "pids"
    process = toolflow(project, "call", "tree", json.dumps({"pids": str(pids_file)}), "--shutdown-grace", "10m")
    pids = wait_for_tree(pids_file)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    returncode, out, err = finish(process)
    assert time.monotonic() - started < 30
    assert returncode == 143
    assert json.loads(out)["error"] == (
        "Error: cancelled - toolflow was stopped (SIGTERM) and a second signal (SIGINT) killed the call"
    )
    assert err.splitlines()[-1] == "toolflow: SIGINT again: killing the calls in flight"
    assert_gone(pids)


def test_grace_period_from_pyproject(project: Path) -> None:
    """`[tool.toolflow] shutdown-grace` sets the grace period when the option does not."""
    (project / "pyproject.toml").write_text(
        '[project]\nname = "trees"\n\n[tool.toolflow]\nshutdown-grace = "200ms"\n', encoding="utf-8"
    )
    pids_file = project / "pids"
    process = toolflow(project, "call", "tree", json.dumps({"pids": str(pids_file)}))
    pids = wait_for_tree(pids_file)
    process.send_signal(signal.SIGTERM)
    returncode, out, _ = finish(process)
    assert returncode == 143
    assert "within the grace period (0.2s)" in json.loads(out)["error"]
    assert_gone(pids)


@pytest.mark.parametrize("value", ["soon", "-1s"])
def test_bad_grace_period_is_a_usage_error(project: Path, value: str) -> None:
    """`--shutdown-grace` takes a duration: anything else is exit 2 with the value named."""
    returncode, _, err = finish(toolflow(project, "call", "greet", '{"name": "x"}', f"--shutdown-grace={value}"))
    assert returncode == 2
    assert err.startswith("toolflow: error: --shutdown-grace: expected a duration like '500ms', '30s', '5m'")


async def test_an_exception_elsewhere_kills_the_tree(project: Path) -> None:
    """A crash beside a running call (an exception in a sibling task) cancels it, and its tree is gone."""
    pids_file = project / "pids"
    registry = load_registry([project / "specs"], plugins=load_plugins(entry_points=False))
    with trio.fail_after(60), pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="crash")):
        async with open_engine(registry) as engine, trio.open_nursery() as nursery:
            nursery.start_soon(engine.call, "tree", {"pids": str(pids_file)})
            pids = await trio.to_thread.run_sync(wait_for_tree, pids_file)
            raise RuntimeError("crash")
    await trio.to_thread.run_sync(assert_gone, pids)


# --- toolflow run ------------------------------------------------------------------------------


def test_run_kills_the_process_tree_after_the_grace_period(project: Path) -> None:
    """SIGTERM during `toolflow run`: the loop stops, the call in flight is `cancelled` after the grace period."""
    pids_file = project / "pids"
    transcript = {
        "prompt": "grow a tree",
        "turns": [{"tool_calls": [{"name": "tree", "arguments": {"pids": str(pids_file)}}]}, {"text": "never"}],
    }
    (project / "session.yaml").write_text(json.dumps(transcript), encoding="utf-8")
    process = toolflow(
        project, "run", "--model", "scripted:session.yaml", "--output", "json", "--shutdown-grace", "300ms"
    )
    pids = wait_for_tree(pids_file)
    process.send_signal(signal.SIGTERM)
    returncode, out, err = finish(process)
    assert returncode == 143
    document = json.loads(out)
    assert document["reason"] == "killed"
    assert document["turns"][0]["calls"][0]["result"]["status"] == "cancelled"
    assert err.splitlines() == [
        "toolflow: SIGTERM: stopping after the calls in flight (at most 0.3s; a second signal kills them)",
        "toolflow: the grace period (0.3s) is over: killing the calls in flight",
    ]
    assert_gone(pids)
