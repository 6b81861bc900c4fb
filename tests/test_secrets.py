"""Values from ``${VAR}`` are never shown: lint output, listings, exports, validation messages, failures.

Each door is tested: ``toolflow lint`` in every output format, ``toolflow list`` and ``toolflow
schema``, the engine (``toolflow call``, :func:`toolflow.invoke`, :meth:`Engine.call`), the agent
loop (what the provider is sent, in every history format) and ``toolflow serve`` (what an MCP
client lists and is answered). A value still reaches the implementation that runs the tool.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import yaml
from _mcp_project import serve_argv
from mcp import ClientSession, StdioServerParameters, stdio_client, types

import toolflow
from toolflow._cli import run
from toolflow._diagnostics import Diagnostic
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._formats import FORMATS, render
from toolflow._lint._rule import LintContext
from toolflow._loop import Agent
from toolflow.default_plugins._scripted import open_scripted

SECRET = "tf-s3cret-Value-0123456789"
SHORT = "xq7"  # shorter than the backstop masks in free text: masked where toolflow builds the text from the string

ENVIRONMENT = {"TF_SECRET": SECRET, "TF_SHORT": SHORT}

SPECS = """\
toolflow: 1
policy:
  system_prompt: "You help ${TF_SECRET}"
tools:
  lookup:
    title: "Lookup for ${TF_SECRET}"
    description: "Look things up for ${TF_SECRET}"
    parameters:
      type: object
      properties:
        space:
          type: string
          description: "The space, like ${TF_SECRET}"
          enum: [public, "${TF_SECRET}", "${TF_SHORT}"]
        token:
          type: string
          description: The account
          default: "${TF_SECRET}"
          examples: ["${TF_SECRET}"]
        code:
          type: string
          description: A code
          pattern: "^${TF_SHORT}[0-9]+$"
    output_schema:
      type: object
      description: "What ${TF_SECRET} found"
    implementation: secrets.lookup
  broken:
    description: A command that is not there
    retry: false
    command: ["/nonexistent/${TF_SECRET}/bin", "{{ word }}"]
    parameters:
      type: object
      properties:
        word: {type: string, description: A word}
"""

PLUGIN = """\
import toolflow

SEEN = []


def lookup(space="public", token=None, code=None):
    SEEN.append(token)
    return {"space": space, "token_length": len(token or "")}


@toolflow.hookimpl
def toolflow_register_implementations(register):
    register("secrets.lookup", lookup)
"""


def _no_value(text: str) -> None:
    """*text* shows no eight characters of the value in a row."""
    for window in range(len(SECRET) - 8 + 1):
        assert SECRET[window : window + 8] not in text, text


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The specs and their plugin in a project that is the working directory, with the variables set."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPECS, encoding="utf-8")
    (tmp_path / "secret_tools.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "s"\n\n[tool.toolflow]\nspecs = ["specs"]\nplugins = ["secret_tools"]\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "secret_tools")
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("secret_tools", None)
    return tmp_path


def toolflow_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- lint, list, schema ----------------------------------------------------------------------------------------------

BAD_SPECS = """\
toolflow: 1
tools:
  schema_bad:
    description: Values the spec schema refuses
    category: "${TF_SECRET}"
    timeout: "${TF_SECRET}"
    template: "x"
  semantics_bad:
    description: Values the semantic rules refuse
    depends_on: ["${TF_SECRET}"]
    parameters:
      type: object
      required: ["${TF_SECRET}"]
      properties:
        n:
          type: integer
          description: A number
          default: "${TF_SECRET}"
          enum: [1, "${TF_SECRET}"]
    examples:
      - args: {n: "${TF_SECRET}"}
    template: "{{ n }} ${TF_SECRET} {{"
  typo:
    description: A category near the value
    category: "${TF_NEAR}"
    template: "x"
toolsets:
  some:
    tools: ["${TF_SECRET}"]
