"""A spec file's ``policy: text_protocol:`` template, from the YAML to the system prompt the model gets.

The specs are loaded from files, the policy read from them, and an Agent runs the ``text`` format
on the scripted provider, which records each request it answers.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from _loop_support import Setup, call

from toolflow import UsageError
from toolflow._cli import run

POLICY = """\
policy:
  toolset: quiet
  system_prompt: You are a careful worker.
  text_protocol: |
    ## Tool-Use Protocol
    Call a tool with <tool_call>{"name": "...", "args": {...}}</tool_call>.
    {% for tool in tools %}
    - {{ tool.name }} ({{ tool.category }}): {{ tool.description }}
      Parameters: {{ tool.parameters_json }}
    {%- endfor %}
"""

HEADER = """\
You are a careful worker.

## Tool-Use Protocol
Call a tool with <tool_call>{"name": "...", "args": {...}}</tool_call>.
"""
"""The policy's system prompt, then the override's text before the tools."""
NO_PARAMETERS = '{"type": "object", "properties": {}, "additionalProperties": false}'
EXPECTED_SYSTEM = (
    HEADER
    + '\n- look (safe_chain): Look around.\n  Parameters: {"type": "object", "properties": '
    + '{"where": {"type": "string", "description": "Where"}}}'
    + f"\n- fail (safe_chain): Always fails.\n  Parameters: {NO_PARAMETERS}"
    + '\n- say (terminal): Say something; ends the loop.\n  Parameters: {"type": "object", "properties": '
    + '{"message": {"type": "string", "description": "What"}}, "required": ["message"]}'
)
"""The override rendered for the tools of the `quiet` toolset."""


async def test_the_spec_files_template_is_the_system_prompt_of_every_request(tmp_path: Path) -> None:
    """The provider gets the override rendered with the exposed tools' schemas, and calls written to it still run."""
    setup = Setup(tmp_path, POLICY)
    turns = [{"tool_calls": [call("look", where="up")]}, {"text": "Nothing up there."}]
    result, provider = await setup.run(turns, format="text")
    assert (result.reason, result.final_answer) == ("final_answer", "Nothing up there.")
    assert [request.system for request in provider.requests] == [EXPECTED_SYSTEM, EXPECTED_SYSTEM]
    assert result.system == EXPECTED_SYSTEM
    assert all(request.tools == () for request in provider.requests)
    assert setup.tools.runs == ["look"]
    assert provider.requests[1].messages[-1]["content"].startswith('<tool_result name="look">')


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{{ tool.name }}", "reads unknown variables 'tool'"),
        ("{% for tool in tools %}", "does not compile: line 1"),
    ],
)
async def test_a_broken_template_in_a_spec_file_is_refused_when_the_loop_starts(
    tmp_path: Path, template: str, words: str
) -> None:
    """An override that reads an unknown variable or does not compile is a UsageError before any request."""
    setup = Setup(tmp_path, f"policy:\n  text_protocol: {json.dumps(template)}\n")
    with pytest.raises(UsageError, match=words):
        await setup.run([{"text": "never asked"}], format="text")


def test_toolflow_run_sends_the_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolflow run --format text` over the spec file prints the rendered override as the system prompt."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n', encoding="utf-8")
    spec = "toolflow: 1\ntools:\n  look:\n    description: Look around.\n    template: seen\n"
    (tmp_path / "tools.yaml").write_text(spec + POLICY.replace("  toolset: quiet\n", ""), encoding="utf-8")
    (tmp_path / "session.yaml").write_text(yaml.safe_dump({"turns": [{"text": "Hi."}]}), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", "--specs", "tools.yaml", "--model", "scripted:session.yaml", "--format", "text", "--prompt", "go"]
    assert run([*argv, "--output-format", "json"], stdout=out, stderr=err) == 0, err.getvalue()
    expected = HEADER + f"\n- look (safe_chain): Look around.\n  Parameters: {NO_PARAMETERS}"
    assert json.loads(out.getvalue())["system"] == expected
