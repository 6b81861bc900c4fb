"""SIGTERM, Ctrl-C and SIGHUP to `toolflow call`, `run` and `serve`: stop, grace period, kill, and no process left.

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
from typing import Any

import httpx
import pytest
import trio
from _mcp_project import HTTPServer, server_environment
from _mcp_wire import StdioServer, answers, call, open_session
from _process_tree import assert_gone, wait_for_file, wait_for_tree, write_tree_project

from toolflow import load_plugins, load_registry, open_engine

ENV = {**server_environment(), "TOOLFLOW_LOAD_PLUGINS": "none"}
CANCELLED = "Error: cancelled - toolflow was stopped (SIGTERM) and the call did not finish within the grace period"


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


def test_a_signal_ignored_at_start_stays_ignored(project: Path) -> None:
    """Under `nohup` (SIGHUP ignored when toolflow starts), SIGHUP does not stop the call; SIGTERM does."""
    pids_file = project / "pids"
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # inherited by the child, as nohup does it
    try:
        process = toolflow(project, "call", "tree", json.dumps({"pids": str(pids_file)}), "--shutdown-grace", "0")
    finally:
        signal.signal(signal.SIGHUP, previous)
    pids = wait_for_tree(pids_file)
    process.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    returncode, _, err = finish(process)
    assert returncode == 143
    assert "SIGHUP" not in err
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


def test_a_grace_period_in_plain_seconds_is_accepted(project: Path) -> None:
    """`--shutdown-grace 2` is two seconds, as its message says a number of seconds is (it was refused)."""
    returncode, out, err = finish(toolflow(project, "call", "greet", '{"name": "x"}', "--shutdown-grace", "2"))
    assert (returncode, err) == (0, "")
    assert json.loads(out)["success"] is True


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
        project, "run", "--model", "scripted:session.yaml", "--output-format", "json", "--shutdown-grace", "300ms"
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


# --- toolflow serve over stdio -----------------------------------------------------------------


def _text(answer: dict[str, Any] | None) -> tuple[bool, str]:
    assert answer is not None
    result = answer["result"]
    return result["isError"], result["content"][0]["text"]


def test_serve_stdio_refuses_new_calls_and_cancels_the_call_in_flight(project: Path) -> None:
    """SIGTERM: new calls are refused at once, the call in flight is answered `cancelled`, the tree is gone."""
    server = StdioServer(project, "--shutdown-grace", "1s", env=ENV)
    try:
        server.start()
        pids_file = project / "pids"
        server.send(call(1, "tree", {"pids": str(pids_file)}))
        pids = wait_for_tree(pids_file)
        server.process.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # the server has taken the signal (its stderr says so; see below)
        server.send(call(2, "greet", {"name": "Ada"}))
        refused = server.receive()
        assert refused is not None
        assert refused["id"] == 2
        assert _text(refused) == (
            True,
            "Error: the server is shutting down: the call was not run; call it again once the server is back",
        )
        cancelled = server.receive()
        assert cancelled is not None
        assert cancelled["id"] == 1
        assert _text(cancelled) == (True, f"{CANCELLED} (1s)")
        assert server.receive() is None  # the server closed its output
        assert server.process.wait(timeout=30) == 143
        assert_gone(pids)
    finally:
        server.kill()
    log = server.log.read_text()
    assert "toolflow: SIGTERM: shutting down: new calls are refused, the calls in flight have 1s to finish" in log
    assert "Traceback" not in log


def test_serve_stdio_call_in_flight_finishes_within_the_grace_period(project: Path) -> None:
    """SIGTERM while a short call runs: it is answered with its own result, then the server exits."""
    server = StdioServer(project, env=ENV)
    try:
        server.start()
        marker = project / "started"
        server.send(call(1, "nap", {"marker": str(marker), "seconds": 0.5}))
        wait_for_file(marker)
        server.process.send_signal(signal.SIGTERM)
        answer = server.receive()
        assert answer is not None
        assert answer["id"] == 1
        assert answer["result"]["structuredContent"]["stdout"] == "rested\n"
        assert server.receive() is None
        assert server.process.wait(timeout=30) == 143
    finally:
        server.kill()


def test_serve_stdio_client_leaving_kills_the_call_in_flight(project: Path) -> None:
    """The client closes its input while a call runs: the server exits 0 and the call's tree is gone."""
    server = StdioServer(project, env=ENV)
    try:
        server.start()
        pids_file = project / "pids"
        server.send(call(1, "tree", {"pids": str(pids_file)}))
        pids = wait_for_tree(pids_file)
        assert server.stop() == 0
        assert_gone(pids)
    finally:
        server.kill()


# --- toolflow serve over HTTP ------------------------------------------------------------------


async def test_serve_http_refuses_new_calls_and_cancels_the_call_in_flight(project: Path) -> None:
    """Over HTTP: SIGTERM refuses new calls, answers the call in flight `cancelled` and leaves no process."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(project, "--shutdown-grace", "1s"))
    pids_file = project / "pids"
    outcome: dict[str, Any] = {}
    try:
        with trio.fail_after(60):
            async with httpx.AsyncClient(timeout=60) as client, trio.open_nursery() as nursery:
                session = await open_session(client, server.url)

                async def grow() -> None:
                    response = await client.post(
                        server.url, json=call(1, "tree", {"pids": str(pids_file)}), headers=session
                    )
                    outcome["tree"] = answers(response)

                nursery.start_soon(grow)
                pids = await trio.to_thread.run_sync(wait_for_tree, pids_file)
                server.process.send_signal(signal.SIGTERM)
                await trio.sleep(0.2)
                refused = answers(
                    await client.post(server.url, json=call(2, "greet", {"name": "Ada"}), headers=session)
                )
            code = await trio.to_thread.run_sync(lambda: server.process.wait(timeout=30))
    finally:
        await trio.to_thread.run_sync(server.close)
    assert [_text(answer) for answer in refused] == [
        (True, "Error: the server is shutting down: the call was not run; call it again once the server is back")
    ]
    assert [(answer["id"], _text(answer)) for answer in outcome["tree"]] == [(1, (True, f"{CANCELLED} (1s)"))]
    assert code == 143
    await trio.to_thread.run_sync(assert_gone, pids)
    assert "Traceback" not in "".join(server.output)
