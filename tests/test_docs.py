"""The documentation stays true: generated references are current, examples lint, links resolve."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolflow import _yaml
from toolflow._docgen import (
    BEGIN_FIELDS,
    END_FIELDS,
    FAMILIES,
    SECTIONS,
    family_of,
    iter_fields,
    main,
    render_rules,
    render_spec_fields,
    splice_fields,
)
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import Rule
from toolflow._lint.rules import builtin_rules
from toolflow._loader import MAX_FILE_BYTES, load_specs
from toolflow._schemas import compile_parameter_rules, spec_schema

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REGENERATE = "docs are stale: run python -m toolflow._docgen"
KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_FENCE = re.compile(r"^\s*```\s*([\w-]*)")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_EXPECT = re.compile(r"^<!-- expect: ([A-Z0-9, ]+) -->$")

Block = tuple[str, str, int]


def _blocks(text: str) -> list[Block]:
    """Fenced code blocks of Markdown *text*: (language, content, line of the opening fence)."""
    return [(language, body, line) for language, body, line, _ in _blocks_with_expectations(text)]


def _blocks_with_expectations(text: str) -> list[tuple[str, str, int, list[str]]]:
    """Fenced blocks with the codes an ``<!-- expect: TF216, TF501 -->`` line right above them names."""
    blocks: list[tuple[str, str, int, list[str]]] = []
    language, start = "", 0
    body: list[str] = []
    inside = False
    previous = ""
    expected: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if match and not inside:
            inside, language, start, body = True, match[1], number, []
            marker = _EXPECT.match(previous.strip())
            expected = sorted(c.strip() for c in marker[1].split(",")) if marker else []
        elif match and inside and not match[1]:
            inside = False
            blocks.append((language, "\n".join(body) + "\n", start, expected))
        elif inside:
            body.append(line)
        if line.strip():
            previous = line
    return blocks


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(text: str) -> set[str]:
    found = {_slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"^#{1,6} ", line)}
    found |= set(re.findall(r'<a id="([^"]+)"></a>', text))
    return found


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))]


def _schema_paths(schema: dict[str, Any]) -> set[str]:
    """Every property path of the spec schema, found independently of the generator."""

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in node:
            target: Any = schema
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return {**resolve(target), **{k: v for k, v in node.items() if k != "$ref"}}
        return node

    paths: set[str] = set()

    def walk(node: dict[str, Any], prefix: str) -> None:
        node = resolve(node)
        for key, sub in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            paths.add(path)
            walk(sub, path)
        items = node.get("items")
        if isinstance(items, dict) and "properties" in resolve(items):
            walk(items, f"{prefix}[]")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and "properties" in resolve(extra):
            walk(extra, f"{prefix}.<name>")

    walk(schema, "")
    return paths


# --- generated references ---------------------------------------------------------------


def test_rules_md_is_current() -> None:
    """docs/rules.md is exactly what the generator renders from the rule docstrings."""
    text = (DOCS / "rules.md").read_text(encoding="utf-8")
    assert text == render_rules(builtin_rules()), REGENERATE


def test_spec_reference_fields_are_current() -> None:
    """The generated field table of docs/spec-reference.md matches the shipped schema."""
    text = (DOCS / "spec-reference.md").read_text(encoding="utf-8")
    assert text.count(BEGIN_FIELDS) == 1
    assert text.count(END_FIELDS) == 1
    assert splice_fields(text, render_spec_fields(spec_schema())) == text, REGENERATE


def test_every_schema_property_is_in_the_reference() -> None:
    """Every property path of the spec schema appears in the spec reference."""
    text = (DOCS / "spec-reference.md").read_text(encoding="utf-8")
    paths = _schema_paths(spec_schema())
    assert "tools.<name>.retry.attempts" in paths
    missing = sorted(p for p in paths if f"`{p}`" not in text)
    assert not missing, f"not in docs/spec-reference.md: {missing}"


def test_reference_states_the_loader_limits() -> None:
    """The limits the spec reference quotes are the loader's."""
    text = (DOCS / "spec-reference.md").read_text(encoding="utf-8")
    assert f"bounded ({_yaml.MAX_EXPANDED_NODES:,} nodes)" in text
    assert f"at most {MAX_FILE_BYTES // (1024 * 1024)} MiB" in text


def test_every_tool_key_is_explained_by_hand() -> None:
    """Each tool key is named in the hand-written part of the reference, not only in the table."""
    text = (DOCS / "spec-reference.md").read_text(encoding="utf-8")
    hand_written = text[: text.index(BEGIN_FIELDS)]
    tool_keys = spec_schema()["definitions"]["tool"]["properties"]
    top_keys = spec_schema()["properties"]
    headings = " ".join(line for line in hand_written.splitlines() if line.startswith("#"))
    missing = [k for k in [*top_keys, *tool_keys] if f"`{k}`" not in hand_written and k not in headings.split()]
    assert not missing


