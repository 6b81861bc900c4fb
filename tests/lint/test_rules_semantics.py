"""The semantic rules (TF211-TF221, and TF225 on toolset names): what the case files under tests/cases cannot say."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from toolflow._diagnostics import Diagnostic
from toolflow._lint import _template_facts
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import LintContext
from toolflow._lint._summarize import summarize_file
from toolflow._lint._summary import ProjectSummary
from toolflow._lint.rules import builtin_rules
from toolflow._loader import load_specs
from toolflow._model import Implementation, ParameterRule, SpecFile, ToolDependency, ToolSpec
from toolflow._plugins import load_plugins
from toolflow._registry import Registry, RegistryError
from toolflow._templates import TemplateProblem, compile_template, parse_template, template_variables

SEMANTIC_RULES = tuple(f"TF{n}" for n in range(211, 222))
CASES = Path(__file__).resolve().parent.parent / "cases"


def _spec(path: Path, tools: dict[str, Any], **sections: Any) -> Path:
    """Write a spec file of *tools* (JSON is YAML) and return its path."""
    path.write_text(json.dumps({"toolflow": 1, **sections, "tools": tools}, indent=2))
    return path


def _tool(**fields: Any) -> dict[str, Any]:
    return {"description": "Search the objects in the room", "implementation": "search", **fields}


def _lint(*paths: Path) -> list[Diagnostic]:
    return list(lint_paths(list(paths), LintConfig(select=SEMANTIC_RULES)).diagnostics)


def _run_rules(ctx: LintContext) -> list[Diagnostic]:
    """Run the semantic rules' checks directly, without the engine's filtering."""
    found: list[Diagnostic] = []
    summary = ProjectSummary(files=tuple(summarize_file(f) for f in ctx.files))
    for rule in builtin_rules():
        if rule.code in SEMANTIC_RULES and rule.check is not None:
            found.extend(rule.check(ctx))
        if rule.code in SEMANTIC_RULES and rule.check_project is not None:
            found.extend(rule.check_project(summary))
    return found


# --- templates: parsed once, positions, odd sources ------------------------------------------


def test_template_facts_are_computed_once_per_tool(tmp_path: Path) -> None:
    """TF215 and TF216 share one parse of each template: the facts are the same object every time."""
    spec = _spec(tmp_path / "say.yaml", {"say": {"description": "Say it", "template": "{{ x"}})
    (tool,) = load_specs([spec]).tools
    first = _template_facts.template_facts(tool)
    ctx = LintContext(files=load_specs([spec]).files)
    _run_rules(ctx)
    assert _template_facts.template_facts(tool) is first


def test_template_facts_follow_the_tool_not_a_reused_id(tmp_path: Path) -> None:
    """Facts never leak from a collected tool to a new one, and the cache does not grow with each load."""
    for i in range(40):
        body = {"description": "Say it", "parameters": {"type": "object"}, "template": f"{{{{ v{i} }}}}"}
        spec = _spec(tmp_path / "say.yaml", {"say": body})
        (tool,) = load_specs([spec]).tools
        (facts,) = _template_facts.template_facts(tool)
        assert facts.variables == {f"v{i}"}
        del tool, facts
    gc.collect()
    assert len(_template_facts._memo._entries) < 5


@pytest.mark.parametrize(
    "source",
    [
        "{{ x }}{{ loop }}{{ self }}{{ caller }}{{ varargs }}{{ kwargs }}{{ super() }}",
        "{% if a is defined %}{{ b.c[d] }}{% elif e %}{{ f(g, h=i) }}{% else %}{{ j if k else l }}{% endif %}",
        "{{ range(n) | join(',') }}{{ dict(a=b) }}{{ lipsum() }}{{ cycler(x) }}{{ joiner() }}{{ namespace() }}",
        "{{ [a, b] + (c, d) }}{{ {'k': v} }}{{ x[1:y] }}{{ -z }}{{ not w }}{{ 'a' ~ q }}{{ m in n }}",
        "{{ x | default(y) | replace(z, 'a') }}{{ env.HOME }}{{ env['X'] }}{{ true }}{{ none }}{{ x(*p, **kw) }}",
        "{% for i in items %}{{ loop.index }}{{ i }}{{ j }}{% endfor %}{{ i }}",
        "{% set y = x %}{{ y }}{% macro m(a) %}{{ a }}{{ b }}{% endmacro %}{% with w = 1 %}{{ w }}{% endwith %}",
    ],
)
def test_free_variables_match_jinja(source: str) -> None:
    """The free variables TF216 checks are exactly those Jinja's own analysis finds."""
    tree = parse_template(source)
    assert not isinstance(tree, TemplateProblem)
    assert _template_facts._analyse(source)[1] == template_variables(tree)


