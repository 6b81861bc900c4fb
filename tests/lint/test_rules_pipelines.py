"""The pipeline rules (TF215 on pipelines, TF227-TF235): what the case files under tests/cases cannot say."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, event, given, settings

from toolflow._diagnostics import Diagnostic
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import LintContext
from toolflow._lint._shapes import follow
from toolflow._lint._summarize import shape_of, summarize_file
from toolflow._lint._summary import ProjectSummary
from toolflow._lint.rules import builtin_rules
from toolflow._loader import load_specs
from toolflow._model import Implementation, Pipeline, PipelineStep, SpecFile, ToolSpec
from toolflow._plugins import load_plugins
from toolflow._registry import Registry, RegistryError

PIPELINE_RULES = ("TF215", *(f"TF{n}" for n in range(227, 236)))


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def _lint(*paths: Path) -> list[Diagnostic]:
    return list(lint_paths(list(paths), LintConfig(select=PIPELINE_RULES)).diagnostics)


def _at(diagnostic: Diagnostic, text: str) -> str:
    """The text a diagnostic's span covers (on its first line)."""
    line = text.splitlines()[diagnostic.line - 1]
    end = diagnostic.end_column - 1 if diagnostic.end_line == diagnostic.line else len(line)
    return line[diagnostic.column - 1 : end]


LOOKUP = """
toolflow: 1
tools:
  lookup_order:
    description: Look an order up.
    parameters:
      type: object
      properties:
        order_id: {type: string, description: The id.}
    output_schema:
      type: object
      properties:
        customer_id: {type: string}
        items: {type: array, items: {type: object, properties: {sku: {type: string}}}}
    template: {output: json, source: '{}'}
"""


# --- positions inside template strings ---------------------------------------------------------


def test_a_field_is_found_in_a_block_scalar_and_in_the_bracket_form(tmp_path: Path) -> None:
    """TF232 points at the misspelt field on the block scalar's own line, and inside ``['...']``."""
    spec = _write(
        tmp_path / "spec.yaml",
        LOOKUP
        + """
  report:
    description: Report.
    pipeline:
      steps:
        order:
          tool: lookup_order
      result:
        text: |
          Order for
            {{ steps.order.cusomer_id }}
        other: "{{ steps['order']['itemz'] }}"
""",
    )
    text = spec.read_text()
    found = {(d.line, _at(d, text)) for d in _lint(spec)}
    assert found == {(25, "cusomer_id"), (26, "itemz")}


def test_a_string_folded_over_lines_is_reported_at_its_value(tmp_path: Path) -> None:
    """When the read cannot be found in the file's text, the diagnostic covers the whole string."""
    spec = _write(
        tmp_path / "spec.yaml",
        LOOKUP
        + """
  report:
    description: Report.
    pipeline:
      steps:
        order:
          tool: lookup_order
      result: "{{ steps.order.\\
        cusomer_id }}"
""",
    )
    (diagnostic,) = _lint(spec)
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF232", 22, 15)


def test_rules_work_on_specs_built_in_code() -> None:
    """A pipeline built in Python (no file, no locator) is checked, its problems at 1:1."""
    step = PipelineStep(name="one", tool="nowhere", arguments={"x": "{{ steps.two }} {{ y }}"}, pointer="/tools/p/x")
    pipeline = Pipeline(steps=(step,), pointer="/tools/p/pipeline")
    tool = ToolSpec(
        name="p",
        parameters={"type": "object", "properties": {}},
        implementations=(Implementation(kind="pipeline", config=pipeline, pointer="/tools/p/pipeline"),),
        pointer="/tools/p",
    )
    spec_file = SpecFile(path="<code>", tools=(tool,))
    found: list[Diagnostic] = []
    summary = ProjectSummary(files=(summarize_file(spec_file),))
    for rule in builtin_rules():
        if rule.code in PIPELINE_RULES and rule.check is not None:
            found.extend(rule.check(LintContext(files=(spec_file,))))
        if rule.code in PIPELINE_RULES and rule.check_project is not None:
            found.extend(rule.check_project(summary))
    assert sorted((d.code, d.line, d.column) for d in found) == [("TF227", 1, 1), ("TF228", 1, 1), ("TF231", 1, 1)]


# --- output shapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "path", "wrong"),
    [
        ({"type": "object", "properties": {"a": {}}}, ("b",), 0),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": True}, ("b",), None),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}, ("b",), None),
        ({"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}}, ("b",), None),
        ({"type": "object"}, ("b",), None),
        ({"allOf": [{"properties": {"a": {}}}]}, ("b",), None),
        ({"$ref": "#/definitions/x"}, ("b",), None),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, ("a", "b"), 1),
        ({"type": "object", "properties": {"a": {"type": ["string", "object"]}}}, ("a", "b"), None),
        ({"type": "array", "items": {"properties": {"a": {}}}}, (0, "b"), 1),
        ({"type": "array"}, (0, "b"), None),
    ],
)
def test_following_a_read_stops_where_the_schema_stops_saying(
    schema: dict[str, Any], path: tuple[str | int, ...], wrong: int | None
) -> None:
    """Open objects, ``$ref`` and combinators end the walk; closed objects and typed values do not."""
    assert follow(shape_of(schema), path, repeated=False).wrong == wrong