def test_generator_follows_refs_lists_and_named_entries() -> None:
    """The field generator resolves $ref, lists, named entries, required keys and defaults."""
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "object",
                "additionalProperties": {"$ref": "#/definitions/item"},
                "description": "Named items.",
            },
        },
        "definitions": {
            "item": {
                "type": ["string", "object"],
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "description": "How big."},
                    "wait": {"$ref": "#/definitions/duration", "description": "Pause (default `2s`)."},
                    "mode": {"enum": ["a", "b"], "description": "`a` (default) or `b`."},
                    "tags": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"label": {"type": "string"}}},
                    },
                },
            },
            "duration": {"type": ["string", "number"]},
        },
    }
    rows = {f.path: f for f in iter_fields(schema)}
    assert list(rows) == [
        "items",
        "items.<key>",
        "items.<key>.size",
        "items.<key>.wait",
        "items.<key>.mode",
        "items.<key>.tags",
        "items.<key>.tags[]",
        "items.<key>.tags[].label",
    ]
    assert rows["items.<key>.size"].type == "integer, at least 1"
    assert rows["items.<key>.size"].default == "required (in the mapping form)"
    assert (rows["items.<key>.wait"].type, rows["items.<key>.wait"].default) == ("duration", "`2s`")
    assert rows["items.<key>.mode"].default == "`a`"
    assert rows["items.<key>.tags"].type == "list of mappings"


def test_docgen_main_writes_then_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """python -m toolflow._docgen rewrites stale docs, and --check reports them with exit 1."""
    reference = tmp_path / "spec-reference.md"
    reference.write_text(f"# Reference\n\n{BEGIN_FIELDS}\nSTALE TABLE\n{END_FIELDS}\n\nThe end.\n", encoding="utf-8")
    assert main(["--docs", str(tmp_path), "--check"]) == 1
    assert "run python -m toolflow._docgen" in capsys.readouterr().err
    assert main(["--docs", str(tmp_path)]) == 0
    assert main(["--docs", str(tmp_path), "--check"]) == 0
    text = reference.read_text(encoding="utf-8")
    assert text.startswith("# Reference\n\n")
    assert text.endswith(f"{END_FIELDS}\n\nThe end.\n")
    assert "STALE TABLE" not in text
    assert (tmp_path / "rules.md").read_text(encoding="utf-8") == render_rules(builtin_rules())


def test_docgen_main_refuses_a_reference_without_markers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A spec reference without the generated-fields markers is a usage problem (exit 2)."""
    (tmp_path / "spec-reference.md").write_text("# Reference\n", encoding="utf-8")
    assert main(["--docs", str(tmp_path)]) == 2
    assert "BEGIN GENERATED FIELDS" in capsys.readouterr().err
    assert not (tmp_path / "rules.md").exists()


# --- rule docstrings, codes and names ------------------------------------------------


@pytest.mark.parametrize("rule", builtin_rules(), ids=lambda r: r.code)
def test_rule_docstring_has_the_four_sections(rule: Rule) -> None:
    """Each rule docstring is a summary line then What it does / Why is this bad? / Example / Use instead."""
    lines = rule.doc.strip().splitlines()
    assert lines, "empty docstring"
    assert not lines[0].startswith("#"), "the first line is a one-line summary"
    headings = [line[3:].strip() for line in lines if line.startswith("## ")]
    assert headings == list(SECTIONS)
    sections = re.split(r"^## .*$", rule.doc, flags=re.MULTILINE)[1:]
    for title, body in zip(SECTIONS, sections, strict=True):
        assert body.strip(), f"section {title!r} is empty"


def test_rule_codes_and_names() -> None:
    """Codes are TFnnn in a known family, unique; names are unique kebab-case."""
    rules = builtin_rules()
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in rules:
        assert re.fullmatch(r"TF\d{3}", rule.code), rule.code
        assert KEBAB.match(rule.name), rule.name
        family = family_of(rule.code)
        assert family is not None, f"{rule.code} is in no family"
        assert rule.code[:3] == family.prefix


def test_rule_family_matches_how_the_rule_reports() -> None:
    """Loader and engine codes (TF0, TF1, TF9) have no check; every other rule has one (per file or project)."""
    for rule in builtin_rules():
        family = family_of(rule.code)
        assert family is not None
        assert (rule.check is None and rule.check_project is None) == family.loader, f"{rule.code} {rule.name}"


def test_rule_module_is_named_after_code_and_name() -> None:
    """Each rule lives in toolflow/_lint/rules/tf<code>_<name>.py."""
    folder = ROOT / "toolflow" / "_lint" / "rules"
    modules = {p.stem for p in folder.glob("tf*.py")}
    expected = {f"{r.code.lower()}_{r.name.replace('-', '_')}" for r in builtin_rules()}
    assert modules == expected


def test_families_are_ordered_and_distinct() -> None:
    """The family table covers distinct prefixes in code order."""
    prefixes = [f.prefix for f in FAMILIES]
    assert prefixes == sorted(set(prefixes))
    assert family_of("TF201") is FAMILIES[2]
    assert family_of("TF2011") is None


def test_rules_md_anchors_match_rule_urls() -> None:
    """Each diagnostic's docs URL fragment is an anchor of docs/rules.md."""
    anchors = _anchors((DOCS / "rules.md").read_text(encoding="utf-8"))
    for rule in builtin_rules():
        assert rule.url == f"https://toolflow.dev/docs/rules#{rule.code.lower()}"
        assert rule.code.lower() in anchors