def test_deeply_nested_template_is_a_diagnostic_not_a_crash(tmp_path: Path) -> None:
    """A template nested beyond Jinja's recursion is reported by TF215 (and not by TF216)."""
    source = "{{ " + "(" * 3000 + "x" + ")" * 3000 + " }}"
    spec = _spec(tmp_path / "deep.yaml", {"deep": {"description": "Deep", "template": source}})
    found = _lint(spec)
    assert [(d.code, d.message) for d in found] == [
        ("TF215", "template does not compile: the template nests too deeply")
    ]


def _nested(opening: str, closing: str, depth: int) -> str:
    return "".join(opening.format(n=n) for n in range(depth)) + "y" + closing * depth


@pytest.mark.parametrize(
    ("source", "compiles"),
    [
        (_nested("{{% for i{n} in items %}}", "{% endfor %}", 20), True),
        (_nested("{{% for i{n} in items %}}", "{% endfor %}", 21), False),  # Python: too many statically nested blocks
        (_nested("{{% if items %}}", "{% endif %}", 98), True),
        (_nested("{{% if items %}}", "{% endif %}", 99), False),  # Python: too many levels of indentation
        ("".join(f"{{% if items %}}{n}{{% endif %}}" for n in range(200)), True),  # many blocks, none nested
    ],
)
def test_template_nesting_lint_agrees_with_the_tool_build(tmp_path: Path, source: str, *, compiles: bool) -> None:
    """TF215 reports a template nested deeper than Python compiles exactly when the template kind cannot build it."""
    tool = {"description": "Deep", "parameters": {"type": "object", "properties": {}}, "template": source}
    spec = _spec(tmp_path / "deep.yaml", {"deep": tool})
    found = [(d.code, d.message) for d in _lint(spec) if d.code == "TF215"]
    assert isinstance(compile_template(source), TemplateProblem) is not compiles
    if compiles:
        assert found == []
    else:
        ((code, message),) = found
        assert (code, message.split(" (")[0]) == ("TF215", "template does not compile: the template nests too deeply")


def test_number_too_long_to_read_is_a_diagnostic_not_a_crash(tmp_path: Path) -> None:
    """A number literal of more than 4,300 digits (Python will not read it) is TF215, not a traceback."""
    source = "{{ " + "1" * 5000 + " }}"
    spec = _spec(tmp_path / "long.yaml", {"long": {"description": "Long", "template": source}})
    reason = "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"
    message = f"template does not compile: a number the template writes cannot be read ({reason})"
    assert [(d.code, d.message) for d in _lint(spec)] == [("TF215", message)]
    assert isinstance(compile_template(source), TemplateProblem)


def test_template_that_does_not_compile_is_not_checked_for_variables(tmp_path: Path) -> None:
    """An undeclared variable in a template with a syntax error gets TF215 only."""
    spec = _spec(tmp_path / "say.yaml", {"say": {"description": "Say it", "template": "{{ undeclared }"}})
    assert [d.code for d in _lint(spec)] == ["TF215"]


def test_unknown_filter_inside_a_branch_is_reported(tmp_path: Path) -> None:
    """Jinja defers unknown filters in a branch to render time; TF215 still reports them, at their line."""
    spec = tmp_path / "say.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  say:\n    description: Say it\n    parameters: {type: object}\n"
        "    template: |\n      {% if true %}\n        {{ 'x' | yell }}\n      {% endif %}\n"
    )
    (found,) = _lint(spec)
    assert (found.code, found.line, found.column) == ("TF215", 8, 9)
    assert found.message == "template does not compile: unknown filter 'yell'"


def test_quoted_template_lines_map_to_the_scalar(tmp_path: Path) -> None:
    """A one-line quoted template with a newline escape reports at its start, not on a later file line."""
    spec = tmp_path / "say.yaml"
    spec.write_text(
        'toolflow: 1\ntools:\n  say:\n    description: Say it\n    template: "a\\nb\\n{{ x"\n'
        "  look:\n    description: Look\n    implementation: look\n"
    )
    (found,) = _lint(spec)
    assert (found.code, found.line, found.column) == ("TF215", 5, 15)


def test_undeclared_variable_messages(tmp_path: Path) -> None:
    """TF216 names each unknown variable once, with a suggestion where one is close."""
    params = {"type": "object", "properties": {"message": {"type": "string", "description": "What to say"}}}
    spec = _spec(
        tmp_path / "say.yaml",
        {
            "say": {
                "description": "Say it",
                "parameters": params,
                "template": "{{ mesage }}{{ mesage }}{{ range(1) }}",
            },
            "echo": {"description": "Echo it", "command": ["echo", "{{ text }}", "{{ env.HOME }}"]},
        },
    )
    assert [d.message for d in _lint(spec)] == [
        "template reads 'mesage', which is not a parameter of tool 'say'; did you mean 'message'?",
        "command argv[1] reads 'text', but tool 'echo' declares no parameters",
        "command argv[2] reads env.NAME, which commands cannot; write ${HOME}",
    ]


