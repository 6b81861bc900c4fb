"""`toolflow call` runs through the engine: timeouts, the persistent cache, `--no-cache` and `--trace`.

Real spec files in tmp_path and real `toolflow` processes; no assertion depends on timing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SPECS = """\
toolflow: 1
tools:
  nap:
    description: Sleep for a while.
    parameters: {type: object, properties: {}}
    command: [sleep, "5"]
    timeout: 200ms
    retry: false
  counter:
    description: Count the calls in counter.txt and print the count.
    parameters: {type: object, properties: {}}
    command: [sh, -c, "n=$(cat counter.txt 2>/dev/null || echo 0); n=$((n + 1)); echo $n > counter.txt; echo $n"]
    cache: {scope: persistent, ttl: 1h}
  flaky:
    description: Fail with a connection error the first time, then succeed.
    parameters: {type: object, properties: {}}
    command: [sh, -c, "if [ -f seen ]; then echo fine; else touch seen; echo 'connection refused' >&2; exit 1; fi"]
    retry: {attempts: 3, initial: 10ms, jitter: false}
  plain:
    description: Print a word.
    parameters: {type: object, properties: {}}
    command: [echo, hello]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root with a pyproject.toml and the specs above in specs/."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    return tmp_path


def toolflow(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m toolflow ARGS` in *project*, with only the default plugins."""
    return subprocess.run(
        [sys.executable, "-m", "toolflow", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TOOLFLOW_LOAD_PLUGINS": "none"},
        stdin=subprocess.DEVNULL,
        check=False,
    )


def counter(project: Path) -> int:
    """How many times the counter tool really ran."""
    return int((project / "counter.txt").read_text(encoding="utf-8"))


def test_timeout_applies_from_the_command_line(project: Path) -> None:
    """A command tool that overruns its 200ms timeout (retry off) fails with exit 1 and says it timed out."""
    done = toolflow(project, "call", "nap")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is False
    assert result["error"] == "Error: tool 'nap' timed out after 200ms"
    assert "attempts" not in result


def test_persistent_cache_hit_on_the_second_run(project: Path) -> None:
    """A second process gets the cached result from .toolflow/cache.sqlite3; the tool does not run again."""
    first = toolflow(project, "call", "counter")
    assert first.returncode == 0, first.stderr
    second = toolflow(project, "call", "counter")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == json.loads(first.stdout)
    assert json.loads(second.stdout)["data"]["stdout"] == "1\n"
    assert counter(project) == 1
    assert (project / ".toolflow" / "cache.sqlite3").is_file()


def test_no_cache_runs_the_tool_again(project: Path) -> None:
    """`--no-cache` neither reads nor writes the cache: the tool runs each time."""
    assert toolflow(project, "call", "counter").returncode == 0
    again = toolflow(project, "call", "counter", "--no-cache")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"]["stdout"] == "2\n"
    assert counter(project) == 2
    cached = toolflow(project, "call", "counter")  # --no-cache wrote nothing: the first result is still cached
    assert json.loads(cached.stdout)["data"]["stdout"] == "1\n"
    assert counter(project) == 2


def test_trace_reports_attempts_duration_and_cache_use(project: Path) -> None:
    """`--trace` prints one line per call on stderr: outcome, attempts, duration, cache miss or hit."""
    miss = toolflow(project, "call", "counter", "--trace")
    hit = toolflow(project, "call", "counter", "--trace")
    plain = toolflow(project, "call", "plain", "--trace", "--no-cache")
    timed_out = toolflow(project, "call", "nap", "--trace")
    line = r"toolflow: trace: {}: {}, {} attempts?, \d+\.\dms, {}"
    assert re.fullmatch(line.format("counter", "success", 1, r"cache miss \(persistent\)"), miss.stderr.strip())
    assert re.fullmatch(line.format("counter", "success", 0, r"cache hit \(persistent\)"), hit.stderr.strip())
    assert re.fullmatch(line.format("plain", "success", 1, "no cache"), plain.stderr.strip())
    assert re.fullmatch(line.format("nap", "failure", 1, "no cache"), timed_out.stderr.strip())
    assert json.loads(hit.stdout) == json.loads(miss.stdout)  # stdout is the same with or without --trace


def test_output_has_no_engine_bookkeeping(project: Path) -> None:
    """The printed result is the tool's result: the engine's `attempts` and `cached` keys are not in it."""
    first = toolflow(project, "call", "counter")
    second = toolflow(project, "call", "counter")
    for done in (first, second):
        assert set(json.loads(done.stdout)) == {"success", "data"}
    assert first.stderr == second.stderr == ""


def test_unknown_tool_is_still_a_usage_error(project: Path) -> None:
    """An unknown NAME exits 2 with a did-you-mean, before any engine runs."""
    done = toolflow(project, "call", "countr", "--trace")
    assert done.returncode == 2
    assert done.stderr.startswith("toolflow: error: Unknown tool: 'countr'")
    assert "did you mean 'counter'" in done.stderr


def test_trace_reports_each_failed_attempt_and_the_retry(project: Path) -> None:
    """--trace prints a line per failed attempt: its duration, its error and the retry decided."""
    done = toolflow(project, "call", "flaky", "--trace")
    assert done.returncode == 0, done.stderr
    first, summary = done.stderr.strip().splitlines()
    assert re.fullmatch(
        r"toolflow: trace: Attempt 1 of flaky failed after \d+ms: command exited with status 1: connection refused; "
        r"retrying in 0\.01s \(the error mentions 'connection' \(connection\)\)",
        first,
    ), first
    assert re.fullmatch(r"toolflow: trace: flaky: success, 2 attempts, \d+\.\dms, no cache", summary), summary


def test_project_sets_the_persistent_cache_file(project: Path) -> None:
    """[tool.toolflow.cache] path moves the persistent cache; a second process hits it there."""
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.toolflow.cache]\npath = "state/results.db"\n', encoding="utf-8"
    )
    assert toolflow(project, "call", "counter").returncode == 0
    second = toolflow(project, "call", "counter", "--trace")
    assert second.returncode == 0, second.stderr
    assert counter(project) == 1
    assert second.stderr.strip().endswith("cache hit (persistent)")
    assert (project / "state" / "results.db").is_file()
    assert not (project / ".toolflow").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('backend = "shelve"', "toolflow: error: unknown cache backend 'shelve'"),
        ('pth = "x.db"', "[tool.toolflow.cache] has unknown key 'pth'; did you mean 'path'?"),
        ("path = 3", "[tool.toolflow.cache] path must be a non-empty string"),
        ('options = "x"', "[tool.toolflow.cache] options must be a table"),
    ],
)
def test_bad_cache_settings_are_configuration_errors(project: Path, table: str, message: str) -> None:
    """A mistyped [tool.toolflow.cache] is an error naming the key or backend, not a traceback."""
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "demo"\n\n[tool.toolflow.cache]\n{table}\n', encoding="utf-8"
    )
    done = toolflow(project, "call", "plain")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr


APPROVAL_SPECS = """\
toolflow: 1
tools:
  wipe:
    description: Remove the marker file.
    category: dangerous
    parameters: {type: object, properties: {}}
    command: [rm, -f, marker]
policy:
  categories:
    dangerous: {approval: true}
"""


@pytest.mark.parametrize(
    ("option", "code", "removed", "said"),
    [
        ([], 1, False, "needs approval before it runs"),
        (["--approve", "no"], 1, False, "was not approved"),
        (["--approve", "yes"], 0, True, '"exit_code": 0'),
    ],
)
def test_call_asks_for_the_policys_approval(
    project: Path, option: list[str], code: int, removed: bool, said: str
) -> None:
    """A tool whose category needs approval runs only when approved; unattended, nobody approves it."""
    (project / "specs" / "tools.yaml").write_text(APPROVAL_SPECS, encoding="utf-8")
    (project / "marker").write_text("here", encoding="utf-8")
    done = toolflow(project, "call", "wipe", *option)  # standard input is not a terminal: nobody is asked
    assert done.returncode == code, done.stderr
    assert said in done.stdout
    assert (project / "marker").exists() is not removed