def test_a_for_each_steps_data_is_a_list_of_its_results() -> None:
    """``steps.NAME[0].field`` of a repeated step reads its tool's result; ``steps.NAME.field`` is not followed."""
    shape = shape_of({"type": "object", "properties": {"a": {}}})
    assert follow(shape, (0, "b"), repeated=True).wrong == 1
    assert follow(shape, ("b",), repeated=True).wrong is None
    whole = follow(shape, (), repeated=True).shape
    assert whole is not None
    assert whole.types == ("array",)


# --- categories -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("category", "reported"), [("safe_chain", True), ("dangerous", False), ("terminal", True)])
def test_a_dangerous_step_needs_a_per_turn_limit_of_one(tmp_path: Path, category: str, reported: bool) -> None:
    """With the default policy, a pipeline calling a ``dangerous`` tool must be limited to one call a turn."""
    spec = _write(
        tmp_path / "spec.yaml",
        f"""
        toolflow: 1
        tools:
          delete:
            description: Delete it.
            category: dangerous
            template: deleted
          tidy:
            description: Tidy up.
            category: {category}
            pipeline:
              steps:
                delete:
                  tool: delete
        """,
    )
    assert [d.code for d in _lint(spec)] == (["TF233"] if reported else [])


# --- imports ----------------------------------------------------------------------------------------


def test_linting_without_pipelines_never_loads_the_pipeline_facts(tmp_path: Path) -> None:
    """The pipeline rules cost a project without pipelines nothing: their Jinja2 helpers stay unloaded."""
    spec = _write(tmp_path / "spec.yaml", LOOKUP)
    code = (
        "import sys\n"
        "from toolflow._lint._engine import lint_paths\n"
        f"assert not lint_paths([{str(spec)!r}]).diagnostics\n"
        "assert 'toolflow._lint._pipeline_facts' not in sys.modules\n"
        "assert 'toolflow._lint._pipeline_summary' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# --- agreement with the registry --------------------------------------------------------------------

STEP_TOOLS = ["look", "shout", "flow", "other", "lookk"]
VALUES = [
    "{{ text }}",
    "plain",
    "{{ steps.one }}",
    "{{ steps.two.text }}",
    "{{ errors.three }}",
    "{{ steps[text] }}",
    "{{ texts }}",
    "{{ text | uper }}",
    "{{ text",
    "{% for x in steps.one %}{{ x }}{% endfor %}",
]
BASE = {
    "look": {
        "description": "Look at something",
        "parameters": {"type": "object", "properties": {"text": {"type": "string", "description": "What"}}},
        "template": "{{ text }}",
    },
    "shout": {"description": "Shout", "template": "HEY"},
}


@st.composite
def _pipeline_tool(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["one", "two", "three"]), min_size=1, max_size=3, unique=True))
    steps: dict[str, Any] = {}
    for name in names:
        step: dict[str, Any] = {"tool": draw(st.sampled_from(STEP_TOOLS))}
        if draw(st.booleans()):
            step["with"] = {"text": draw(st.sampled_from(VALUES))}
        if draw(st.integers(0, 3)) == 0:
            step["when"] = draw(st.sampled_from(VALUES))
        if draw(st.integers(0, 3)) == 0:
            step["needs"] = draw(st.lists(st.sampled_from(["one", "two", "three"]), min_size=1, max_size=2))
        steps[name] = step
    pipeline: dict[str, Any] = {"steps": steps}
    if draw(st.booleans()):
        pipeline["result"] = draw(st.sampled_from(VALUES))
    return {
        "description": "A pipeline",
        "parameters": {"type": "object", "properties": {"text": {"type": "string", "description": "What"}}},
        "pipeline": pipeline,
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flow=_pipeline_tool(), other=_pipeline_tool(), split=st.booleans())
def test_lint_reports_every_pipeline_the_registry_refuses(
    flow: dict[str, Any], other: dict[str, Any], split: bool
) -> None:
    """A pipeline the registry refuses to build has a lint error; a project lint passes builds."""
    plugins = load_plugins(entry_points=False, environ={})
    tools = {**BASE, "flow": flow, "other": other}
    with tempfile.TemporaryDirectory() as folder:
        first = {name: tools[name] for name in (["look", "flow"] if split else list(tools))}
        files = [first, {name: tool for name, tool in tools.items() if name not in first}]
        paths = []
        for index, document in enumerate(f for f in files if f):
            path = Path(folder) / f"spec{index}.yaml"
            path.write_text(json.dumps({"toolflow": 1, "tools": document}, indent=2), encoding="utf-8")
            paths.append(path)
        report = lint_paths(paths, LintConfig(), plugins=plugins.lint_facts(), kinds=plugins.kind_schemas())
        errors = [d.render() for d in report.diagnostics if d.severity.value == "error"]
        refused: RegistryError | None = None
        try:
            Registry.build(load_specs(paths, kinds=plugins.kind_schemas()), plugins)
        except RegistryError as exc:
            refused = exc
        event("the registry refuses" if refused else "lint reports errors" if errors else "lint passes, it builds")
        assert errors or refused is None, f"lint passed what the registry refuses: {refused}"