# --- parameter rules ---------------------------------------------------------------------------


def test_when_mapping_key_is_pointed_at_with_an_escaped_pointer(tmp_path: Path) -> None:
    """An unknown key of a `when` mapping is reported at that key; the pointer escapes '/' and '~'."""
    spec = tmp_path / "search.yaml"
    spec.write_text(
        "toolflow: 1\ntools:\n  search:\n    description: Search\n    implementation: search\n"
        "    parameters:\n      type: object\n      properties:\n"
        "        id: {type: string, description: Exact id}\n"
        "    parameter_rules:\n      - when: {a/b~c: 1}\n        require: [id]\n"
    )
    (found,) = _lint(spec)
    assert (found.code, found.line, found.column) == ("TF211", 11, 16)
    assert found.pointer == "/tools/search/parameter_rules/0/when/a~1b~0c"


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": [1], "required": "id"},
        {"type": "object", "properties": {"id": True, "q": False}, "required": [1, None, "id"]},
        {"type": "object", "properties": {"id": {"type": "string"}}, "required": {"id": True}},
        {"properties": None},
        {},
    ],
)
def test_rules_survive_odd_parameter_schemas(tmp_path: Path, parameters: dict[str, Any]) -> None:
    """Parameter schemas that are not valid JSON Schema never make a semantic rule raise."""
    tool = _tool(
        parameters=parameters,
        parameter_rules=[
            {"when": "id", "require": ["q", "q"]},
            {"when": {"id": "x"}, "require": ["q"]},
            {"exclusive": ["id", "q"]},
            {"exactly_one": ["id"]},
        ],
    )
    tool.pop("implementation")
    tool["template"] = "{{ id }}{{ env.X }}"
    spec = _spec(tmp_path / "odd.yaml", {"odd": tool})
    ctx = LintContext(files=load_specs([spec]).files)
    assert {d.code for d in _run_rules(ctx)} <= {"TF211", "TF212", "TF216"}


def test_rules_run_on_tools_built_without_a_locator() -> None:
    """Tools built in code (no file, no locator) are checked too, positioned at 1:1."""
    tool = ToolSpec(
        name="t",
        category="dangerous",
        parameters={"type": "object", "properties": {"a": {}}, "required": ["a"]},
        parameter_rules=(
            ParameterRule(kind="exclusive", params=("a", "zz"), pointer="/tools/t/parameter_rules/0"),
            ParameterRule(kind="exactly_one", params=("a", "a"), pointer="/tools/t/parameter_rules/1"),
        ),
        depends_on=(ToolDependency(tool="t", pointer="/tools/t/depends_on/0"),),
        implementations=(
            Implementation(kind="template", config={"source": "{{ b", "env": []}, pointer="/tools/t/template"),
            Implementation(kind="command", config={"argv": []}, pointer="/tools/t/command"),
        ),
        pointer="/tools/t",
    )
    found = _run_rules(LintContext(files=(SpecFile(path="<code>", tools=(tool,)),)))
    assert sorted(d.code for d in found) == ["TF211", "TF212", "TF212", "TF214", "TF215", "TF217", "TF218", "TF219"]
    assert {(d.line, d.column) for d in found} == {(1, 1)}


# --- tool dependencies -------------------------------------------------------------------------


def test_cycle_messages_start_at_the_reporting_tool(tmp_path: Path) -> None:
    """Each tool on a cycle reports it once, starting from itself; tools off the cycle are silent."""
    tools = {
        "a": _tool(depends_on=["b"]),
        "b": _tool(depends_on=["c", "d"]),
        "c": _tool(depends_on=["a"]),
        "d": _tool(depends_on=["d"]),
        "e": _tool(depends_on=["a"]),
    }
    found = _lint(_spec(tmp_path / "tools.yaml", tools))
    assert [(d.pointer, d.message.split(":")[0]) for d in found] == [
        ("/tools/a/depends_on/0", "dependency cycle a -> b -> c -> a"),
        ("/tools/b/depends_on/0", "dependency cycle b -> c -> a -> b"),
        ("/tools/c/depends_on/0", "dependency cycle c -> a -> b -> c"),
        ("/tools/d/depends_on/0", "dependency cycle d -> d"),
    ]


