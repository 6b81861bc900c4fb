"""Parameters bound to the caller's context (issue 21 section 4), through every door.

The exports leave them out; the engine fills them from the caller's context before validation,
refuses a call whose arguments set one, and refuses a call whose required bound parameter has no
value. Tested through the Python API (Engine, Agent with a scripted session), pipelines,
``toolflow call`` in a subprocess, ``toolflow run`` with a scripted session, and ``toolflow serve``
over HTTP with a bearer token whose principal has claims.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import yaml
from _cli_project import make_project, toolflow
from _mcp_project import HTTPServer
from _mcp_wire import answers, call, open_session

import toolflow as tf
from toolflow._context import CallContext, current_context, providing_context
from toolflow._executor import open_engine
from toolflow._export import export_tools
from toolflow._history import get_format
from toolflow._loop import Agent
from toolflow.default_plugins._scripted import open_scripted

SPEC = """\
toolflow: 1
tools:
  my_orders:
    description: The user's orders.
    context: {user_id: user.id, channel: channel.name}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Whose orders}
        channel: {type: string, description: Where the user asks}
        status: {type: string, description: Which orders}
      required: [user_id, status]
    template: "orders of {{ user_id }} ({{ status }}){% if channel is defined %} in {{ channel }}{% endif %}"
  open_orders:
    description: The user's open orders.
    pipeline:
      steps:
        orders:
          tool: my_orders
          with: {status: open}
  whoami:
    description: Who is asking.
    implementation: t.whoami
  greeting:
    description: Greet the user (cached for the session).
    cache: {scope: session}
    context: {name: user.name}
    parameters:
      type: object
      properties:
        name: {type: string, description: Whom}
      required: [name]
    template: "Hello, {{ name }}!"
"""

USER = {"user": {"id": "u1", "name": "Ada"}, "channel": {"name": "#help"}}

SET_BY_APPLICATION = (
    "Error: my_orders: the parameter 'user_id' is set by the application, not by you; call my_orders again without it."
)
NO_VALUE = (
    "Error: my_orders cannot be called here: its parameter 'user_id' comes from the application's context "
    "('user.id'), and the caller gave no value there."
)


class Tools:
    """Binds ``t.whoami``, which reads the whole context from ``ctx.context``."""

    @tf.hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        def whoami(ctx: CallContext) -> dict[str, Any]:  # sync: runs in a worker thread
            return dict(ctx.context)

        register("t.whoami", whoami)


@pytest.fixture
def setup(tmp_path: Path) -> tuple[tf.Registry, tf.Plugins]:
    """The registry of SPEC and its plugins."""
    spec = tmp_path / "tools.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    plugins = tf.load_plugins(entry_points=False)
    plugins.register(Tools(), "bound-tools")
    return tf.load_registry([spec], plugins=plugins), plugins


# --- the engine (Python API) ---------------------------------------------------------------------


async def test_engine_fills_bound_parameters_from_the_context(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """Every bound parameter with a value in the context is filled; the model's arguments give the rest."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context(USER):
            result = await engine.call("my_orders", {"status": "open"})
    assert result.success, result.error
    assert result.data == "orders of u1 (open) in #help"


