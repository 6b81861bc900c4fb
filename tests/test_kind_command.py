"""The built-in ``command`` kind: real subprocesses, no shell, capped output, and process-group clean-up."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

import toolflow
from toolflow import ToolSpec, load_specs
from toolflow._plugins import ImplementationKind, load_plugins
from toolflow._templates import TemplateError
from toolflow.default_plugins._command_run import run_argv

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "toolflow" / "data" / "spec-v1.schema.json"
PY = sys.executable
PRINT_ARGV = "import sys, json; print(json.dumps(sys.argv[1:]))"

Run = Callable[..., Coroutine[Any, Any, object]]

PARAMETERS = {
    "type": "object",
    "properties": {
        "arg": {"type": "string", "description": "An argument"},
        "n": {"type": "integer", "description": "A number"},
    },
}


def _kind() -> ImplementationKind:
    kinds = load_plugins(entry_points=False).kinds()["command"]
    assert len(kinds) == 1
    return kinds[0]


def _tool(tmp_path: Path, command: object) -> ToolSpec:
    body = {"description": "A command tool", "parameters": PARAMETERS, "command": command}
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"toolflow": 1, "tools": {"t": body}}), encoding="utf-8")
    loaded = load_specs([path])
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    (tool,) = loaded.tools
    return tool


def _build(tmp_path: Path, command: object) -> Run:
    return _kind().build(_tool(tmp_path, command))


async def _call(tmp_path: Path, command: object, **arguments: Any) -> dict[str, Any]:
    with trio.fail_after(30):
        result = await _build(tmp_path, command)(**arguments)
    assert isinstance(result, dict)
    return result


def _alive(pid: int) -> bool:
    """True while *pid* is a process that has not exited (a zombie awaiting its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _group_members(pgid: int) -> list[int]:
    """Live processes whose process group is *pgid*."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text(encoding="utf-8").rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(line) for line in path.read_text(encoding="utf-8").split()]
    except FileNotFoundError:
        return []


def _reaped(pid: int) -> bool:
    """True when *pid* is no longer a child of this process (its parent reaped it)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


async def _wait_for_pids(path: Path, count: int) -> list[int]:
    while True:
        pids = _read_pids(path)
        if len(pids) >= count:
            return pids
        await trio.sleep(0.01)


async def _wait_until_gone(pid: int) -> None:
    with trio.move_on_after(5):
        while True:
            if not _alive(pid):
                return
            await trio.sleep(0.01)


def test_registered_as_a_default_plugin_with_the_spec_schema() -> None:
    """The command kind comes from the default plugin, with the spec schema's definition of `command`."""
    kind = _kind()
    assert kind.plugin == "toolflow.default_plugins.command"
    assert kind.description
    definitions = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))["definitions"]
    assert kind.schema == definitions["command"]


async def test_runs_the_program_and_captures_stdout(tmp_path: Path) -> None:
    """The short form runs argv with templated items; stdout is the data, exit 0 is success."""
    result = await _call(tmp_path, [PY, "-c", PRINT_ARGV, "--count={{ n }}", "{{ arg | upper }}"], n=3, arg="x")
    assert result == {
        "success": True,
        "data": {"exit_code": 0, "stdout": '["--count=3", "X"]\n', "stderr": "", "truncated": False},
    }


@pytest.mark.parametrize(
    "hostile",
    [
        "; rm -rf /",
        "$(id)",
        "`id`",
        "a && echo pwned",
        "x || true",
        "| cat /etc/passwd",
        "*",
        "~",
        "'quoted' \"double\"",
        "line one\nline two",
        "$HOME ${PATH}",
        "> /tmp/toolflow-redirect",
        "--help",
    ],
)
async def test_shell_syntax_in_an_argument_is_one_literal_argument(tmp_path: Path, hostile: str) -> None:
    """No shell sees the argv: each argument reaches the program verbatim, as one item."""
    result = await _call(tmp_path, [PY, "-c", PRINT_ARGV, "{{ arg }}", "after"], arg=hostile)
    assert result["success"] is True
    assert json.loads(result["data"]["stdout"]) == [hostile, "after"]


