"""Every model-facing error text starts with ``Error: `` (seed 003), through every door.

A corpus of failures of every kind (invalid arguments, an unknown tool, a tool that raises, times
out, reports its own failure or an unreadable result, a failing command and template, a pipeline
whose step fails, the gates: allowlist, ``depends_on``, approval, one dangerous call per turn,
malformed and oversized calls, a stop and a kill) is produced through the Python API
(:class:`toolflow.Engine`, :class:`toolflow.Agent`), ``toolflow run`` with a scripted session,
``toolflow call`` and ``toolflow serve`` (the ``mcp`` SDK's client), and each text is checked
as it arrives, not by reading the source. The same project shows that the result cap and the
argument-size cap are policy keys that every door obeys, and that the CLI options override them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml
from _cli_project import toolflow as toolflow_in_process
from mcp import Client, ClientSession, StdioServerParameters, stdio_client, types

import toolflow
from toolflow._loop import Agent
from toolflow._serve import ToolService, build_server, call_result
from toolflow.default_plugins._scripted import open_scripted

PLUGIN = '''\
"""The corpus's Python tools."""

import trio

import toolflow


def raises():
    raise ValueError("bad input shape")


def refuses(order_id="A"):
    return {"success": False, "error": f"no such order: {order_id}"}


def misreports():
    return {"success": "yes"}


async def hangs():
    await trio.sleep_forever()


def big(size=5000):
    return "x" * size


@toolflow.hookimpl
def toolflow_register_implementations(register):
    for function in (raises, refuses, misreports, hangs, big):
        register(f"corpus.{function.__name__}", function)