# --- examples, links and the README ------------------------------------------------------


def _spec_examples() -> list[Any]:
    found = []
    for path in _markdown_files():
        if path.name == "rules.md" or not path.exists():
            continue
        for language, body, line, expected in _blocks_with_expectations(path.read_text(encoding="utf-8")):
            if language == "yaml" and re.search(r"^toolflow: 1$", body, flags=re.MULTILINE):
                found.append(pytest.param(body, expected, id=f"{path.name}:{line}"))
    return found


@pytest.mark.parametrize(("text", "expected"), _spec_examples())
def test_complete_spec_examples_lint_as_documented(tmp_path: Path, text: str, expected: list[str]) -> None:
    """Every complete spec file in the docs lints clean, or with exactly the codes its expect marker names."""
    spec = tmp_path / "example.yaml"
    spec.write_text(text, encoding="utf-8")
    report = lint_paths([spec], LintConfig())
    assert sorted(d.code for d in report.diagnostics) == expected, [d.render() for d in report.diagnostics]
    assert report.tool_count or "tools: {}" in text or "\npolicy:" in text or "\nmcp_servers:" in text or expected


def test_yaml_fragments_in_docs_parse() -> None:
    """Every YAML snippet in the docs (outside the rule reference) is well-formed YAML."""
    for path in _markdown_files():
        if path.name == "rules.md" or not path.exists():
            continue
        for language, body, line in _blocks(path.read_text(encoding="utf-8")):
            if language == "yaml":
                try:
                    _yaml.compose(body)
                except _yaml.DocumentError as exc:
                    pytest.fail(f"{path.name}:{line}: {exc.message}")


def _rule_compilations() -> list[tuple[str, str]]:
    blocks = _blocks((DOCS / "spec-reference.md").read_text(encoding="utf-8"))
    return [
        (first[1], second[1])
        for first, second in itertools.pairwise(blocks)
        if first[0] == "yaml" and first[1].startswith("parameter_rules:") and second[0] == "json"
    ]


def test_parameter_rule_compilations_in_the_reference_are_true(tmp_path: Path) -> None:
    """Each parameter-rule example of the spec reference compiles to the JSON Schema shown beside it."""
    pairs = _rule_compilations()
    assert len(pairs) == 5
    for rules_yaml, expected in pairs:
        names = set(re.findall(r"[a-z_]+", rules_yaml)) - {"parameter_rules", "when", "require", "advanced"}
        properties = "".join(f"\n        {n}: {{type: string}}" for n in sorted(names))
        body = "".join(f"\n    {line}" for line in rules_yaml.splitlines())
        spec = tmp_path / "rules.yaml"
        spec.write_text(
            "toolflow: 1\ntools:\n  t:\n    description: A tool.\n    template: x\n"
            f"    parameters:\n      type: object\n      properties:{properties}{body}\n",
            encoding="utf-8",
        )
        result = load_specs([spec])
        assert result.diagnostics == ()
        (tool,) = result.tools
        assert compile_parameter_rules(tool.parameter_rules) == json.loads(expected)


def test_relative_links_resolve() -> None:
    """Every relative link in README, CHANGELOG and docs/ names an existing file and anchor."""
    problems = []
    for path in _markdown_files():
        if not path.exists():
            continue
        for target in _LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                problems.append(f"{path.name}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text(encoding="utf-8")):
                problems.append(f"{path.name}: {target} (no such anchor)")
    assert not problems


def test_index_links_every_doc() -> None:
    """docs/index.md links every other page of docs/."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in _LINK.findall(index)}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked


def test_readme_quick_start_is_exactly_two_commands() -> None:
    """The README's quick start runs `tasks.py run` and `tasks.py test`, and nothing else."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = [
        line.strip().removeprefix("$ ").split("#")[0].strip()
        for _, body, _ in _blocks(section)
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert commands == ["python3 tasks.py run", "python3 tasks.py test"]
    tasks = (ROOT / "tasks.py").read_text(encoding="utf-8")
    assert '"run": run' in tasks
    assert '"test": test' in tasks
