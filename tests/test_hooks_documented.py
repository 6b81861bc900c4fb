"""Every hook of ``toolflow.hookspecs`` is documented, in its docstring and in docs/plugin-hooks.md."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolflow import hookspecs
from toolflow._plugins import PluginLoadWarning

ROOT = Path(__file__).resolve().parent.parent
HOOKS_MD = ROOT / "docs" / "plugin-hooks.md"
SECTION = re.compile(r"^## (toolflow_\w+)\s*$", re.MULTILINE)


def _hooks() -> dict[str, object]:
    """The hook specifications: functions of the module named ``toolflow_*`` and marked as specs."""
    return {
        name: value
        for name, value in vars(hookspecs).items()
        if name.startswith("toolflow_") and callable(value) and hasattr(value, "toolflow_spec")
    }


def _sections() -> dict[str, str]:
    """``## toolflow_xxx`` sections of docs/plugin-hooks.md: hook name to the section's text."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    parts = re.split(r"^(?=## )", text, flags=re.MULTILINE)
    found: dict[str, str] = {}
    for part in parts:
        match = SECTION.match(part)
        if match:
            assert match[1] not in found, f"{match[1]} is documented twice"
            found[match[1]] = part
    return found


def _signature_in(section: str, hook: str) -> list[str]:
    """Parameter names of the first ``def <hook>(...)`` in the section's Python blocks."""
    for block in re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.FunctionDef) and node.name == hook:
                return [a.arg for a in node.args.args]
    pytest.fail(f"the {hook} section shows no `def {hook}(...)` signature")


def test_hookspecs_has_hooks() -> None:
    """The spec module declares the hooks the plugin system needs (guards the discovery below)."""
    hooks = _hooks()
    assert "toolflow_register_implementations" in hooks
    assert len(hooks) >= 9
    assert sorted(hooks) == sorted(n for n in hookspecs.__all__ if n.startswith("toolflow_"))


@pytest.mark.parametrize("hook", sorted(_hooks()))
def test_hook_has_a_docstring(hook: str) -> None:
    """Each hook specification explains its contract in a docstring."""
    doc = inspect.getdoc(_hooks()[hook])
    assert doc, f"{hook} has no docstring"
    assert doc.splitlines()[0].rstrip().endswith("."), "the first line is a one-sentence summary"


@pytest.mark.parametrize("hook", sorted(_hooks()))
def test_hook_has_a_section(hook: str) -> None:
    """Each hook has a `## toolflow_xxx` section whose signature, example and failures match the spec."""
    sections = _sections()
    assert hook in sections, f"docs/plugin-hooks.md has no `## {hook}` section"
    section = sections[hook]
    expected = list(inspect.signature(_hooks()[hook]).parameters)  # type: ignore[arg-type]
    assert _signature_in(section, hook) == expected
    assert "**When:**" in section
    assert "**Example:**" in section
    assert "**Failures:**" in section
    assert "@toolflow.hookimpl" in section


def test_no_documented_hook_is_missing_from_hookspecs() -> None:
    """Every `## toolflow_xxx` section names a real hook (no stale or misspelt sections)."""
    stale = sorted(set(_sections()) - set(_hooks()))
    assert not stale, f"documented but not in toolflow.hookspecs: {stale}"


def test_firstresult_hooks_say_so() -> None:
    """A hook whose first non-None answer wins is documented as such."""
    for name, hook in _hooks().items():
        options = getattr(hook, "toolflow_spec", {})
        if options.get("firstresult"):
            assert "firstresult" in _sections()[name], name


def test_every_hook_is_in_the_contents_list() -> None:
    """The list at the top of the page links every hook section."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    head = text[: text.index("\n## ")]
    for hook in _hooks():
        assert f"(#{hook})" in head, hook


def test_page_covers_discovery_and_failures() -> None:
    """Discovery, the environment variables, failure handling, strict mode and `toolflow plugins` are documented."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    for needle in (
        "[project.entry-points.toolflow]",
        "[tool.toolflow]",
        "TOOLFLOW_LOAD_PLUGINS",
        "TOOLFLOW_DISABLE_PLUGINS",
        "PluginLoadWarning",
        "PluginError",
        "--strict",
        "--output-format json",
        "## toolflow plugins",
    ):
        assert needle in text, needle


def test_failure_example_is_what_toolflow_plugins_prints(tmp_path: Path) -> None:
    """The failing plugin of the `toolflow plugins` example gives exactly the warning, row and error shown."""
    text = HOOKS_MD.read_text(encoding="utf-8")
    section = text[text.index("\n## toolflow plugins") :]
    shown = re.search(r"```console\n\$ toolflow plugins\n(.*?)```", section, flags=re.DOTALL)
    assert shown is not None
    warning, *table = shown[1].splitlines()
    site = tmp_path / "site"
    (site / "toolflow_weather").mkdir(parents=True)
    (site / "toolflow_weather" / "__init__.py").write_text("", encoding="utf-8")
    (site / "toolflow_weather" / "plugin.py").write_text("import weatherkit\n", encoding="utf-8")
    dist_info = site / "toolflow_weather-1.2.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toolflow-weather\nVersion: 1.2.0\n", encoding="utf-8"
    )
    (dist_info / "entry_points.txt").write_text("[toolflow]\nweather = toolflow_weather.plugin\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(site), "TOOLFLOW_LOAD_PLUGINS": "weather"}
    env.pop("TOOLFLOW_DISABLE_PLUGINS", None)
    result = subprocess.run(
        [sys.executable, "-m", "toolflow", "plugins"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [warning]
    actual = [re.split(r"\s{2,}", line.strip()) for line in result.stdout.splitlines()]
    for line in table[:-1]:  # the summary line counts whatever else is installed
        assert re.split(r"\s{2,}", line.strip()) in actual, line


def test_marker_options_and_misspelt_hooks_behave_as_documented() -> None:
    """optionalhook and specname work as the Markers section says, and a typo gives the quoted message."""
    from toolflow.testing import isolated_plugins

    class Plugin:
        @hookspecs.hookimpl(optionalhook=True)
        def toolflow_register_widgets(self, register: object) -> None:
            """A hook from a newer toolflow."""

        @hookspecs.hookimpl(specname="toolflow_register_implementations")
        def bindings(self, register: Any) -> None:
            register("weather.now", print)

    class Typo:
        @hookspecs.hookimpl
        def toolflow_register_implementation(self, register: object) -> None:
            """Misspelt."""

    plugins = isolated_plugins(strict=False)
    assert plugins.register(Plugin(), "weather")
    assert list(plugins.bindings()) == ["weather.now"]
    with pytest.warns(PluginLoadWarning) as caught:
        assert not plugins.register(Typo(), "typo")
    message = str(caught[0].message).replace("'typo'", "'weather'")
    documented = " ".join(HOOKS_MD.read_text(encoding="utf-8").split())
    quoted = re.search(r"`(plugin 'weather' failed to load: implements unknown hook [^`]*)`", documented)
    assert quoted is not None
    assert message.startswith(quoted[1])
