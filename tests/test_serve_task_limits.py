"""`toolflow serve --task-max-running/--task-max-kept/--task-ttl/--task-max-ttl`: MCP task limits from the command line.

Real `toolflow serve` processes, over stdio and over HTTP on 127.0.0.1, spoken to by the `mcp`
SDK's client under 2025-11-25 (tasks in the core protocol, where a client may ask for a `ttl`):
the limits the options set are the ones a client meets. The usage errors run in process through
`toolflow._cli.run`.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
from _mcp_project import HTTPServer, serve_argv, server_environment
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_serve_tasks import cancel, create_legacy, get_legacy

from toolflow._cli import _parser, _task_limits, run
from toolflow._serve_tasks import TaskLimits

pytestmark = pytest.mark.filterwarnings(
    r"ignore:Async generator '(httpx2|httpcore2)\..*' was garbage collected:ResourceWarning"
)

SPEC = """\
toolflow: 1
tools:
  forever:
    description: Runs until it is cancelled.
    category: async_required
    timeout: 1h
    retry: false
    command: [sleep, "3600"]
policy:
  categories:
    async_required: {background: true}
"""

LIMITS = ("--task-max-running", "1", "--task-max-kept", "3", "--task-ttl", "2m", "--task-max-ttl", "300")
"""One task running per client; kept 2 minutes unless the client asks, 5 minutes at most."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[tool.toolflow]\nspecs = ["specs"]\n', encoding="utf-8")
    return tmp_path


@contextlib.asynccontextmanager
async def over_stdio(root: Path, *args: str) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 session with `toolflow serve --project ROOT ARGS` over stdio."""
    argv = serve_argv("--project", str(root), *args)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_environment())
    with (root / "stdio.log").open("w", encoding="utf-8") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@contextlib.asynccontextmanager
async def over_http(root: Path, *args: str) -> AsyncIterator[ClientSession]:
    """A 2025-11-25 session with `toolflow serve --transport http --port 0 ARGS`, run in ROOT."""
    server = await trio.to_thread.run_sync(lambda: HTTPServer(root, *args))
    try:
        async with Client(streamable_http_client(server.url), mode="legacy") as client:
            yield client.session
    finally:
        await trio.to_thread.run_sync(server.close)


async def limits_met(session: ClientSession) -> dict[str, object]:
    """Under LIMITS: a second task refused while the first runs; the ttls `tasks/get` reports."""
    first = await create_legacy(session, "forever", {})
    polled = await get_legacy(session, first.task_id)
    with pytest.raises(MCPError) as refused:
        await create_legacy(session, "forever", {})
    await cancel(session, first.task_id)
    asked_long = await create_legacy(session, "forever", {}, ttl=3_600_000)  # the first no longer runs
    polled_long = await get_legacy(session, asked_long.task_id)
    await cancel(session, asked_long.task_id)
    return {
        "default ttl": (first.ttl, polled.status, polled.ttl),
        "refused": (refused.value.error.code, refused.value.error.message),
        "cut ttl": (asked_long.ttl, polled_long.ttl),
    }


EXPECTED = {
    "default ttl": (120_000, "working", 120_000),
    "refused": (
        -32600,
        "too many tasks running: at most 1 per client; wait for one to finish or cancel one (tasks/cancel)",
    ),
    "cut ttl": (300_000, 300_000),
}


async def test_stdio_process_applies_the_task_limits(project: Path) -> None:
    """Over stdio: a second task while the first runs is refused (-32600, saying why); the ttls are the options'."""
    with trio.fail_after(60):
        async with over_stdio(project, *LIMITS) as session:
            met = await limits_met(session)
    assert met == EXPECTED


async def test_http_process_applies_the_task_limits(project: Path) -> None:
    """Over HTTP: the same limits, from the same options, in the same words."""
    with trio.fail_after(60):
        async with over_http(project, *LIMITS) as session:
            met = await limits_met(session)
    assert met == EXPECTED


async def test_without_the_options_the_defaults_hold(project: Path) -> None:
    """No option: TaskLimits' defaults, a 15-minute ttl and an asked ttl cut to 1 hour; two tasks may run."""
    default = TaskLimits()
    with trio.fail_after(60):
        async with over_stdio(project) as session:
            first = await create_legacy(session, "forever", {})
            second = await create_legacy(session, "forever", {}, ttl=10 * 3_600_000)
            for task in (first, second):
                await cancel(session, task.task_id)
    assert (first.ttl, second.ttl) == (round(default.ttl * 1000), round(default.max_ttl * 1000))
    assert default.running > 1


