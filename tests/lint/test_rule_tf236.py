"""TF236: a read of an optional parameter without a default is reported unless a guard keeps it safe.

The guard analysis is checked against real renderings: a template TF236 passes renders without
the parameter, and one it reports fails with ``'tone' is undefined``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from toolflow import load_registry, open_engine
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._rendering import render_template
from toolflow._template_guards import unguarded_template_reads
from toolflow._templates import TemplateError, TemplateProblem, compile_template

UNGUARDED = [
    "{{ tone }}",
    "{{ tone | upper }}",
    "{% if tone %}x{% endif %}",
    "{{ 'a' if tone else 'b' }}",
    "{% if tone is defined %}{% endif %}{{ tone }}",
    "{% if tone is not defined %}{{ tone }}{% endif %}",
    "{{ tone is defined or tone }}",
    "{% if other is defined %}{{ tone }}{% endif %}",
    "{% if tone is defined or other is defined %}{{ tone }}{% endif %}",
    "{% for t in tone %}{{ t }}{% endfor %}",
    "{{ tone.size | default(1) }}",
    "{{ tone is odd }}",
]

GUARDED = [
    "plain text",
    "{{ tone | default('plain') }}",
    "{{ tone | d('plain') | upper }}",
    "{% if tone is defined %}{{ tone | upper }}{% endif %}",
    "{% if tone is not defined %}plain{% else %}{{ tone }}{% endif %}",
    "{% if tone is undefined %}plain{% else %}{{ tone }}{% endif %}",
    "{% if other is defined %}{% elif tone is defined %}{{ tone }}{% endif %}",
    "{% if tone is not defined %}{% elif tone == 'x' %}x{% else %}{{ tone }}{% endif %}",
    "{{ tone is defined and tone == 'loud' }}",
    "{{ tone is not defined or tone == 'loud' }}",
    "{{ tone if tone is defined else 'plain' }}",
    "{{ 'plain' if tone is not defined else tone }}",
    "{% if not (tone is not defined) %}{{ tone }}{% endif %}",
    "{% if tone is defined and other is defined %}{{ tone }}{% endif %}",
    "{{ tone is string }}",
    "{{ tone is none }}",
    "{% set tone = 'x' %}{{ tone }}",
    "{% for tone in ['a'] %}{{ tone }}{% endfor %}",
]


@pytest.mark.parametrize("source", UNGUARDED)
def test_unguarded_reads_are_found(source: str) -> None:
    """Reads that fail when the parameter is missing are reported."""
    assert [name for name, _ in unguarded_template_reads(source, frozenset({"tone"}))] == ["tone"]


@pytest.mark.parametrize("source", GUARDED)
def test_guarded_reads_are_not(source: str) -> None:
    """Reads inside an `is defined` guard, under `default`, or of a name the template binds are safe."""
    assert unguarded_template_reads(source, frozenset({"tone"})) == []


def test_the_line_is_the_first_unguarded_read() -> None:
    """The line is the template line of the first read that is not guarded."""
    source = "{% if tone is defined %}{{ tone }}{% endif %}\n\n{{ tone }}\n{{ tone }}"
    assert unguarded_template_reads(source, frozenset({"tone"})) == [("tone", 3)]


def test_a_template_that_does_not_parse_has_no_reads() -> None:
    """Syntax errors are TF215's: no reads are reported."""
    assert unguarded_template_reads("{{ tone ", frozenset({"tone"})) == []


async def _failure_without(source: str) -> str | None:
    """Why *source* fails to render without ``tone``, or ``None`` when it renders."""
    template = compile_template(source)
    assert not isinstance(template, TemplateProblem)
    with trio.fail_after(60):
        try:
            await render_template(template, {"other": "o"})
        except TemplateError as error:
            return str(error)
    return None


async def test_lint_agrees_with_a_real_rendering() -> None:
    """Every source TF236 reports fails to render without the parameter; every one it passes renders."""
    for source in UNGUARDED:
        assert "'tone' is undefined" in (await _failure_without(source) or ""), source
    for source in GUARDED:
        assert await _failure_without(source) is None, source


def _lint(tmp_path: Path, tool: dict[str, Any]) -> list[str]:
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"toolflow": 1, "tools": {"greet": tool}}))
    return [d.message for d in lint_paths([path], LintConfig(select=("TF236",))).diagnostics]


def _greet(template: str, **tone: Any) -> dict[str, Any]:
    return {
        "description": "Greet someone",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who"}, "tone": {"description": "How", **tone}},
            "required": ["name"],
        },
        "template": template,
    }


