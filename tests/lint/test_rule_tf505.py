"""TF505: ``${VAR}`` where the model is shown only its reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint.rules import builtin_rules

ENVIRONMENT = {"COMPANY": "Acme", "PRIVATE_SPACE": "internal-space-7", "TOKEN": "t0ken-for-the-wiki"}


def _codes(path: Path) -> list[tuple[str, str]]:
    report = lint_paths([path], LintConfig(select=("ALL",)), environ=ENVIRONMENT)
    return [(d.code, d.pointer) for d in report.diagnostics]


def test_the_example_triggers_it_and_use_instead_does_not(tmp_path: Path) -> None:
    """The rule's Example is reported at each string; its Use instead lints clean."""
    doc = next(r.doc for r in builtin_rules() if r.code == "TF505")
    example, use_instead = re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL)
    for label, block in (("example", example), ("instead", use_instead)):
        path = tmp_path / f"{label}.yaml"
        path.write_text("toolflow: 1\n" + block, encoding="utf-8")
        found = _codes(path)
        if label == "example":
            assert found == [
                ("TF505", "/tools/search_docs/description"),
                ("TF505", "/tools/search_docs/parameters/properties/space/enum/1"),
            ]
        else:
            assert found == []


@pytest.mark.parametrize(
    ("place", "pointer"),
    [
        ({"title": "${COMPANY} docs"}, "/tools/t/title"),
        (
            {
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string", "description": "Q", "default": "${TOKEN}"}},
                }
            },
            "/tools/t/parameters/properties/q/default",
        ),
        (
            {
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string", "description": "Q", "examples": ["${TOKEN}"]}},
                }
            },
            "/tools/t/parameters/properties/q/examples/0",
        ),
        (
            {"parameters": {"type": "object", "properties": {"q": {"const": "${TOKEN}", "description": "Q"}}}},
            "/tools/t/parameters/properties/q/const",
        ),
        ({"output_schema": {"type": "object", "description": "By ${COMPANY}"}}, "/tools/t/output_schema/description"),
        ({"examples": [{"args": {}, "description": "As ${COMPANY} does"}]}, "/tools/t/examples/0/description"),
    ],
)
def test_every_part_the_model_reads(tmp_path: Path, place: dict[str, object], pointer: str) -> None:
    """Title, anything in the parameters and output schema, examples: each is reported where it is."""
    tool = {"description": "A tool", "template": "x", **place}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"toolflow": 1, "tools": {"t": tool}}), encoding="utf-8")
    assert ("TF505", pointer) in _codes(path)


def test_the_policy_prompt_is_reported_and_configuration_is_not(tmp_path: Path) -> None:
    """The policy's system prompt is reported; the implementation's configuration never is."""
    spec = {
        "toolflow": 1,
        "policy": {"system_prompt": "You work for ${COMPANY}", "max_iterations": 4},
        "tools": {
            "t": {
                "description": "A tool",
                "command": {"argv": ["echo", "${TOKEN}"], "cwd": "${PRIVATE_SPACE:-.}", "env": {"K": "${TOKEN}"}},
                "timeout": "${TIMEOUT:-5s}",
            }
        },
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert _codes(path) == [("TF505", "/policy/system_prompt")]
