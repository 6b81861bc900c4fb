"""Edges of the running commands: an interrupted call, plugin kinds in `toolflow list`, dangerous retries."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _mcp_wire import pids_alive

from toolflow import load_specs

SLEEPER = """\
toolflow: 1
tools:
  nap:
    description: Sleep for a while.
    parameters: {type: object, properties: {}}
    command: [sleep, "30"]
"""


def test_interrupted_call_exits_130_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C twice during `toolflow call`: the call is `cancelled`, exit 130, no traceback, and the command is gone."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "nap.yaml").write_text(SLEEPER, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "toolflow", "call", "nap"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
    )
    deadline = time.monotonic() + 30
    while not any("sleep" in _cmdline(pid) for pid in _children(process.pid)):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.05)
    sleeper = next(pid for pid in _children(process.pid) if "sleep" in _cmdline(pid))
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert json.loads(out)["status"] == "cancelled"
    assert err.strip().splitlines()[-1] == "toolflow: SIGINT again: killing the calls in flight"
    assert "Traceback" not in err
    assert pids_alive([sleeper]) == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def test_list_shows_tools_of_plugin_kinds(tmp_path: Path) -> None:
    """`toolflow list` loads plugins, so a tool of the http kind is listed, not refused."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "status.yaml").write_text(
        "toolflow: 1\ntools:\n  status:\n    description: Service status.\n"
        "    parameters: {type: object, properties: {}}\n    http: http://127.0.0.1:9/status\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "toolflow", "list", "--output-format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (tool,) = json.loads(done.stdout)["tools"]
    assert (tool["name"], tool["implementation"]) == ("status", "http")


def test_retry_true_asks_for_retries_of_a_dangerous_tool_whatever_the_defaults(tmp_path: Path) -> None:
    """`retry: true` on a dangerous tool asks for retries, with or without a defaults.retry mapping."""
    body = (
        "  wipe:\n    description: Wipe.\n    category: dangerous\n    retry: true\n    implementation: wipe\n"
        "  poke:\n    description: Poke.\n    category: dangerous\n    implementation: poke\n"
    )
    with_defaults = tmp_path / "a.yaml"
    with_defaults.write_text(f"toolflow: 1\ndefaults:\n  retry: {{initial: 2s}}\ntools:\n{body}", encoding="utf-8")
    without = tmp_path / "b.yaml"
    without.write_text(
        f"toolflow: 1\ntools:\n{body}".replace("wipe", "wipe2").replace("poke", "poke2"), encoding="utf-8"
    )
    tools = {t.name: t for t in load_specs([with_defaults, without]).tools}
    assert (tools["wipe"].retry.attempts, tools["wipe"].retry.initial) == (4, 2.0)
    assert tools["wipe2"].retry.attempts == 4
    assert tools["poke"].retry.attempts == 1
    assert tools["poke2"].retry.attempts == 1