async def test_injected_command_does_not_run(tmp_path: Path) -> None:
    """An argument that would create a file through a shell creates nothing."""
    marker = tmp_path / "pwned"
    for hostile in (f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", f"&& touch {marker}"):
        result = await _call(tmp_path, ["echo", "{{ arg }}"], arg=hostile)
        assert result["data"]["stdout"] == hostile + "\n"
    assert not marker.exists()


async def test_nonzero_exit_is_a_failure_naming_the_first_stderr_line(tmp_path: Path) -> None:
    """Exit status decides success; the error gives the status and the first non-blank stderr line."""
    code = "import sys; print('partial'); sys.stderr.write('\\n  boom: no such thing  \\nmore\\n'); sys.exit(3)"
    result = await _call(tmp_path, [PY, "-c", code])
    assert result == {
        "success": False,
        "data": {
            "exit_code": 3,
            "stdout": "partial\n",
            "stderr": "\n  boom: no such thing  \nmore\n",
            "truncated": False,
        },
        "error": "command exited with status 3: boom: no such thing",
    }


async def test_failure_without_stderr_gives_the_status_alone(tmp_path: Path) -> None:
    """A program that fails silently is reported by its exit status."""
    result = await _call(tmp_path, [PY, "-c", "raise SystemExit(1)"])
    assert result["error"] == "command exited with status 1"


async def test_program_killed_by_a_signal_is_named(tmp_path: Path) -> None:
    """A program that dies of a signal is reported by the signal's name."""
    result = await _call(tmp_path, [PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert result["success"] is False
    assert result["data"]["exit_code"] == -signal.SIGTERM
    assert result["error"] == "command was killed by SIGTERM"


async def test_output_is_capped_per_stream_and_marked_truncated(tmp_path: Path) -> None:
    """Only max_output bytes of stdout and of stderr are kept; the program still runs to completion."""
    code = (
        "import sys\n"
        "for _ in range(64): sys.stdout.write('o' * 65536); sys.stderr.write('e' * 65536)\n"
        "sys.stdout.flush(); sys.stderr.write('\\nEND')\n"
    )
    result = await _call(tmp_path, {"argv": [PY, "-c", code], "max_output": 1000})
    data = result["data"]
    assert result["success"] is True
    assert data["stdout"] == "o" * 1000
    assert data["stderr"] == "e" * 1000
    assert data["truncated"] is True


async def test_output_below_the_cap_is_not_truncated(tmp_path: Path) -> None:
    """Output of exactly max_output bytes is complete."""
    result = await _call(tmp_path, {"argv": [PY, "-c", "print('x' * 9)"], "max_output": 10})
    assert result["data"]["stdout"] == "x" * 9 + "\n"
    assert result["data"]["truncated"] is False


async def test_character_cut_by_the_cap_is_dropped_and_bad_bytes_replaced(tmp_path: Path) -> None:
    """Truncation never leaves half a UTF-8 character; invalid bytes become replacement characters."""
    code = "import sys; sys.stdout.buffer.write('é'.encode() * 10); sys.stderr.buffer.write(b'bad \\xff byte')"
    result = await _call(tmp_path, {"argv": [PY, "-c", code], "max_output": 5})
    assert result["data"]["stdout"] == "éé"
    assert result["data"]["stderr"] == "bad \ufffd"


async def test_working_directory_is_used(tmp_path: Path) -> None:
    """`cwd` is the program's working directory."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    result = await _call(tmp_path, {"argv": [PY, "-c", "import os; print(os.getcwd())"], "cwd": str(workdir)})
    assert result["data"]["stdout"] == f"{workdir.resolve()}\n"


async def test_env_is_added_to_the_inherited_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`env` adds variables (as written, not templated) to the environment the program inherits."""
    monkeypatch.setenv("TOOLFLOW_TEST_INHERITED", "inherited")
    code = "import os; print(os.environ['TOOLFLOW_TEST_INHERITED'], os.environ['TOOLFLOW_TEST_EXTRA'])"
    command = {"argv": [PY, "-c", code], "env": {"TOOLFLOW_TEST_EXTRA": "{{ arg }}"}}
    result = await _call(tmp_path, command, arg="ignored")
    assert result["data"]["stdout"] == "inherited {{ arg }}\n"


async def test_stdin_is_empty(tmp_path: Path) -> None:
    """The program reads end-of-file from stdin instead of waiting for input."""
    result = await _call(tmp_path, [PY, "-c", "import sys; print(repr(sys.stdin.read()))"])
    assert result["data"]["stdout"] == "''\n"


async def test_argv_templates_cannot_read_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`env.NAME` in an argv item is a failure that points at `${NAME}`; the value never shows."""
    monkeypatch.setenv("TOOLFLOW_TEST_SECRET", "hunter2")
    result = await _call(tmp_path, ["echo", "{{ env.TOOLFLOW_TEST_SECRET }}"])
    assert result["success"] is False
    assert result["error"].startswith(
        "command argv[1]: template error: environment variable 'TOOLFLOW_TEST_SECRET' is not readable"
    )
    assert "${NAME}" in result["error"]
    assert "hunter2" not in result["error"]


async def test_undefined_variable_in_argv_is_a_failure(tmp_path: Path) -> None:
    """An argv item reading a variable the call lacks fails before anything runs."""
    result = await _call(tmp_path, ["echo", "{{ arg }}", "{{ nope }}"], arg="a")
    assert result == {"success": False, "error": "command argv[2]: template variable error: 'nope' is undefined"}


async def test_sandbox_applies_to_argv(tmp_path: Path) -> None:
    """Argv items render in the same sandbox as templates."""
    result = await _call(tmp_path, ["echo", "{{ arg.__class__.__mro__ }}"], arg="a")
    assert result["success"] is False
    assert "unsafe" in result["error"]


async def test_missing_program_is_a_failure(tmp_path: Path) -> None:
    """A program that does not exist is a failure result, not an exception."""
    result = await _call(tmp_path, ["toolflow-no-such-program-{{ arg }}", "x"], arg="1")
    assert result == {"success": False, "error": "command not found: 'toolflow-no-such-program-1'"}


async def test_program_that_is_not_executable_is_a_failure(tmp_path: Path) -> None:
    """A file without execute permission is reported as not executable."""
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    script.chmod(0o644)
    result = await _call(tmp_path, [str(script)])
    assert result == {"success": False, "error": f"command not executable: {str(script)!r}"}


async def test_missing_working_directory_is_a_failure(tmp_path: Path) -> None:
    """A working directory that does not exist is named in the failure."""
    missing = tmp_path / "nowhere"
    result = await _call(tmp_path, {"argv": [PY, "-c", "pass"], "cwd": str(missing)})
    assert result == {"success": False, "error": f"working directory not found: {str(missing)!r}"}


async def test_nul_character_in_an_argument_is_a_failure(tmp_path: Path) -> None:
    """An argument that the operating system cannot pass is a failure result."""
    result = await _call(tmp_path, ["echo", "{{ arg }}"], arg="a\x00b")
    assert result["success"] is False
    assert result["error"].startswith("cannot run command 'echo': ")


def test_empty_argv_does_not_build(tmp_path: Path) -> None:
    """An empty argv is refused when the tool is built."""
    with pytest.raises(TemplateError, match=r"^the command has an empty argv$"):
        _kind().build(_tool(tmp_path, {"argv": []}))


def test_argv_item_that_does_not_compile_does_not_build(tmp_path: Path) -> None:
    """A syntax error in an argv item fails the build and names the item."""
    with pytest.raises(TemplateError, match=r"^command argv\[1\] does not compile: "):
        _kind().build(_tool(tmp_path, ["echo", "{{ arg }"]))


async def test_run_argv_refuses_an_empty_argv() -> None:
    """The helper itself never raises on an empty argv."""
    assert await run_argv([]) == {"success": False, "error": "the command has an empty argv"}


async def test_cancellation_kills_the_whole_process_group(tmp_path: Path) -> None:
    """Cancelling a call kills the program and the grandchild it spawned, and reaps the program."""
    pids = tmp_path / "pids"
    script = f"sleep 100 & echo $! > {pids}; echo $$ >> {pids}; wait"
    run = _build(tmp_path, ["sh", "-c", script])
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            grandchild, child = await _wait_for_pids(pids, 2)
            assert _alive(grandchild)
            assert _alive(child)
            nursery.cancel_scope.cancel()
    assert not _alive(child)
    assert _reaped(child)
    await _wait_until_gone(grandchild)
    assert not _alive(grandchild)
    assert _group_members(child) == []


async def test_timeout_cancels_promptly(tmp_path: Path) -> None:
    """A deadline around a long-running command ends the call at the deadline, not when the program ends."""
    run = _build(tmp_path, ["sleep", "100"])
    start = time.monotonic()
    with trio.fail_after(20), trio.move_on_after(0.3) as scope:
        await run()
    assert scope.cancelled_caught
    assert time.monotonic() - start < 5


async def test_background_process_left_behind_is_killed_on_exit(tmp_path: Path) -> None:
    """A program that exits leaving a process in its group (holding stdout open) returns at once and leaves nothing."""
    start = time.monotonic()
    result = await _call(tmp_path, ["sh", "-c", "sleep 100 & echo $!"])
    assert time.monotonic() - start < 5
    assert result["success"] is True
    leftover = int(result["data"]["stdout"])
    await _wait_until_gone(leftover)
    assert not _alive(leftover)


async def test_many_concurrent_calls(tmp_path: Path) -> None:
    """Concurrent calls of one tool each get their own output."""
    run = _build(tmp_path, [PY, "-c", PRINT_ARGV, "{{ n }}"])
    results: dict[int, object] = {}

    async def one(n: int) -> None:
        results[n] = await run(n=n)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(one, n)
    for n in range(8):
        result = results[n]
        assert isinstance(result, dict)
        assert json.loads(result["data"]["stdout"]) == [str(n)]


def _json_registry(tmp_path: Path, tools: dict[str, Any]) -> toolflow.Registry:
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"toolflow": 1, "tools": tools}, sort_keys=False), encoding="utf-8")
    return toolflow.load_registry([path], plugins=load_plugins(entry_points=False))


def _json_tool(code: str, **options: Any) -> dict[str, Any]:
    command = {"argv": [PY, "-c", code, "{{ arg }}"], "output": "json", **options}
    return {"description": "A command tool", "parameters": PARAMETERS, "command": command}


async def _json_call(tmp_path: Path, code: str, **options: Any) -> toolflow.ToolResult:
    registry = _json_registry(tmp_path, {"t": _json_tool(code, **options)})
    with trio.fail_after(30):
        async with toolflow.open_engine(registry) as engine:
            return await engine.call("t", {"arg": "x"})


async def test_json_output_is_parsed_into_the_data(tmp_path: Path) -> None:
    """With `output: json` the program's stdout, parsed, is the result's data; stderr is dropped."""
    code = "import json, sys; sys.stderr.write('log line'); print(json.dumps({'arg': sys.argv[1], 'n': [1, 2]}))"
    result = await _json_call(tmp_path, code)
    assert result.success is True
    assert result.data == {"arg": "x", "n": [1, 2]}
    assert result.warnings == ()


async def test_json_output_may_be_a_result_dict(tmp_path: Path) -> None:
    """A parsed object with a `success` key is a result dict, so the program can report a failure itself."""
    result = await _json_call(tmp_path, 'print(\'{"success": false, "error": "no such order"}\')')
    assert result.success is False
    assert result.error == "Error: no such order"


async def test_json_output_that_is_not_json_is_a_clear_failure(tmp_path: Path) -> None:
    """Stdout that does not parse fails the call, naming the problem with a preview; the text stays in the data."""
    result = await _call(tmp_path, {"argv": [PY, "-c", "print('not json')"], "output": "json"})
    assert result == {
        "success": False,
        "data": {"exit_code": 0, "stdout": "not json\n", "stderr": "", "truncated": False},
        "error": "command output is not valid JSON (Expecting value: line 1 column 1 (char 0)): 'not json\\n'",
    }


async def test_json_output_previews_only_the_start_of_long_text(tmp_path: Path) -> None:
    """The error quotes the first 60 characters of stdout, not all of it."""
    result = await _call(tmp_path, {"argv": [PY, "-c", "print('x' * 500)"], "output": "json"})
    assert result["error"].endswith(": '" + "x" * 60 + "...'")


async def test_json_output_refuses_nan(tmp_path: Path) -> None:
    """NaN and Infinity are not JSON, as for templates."""
    result = await _call(tmp_path, {"argv": [PY, "-c", "print('[NaN]')"], "output": "json"})
    assert result["success"] is False
    assert "NaN is not JSON" in result["error"]


async def test_json_output_cut_at_max_output_is_a_failure(tmp_path: Path) -> None:
    """Stdout longer than max_output is not parsed: its prefix could be JSON, and wrong."""
    result = await _call(tmp_path, {"argv": [PY, "-c", "print(123456789)"], "output": "json", "max_output": 4})
    assert result["success"] is False
    assert result["error"] == "command output is not read as JSON: stdout was longer than max_output (4 bytes)"
    assert result["data"]["stdout"] == "1234"


async def test_json_output_nested_too_deeply_is_a_failure(tmp_path: Path) -> None:
    """A document deeper than the parser's recursion limit fails the call; nothing is raised."""
    code = "print('[' * 100000 + ']' * 100000)"
    result = await _call(tmp_path, {"argv": [PY, "-c", code], "output": "json", "max_output": 300000})
    assert result["success"] is False
    assert result["error"] == "command output nests too deeply to be read as JSON"


async def test_nonzero_exit_with_json_output_is_the_text_failure(tmp_path: Path) -> None:
    """A non-zero exit fails as with `output: text`: stdout is kept as text, not parsed."""
    code = "import sys; print('{\"partial\": 1}'); sys.stderr.write('boom'); sys.exit(2)"
    result = await _call(tmp_path, {"argv": [PY, "-c", code], "output": "json"})
    assert result == {
        "success": False,
        "data": {"exit_code": 2, "stdout": '{"partial": 1}\n', "stderr": "boom", "truncated": False},
        "error": "command exited with status 2: boom",
    }


async def test_json_output_passes_structured_data_to_the_next_pipeline_step(tmp_path: Path) -> None:
    """A command step with `output: json` gives the next step fields to read, through the engine."""
    order = _json_tool("import json, sys; print(json.dumps({'customer': 'c-' + sys.argv[1], 'items': [1, 2]}))")
    echo = _json_tool("import json, sys; print(json.dumps(sys.argv[1]))")
    pipeline = {
        "description": "An order's customer, twice.",
        "parameters": PARAMETERS,
        "pipeline": {
            "steps": {
                "order": {"tool": "order", "with": {"arg": "{{ arg }}"}},
                "customer": {"tool": "echo", "with": {"arg": "{{ steps.order.customer }}"}},
            },
            "result": {"customer": "{{ steps.customer }}", "count": "{{ steps.order['items'] | length }}"},
        },
    }
    registry = _json_registry(tmp_path, {"order": order, "echo": echo, "report": pipeline})
    with trio.fail_after(30):
        async with toolflow.open_engine(registry) as engine:
            result = await engine.call("report", {"arg": "42"})
    assert result.success is True, result.error
    assert result.data == {"customer": "c-42", "count": 2}


async def test_success_codes_say_which_exit_statuses_succeed(tmp_path: Path) -> None:
    """`success_codes: [0, 1]`: grep finding nothing (exit 1) is an answer; exit 2 is still a failure."""
    (tmp_path / "words.txt").write_text("apple\nbanana\n", encoding="utf-8")
    words = str(tmp_path / "words.txt")
    found = await _call(tmp_path, {"argv": ["grep", "apple", words], "success_codes": [0, 1]})
    nothing = await _call(tmp_path, {"argv": ["grep", "cherry", words], "success_codes": [0, 1]})
    broken = await _call(tmp_path, {"argv": ["grep", "x", str(tmp_path / "missing")], "success_codes": [0, 1]})
    plain = await _call(tmp_path, {"argv": ["grep", "cherry", words]})
    assert (found["success"], found["data"]["stdout"]) == (True, "apple\n")
    assert (nothing["success"], nothing["data"]["exit_code"], nothing["data"]["stdout"]) == (True, 1, "")
    assert (broken["success"], broken["data"]["exit_code"]) == (False, 2)
    assert (plain["success"], plain["error"]) == (False, "command exited with status 1")


async def test_success_codes_and_json_output(tmp_path: Path) -> None:
    """With `output: json`, stdout is parsed for every exit status the spec calls a success."""
    script = "import json, sys; print(json.dumps({'matches': []})); sys.exit(1)"
    result = await _call(tmp_path, {"argv": [sys.executable, "-c", script], "output": "json", "success_codes": [0, 1]})
    assert result == {"matches": []}