async def test_arguments_never_override_the_context(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """A call that sets a bound parameter is refused, naming it, and never runs with its value."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context(USER):
            result = await engine.call("my_orders", {"status": "open", "user_id": "admin"})
    assert not result.success
    assert result.error == SET_BY_APPLICATION


async def test_required_bound_parameter_without_a_value_refuses_the_call(
    setup: tuple[tf.Registry, tf.Plugins],
) -> None:
    """No context at all, or one without the path: the call is refused with a clear error; an optional one is left out."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        bare = await engine.call("my_orders", {"status": "open"})
        with providing_context({"user": {"id": None}}):
            unset = await engine.call("my_orders", {"status": "open"})
        with providing_context({"user": {"id": "u2"}}):
            no_channel = await engine.call("my_orders", {"status": "all"})
    assert (bare.success, bare.error) == (False, NO_VALUE)
    assert (unset.success, unset.error) == (False, NO_VALUE)
    assert (no_channel.success, no_channel.data) == (True, "orders of u2 (all)")


async def test_bound_value_is_validated_like_an_argument(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """A context value of the wrong type fails the tool's schema, as a model's argument would."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context({"user": {"id": ["not", "a", "string"]}}):
            result = await engine.call("my_orders", {"status": "open"})
    assert not result.success
    assert "user_id" in (result.error or "")


async def test_pipeline_steps_get_the_callers_context(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """A pipeline's step is filled from the same context as the pipeline's own call."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context(USER):
            result = await engine.call("open_orders", {})
        refused = await engine.call("open_orders", {})
    assert result.success, result.error
    assert result.data == {"orders": "orders of u1 (open) in #help"}
    assert not refused.success


async def test_concurrent_callers_of_one_engine_keep_their_contexts(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """Two callers at once on one engine (as serve's requests) each get their own context, and their own cache entry."""
    registry, plugins = setup
    results: dict[str, list[Any]] = {"Ada": [], "Bob": []}
    async with open_engine(registry, plugins=plugins) as engine:

        async def caller(name: str) -> None:
            with providing_context({"user": {"name": name}}):
                for _ in range(2):
                    results[name].append(await engine.call("greeting", {}))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller, "Ada")
                nursery.start_soon(caller, "Bob")
    for name, answers_ in results.items():
        assert [r.data for r in answers_] == [f"Hello, {name}!"] * 2
        assert [r.extra.get("cached", False) for r in answers_] == [False, True]


async def test_implementation_reads_the_whole_context(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """An implementation that declares ``ctx`` reads the caller's context as ``ctx.context`` (empty without one)."""
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context(USER):
            given = await engine.call("whoami", {})
        none = await engine.call("whoami", {})
    assert given.data == USER
    assert none.data == {}


def test_providing_context_refuses_what_is_not_a_mapping() -> None:
    """The context is a JSON object: anything else is a TypeError naming its type; None is the empty context."""
    with pytest.raises(TypeError, match=r"must be a mapping .* got 'list'"), providing_context([1]):  # type: ignore[arg-type]
        pass
    with providing_context(None):
        assert current_context() == {}


# --- exports -------------------------------------------------------------------------------------


def test_every_export_leaves_bound_parameters_out(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """OpenAI, Anthropic, Gemini and MCP show neither ``user_id`` nor ``channel``, in properties or required."""
    registry, _ = setup
    spec = registry.get("my_orders").spec
    openai, anthropic, gemini, mcp = (export_tools([spec], fmt)[0] for fmt in ("openai", "anthropic", "gemini", "mcp"))
    for schema in (
        openai["function"]["parameters"],
        anthropic["input_schema"],
        gemini["parameters"],
        mcp["inputSchema"],
    ):
        assert list(schema["properties"]) == ["status"]
        assert schema["required"] == ["status"]
    assert spec.parameters["required"] == ["user_id", "status"]  # the spec itself is untouched


async def test_text_and_fallback_formats_do_not_describe_bound_parameters(
    setup: tuple[tf.Registry, tf.Plugins],
) -> None:
    """The text protocols' system prompts describe the tool without its bound parameters."""
    registry, _ = setup
    spec = registry.get("my_orders").spec
    for name in ("text", "fallback"):
        prompt = await get_format(name).system_prompt("", [spec])
        assert "status" in prompt
        assert "user_id" not in prompt
        assert "channel" not in prompt


# --- the agent loop ------------------------------------------------------------------------------


async def test_agent_passes_its_context_and_the_model_never_sees_it(
    setup: tuple[tf.Registry, tf.Plugins], tmp_path: Path
) -> None:
    """``Agent(context=...)`` fills the bound parameters; the model's attempt to set one is refused."""
    registry, plugins = setup
    turns = [
        {"tool_calls": [{"name": "my_orders", "arguments": {"status": "open"}}]},
        {"tool_calls": [{"name": "my_orders", "arguments": {"status": "open", "user_id": "admin"}}]},
        {"text": "done"},
    ]
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"turns": turns}), encoding="utf-8")
    provider = open_scripted(str(tmp_path / "session.yaml"), record_requests=True)
    with trio.fail_after(30):
        async with open_engine(registry, plugins=plugins) as engine:
            agent = Agent(engine, provider, context=USER)
            result = await agent.run("my orders?")
    first, second = (turn.entries[0].result for turn in result.turns[:2])
    assert (first.success, first.data) == (True, "orders of u1 (open) in #help")
    assert (second.success, second.error) == (False, SET_BY_APPLICATION)
    offered = {tool["function"]["name"]: tool["function"]["parameters"] for tool in provider.requests[0].tools}
    assert list(offered["my_orders"]["properties"]) == ["status"]


async def test_agent_refuses_a_context_that_is_not_a_mapping(
    setup: tuple[tf.Registry, tf.Plugins], tmp_path: Path
) -> None:
    """``Agent(context=...)`` takes a mapping or None."""
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"turns": [{"text": "hi"}]}), encoding="utf-8")
    provider = open_scripted(str(tmp_path / "session.yaml"))
    registry, plugins = setup
    async with open_engine(registry, plugins=plugins) as engine:
        with pytest.raises(TypeError, match="Agent: context must be a mapping"):
            Agent(engine, provider, context="user=u1")  # type: ignore[arg-type]


