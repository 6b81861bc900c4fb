"""Corpus: a value from ``${VAR}`` in every place a spec can hold a string, through every output.

Each case puts ``${TF_CORPUS_SECRET}`` in one place of an otherwise clean spec (alone, or inside
other text) and sets the variable to one of several hostile values: quotes, backslashes,
non-ASCII, percent signs and slashes, a value that looks like YAML or a template, a long one
that messages truncate. The spec is linted once, and the report rendered in every output
format; ``toolflow list`` (text and JSON), ``toolflow graph`` and the exports of each format are rendered too.
No output may contain any eight characters of the value in a row, as they are or in the
escaped forms messages quote values in (JSON, ``repr``). Hypothesis adds random values.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _corpus import record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolflow._cli import run
from toolflow._cli_graph import GRAPH_FORMATS, tool_graph
from toolflow._cli_graph import render as render_graph
from toolflow._export import EXPORT_FORMATS, export_tools
from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._formats import FORMATS, render
from toolflow._loader import load_specs
from toolflow._provenance import MIN_MASKED_LENGTH

REF = "${TF_CORPUS_SECRET}"
_WORDS = re.compile(r"[A-Za-z ._-]{4}")

VALUES = [
    "pl4in-s3cr3t-0123456789abcdef",
    "w1th 'sInGle' and \"dOuBle\" qu0tes!",
    "b4ck\\sl4sh\\and\\t4bs\th3re",
    "ünïcødé-sëcrét-€-ключ-密钥",
    "p3rc3nt%20and/sl4sh?qu3ry=1&x=#fr4g",
    "{{ l00ks.l1ke_a_t3mpl4te }} {% 1f %}",
    "k3y: [y4ml, {l00ks: l1ke}]  # c0mm3nt",
    "x" * 30 + "-4-l0ng-s3cr3t-th4t-m3ss4ges-cut-" + "y" * 60,
]
"""Hostile values: each has no run of letters long enough to match ordinary text by chance."""

BASE: dict[str, Any] = {
    "toolflow": 1,
    "tools": {
        "t": {
            "description": "A tool",
            "parameters": {
                "type": "object",
                "properties": {"p": {"type": "integer", "description": "A number"}},
            },
            "template": "{{ p }}",
        },
        "u": {"description": "Another tool", "template": "u"},
    },
}

Change = Callable[[dict[str, Any]], None]


def _at(*path: str | int, value: Any) -> Change:
    def change(spec: dict[str, Any]) -> None:
        node: Any = spec
        for key in path[:-1]:
            node = node.setdefault(key, {}) if isinstance(key, str) else node[key]
        node[path[-1]] = value

    return change


def _p(key: str, value: Any) -> Change:
    return _at("tools", "t", "parameters", "properties", "p", key, value=value)


def _t(key: str, value: Any) -> Change:
    return _at("tools", "t", key, value=value)


PLACES: dict[str, Change] = {
    "version": _at("toolflow", value=REF),
    "description": _t("description", REF),
    "description, inside text": _t("description", f"Find {REF} now"),
    "title": _t("title", REF),
    "category": _t("category", REF),
    "timeout": _t("timeout", REF),
    "retry attempts": _t("retry", {"attempts": REF}),
    "retry on": _t("retry", {"on": [REF]}),
    "cache scope": _t("cache", {"scope": REF}),
    "cache ttl": _t("cache", {"ttl": REF}),
    "concurrency": _t("concurrency", REF),
    "depends_on": _t("depends_on", [REF]),
    "depends_on mapping": _t("depends_on", [{"tool": REF, "scope": REF}]),
    "implementation": _t("implementation", REF),
    "template": _t("template", f"{{{{ p }}}} {REF}"),
    "template syntax error": _t("template", f"{REF} {{{{ p "),
    "command argv": _t("command", [REF, "{{ p }}"]),
    "command cwd": _t("command", {"argv": ["true"], "cwd": REF}),
    "command env": _t("command", {"argv": ["true"], "env": {"K": REF}}),
    "parameters type": _at("tools", "t", "parameters", "type", value=REF),
    "parameters $schema": _at("tools", "t", "parameters", "$schema", value=REF),
    "parameters required": _at("tools", "t", "parameters", "required", value=[REF]),
    "parameter type": _p("type", REF),
    "parameter default": _p("default", REF),
    "parameter enum": _p("enum", [1, REF]),
    "parameter const": _p("const", REF),
    "parameter pattern": _p("pattern", REF),
    "parameter format": _p("format", REF),
    "parameter examples": _p("examples", [REF]),
    "parameter description": _p("description", REF),
    "parameter $ref": _p("$ref", REF),
    "parameter_rules": _t("parameter_rules", [{"exclusive": [REF, "p"]}]),
    "examples": _t("examples", [{"args": {"p": REF}}]),
    "example result": _t("examples", [{"args": {"p": 1}, "result": REF, "description": REF}]),
    "output_schema": _t("output_schema", {"type": REF}),
    "strict": _t("strict", REF),
    "toolset member": _at("toolsets", "s", value={"tools": [REF], "description": REF}),
    "toolset category": _at("toolsets", "s", value={"categories": [REF]}),
    "policy allow": _at("policy", value={"allow": [REF]}),
    "policy system_prompt": _at("policy", value={"system_prompt": REF}),
    "policy max_iterations": _at("policy", value={"max_iterations": REF}),
    "defaults timeout": _at("defaults", value={"timeout": REF}),
}


def _spec(place: str) -> str:
    spec = json.loads(json.dumps(BASE))
    PLACES[place](spec)
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)


def _windows(value: str) -> Iterator[str]:
    for form in {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]}:
        for start in range(len(form) - MIN_MASKED_LENGTH + 1):
            yield form[start : start + MIN_MASKED_LENGTH]


def _outputs(path: Path, value: str) -> Iterator[tuple[str, str]]:
    """``(what, text)`` of every output about the spec at *path*, with the variable set to *value*."""
    environ = {"TF_CORPUS_SECRET": value}
    report = lint_paths([path], LintConfig(select=("ALL",)), environ=environ)
    for name in FORMATS:
        yield f"lint --output-format {name}", render(report, name)
    loaded = load_specs([path], environ=environ)
    yield "diagnostics", "\n".join(d.render() for d in loaded.diagnostics)
    for export in EXPORT_FORMATS:
        yield f"schema --format {export}", json.dumps(export_tools(loaded.tools, export), ensure_ascii=False)
    for graph_format in GRAPH_FORMATS:
        yield f"graph --format {graph_format}", render_graph(*tool_graph(loaded.tools), graph_format)


def _check(tmp_path: Path, place: str, value: str) -> int:
    path = tmp_path / "spec.yaml"
    path.write_text(_spec(place), encoding="utf-8")
    count = 0
    windows = set(_windows(value))
    for what, text in _outputs(path, value):
        leaked = sorted(w for w in windows if w in text)
        assert not leaked, f"{place}: {what} shows {leaked[:3]} of the value:\n{text}"
        count += 1
    return count


@pytest.mark.parametrize("place", sorted(PLACES))
def test_no_output_shows_the_value(tmp_path: Path, place: str) -> None:
    """Every place, every hostile value, every output: the reference, never the value."""
    runs = sum(_check(tmp_path, place, value) for value in VALUES)
    record("secrets: spec places x values x outputs", runs)


def test_the_command_line_shows_no_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``toolflow list`` (text and JSON), ``toolflow lint`` and ``toolflow graph`` read the environment themselves: the same holds."""
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "none")
    runs = 0
    for place in ("description", "description, inside text", "category", "parameter enum", "template syntax error"):
        (tmp_path / "spec.yaml").write_text(_spec(place), encoding="utf-8")
        for value in VALUES:
            monkeypatch.setenv("TF_CORPUS_SECRET", value)
            windows = set(_windows(value))
            for args in (["list"], ["list", "--json"], ["lint", "--output-format", "json"], ["graph"]):
                out, err = io.StringIO(), io.StringIO()
                run([*args, str(tmp_path / "spec.yaml")], stdout=out, stderr=err)
                text = out.getvalue() + err.getvalue()
                assert not [w for w in windows if w in text], (place, args, text)
                runs += 1
    record("secrets: spec places x values x outputs", runs)


_VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\\\"'%/{}$\t"),
    min_size=MIN_MASKED_LENGTH,
    max_size=60,
).filter(lambda v: len(set(v)) >= 6 and v.strip() == v and not _WORDS.search(v))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(place=st.sampled_from(sorted(PLACES)), value=_VALUE)
def test_random_values(tmp_path: Path, place: str, value: str) -> None:
    """Random values (any printable text of 8 to 60 characters) in random places."""
    record("secrets: spec places x values x outputs", _check(tmp_path, place, value))