"""


@pytest.mark.parametrize("output_format", sorted(FORMATS))
def test_lint_shows_references_in_every_format(
    output_format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every diagnostic quoting a value from ${...} shows ``${TF_SECRET}``; no format leaks the value."""
    (tmp_path / "bad.yaml").write_text(BAD_SPECS, encoding="utf-8")
    for name, value in {**ENVIRONMENT, "TF_NEAR": "dangerous-"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    code, out, err = toolflow_cli("lint", "--output-format", output_format, str(tmp_path / "bad.yaml"))
    assert code == 1
    _no_value(out + err)
    assert "${TF_SECRET}" in out
    assert "did you mean 'dangerous'" not in out  # no hint towards, or from, a value of the environment


def test_lint_names_the_reference_in_each_rule_that_quotes_a_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rules that quote a value name it with ``!r``, which shows ``${TF_SECRET}``."""
    (tmp_path / "bad.yaml").write_text(BAD_SPECS, encoding="utf-8")
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    report = lint_paths([tmp_path / "bad.yaml"], LintConfig())
    quoted = {d.code for d in report.diagnostics if "${TF_SECRET}" in d.message}
    assert {"TF104", "TF207", "TF208", "TF210", "TF213", "TF222"} <= quoted, [d.render() for d in report.diagnostics]
    _no_value(render(report, "text"))


def test_a_rule_that_formats_a_value_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A (plugin) rule that puts a value in its message without ``!r`` still shows the reference."""

    def check(ctx: LintContext) -> Iterator[Diagnostic]:
        for tool in ctx.tools:
            yield rule.diag(tool, tool.pointer, f"description is {tool.description}")

    rule = toolflow.LintRule(
        code="X001", name="x", severity=toolflow.Severity.WARNING, doc="X.", check=check, plugin="x"
    )
    (tmp_path / "s.yaml").write_text(SPECS, encoding="utf-8")
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    report = lint_paths([tmp_path / "s.yaml"], LintConfig(select=("X001",)), rules=[rule])
    messages = [d.message for d in report.diagnostics]
    assert messages[0] == "description is Look things up for ${TF_SECRET}"


def test_list_and_schema_show_references(project: Path) -> None:
    """``toolflow list`` (text and JSON) and ``toolflow schema`` (each format) show ``${TF_SECRET}``."""
    outputs = []
    for args in (
        ["list"],
        ["list", "--output-format", "json"],
        *(["schema", "--format", f] for f in ("openai", "anthropic", "mcp")),
    ):
        code, out, err = toolflow_cli(*args)
        assert code == 0, err
        outputs.append(out)
        _no_value(out + err)
    listed = json.loads(outputs[1])["tools"][0]
    assert listed["description"] == "Look things up for ${TF_SECRET}"
    mcp = json.loads(outputs[4])[0]
    assert mcp["title"] == mcp["annotations"]["title"] == "Lookup for ${TF_SECRET}"
    space = mcp["inputSchema"]["properties"]["space"]
    assert space["enum"] == ["public", "${TF_SECRET}", "${TF_SHORT}"]
    assert mcp["inputSchema"]["properties"]["token"]["default"] == "${TF_SECRET}"
    assert mcp["outputSchema"]["description"] == "What ${TF_SECRET} found"
    assert SHORT not in json.dumps(space)


# --- calls: validation messages, failures, the value reaching the implementation -------------------------------------


async def test_validation_messages_and_failures_show_references(project: Path) -> None:
    """Through invoke and Engine.call: an enum, a pattern and a failing command name references only."""
    registry = toolflow.load_registry(["specs"], plugins=toolflow.load_plugins(project_plugins=["secret_tools"]))
    assert registry.get("lookup").description == "Look things up for ${TF_SECRET}"
    with trio.fail_after(30):
        near = await toolflow.invoke(registry.get("lookup"), {"space": SECRET[:-1]})
        bad = await toolflow.invoke(registry.get("lookup"), {"space": "nope", "code": "x"})
        async with toolflow.open_engine(registry) as engine:
            failed = await engine.call("broken", {"word": "hi"})
            ran = await engine.call("lookup", {"space": "public"})
    assert "did you mean" not in (near.error or "")  # no hint tells the model how close it came to a value
    error = bad.error or ""
    assert '"public", "${TF_SECRET}", "${TF_SHORT}"' in error
    assert "Must match the pattern ^${TF_SHORT}[0-9]+$" in error
    assert "did you mean" not in error
    _no_value(error)
    assert SHORT not in error
    assert failed.error == "Error: command not found: '/nonexistent/${TF_SECRET}/bin'"
    assert ran.data["token_length"] == len(SECRET)  # the default reached the implementation
    seen = sys.modules["secret_tools"].SEEN
    assert seen == [SECRET]


def test_toolflow_call_shows_references(project: Path) -> None:
    """``toolflow call`` prints the same masked failure."""
    code, out, _ = toolflow_cli("call", "broken", '{"word": "hi"}')
    assert code == 1
    assert json.loads(out)["error"] == "Error: command not found: '/nonexistent/${TF_SECRET}/bin'"


@pytest.mark.parametrize("history_format", ["openai", "anthropic", "fallback", "text"])
async def test_the_agent_loop_never_sends_a_value(project: Path, history_format: str) -> None:
    """Tool definitions, the system prompt and every result the model is sent show references only."""
    (project / "session.yaml").write_text(
        yaml.safe_dump(
            {
                "turns": [
                    {"tool_calls": [{"name": "lookup", "arguments": {"space": "nope"}}]},
                    {"tool_calls": [{"name": "broken", "arguments": {"word": "hi"}}]},
                    {"tool_calls": [{"name": "lookup", "arguments": {}}]},
                    {"text": "done"},
                ]
            }
        ),
        encoding="utf-8",
    )
    plugins = toolflow.load_plugins(project_plugins=["secret_tools"])
    loaded = toolflow.load_specs(["specs"], kinds=plugins.kind_schemas())
    registry = toolflow.Registry.build(loaded, plugins)
    provider = open_scripted(str(project / "session.yaml"), record_requests=True)
    with trio.fail_after(30):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            agent = Agent(engine, provider, policy=toolflow.Policy.from_specs(loaded), format=history_format)
            result = await agent.run("go")
    assert result.reason == "final_answer"
    sent = json.dumps([{"messages": list(r.messages), "tools": r.tools, "system": r.system} for r in provider.requests])
    _no_value(sent)
    assert "You help ${TF_SECRET}" in sent
    assert "Look things up for ${TF_SECRET}" in sent
    assert sys.modules["secret_tools"].SEEN == [SECRET]


async def test_serve_lists_and_answers_with_references(project: Path) -> None:
    """An MCP client's tools/list and tools/call answers carry references only."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv()[1:],
        cwd=project,
        env={**os.environ, "TOOLFLOW_DISABLE_PLUGINS": "assistant,http"},
    )
    with trio.fail_after(60):
        with (project / "serve.log").open("a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                bad = await session.call_tool("lookup", {"space": "nope"})
                failed = await session.call_tool("broken", {"word": "hi"})
    shown = json.dumps([tool.model_dump(mode="json") for tool in listed.tools])
    answers = [block.text for r in (bad, failed) for block in r.content if isinstance(block, types.TextContent)]
    _no_value(shown + json.dumps(answers))
    assert "${TF_SECRET}" in shown
    assert any("${TF_SECRET}" in answer for answer in answers), answers