# --- the command line ----------------------------------------------------------------------------

CLI_SPEC = SPEC.replace("  whoami:\n    description: Who is asking.\n    implementation: t.whoami\n", "")


def test_toolflow_call_takes_the_context_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow call --context JSON` in a real process fills the bound parameters; arguments cannot set them."""
    project = make_project(tmp_path, monkeypatch, CLI_SPEC)
    argv = [sys.executable, "-m", "toolflow", "call", "my_orders"]
    context = ["--context", json.dumps(USER)]
    filled = subprocess.run(
        [*argv, '{"status": "open"}', *context], cwd=project, capture_output=True, text=True, timeout=60, check=False
    )
    refused = subprocess.run(
        [*argv, '{"status": "open", "user_id": "admin"}', *context],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    missing = subprocess.run(
        [*argv, '{"status": "open"}'], cwd=project, capture_output=True, text=True, timeout=60, check=False
    )
    assert (filled.returncode, json.loads(filled.stdout)["data"]) == (0, "orders of u1 (open) in #help"), filled.stderr
    assert (refused.returncode, json.loads(refused.stdout)["error"]) == (1, SET_BY_APPLICATION)
    assert (missing.returncode, json.loads(missing.stdout)["error"]) == (1, NO_VALUE)


@pytest.mark.parametrize(("value", "why"), [("{user", "not valid JSON"), ("[1, 2]", "expected a JSON object")])
def test_bad_context_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, why: str) -> None:
    """`--context` that is not a JSON object: exit 2, naming the option, for `call` and `run`."""
    make_project(tmp_path, monkeypatch, CLI_SPEC)
    for argv in (["call", "my_orders", "{}"], ["run", "--model", "scripted:x.yaml", "--prompt", "go"]):
        code, out, err = toolflow(*argv, "--context", value)
        assert (code, out) == (2, "")
        assert "--context" in err
        assert why in err


def test_toolflow_run_takes_the_context_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow run --context JSON` with a scripted session: the model's call is filled from the context."""
    project = make_project(tmp_path, monkeypatch, CLI_SPEC)
    turns = [{"tool_calls": [{"name": "my_orders", "arguments": {"status": "open"}}]}, {"text": "done"}]
    (project / "session.yaml").write_text(yaml.safe_dump({"prompt": "go", "turns": turns}), encoding="utf-8")
    code, out, err = toolflow(
        "run", "--model", "scripted:session.yaml", "--context", json.dumps(USER), "--output-format", "json"
    )
    assert (code, err) == (0, "")
    [call_record] = json.loads(out)["turns"][0]["calls"]
    assert call_record["result"]["data"] == "orders of u1 (open) in #help"