def test_a_required_parameter_or_a_default_is_not_reported(tmp_path: Path) -> None:
    """Only parameters a call may leave out, with nothing to fill them in, are reported."""
    assert _lint(tmp_path, _greet("{{ name }} {{ tone }}", default="plain")) == []
    required = _greet("{{ name }} {{ tone }}")
    required["parameters"]["required"] = ["name", "tone"]
    assert _lint(tmp_path, required) == []


def test_odd_parameter_schemas_never_make_it_raise(tmp_path: Path) -> None:
    """`required` with values that are not names, or properties that are not schemas, are TF204's business."""
    odd = _greet("{{ name }} {{ tone }}")
    odd["parameters"]["required"] = [{"a": 1}, ["name"], "name"]
    odd["parameters"]["properties"]["x"] = [1]
    assert [m.split(",")[0] for m in _lint(tmp_path, odd)] == ["template reads optional parameter 'tone'"]


def test_the_message_names_both_fixes(tmp_path: Path) -> None:
    """The message says what fails and how to fix it."""
    message = (
        "template reads optional parameter 'tone', which has no default, so a call that leaves it out fails "
        "('tone' is undefined); give it a 'default', or read it under '{% if tone is defined %}' "
        "or as 'tone | default(...)'"
    )
    assert _lint(tmp_path, _greet("{{ name }} {{ tone }}")) == [message]


# --- parameter rules ---------------------------------------------------------------------------

RULED = [  # (template, the parameters TF236 reports) with `when: mood, require: [tone]`
    ("{% if mood is defined %}{{ mood }} {{ tone }}{% endif %}", []),
    ("{{ tone if mood is defined else 'plain' }}", []),
    ("{% if mood is not defined %}plain{% else %}{{ tone }}{% endif %}", []),
    ("{% if tone is defined %}{{ mood }}{% endif %}", ["mood"]),  # the rule does not run backwards
    ("{% if mood == 'x' %}{{ tone }}{% endif %}", ["mood", "tone"]),
    ("{{ tone }}", ["tone"]),
]


@pytest.mark.parametrize(("template", "reported"), RULED)
def test_a_guard_covers_what_a_rule_requires_with_it(tmp_path: Path, template: str, reported: list[str]) -> None:
    """With `when: mood, require: [tone]`, a guard that proves `mood` defined proves `tone` defined too."""
    tool = _greet("{{ name }}" + template)
    tool["parameters"]["properties"]["mood"] = {"type": "string", "description": "The mood"}
    tool["parameter_rules"] = [{"when": "mood", "require": ["tone"]}]
    messages = _lint(tmp_path, tool)
    assert [m.split("'")[1] for m in messages] == reported, messages


def test_rule_implications_chain(tmp_path: Path) -> None:
    """`when: a require [b]` and `when: b require [tone]`: a guard on `a` covers `tone`."""
    tool = _greet("{{ name }}{% if a is defined %}{{ a }}{{ b }}{{ tone }}{% endif %}")
    for name in ("a", "b"):
        tool["parameters"]["properties"][name] = {"type": "string", "description": name}
    tool["parameter_rules"] = [{"when": "a", "require": ["b"]}, {"when": "b", "require": ["tone"]}]
    assert _lint(tmp_path, tool) == []


async def test_a_rule_guarded_read_renders_for_every_call_the_rule_lets_through() -> None:
    """The guard holds at run time: a call with `mood` but no `tone` is rejected before the template renders."""
    template = "{% if mood is defined %}{{ mood }} {{ tone }}{% endif %}"
    assert unguarded_template_reads(template, {"tone"}, {"mood": {"tone"}}) == []
    tool = _greet("{{ name }}" + template)
    tool["parameters"]["properties"]["mood"] = {"type": "string", "description": "The mood"}
    tool["parameter_rules"] = [{"when": "mood", "require": ["tone"]}]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tools.yaml"
        path.write_text(json.dumps({"toolflow": 1, "tools": {"greet": tool}}))
        registry = load_registry([str(path)])
        with trio.fail_after(60):
            async with open_engine(registry) as engine:
                refused = await engine.call("greet", {"name": "Ada", "mood": "calm"})
                alone = await engine.call("greet", {"name": "Ada"})
    assert not refused.success
    assert "tone" in (refused.error or "")
    assert "undefined" not in (refused.error or "")
    assert alone.success