def test_long_dependency_chains_need_no_recursion(tmp_path: Path) -> None:
    """A chain of 3,000 tools is checked without recursion, and a long cycle's message stays short."""
    count = 3000
    tools = {f"t{i}": _tool(depends_on=[f"t{i + 1}"]) for i in range(count - 1)}
    tools[f"t{count - 1}"] = _tool()
    spec = _spec(tmp_path / "chain.yaml", tools)
    assert _lint(spec) == []
    ring = {f"t{i}": _tool(depends_on=[f"t{(i + 1) % 40}"]) for i in range(40)}
    found = _lint(_spec(tmp_path / "chain.yaml", ring))
    assert len(found) == 40
    assert found[0].message.startswith("dependency cycle t0 -> t1 -> ")
    assert "-> ... -> t0 (40 tools)" in found[0].message


def test_dependency_on_a_tool_of_another_file_is_known(tmp_path: Path) -> None:
    """TF213 looks for the tool in every linted file, and never suggests the tool itself."""
    look = _spec(tmp_path / "look.yaml", {"look": _tool()})
    spec = _spec(tmp_path / "open.yaml", {"open_look": _tool(depends_on=["look", "open_lok"])})
    (found,) = _lint(look, spec)
    assert found.message == "tool 'open_look' depends on 'open_lok', which no spec file declares"


# --- retry, cache, categories ------------------------------------------------------------------


def test_dangerous_retry_points_at_the_retry_that_asked(tmp_path: Path) -> None:
    """A tool's own `retry` without attempts defers to the file's default, which is then blamed."""
    tools = {"rm": _tool(category="dangerous", retry={"initial": "2s"})}
    spec = _spec(tmp_path / "rm.yaml", tools, defaults={"retry": {"attempts": 3}})
    (found,) = _lint(spec)
    assert (found.code, found.pointer) == ("TF219", "/defaults/retry")


def test_categories_declared_by_any_file_are_known(tmp_path: Path) -> None:
    """A category declared in one file's policy is known in every file; a non-mapping policy declares none."""
    policy = _spec(tmp_path / "policy.yaml", {}, policy={"categories": {"observe": {}}})
    other = _spec(tmp_path / "other.yaml", {}, policy={"categories": ["notify"]})
    spec = _spec(tmp_path / "tools.yaml", {"look": _tool(category="observe"), "tell": _tool(category="notify")})
    (found,) = _lint(policy, other, spec)
    assert (found.code, found.pointer) == ("TF221", "/tools/tell/category")


# --- TF225: toolset names across files ----------------------------------------------------------


def _toolset_files(tmp_path: Path, *names: str) -> list[Path]:
    """One spec file per name, each with its own template tool and a toolset 'core' selecting it."""
    return [
        _spec(
            tmp_path / f"{name}.yaml",
            {name: {"description": "Say it", "template": "hi"}},
            toolsets={"core": {"tools": [name]}},
        )
        for name in names
    ]


def test_duplicate_toolset_each_declaration_names_the_others(tmp_path: Path) -> None:
    """With three files declaring toolset 'core', each diagnostic names the other two places."""
    paths = _toolset_files(tmp_path, "a", "b", "c")
    found = list(lint_paths(paths, LintConfig(select=("TF225",))).diagnostics)
    assert [(d.code, d.pointer) for d in found] == [("TF225", "/toolsets/core")] * 3
    for path, diagnostic in zip(paths, found, strict=True):
        others = [f"{p}:4:5" for p in paths if p != path]  # line 4 of the JSON: "core": {
        assert diagnostic.message == f"toolset 'core' is also declared at {', '.join(others)}"


def test_same_file_named_twice_does_not_declare_its_toolsets_twice(tmp_path: Path) -> None:
    """A file given twice on the command line is not a duplicate toolset, and its registry builds."""
    (spec,) = _toolset_files(tmp_path, "a")
    assert lint_paths([spec, tmp_path, f"{tmp_path}/./a.yaml"]).diagnostics == ()
    assert Registry.build(load_specs([spec]), load_plugins(entry_points=False)).toolset("core").names() == ("a",)


def test_lint_reports_the_duplicate_toolsets_the_registry_refuses(tmp_path: Path) -> None:
    """Lint passes exactly the toolset declarations the registry accepts."""
    paths = _toolset_files(tmp_path, "a", "b")
    assert [d.code for d in lint_paths(paths).diagnostics] == ["TF225", "TF225"]
    with pytest.raises(RegistryError, match="toolset 'core' is declared twice"):
        Registry.build(load_specs(paths), load_plugins(entry_points=False))


# --- messages ----------------------------------------------------------------------------------


def test_semantic_messages_follow_the_house_style() -> None:
    """Every message of the TF211-TF221 cases starts lower-case and has no trailing period."""
    cases = [p for p in sorted((CASES / "invalid").iterdir()) if p.name[:5] in {c.lower() for c in SEMANTIC_RULES}]
    messages = [d.message for d in _lint(*cases)]
    assert len(messages) > 30
    for message in messages:
        assert message[0].islower(), message
        assert not message.endswith("."), message