# --- toolflow serve ------------------------------------------------------------------------------

SERVE_SPEC = """\
toolflow: 1
tools:
  team_report:
    description: The caller's team report.
    context: {who: principal.id, team: principal.claims.team}
    parameters:
      type: object
      properties:
        who: {type: string, description: The caller}
        team: {type: string, description: The caller's team}
        period: {type: string, description: Which period}
      required: [who, team, period]
    template: "{{ team }} report for {{ who }} ({{ period }})"
"""

TOKEN = "tf-alice-0123456789abcdef"
OTHER = "tf-ci-bot-fedcba9876543210"
TOKENS = f"""\
[principals.alice]
token = "{TOKEN}"
claims = {{team = "games", level = 3}}

[principals.ci-bot]
token = "{OTHER}"
"""


async def test_serve_binds_parameters_to_the_authenticated_principal(tmp_path: Path) -> None:
    """Over HTTP, the bearer token's principal (id and claims) fills the bound parameters; tools/list hides them."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SERVE_SPEC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "bound"\n', encoding="utf-8")
    (tmp_path / "tokens.toml").write_text(TOKENS, encoding="utf-8")
    (tmp_path / "tokens.toml").chmod(0o600)
    server = await trio.to_thread.run_sync(lambda: HTTPServer(tmp_path, "--auth-tokens", "tokens.toml"))
    try:
        with trio.fail_after(60):
            async with httpx.AsyncClient() as client:
                alice = await open_session(client, server.url, headers={"Authorization": f"Bearer {TOKEN}"})
                listed = await client.post(
                    server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=alice
                )
                report = await client.post(server.url, json=call(2, "team_report", {"period": "Q3"}), headers=alice)
                forged = await client.post(
                    server.url, json=call(3, "team_report", {"period": "Q3", "who": "bob"}), headers=alice
                )
                bot = await open_session(client, server.url, headers={"Authorization": f"Bearer {OTHER}"})
                no_team = await client.post(server.url, json=call(4, "team_report", {"period": "Q3"}), headers=bot)
    finally:
        await trio.to_thread.run_sync(server.close)
    [tool] = answers(listed)[0]["result"]["tools"]
    assert list(tool["inputSchema"]["properties"]) == ["period"]
    assert tool["inputSchema"]["required"] == ["period"]
    assert answers(report)[0]["result"]["content"][0]["text"] == "games report for alice (Q3)"
    forged_result = answers(forged)[0]["result"]
    assert forged_result["isError"] is True
    assert "'who' is set by the application, not by you" in forged_result["content"][0]["text"]
    refused = answers(no_team)[0]["result"]
    assert refused["isError"] is True
    assert "'team' comes from the application's context ('principal.claims.team')" in refused["content"][0]["text"]


# --- toolflow_validate_arguments -----------------------------------------------------------------


class Checks:
    """A plugin whose ``toolflow_validate_arguments`` refuses closed orders and sees the filled context."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    @tf.hookimpl
    def toolflow_validate_arguments(self, call: tf.ToolCall, arguments: Any) -> Any:
        self.seen.append((call.name, dict(arguments)))
        if arguments.get("status") == "closed":
            return {"status": "closed orders are archived; ask for 'open' or 'all'"}
        if arguments.get("status") == "boom":
            msg = "the check broke"
            raise RuntimeError(msg)
        return None


