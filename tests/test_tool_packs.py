"""Tool packs (issue 17, section 6): plugins ship YAML tools that spec files include by name."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import toolflow
from toolflow._lint._engine import lint_paths
from toolflow._loader import load_specs

PACK = """\
toolflow: 1
include: [base-pack]
tools:
  shout:
    description: Says it loudly.
    parameters:
      type: object
      properties:
        text: {type: string, description: What.}
      required: [text]
    template: "{{ text | upper }}!"
"""

BASE = """\
toolflow: 1
tools:
  whisper:
    description: Says it softly.
    parameters:
      type: object
      properties:
        text: {type: string, description: What.}
      required: [text]
    template: "{{ text | lower }}..."
"""


class Packs:
    """A plugin shipping two packs, one including the other."""

    def __init__(self, folder: Path) -> None:
        (folder / "loud.yaml").write_text(PACK, encoding="utf-8")
        (folder / "base.yaml").write_text(BASE, encoding="utf-8")
        self.folder = folder

    @toolflow.hookimpl
    def toolflow_register_tool_packs(self, register: Callable[[str, Any], None]) -> None:
        register("voices", [self.folder / "loud.yaml"])
        register("base-pack", [str(self.folder / "base.yaml")])


def _project(tmp_path: Path, include: str) -> tuple[Path, toolflow.Plugins]:
    pack_dir = tmp_path / "plugin"
    pack_dir.mkdir()
    plugins = toolflow.load_plugins(entry_points=False)
    plugins.register(Packs(pack_dir), "packs")
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "main.yaml").write_text(
        f"toolflow: 1\ninclude: [{include}]\ntools:\n  hello:\n    description: Hi.\n    template: hi\n",
        encoding="utf-8",
    )
    return specs, plugins


def test_an_included_pack_brings_its_tools_and_the_packs_it_includes(tmp_path: Path) -> None:
    """`include: [voices, base-pack]` loads each pack's file once, the base pack also included by `voices`."""
    specs, plugins = _project(tmp_path, "voices, base-pack")
    loaded = load_specs([specs], **plugins.loader_options())
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    assert [tool.name for tool in loaded.tools] == ["hello", "shout", "whisper"]
    assert [Path(f.path).name for f in loaded.files] == ["main.yaml", "loud.yaml", "base.yaml"]
    (shout,) = [tool for tool in loaded.tools if tool.name == "shout"]
    assert shout.file == str(tmp_path / "plugin" / "loud.yaml")  # positions in the plugin's file


def test_an_unknown_pack_is_tf106_with_the_nearest_name(tmp_path: Path) -> None:
    """A misspelt pack name is an error at its entry, naming the nearest pack and the installed ones."""
    specs, plugins = _project(tmp_path, "voicse")
    loaded = load_specs([specs], **plugins.loader_options())
    (problem,) = loaded.diagnostics
    assert problem.render() == (
        f"{specs / 'main.yaml'}:2:11: TF106 no plugin provides tool pack 'voicse'; did you mean 'voices'? "
        "(installed packs: 'base-pack', 'voices')"
    )


def test_two_plugins_registering_one_pack_is_reported_where_it_is_included(tmp_path: Path) -> None:
    """Neither plugin's files are loaded; the include says why."""
    specs, plugins = _project(tmp_path, "voices")
    other = tmp_path / "other"
    other.mkdir()
    plugins.register(Packs(other), "more-packs")
    loaded = load_specs([specs], **plugins.loader_options())
    assert [d.code for d in loaded.diagnostics] == ["TF106"]
    assert "registered by more than one plugin" in loaded.diagnostics[0].message
    assert [tool.name for tool in loaded.tools] == ["hello"]


def test_lint_checks_the_files_of_included_packs_at_their_own_paths(tmp_path: Path) -> None:
    """A problem inside a pack's file is reported at its line in that file."""
    specs, plugins = _project(tmp_path, "voices")
    (tmp_path / "plugin" / "base.yaml").write_text(BASE.replace("{{ text | lower }}", "{{ txet }}"), encoding="utf-8")
    report = lint_paths([specs], packs=plugins.loader_options()["packs"])
    assert [(Path(d.file).name, d.code) for d in report.diagnostics] == [("base.yaml", "TF216")]
    assert report.exit_code == 1


async def test_the_engine_runs_a_pack_tool(tmp_path: Path) -> None:
    """A pack's tool is registered and called like any other."""
    specs, plugins = _project(tmp_path, "voices")
    registry = toolflow.load_registry([specs], plugins=plugins)
    with trio.fail_after(60):
        async with toolflow.open_engine(registry, plugins=plugins) as engine:
            result = await engine.call("shout", {"text": "hey"})
    assert (result.success, result.data) == (True, "HEY!")


@pytest.mark.parametrize(
    ("name", "files", "message"),
    [
        ("Bad Name", ["x.yaml"], "pack name 'Bad Name' must be lower-case words"),
        ("missing", ["/nowhere/at/all.yaml"], "pack 'missing' needs existing spec files"),
        ("single", "one.yaml", "must be a list of paths"),
    ],
)
def test_a_pack_registered_wrongly_fails_its_plugin_with_one_warning(name: str, files: Any, message: str) -> None:
    """A malformed registration is one warning naming the plugin; toolflow goes on without it."""

    class Broken:
        @toolflow.hookimpl
        def toolflow_register_tool_packs(self, register: Callable[[str, Any], None]) -> None:
            register(name, files)

    plugins = toolflow.load_plugins(entry_points=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugins.register(Broken(), "broken")
    assert len(caught) == 1
    assert "broken" in str(caught[0].message)
    assert message in str(caught[0].message)
    assert plugins.tool_packs() == {}