def serve_in_process(root: Path, *args: str) -> tuple[int, str]:
    """`toolflow serve ARGS` in process, in ROOT, for command lines that must not start; exit code and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(root):
        code = run(["serve", *args], stdout=out, stderr=err)
    return code, err.getvalue()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--task-max-running", "0"], "argument --task-max-running: expected a whole number of at least 1, got '0'"),
        (["--task-max-kept", "many"], "argument --task-max-kept: expected a whole number of at least 1, got 'many'"),
        (["--task-max-running", "-3"], "argument --task-max-running: expected a whole number of at least 1, got '-3'"),
        (
            ["--task-ttl", "soon"],
            "--task-ttl: expected a duration like '500ms', '30s', '5m' or a number of seconds, got 'soon'",
        ),
        (["--task-max-ttl", "0"], "--task-max-ttl: a duration must be positive, got '0'"),
        (  # with "=": alone, argparse takes -5m for an option
            ["--task-ttl=-5m"],
            "--task-ttl: expected a duration like '500ms', '30s', '5m' or a number of seconds, got '-5m'",
        ),
        (
            ["--task-max-ttl", "inf"],
            "--task-max-ttl: expected a duration like '500ms', '30s', '5m' or a number of seconds, got 'inf'",
        ),
        (["--task-max-running", "5", "--task-max-kept", "3"], "--task-max-running 5 is more than --task-max-kept 3"),
        (["--task-ttl", "2h", "--task-max-ttl", "90m"], "--task-ttl 2h is more than --task-max-ttl 90m"),
        (["--task-ttl", "7200", "--task-max-ttl", "3599"], "--task-ttl 7200 is more than --task-max-ttl 3599"),
    ],
)
def test_bad_task_limits_are_usage_errors(project: Path, args: list[str], said: str) -> None:
    """A limit that is not a positive number, or that contradicts another (or its default): exit 2, one line."""
    for transport in ("stdio", "http"):
        code, err = serve_in_process(project, "--transport", transport, "--port", "0", *args)
        assert (code, err) == (2, f"toolflow: error: serve: {said}\n")


@pytest.mark.parametrize(
    ("args", "limits"),
    [
        ([], TaskLimits()),
        (["--task-max-ttl", "5m"], TaskLimits(running=16, kept=100, ttl=300, max_ttl=300)),
        (["--task-ttl", "2h"], TaskLimits(running=16, kept=100, ttl=7200, max_ttl=7200)),
        (["--task-max-running", "200"], TaskLimits(running=200, kept=200, ttl=900, max_ttl=3600)),
        (["--task-max-kept", "10"], TaskLimits(running=10, kept=10, ttl=900, max_ttl=3600)),
        (["--task-ttl", "90", "--task-max-ttl", "600"], TaskLimits(running=16, kept=100, ttl=90, max_ttl=600)),
    ],
    ids=["defaults", "max-ttl-alone", "ttl-alone", "running-alone", "kept-alone", "seconds"],
)
def test_a_default_left_out_moves_to_fit_the_option_given(args: list[str], limits: TaskLimits) -> None:
    """An option alone never contradicts a default: the default moves to fit it; bare numbers are seconds."""
    assert _task_limits(_parser().parse_args(["serve", *args])) == limits


def test_the_help_names_the_defaults_of_task_limits(project: Path) -> None:
    """`toolflow serve --help` gives TaskLimits' own defaults (the parser cannot import them: the SDK is heavy)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["serve", "--help"], stdout=out, stderr=io.StringIO()) == 0
    text = " ".join(out.getvalue().split())
    default = TaskLimits()
    assert "MCP tasks: limits per client" in text
    assert f"one more is refused (default: {default.running};" in text
    assert f"the oldest finished one is dropped (default: {default.kept})" in text
    assert f"asks for no ttl (default: {default.ttl / 60:g}m;" in text
    assert f"a longer one is cut to it (default: {default.max_ttl / 3600:g}h)" in text