async def test_validation_hook_runs_after_the_schema_and_speaks_the_validators_format(
    setup: tuple[tf.Registry, tf.Plugins],
) -> None:
    """The hook sees the validated, filled arguments; its errors fail the call in the validator's format."""
    registry, plugins = setup
    checks = Checks()
    plugins.register(checks, "checks")
    async with open_engine(registry, plugins=plugins) as engine:
        with providing_context(USER):
            ok = await engine.call("my_orders", {"status": "open"})
            refused = await engine.call("my_orders", {"status": "closed"})
            invalid = await engine.call("my_orders", {"status": 5, "extra": 1})
            with pytest.warns(tf.CallHookWarning, match="RuntimeError: the check broke"):
                broken = await engine.call("my_orders", {"status": "boom"})
            stepped = await engine.call("open_orders", {})
            invoked = await tf.invoke(registry.get("my_orders"), {"status": "closed"}, plugins=plugins)
    assert ok.success, ok.error
    assert (refused.success, refused.error) == (
        False,
        "Error: Parameter validation failed for 'my_orders':\n  - status: closed orders are archived; ask for 'open' or 'all'",
    )
    assert not invalid.success
    assert "expected: type: string" in (invalid.error or "")  # the schema answered; the hook was not asked
    assert (broken.success, broken.error) == (
        False,
        "Error: Parameter validation failed for 'my_orders':\n  - (arguments): the tool's own check of the arguments failed",
    )
    assert stepped.success
    assert checks.seen[0] == ("my_orders", {"status": "open", "user_id": "u1", "channel": "#help"})
    assert [name for name, _ in checks.seen].count("open_orders") == 1
    assert invoked.error == refused.error  # toolflow.invoke fills the context and asks the hook too


# --- remote tools (mcp_servers) ------------------------------------------------------------------


async def test_overrides_bind_a_remote_tools_parameter() -> None:
    """`overrides: {echo: {context: {text: user.name}}}`: listed without it, filled before the call is sent."""
    server = tf.McpServer(
        name="remote",
        command=(sys.executable, str(Path(__file__).with_name("_mcp_remote_server.py")), "stdio"),
        overrides={"echo": {"context": {"text": "user.name"}}},
    )
    specs = tf.LoadResult(files=(tf.SpecFile(path="specs/remote.yaml", mcp_servers=(server,)),))
    with trio.fail_after(60):
        async with tf.open_registry(specs) as registry, open_engine(registry) as engine:
            with providing_context(USER):
                echoed = await engine.call("echo", {})
                forged = await engine.call("echo", {"text": "Bob"})
            spec = registry.get("echo").spec
    assert (echoed.success, echoed.data) == (True, "Ada")
    assert forged.error == (
        "Error: echo: the parameter 'text' is set by the application, not by you; call echo again without it."
    )
    assert export_tools([spec], "mcp")[0]["inputSchema"].get("properties") == {}


# --- the gaps closed after section 4 landed: rules, the ignore policy, examples and test files ----

RULED_SPEC = """\
toolflow: 1
tools:
  ticket:
    description: Open a ticket.
    context: {user_id: user.id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Who opens it}
        title: {type: string, description: What it is about}
        urgent: {type: boolean, description: Whether it is urgent}
        team: {type: string, description: Which team handles it}
      required: [title]
    parameter_rules:
      - when: urgent
        require: [user_id]
      - when: urgent
        require: [team]
    template: "{{ title }} by {{ user_id }}"
"""


def test_rules_about_bound_parameters_are_not_shown_to_the_model(tmp_path: Path) -> None:
    """A parameter rule naming a bound parameter is left out of every export; the engine still checks it."""
    spec_file = tmp_path / "tools.yaml"
    spec_file.write_text(RULED_SPEC, encoding="utf-8")
    spec = tf.load_registry([spec_file], plugins=tf.load_plugins(entry_points=False)).get("ticket").spec
    openai, anthropic, mcp = (export_tools([spec], fmt)[0] for fmt in ("openai", "anthropic", "mcp"))
    for description in (openai["function"]["description"], anthropic["description"]):
        assert "`team`" in description
        assert "user_id" not in description
    assert "user_id" not in json.dumps(mcp["inputSchema"])
    assert "team" in json.dumps(mcp["inputSchema"]["allOf"])


