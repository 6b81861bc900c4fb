"""Plugin kinds where editors and spec authors meet them: ``toolflow spec-schema`` and TF101's message.

A project plugin (``[tool.toolflow] plugins``) adds a ``sqlite`` kind; ``TOOLFLOW_LOAD_PLUGINS``
loads it alone, so the installed first-party plugins take no part but in the list of entry points
that TF101 names, which the test reads from the same metadata.
"""

from __future__ import annotations

import importlib.metadata
import io
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import toolflow
from toolflow._cli import run

PLUGIN = """\
import toolflow

KIND = toolflow.ImplementationKind(
    name="sqlite",
    schema={
        "type": "object",
        "required": ["query"],
        "properties": {"query": {"type": "string"}},
        "additionalProperties": False,
    },
    build=lambda spec: (lambda **arguments: []),
    description="A query against a SQLite database.",
)


@toolflow.hookimpl
def toolflow_register_kinds(register):
    register(KIND)
"""

SPEC = """\
toolflow: 1
tools:
  count_notes:
    description: Count the notes.
    sqlite:
      query: select count(*) from notes
"""


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project whose plugin ``sqlite_kind`` adds the sqlite kind, with specs/tools.yaml using it."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "notes"\n\n[tool.toolflow]\nplugins = ["sqlite_kind"]\n', encoding="utf-8"
    )
    (tmp_path / "sqlite_kind.py").write_text(PLUGIN, encoding="utf-8")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tools.yaml").write_text(SPEC, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "sqlite_kind")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sqlite_kind", raising=False)
    return tmp_path


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def schema(*args: str) -> dict[str, Any]:
    code, out, err = cli("spec-schema", *args)
    assert (code, err) == (0, "")
    document: dict[str, Any] = json.loads(out)
    jsonschema.Draft7Validator.check_schema(document)
    return document


def shipped() -> dict[str, Any]:
    document: dict[str, Any] = json.loads((Path(toolflow.__file__).parent / "data" / "spec-v1.schema.json").read_text())
    return document


def test_spec_schema_adds_each_plugin_kind_marked_with_its_plugin() -> None:
    """The sqlite kind is a tool key with its schema, ``x-toolflow-plugin`` and a description naming the plugin."""
    tool = schema()["definitions"]["tool"]["properties"]
    assert tool["sqlite"] == {
        "type": "object",
        "required": ["query"],
        "properties": {"query": {"type": "string"}},
        "additionalProperties": False,
        "description": "A query against a SQLite database. From plugin 'sqlite_kind'.",
        "x-toolflow-plugin": "sqlite_kind",
    }
    assert tool["template"] == shipped()["definitions"]["tool"]["properties"]["template"]


def test_spec_schema_with_plugin_kinds_accepts_their_tools_and_checks_their_values() -> None:
    """An editor with the printed schema accepts the sqlite tool and flags a misspelt key inside it."""
    validator = jsonschema.Draft7Validator(schema())
    assert list(validator.iter_errors(yaml.safe_load(SPEC))) == []
    assert list(validator.iter_errors(yaml.safe_load(SPEC.replace("query:", "querry:")))) != []


def test_spec_schema_without_plugins_is_the_shipped_file() -> None:
    """``--no-plugins`` prints the schema as shipped, which refuses the plugin's key."""
    bare = schema("--no-plugins")
    assert bare == shipped()
    assert list(jsonschema.Draft7Validator(bare).iter_errors(yaml.safe_load(SPEC))) != []


def test_spec_schema_names_the_distribution_of_an_entry_point_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind from an installed distribution names it and its version (toolflow-http, when installed)."""
    found = {e.name: e.dist for e in importlib.metadata.entry_points(group="toolflow")}
    if "http" not in found or found["http"] is None:
        pytest.skip("toolflow-http is not installed")
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "http")
    http = schema()["definitions"]["tool"]["properties"]["http"]
    assert http["x-toolflow-plugin"] == "http"
    assert http["description"].endswith(f". From plugin 'http', distribution toolflow-http {found['http'].version}.")


def installed_entry_points() -> str:
    names = sorted({f"{e.name} ({e.dist.name})" for e in importlib.metadata.entry_points(group="toolflow") if e.dist})
    return ", ".join(names) or "none"


def test_an_unknown_key_of_a_tool_may_be_a_plugin_kind() -> None:
    """Without the plugin, TF101 says a plugin may provide the key, lists the entry points, and names --no-plugins."""
    code, out, _ = cli("lint", "--no-plugins")
    assert code == 1
    assert out.splitlines()[0] == (
        "specs/tools.yaml:5:5: TF101 unknown key 'sqlite' in tool 'count_notes'; a plugin may provide it as an "
        f"implementation kind (installed 'toolflow' entry points: {installed_entry_points()}; "
        "'toolflow lint --no-plugins' skips plugin kinds)"
    )
    assert cli("lint")[:2] == (0, "All checks passed: 1 file, 1 tool.\n")


def test_a_close_known_key_wins_over_the_plugin_hint() -> None:
    """A misspelt known key gets its did-you-mean and no word of plugins."""
    Path("specs/tools.yaml").write_text(SPEC.replace("    sqlite:", "    timout: 5s\n    sqlite:"), encoding="utf-8")
    out = cli("lint")[1]
    assert "TF101 unknown key 'timout' in tool 'count_notes'; did you mean 'timeout'?\n" in out
    assert "plugin" not in out


def test_an_unknown_key_outside_a_tool_gets_no_plugin_hint() -> None:
    """Only a tool's own keys can be implementation kinds: an unknown key elsewhere says nothing of plugins."""
    Path("specs/tools.yaml").write_text("toolflow: 1\nsqlite: {}\n" + SPEC.split("\n", 1)[1], encoding="utf-8")
    out = cli("lint")[1]
    assert "specs/tools.yaml:2:1: TF101 unknown key 'sqlite' in the spec file\n" in out
    assert "plugin" not in out