'''

SPECS = f"""\
toolflow: 1
policy:
  max_argument_bytes: 400
  max_result_chars: 300
  max_consecutive_errors: 50
  deny: [secret]
tools:
  lookup:
    description: Look up an order.
    parameters:
      type: object
      properties:
        order_id: {{type: string, description: The order.}}
      required: [order_id]
    template: "order {{{{ order_id }}}}"
  follow_up:
    description: Follow an order up; needs a lookup first.
    depends_on: [lookup]
    template: "followed up"
  undefined:
    description: A template that reads a variable nobody gives it.
    template: "{{{{ nobody.knows }}}}"
  exits:
    description: A command that fails.
    retry: false
    command: [{json.dumps(sys.executable)}, -c, "import sys; sys.stderr.write('disk full'); sys.exit(3)"]
  raises:
    description: Raises.
    retry: false
    implementation: corpus.raises
  refuses:
    description: Reports its own failure.
    parameters:
      type: object
      properties:
        order_id: {{type: string, description: The order.}}
    implementation: corpus.refuses
  misreports:
    description: Returns a result whose success is not a boolean.
    implementation: corpus.misreports
  hangs:
    description: Never finishes in time.
    timeout: 2s
    retry: false
    implementation: corpus.hangs
  wipe:
    description: Wipe the disk.
    approval: true
    template: wiped
  launch:
    description: Launch something.
    category: dangerous
    template: launched
  big:
    description: A long text.
    parameters:
      type: object
      properties:
        size: {{type: integer, description: How long.}}
    implementation: corpus.big
  secret:
    description: Kept from the model by the policy.
    template: hidden
  chain:
    description: A lookup, then a failing command.
    pipeline:
      steps:
        first: {{tool: lookup, with: {{order_id: A}}}}
        second: {{tool: exits, needs: [first]}}
"""

PREFIX = "Error: "
LONG = "y" * 500
"""An argument longer than the policy's max_argument_bytes (400) allows."""
TOO_LARGE = "Error: Arguments are too large - more than 400 bytes of JSON; send smaller arguments"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project: SPECS in specs/, the corpus plugin as a project plugin."""
    root = tmp_path_factory.mktemp("errors")
    (root / "specs").mkdir()
    (root / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (root / "corpus_tools.py").write_text(PLUGIN, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "errors"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["corpus_tools"]\n',
        encoding="utf-8",
    )
    return root


@pytest.fixture
def here(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project as the working directory, with no entry-point plugins but its own."""
    monkeypatch.chdir(project)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", "assistant,http")
    return project


def _check(errors: Iterable[str | None]) -> list[str]:
    """Each error starts with ``Error: `` once (no text in it starts another ``Error: Error: ``)."""
    texts = [error for error in errors if error is not None]
    for text in texts:
        assert text.startswith(PREFIX), text
        assert not text.startswith(PREFIX + PREFIX), text
    return texts


def _setup(project: Path) -> tuple[toolflow.Registry, toolflow.Plugins, toolflow.Policy]:
    plugins = toolflow.load_plugins(entry_points=False, project_plugins=["corpus_tools"], project_root=project)
    specs = toolflow.load_specs([project / "specs"], kinds=plugins.kind_schemas())
    assert specs.ok, [d.render() for d in specs.diagnostics]
    return toolflow.Registry.build(specs, plugins), plugins, toolflow.Policy.from_specs(specs)


# --- the Python API ------------------------------------------------------------------------------


async def test_engine_failures_of_every_kind_start_with_error(project: Path) -> None:
    """Calls and batches through the engine: every failure's error (and its text for the model) starts with Error: ."""
    registry, plugins, policy = _setup(project)
    exposed = [n for n in registry.names() if n != "secret"]
    with trio.fail_after(60):
        async with toolflow.open_engine(registry, plugins=plugins, policy=policy, allowlist=exposed) as engine:
            singles = {
                "invalid": await engine.call("lookup", {}),
                "unknown": await engine.call("lokup", {"order_id": "A"}),
                "blocked": await engine.call("secret", {}),
                "dependency": await engine.call("follow_up", {}),
                "raises": await engine.call("raises", {}),
                "refuses": await engine.call("refuses", {}),
                "misreports": await engine.call("misreports", {}),
                "command": await engine.call("exits", {}),
                "template": await engine.call("undefined", {}),
                "no_approver": await engine.call("wipe", {}),
                "pipeline": await engine.call("chain", {}),
                "oversized": await engine.call("lookup", {"order_id": LONG}),
            }
            engine.approve = lambda _call, _category: False
            singles["denied"] = await engine.call("wipe", {})
            engine.tick()
            batch = await engine.run_batch(
                [
                    {"name": "launch", "arguments": {}},
                    {"name": "launch", "arguments": {}},
                    {"name": "lookup", "arguments": "{oops"},
                    {"name": "lookup", "arguments": {"order_id": LONG}},
                ]
            )
    assert all(not result.success for result in singles.values())
    _check(result.error for result in singles.values())
    _check(json.loads(result.text_for_model(100_000))["error"] for result in singles.values())
    assert singles["raises"].error == "Error: tool 'raises' raised ValueError: bad input shape"
    assert singles["refuses"].error == "Error: no such order: A"
    assert singles["command"].error == "Error: command exited with status 3: disk full"
    assert (singles["pipeline"].error or "").startswith(
        "Error: step 'second' (exits) failed: command exited with status 3"
    )
    assert singles["dependency"].error == "Error: 'follow_up' cannot run yet - run 'lookup' successfully first"
    assert singles["oversized"].error == TOO_LARGE
    assert [result.success for result in batch] == [True, False, False, False]
    one, bad_json, too_large = _check(result.error for result in batch[1:])
    assert one == "Error: one dangerous action per turn - 'launch' was not run; call it again next turn"
    assert bad_json.startswith("Error: Invalid JSON arguments - ")
    assert too_large == TOO_LARGE


async def test_timeouts_stops_and_kills_start_with_error(project: Path, autojump_clock: Any) -> None:
    """A call that times out, one a stop keeps from running, and one a kill ends."""
    registry, plugins, policy = _setup(project)
    async with toolflow.open_engine(registry, plugins=plugins, policy=policy) as engine:
        timed_out = await engine.call("hangs", {})
        killed: list[toolflow.ToolResult] = []
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                killed.append(await engine.call("hangs", {}))

            nursery.start_soon(call)
            await trio.sleep(1)
            engine.kill()
        engine.request_stop()
        stopped = await engine.run_batch([{"name": "lookup", "arguments": {"order_id": "A"}}])
    assert timed_out.error == "Error: tool 'hangs' timed out after 2s"
    _check([timed_out.error, killed[0].error, *(result.error for result in stopped)])


async def test_agent_reads_its_caps_from_the_policy(project: Path, tmp_path: Path) -> None:
    """Without max_result_chars, the agent cuts results at the policy's cap and parses calls under its argument cap."""
    registry, plugins, policy = _setup(project)
    turns = [
        {"tool_calls": [{"name": "big", "arguments": {}}, {"name": "lookup", "arguments": {"order_id": LONG}}]},
        {"text": "done"},
    ]
    path = tmp_path / "session.yaml"
    path.write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    results = []
    for max_result_chars in (None, 1000):
        provider = open_scripted(str(path), record_requests=True)
        with trio.fail_after(30):
            async with toolflow.open_engine(registry, plugins=plugins) as engine:
                agent = Agent(engine, provider, policy=policy, max_result_chars=max_result_chars)
                result = await agent.run("go")
        results.append(result)
        big, oversized = provider.requests[1].messages[-2:]
        assert oversized["content"].startswith('{"success":false,"data":null,"error":"Error: Arguments are too large')
        if max_result_chars is None:
            assert len(big["content"]) == 300
        else:
            assert len(big["content"]) == 1000  # the argument wins over the policy
        assert big["content"].endswith("characters]")
    for result in results:
        _check(entry.result.error for turn in result.turns for entry in turn.entries)


# --- toolflow run, toolflow call ----------------------------------------------------------------


def _run(project: Path, turns: list[Any], *args: str) -> dict[str, Any]:
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    code, out, err = toolflow_in_process("run", "--model", "scripted:session.yaml", "--output-format", "json", *args)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def _results(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [call["result"] for turn in document["turns"] for call in turn["calls"]]


def test_run_with_a_scripted_session_answers_every_failure_with_error(here: Path) -> None:
    """`toolflow run`: failures of every kind the loop sees, each result's error starting with Error: ."""
    malformed = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{oops"}}],
    }
    turns = [
        {
            "tool_calls": [
                {"name": "lookup", "arguments": {}},
                {"name": "lokup", "arguments": {}},
                {"name": "secret", "arguments": {}},
                {"name": "follow_up", "arguments": {}},
                {"name": "raises", "arguments": {}},
                {"name": "refuses", "arguments": {}},
                {"name": "misreports", "arguments": {}},
                {"name": "exits", "arguments": {}},
                {"name": "undefined", "arguments": {}},
                {"name": "chain", "arguments": {}},
                {"name": "lookup", "arguments": {"order_id": LONG}},
            ]
        },
        {"tool_calls": [{"name": "launch", "arguments": {}}, {"name": "launch", "arguments": {}}]},
        {"tool_calls": [{"name": "wipe", "arguments": {}}]},
        {"message": malformed},
        {"text": "done"},
    ]
    results = _results(_run(here, turns, "--approve", "no"))
    failures = [result for result in results if not result["success"]]
    assert len(failures) == 14
    texts = _check(result["error"] for result in failures)
    assert TOO_LARGE in texts
    assert "Error: 'wipe' was not approved, so it did not run; do not retry it unchanged" in texts


def test_run_options_override_the_policy_caps(here: Path) -> None:
    """--max-argument-bytes lets the long call through; --max-result-chars changes where results are cut."""
    turns = [{"tool_calls": [{"name": "lookup", "arguments": {"order_id": LONG}}]}, {"text": "done"}]
    assert _results(_run(here, turns))[0]["success"] is False
    assert _results(_run(here, turns, "--max-argument-bytes", "4096"))[0]["data"] == f"order {LONG}"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--max-result-chars", "0"], "--max-result-chars: expected a whole number of at least 1, got '0'"),
        (["--max-argument-bytes", "many"], "--max-argument-bytes: expected a whole number of at least 1, got 'many'"),
    ],
)
def test_bad_cap_values_are_usage_errors(here: Path, args: list[str], said: str) -> None:
    """A cap that is not a positive whole number: exit 2, saying which option and why, for run, call and serve."""
    for command in (["run", "--model", "scripted:session.yaml"], ["serve"], ["call", "lookup"]):
        if command[0] == "call" and args[0] == "--max-result-chars":
            continue  # call prints the whole result: it has no result cap
        code, _, err = toolflow_in_process(*command, *args)
        assert code == 2
        assert said in err


def test_call_refuses_arguments_over_the_cap(here: Path) -> None:
    """`toolflow call`: over the policy's cap the tool never runs (exit 1, an Error: result); the option raises it."""
    arguments = json.dumps({"order_id": LONG})
    code, out, _ = toolflow_in_process("call", "lookup", arguments)
    assert code == 1
    assert json.loads(out)["error"] == (TOO_LARGE)
    code, out, _ = toolflow_in_process("call", "lookup", arguments, "--max-argument-bytes", "4096")
    assert (code, json.loads(out)["data"]) == (0, f"order {LONG}")
    code, out, _ = toolflow_in_process("call", "--raw", json.dumps({"name": "lookup", "arguments": {"order_id": LONG}}))
    assert code == 1
    assert json.loads(out)["error"].startswith("Error: Arguments are too large")


# --- toolflow serve -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _served(project: Path) -> AsyncIterator[Client]:
    registry, plugins, policy = _setup(project)
    service = ToolService.under_policy(registry, policy=policy, plugins=plugins)
    async with service.open_engine() as engine:
        service.shared = engine
        async with Client(build_server(service)) as client:
            yield client


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_serve_answers_every_failure_with_error(project: Path) -> None:
    """`toolflow serve` (the SDK's client): every isError text starts with Error: ; the caps are the policy's."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("lookup", {}),
        ("lokup", {}),
        ("secret", {}),
        ("follow_up", {}),
        ("raises", {}),
        ("refuses", {}),
        ("misreports", {}),
        ("exits", {}),
        ("undefined", {}),
        ("wipe", {}),
        ("chain", {}),
        ("lookup", {"order_id": LONG}),
    ]
    with trio.fail_after(60):
        async with _served(project) as client:
            failures = [await client.call_tool(name, arguments) for name, arguments in calls]
            big = await client.call_tool("big", {})
    assert all(result.is_error for result in failures)
    texts = _check(_text(result) for result in failures)
    assert texts[-1] == TOO_LARGE
    assert not big.is_error
    assert len(_text(big)) == 300
    assert _text(big).endswith("characters]")


async def test_serve_options_override_the_policy_caps(project: Path) -> None:
    """`toolflow serve --max-argument-bytes --max-result-chars` over stdio: the long call runs, results are cut later."""
    argv = [sys.executable, "-m", "toolflow", "serve", "--max-argument-bytes", "4096", "--max-result-chars", "1000"]
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], cwd=project, env={**os.environ, "TOOLFLOW_DISABLE_PLUGINS": "assistant,http"}
    )
    with trio.fail_after(60), (project / "serve.log").open("a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            long = await session.call_tool("lookup", {"order_id": LONG})
            big = await session.call_tool("big", {})
    assert (long.is_error, _text(long)) == (False, f"order {LONG}")
    assert len(_text(big)) == 1000


def test_serve_text_cap_is_what_call_result_is_given() -> None:
    """call_result cuts a failure's text at max_chars too, keeping the Error: prefix at its start."""
    result = call_result(toolflow.ToolResult.failure("x" * 500), max_chars=100)
    assert len(_text(result)) == 100
    assert _text(result).startswith("Error: xxx")