async def test_policy_may_ignore_a_bound_argument_instead_of_refusing(setup: tuple[tf.Registry, tf.Plugins]) -> None:
    """``bound_arguments: ignore``: the model's value is dropped, the context's is used, the call runs."""
    registry, plugins = setup
    policy = tf.Policy(bound_arguments="ignore")
    async with open_engine(registry, plugins=plugins, policy=policy) as engine:
        with providing_context(USER):
            result = await engine.call("my_orders", {"status": "open", "user_id": "admin"})
    assert result.success, result.error
    assert result.data == "orders of u1 (open) in #help"
    with pytest.raises(ValueError, match="bound_arguments"):
        tf.Policy(bound_arguments="obey")  # type: ignore[arg-type]


EXAMPLES_SPEC = """\
toolflow: 1
tools:
  my_orders:
    description: The user's orders.
    context: {user_id: user.id}
    parameters:
      type: object
      properties:
        user_id: {type: string, description: Whose orders}
        status: {type: string, description: Which orders}
      required: [user_id, status]
    template: "orders of {{ user_id }} ({{ status }})"
    examples:
      - args: {status: open}
        context: {user: {id: u1}}
        expect: orders of u1 (open)
"""


def test_examples_run_under_their_own_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow test` runs an example under its ``context``; lint fills the bound parameters from it."""
    make_project(tmp_path, monkeypatch, EXAMPLES_SPEC)
    code, out, err = toolflow("test")
    assert code == 0, out + err
    assert "1 passed" in out
    code, out, err = toolflow("lint", "specs")
    assert code == 0, out + err


def test_lint_reports_examples_that_set_or_lack_a_bound_parameter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TF210: an example whose args set a bound parameter, or that gives no context for a required one."""
    bad = EXAMPLES_SPEC.replace(
        "      - args: {status: open}\n        context: {user: {id: u1}}\n",
        "      - args: {status: open, user_id: u1}\n        context: {user: {id: u1}}\n      - args: {status: open}\n",
    )
    make_project(tmp_path, monkeypatch, bad)
    code, out, _ = toolflow("lint", "specs")
    assert code == 1
    lines = [line for line in out.splitlines() if "TF210" in line]
    assert len(lines) == 2, out
    assert "examples[0] args set 'user_id'" in lines[0]
    assert "specs/tools.yaml:14:" in lines[0]
    assert "examples[1] has no value for the bound parameter 'user_id'" in lines[1]


def test_a_session_test_file_gives_the_loop_its_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``*.toolflow.yaml`` test's ``context`` is the agent's: the model's call is filled from it."""
    terminal = EXAMPLES_SPEC.split("    examples:", maxsplit=1)[0].replace(
        "    context:", "    category: terminal\n    context:"
    )
    project = make_project(tmp_path, monkeypatch, terminal)
    (project / "tests").mkdir()
    test = {
        "context": {"user": {"id": "u7"}},
        "prompt": "my open orders",
        "turns": [{"tool_calls": [{"name": "my_orders", "arguments": {"status": "open"}}]}],
        "expect": {"reason": "terminal", "tools": ["my_orders"], "answer_contains": "orders of u7 (open)"},
    }
    (project / "tests" / "orders.toolflow.yaml").write_text(yaml.safe_dump(test), encoding="utf-8")
    code, out, err = toolflow("test")
    assert code == 0, out + err
    (project / "tests" / "orders.toolflow.yaml").write_text(yaml.safe_dump({**test, "context": "u7"}), encoding="utf-8")
    code, out, _ = toolflow("test")
    assert code == 1
    assert "'context' must be a mapping" in out
