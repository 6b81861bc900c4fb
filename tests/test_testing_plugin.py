"""``toolflow.testing``: the pytest plugin for plugin authors, used directly and in real pytest runs.

The fixtures are enabled here the way plugin authors enable them (``pytest_plugins``);
the ``pytester`` tests run small test files that use them in a separate pytest session,
in-process, to check what a plugin author sees: isolation between tests, teardown after a
failing test, and the failure messages.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio

from toolflow._plugins import DEFAULT_PLUGINS, ImplementationKind, PluginError, PluginLoadWarning, Plugins
from toolflow.hookspecs import hookimpl
from toolflow.testing import (
    AsyncFakeImplementation,
    CliResult,
    FakeImplementation,
    IsolatedPlugins,
    ToolflowProject,
    isolated_plugins,
)

pytest_plugins = ["pytester", "toolflow.testing"]

BUILTINS = list(DEFAULT_PLUGINS)

SAY = {
    "tools": {
        "say": {
            "description": "Say something to the room.",
            "category": "terminal",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string", "description": "What to say."}},
                "required": ["message"],
            },
            "template": "You say: {{ message }}",
        }
    }
}


def _kind_plugin() -> object:
    """A plugin adding an ``echo`` implementation kind whose value is a string."""

    class EchoKind:
        @hookimpl
        def toolflow_register_kinds(self, register: Any) -> None:
            register(ImplementationKind(name="echo", schema={"type": "string"}, build=lambda spec: print))

    return EchoKind()


# --- toolflow_plugins ------------------------------------------------------------------------


def test_plugins_fixture_holds_only_the_builtins(toolflow_plugins: IsolatedPlugins) -> None:
    """The fixture is a strict manager with the default plugins and no installed plugin."""
    assert isinstance(toolflow_plugins, Plugins)
    assert toolflow_plugins.strict
    assert [info.name for info in toolflow_plugins.infos] == BUILTINS
    assert {info.source for info in toolflow_plugins.infos} == {"builtin"}
    assert toolflow_plugins.bindings() == {}


def test_plugins_fixture_ignores_the_plugin_environment(
    toolflow_plugins: IsolatedPlugins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TOOLFLOW_LOAD_PLUGINS and TOOLFLOW_DISABLE_PLUGINS do not change an isolated manager."""
    monkeypatch.setenv("TOOLFLOW_LOAD_PLUGINS", "nothing")
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", ",".join(BUILTINS))
    assert [info.name for info in isolated_plugins().infos] == BUILTINS


def test_register_a_module_under_its_own_name(toolflow_plugins: IsolatedPlugins) -> None:
    """A module registered without a name is named after the module; its bindings show."""
    module = ModuleType("acme_tools")

    @hookimpl
    def toolflow_register_implementations(register: Any) -> None:
        register("acme.ping", "acme_tools.impl:ping")

    module.toolflow_register_implementations = toolflow_register_implementations  # type: ignore[attr-defined]
    assert toolflow_plugins.register(module)
    (binding,) = toolflow_plugins.bindings()["acme.ping"]
    assert (binding.plugin, binding.target, binding.lazy) == ("acme_tools", "acme_tools.impl:ping", True)
    assert toolflow_plugins.infos[-1].hooks == ("toolflow_register_implementations",)


def test_bind_and_undo(toolflow_plugins: IsolatedPlugins) -> None:
    """bind() registers a one-binding plugin; undo() removes every registration and keeps the built-ins."""
    fake = FakeImplementation()
    toolflow_plugins.bind("weather.current", fake)
    toolflow_plugins.register(_kind_plugin(), "echo-kind")
    assert toolflow_plugins.bindings()["weather.current"][0].target is fake
    assert toolflow_plugins.bindings()["weather.current"][0].plugin == "bind[weather.current]"
    assert "echo" in toolflow_plugins.kinds()
    toolflow_plugins.undo()
    assert toolflow_plugins.bindings() == {}
    assert "echo" not in toolflow_plugins.kinds()
    assert [info.name for info in toolflow_plugins.infos] == BUILTINS
    toolflow_plugins.bind("weather.current", fake)  # the names are free again
    assert list(toolflow_plugins.bindings()) == ["weather.current"]


def test_two_plugins_binding_one_name_are_both_reported(toolflow_plugins: IsolatedPlugins) -> None:
    """Binding a name twice is visible as a conflict naming both plugins."""
    toolflow_plugins.bind("say", FakeImplementation(), plugin="first")
    toolflow_plugins.bind("say", FakeImplementation(), plugin="second")
    assert [b.plugin for b in toolflow_plugins.bindings()["say"]] == ["first", "second"]


def test_misspelt_hook_fails_loudly(toolflow_plugins: IsolatedPlugins) -> None:
    """Strict by default: a misspelt hook raises PluginError with a suggestion, and nothing is registered."""

    class Typo:
        @hookimpl
        def toolflow_register_implementation(self, register: Any) -> None:
            """Misspelt: the hook ends in 's'."""

    with pytest.raises(PluginError, match=r"did you mean 'toolflow_register_implementations'"):
        toolflow_plugins.register(Typo(), "typo")
    assert toolflow_plugins.manager.get_plugin("typo") is None


def test_unregister_one_plugin(toolflow_plugins: IsolatedPlugins) -> None:
    """unregister(name) removes one plugin and its info; unknown names are ignored."""
    toolflow_plugins.bind("a", FakeImplementation(), plugin="a-plugin")
    toolflow_plugins.bind("b", FakeImplementation(), plugin="b-plugin")
    toolflow_plugins.unregister("a-plugin")
    toolflow_plugins.unregister("never-registered")
    assert list(toolflow_plugins.bindings()) == ["b"]
    assert [info.name for info in toolflow_plugins.infos] == [*BUILTINS, "b-plugin"]


# --- toolflow_project ------------------------------------------------------------------------


def test_project_starts_with_an_isolating_pyproject(toolflow_project: ToolflowProject, tmp_path: Path) -> None:
    """A new project is tmp_path/project with a pyproject.toml naming specs/, and no specs."""
    assert toolflow_project.root == tmp_path / "project"
    assert (toolflow_project.root / "pyproject.toml").read_text(encoding="utf-8") == (
        '[tool.toolflow]\nspecs = ["specs"]\n'
    )
    assert toolflow_project.spec_paths() == [str(toolflow_project.root / "specs")]
    result = toolflow_project.load()
    assert result.tools == ()


def test_write_spec_dumps_a_mapping_with_the_version_first(toolflow_project: ToolflowProject) -> None:
    """A mapping becomes YAML under specs/ with `toolflow: 1` added as its first key."""
    path = toolflow_project.write_spec("room/say.yaml", SAY)
    assert path == toolflow_project.root / "specs" / "room" / "say.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("toolflow: 1\ntools:\n  say:\n")
    (tool,) = toolflow_project.load().tools
    assert (tool.name, tool.category, tool.file) == ("say", "terminal", str(path))


def test_write_spec_keeps_an_explicit_version(toolflow_project: ToolflowProject) -> None:
    """A mapping that names its version keeps it (and the loader reports a wrong one)."""
    toolflow_project.write_spec("v2.yaml", {"toolflow": 2, "tools": {}})
    assert [d.code for d in toolflow_project.load().diagnostics] == ["TF105"]


def test_write_spec_text_is_dedented_and_positions_hold(toolflow_project: ToolflowProject) -> None:
    """YAML text is dedented, its leading newline dropped, so diagnostics point at the lines as written."""
    toolflow_project.write_spec(
        "bad.yaml",
        """
        toolflow: 1
        tools:
          say:
            description: Say something.
            template: hi
            colour: red
        """,
    )
    (diagnostic,) = toolflow_project.load().diagnostics
    assert (diagnostic.code, diagnostic.line, diagnostic.column) == ("TF101", 6, 5)


def test_pyproject_moves_the_specs(toolflow_project: ToolflowProject) -> None:
    """[tool.toolflow] specs in the project's pyproject decides what load() and lint() read."""
    toolflow_project.pyproject(
        """
        [tool.toolflow]
        specs = ["tools"]
        """
    )
    toolflow_project.write_spec("ignored.yaml", "toolflow: 1\ntools: {colour: red}\n")
    toolflow_project.write("tools/say.yaml", json.dumps({"toolflow": 1, **SAY}))
    assert [t.name for t in toolflow_project.load().tools] == ["say"]
    assert toolflow_project.lint().exit_code == 0


def test_load_accepts_the_kinds_of_the_plugins_given(
    toolflow_project: ToolflowProject, toolflow_plugins: IsolatedPlugins
) -> None:
    """A plugin's implementation kind is a known spec key only when that plugin is passed to load()."""
    toolflow_project.write_spec("echo.yaml", {"tools": {"hello": {"description": "Say hello.", "echo": "hello"}}})
    assert [d.code for d in toolflow_project.load(toolflow_plugins).diagnostics] == ["TF101"]
    toolflow_plugins.register(_kind_plugin(), "echo-kind")
    result = toolflow_project.load(toolflow_plugins)
    assert result.diagnostics == ()
    (tool,) = result.tools
    assert [(i.kind, i.config) for i in tool.implementations] == [("echo", "hello")]


def test_project_plugins_come_from_pyproject(toolflow_project: ToolflowProject) -> None:
    """plugins() loads the built-ins plus [tool.toolflow] plugins, importable from the project root."""
    toolflow_project.pyproject('[tool.toolflow]\nplugins = ["local_tools"]\n')
    toolflow_project.write(
        "local_tools.py",
        """
        import toolflow.hookspecs

        @toolflow.hookspecs.hookimpl
        def toolflow_register_implementations(register):
            register("local.ping", lambda: "pong")
        """,
    )
    plugins = toolflow_project.plugins()
    assert [(i.name, i.source) for i in plugins.infos][-1] == ("local_tools", "project")
    assert list(plugins.bindings()) == ["local.ping"]
    assert "local_tools" in sys.modules
    assert str(toolflow_project.root) in sys.path
    toolflow_project.forget_imports()
    assert "local_tools" not in sys.modules
    assert str(toolflow_project.root) not in sys.path


def test_a_broken_project_plugin_fails_strictly(toolflow_project: ToolflowProject) -> None:
    """A local plugin that cannot be imported raises PluginError naming it (strict), or is recorded as failed."""
    toolflow_project.pyproject('[tool.toolflow]\nplugins = ["missing_module"]\n')
    with pytest.raises(PluginError, match="missing_module"):
        toolflow_project.plugins()
    with pytest.warns(PluginLoadWarning, match="missing_module"):
        plugins = toolflow_project.plugins(strict=False)
    assert plugins.infos[-1].status == "failed"


def test_lint_runs_in_the_project(
    toolflow_project: ToolflowProject, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """lint() runs the real CLI in the project directory, whatever the current directory is."""
    monkeypatch.chdir(tmp_path)
    toolflow_project.write_spec("ok.yaml", SAY)
    result = toolflow_project.lint()
    assert isinstance(result, CliResult)
    assert result == (0, "All checks passed: 1 file, 1 tool.\n", "")
    toolflow_project.write_spec("bad.yaml", {"tools": {"look": {"template": "You see nothing."}}})
    code, out, err = toolflow_project.lint("--select", "TF501")
    assert code == 1
    assert out.startswith("specs/bad.yaml:3:3: TF501 ")
    assert err == ""
    assert Path.cwd() == tmp_path


def test_lint_runs_the_rules_of_local_plugins(toolflow_project: ToolflowProject) -> None:
    """A lint rule of a plugin named in [tool.toolflow] plugins reports through lint(), and `plugins` lists it."""
    toolflow_project.pyproject('[tool.toolflow]\nplugins = ["house_rules"]\n')
    toolflow_project.write(
        "house_rules.py",
        """
        from toolflow._diagnostics import Severity
        from toolflow._lint._rule import Rule
        from toolflow.hookspecs import hookimpl

        def check(ctx):
            for tool in ctx.tools:
                if tool.name.startswith("tmp_"):
                    yield RULE.diag(tool, tool.pointer, f"tool {tool.name!r} looks temporary", key=True)

        RULE = Rule(code="HOUSE101", name="temporary-tool", severity=Severity.ERROR, doc="A temporary tool.", check=check)

        @hookimpl
        def toolflow_register_lint_rules(register):
            register(RULE)
        """,
    )
    toolflow_project.write_spec("tmp.yaml", {"tools": {"tmp_probe": {"description": "Probe.", "template": "ok"}}})
    code, out, _ = toolflow_project.lint("--select", "HOUSE")
    assert code == 1
    assert out.startswith("specs/tmp.yaml:3:3: HOUSE101 tool 'tmp_probe' looks temporary\n")
    listed = json.loads(toolflow_project.run("plugins", "--output-format", "json").stdout)["plugins"]
    assert {"name": "house_rules", "source": "project", "status": "loaded"}.items() <= next(
        p for p in listed if p["name"] == "house_rules"
    ).items()


def test_run_reports_usage_errors(toolflow_project: ToolflowProject) -> None:
    """run() returns the CLI's exit code and messages instead of raising or exiting."""
    assert toolflow_project.run("--version").stdout.startswith("toolflow ")
    code, _, err = toolflow_project.lint("--select", "NOPE999")
    assert code == 2
    assert "NOPE999" in err


def test_run_sets_and_restores_the_environment(
    toolflow_project: ToolflowProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env= applies to the run only: `${VAR}` in a spec sees it, and the old values come back."""
    monkeypatch.setenv("TF_TESTING_GONE", "before")
    monkeypatch.delenv("TF_TESTING_WHO", raising=False)
    toolflow_project.write_spec(
        "who.yaml", "toolflow: 1\ntools:\n  who:\n    description: Who.\n    template: ${TF_TESTING_WHO}\n"
    )
    assert "TF007" in toolflow_project.lint().stdout
    result = toolflow_project.lint(env={"TF_TESTING_WHO": "Who is here.", "TF_TESTING_GONE": None})
    assert result.exit_code == 0, result
    assert "TF_TESTING_WHO" not in __import__("os").environ
    assert __import__("os").environ["TF_TESTING_GONE"] == "before"


def test_registry_binds_a_fake(toolflow_project: ToolflowProject, toolflow_plugins: IsolatedPlugins) -> None:
    """registry() builds the Registry from the project's specs and the plugins given."""
    fake = FakeImplementation()
    toolflow_plugins.bind("weather.current", fake)
    toolflow_project.write_spec(
        "weather.yaml",
        {
            "tools": {
                "weather": {"description": "Current weather in a city.", "implementation": "weather.current"},
                "say": SAY["tools"]["say"],
            }
        },
    )
    registry = toolflow_project.registry(toolflow_plugins)
    assert registry.names() == ("weather", "say")
    assert registry.get("weather").resolve() is fake
    assert registry.get("say").kind == "template"


# --- fakes -----------------------------------------------------------------------------------


def test_fake_echoes_the_arguments_by_default() -> None:
    """With nothing queued a fake returns a success result holding the arguments, and records the call."""
    fake = FakeImplementation()
    assert fake(city="Oslo") == {"success": True, "data": {"city": "Oslo"}}
    assert fake() == {"success": True, "data": {}}
    assert fake.calls == [{"city": "Oslo"}, {}]
    assert (fake.call_count, fake.last_call) == (2, {})


def test_fake_plays_its_queue_in_order_then_the_default() -> None:
    """Queued values and exceptions come out first-in first-out; then the given default."""
    fake = FakeImplementation("done", name="weather").returns(1, None).raises(TimeoutError("slow"), KeyError)
    fake.returns({"success": False, "error": "closed"})
    assert fake() == 1
    assert fake() is None
    with pytest.raises(TimeoutError, match="slow"):
        fake(attempt=3)
    with pytest.raises(KeyError):
        fake()
    assert fake() == {"success": False, "error": "closed"}
    assert fake() == "done"
    assert fake.call_count == 6
    assert fake.calls[2] == {"attempt": 3}
    assert repr(fake) == "FakeImplementation(name='weather', calls=6, queued=0)"


def test_fake_reset_forgets_calls_and_queue() -> None:
    """reset() empties both the recorded calls and the queue."""
    fake = FakeImplementation().returns(1)
    fake(a=1)
    fake.returns(2)
    fake.reset()
    assert (fake.calls, fake.last_call) == ([], None)
    assert fake(b=2) == {"success": True, "data": {"b": 2}}


def test_fake_records_a_copy_of_the_arguments() -> None:
    """Mutating the recorded call does not change what the fake returned, and the reverse."""
    fake = FakeImplementation()
    result = fake(n=1)
    result["data"]["n"] = 2
    assert fake.calls == [{"n": 1}]


async def test_async_fake_awaits_and_records() -> None:
    """The async fake is awaited, plays its queue like the sync one, and keeps ctx apart."""
    fake = AsyncFakeImplementation().returns("first").raises(ConnectionError("down"))
    assert await fake(query="a", ctx="the-context") == "first"
    with pytest.raises(ConnectionError):
        await fake(query="b")
    assert await fake(query="c") == {"success": True, "data": {"query": "c"}}
    assert fake.calls == [{"query": "a"}, {"query": "b"}, {"query": "c"}]
    assert fake.contexts == ["the-context", None, None]
    fake.reset()
    assert (fake.calls, fake.contexts) == ([], [])


async def test_async_fake_delay_can_time_out(autojump_clock: trio.testing.MockClock) -> None:
    """A slow async fake sleeps on trio's clock: a timeout cancels it, and the call is still recorded."""
    fake = AsyncFakeImplementation(delay=5.0).returns("late")
    with trio.move_on_after(1.0) as scope:
        await fake(n=1)
    assert scope.cancelled_caught
    assert fake.calls == [{"n": 1}]
    with trio.fail_after(10):
        assert await fake(n=2) == "late"
    assert trio.current_time() == pytest.approx(6.0)


def test_registry_treats_the_async_fake_as_async(
    toolflow_project: ToolflowProject, toolflow_plugins: IsolatedPlugins
) -> None:
    """A registered AsyncFakeImplementation is seen as an async implementation, the sync one is not."""
    toolflow_plugins.bind("slow", AsyncFakeImplementation())
    toolflow_plugins.bind("fast", FakeImplementation())
    toolflow_project.write_spec(
        "two.yaml",
        {
            "tools": {
                "slow": {"description": "A slow tool.", "implementation": "slow"},
                "fast": {"description": "A fast tool.", "implementation": "fast"},
            }
        },
    )
    registry = toolflow_project.registry(toolflow_plugins)
    registry.get("slow").resolve()
    registry.get("fast").resolve()
    assert (registry.get("slow").is_async, registry.get("fast").is_async) == (True, False)


def test_module_works_without_pytest() -> None:
    """Without pytest installed the module still imports; the fakes work and the fixtures are plain functions."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pytest"] = None  # as if pytest were not installed
        import toolflow.testing as t
        fake = t.FakeImplementation().returns(42)
        print(fake(x=1), fake.calls, type(t.toolflow_plugins).__name__, "pytest" in sys.modules)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "42 [{'x': 1}] function True"


def test_import_toolflow_does_not_import_the_testing_module() -> None:
    """The public package never pulls in the test helpers or pytest."""
    code = "import sys, toolflow\nprint('toolflow.testing' in sys.modules, 'pytest' in sys.modules)\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "False False"


# --- real pytest runs (pytester) -------------------------------------------------------------

CONFTEST = 'pytest_plugins = ["toolflow.testing"]\n'


def _run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_plugin=source)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)


def test_pytester_a_plugin_author_test_suite_passes(pytester: pytest.Pytester) -> None:
    """A small plugin test module using all the fixtures and fakes passes in a real pytest run."""
    result = _run(
        pytester,
        """
        import pytest
        import toolflow.hookspecs
        from toolflow.testing import AsyncFakeImplementation, FakeImplementation

        @toolflow.hookspecs.hookimpl
        def toolflow_register_implementations(register):
            register("weather.current", FakeImplementation().returns({"temp": 21}))

        def test_my_plugin_binds(toolflow_plugins):
            toolflow_plugins.register(__import__(__name__), "weather")
            assert list(toolflow_plugins.bindings()) == ["weather.current"]

        def test_spec_and_registry(toolflow_project, toolflow_plugins):
            fake = FakeImplementation()
            toolflow_plugins.bind("weather.current", fake)
            toolflow_project.write_spec("weather.yaml", {
                "tools": {"weather": {"description": "Weather now.", "implementation": "weather.current"}},
            })
            registry = toolflow_project.registry(toolflow_plugins)
            assert registry.get("weather").resolve() is fake

        def test_lint(toolflow_project):
            toolflow_project.write_spec("x.yaml", {"tools": {"x": {"template": "hi"}}})
            code, out, err = toolflow_project.lint("--select", "TF501")
            assert code == 1 and "TF501" in out

        @pytest.mark.trio
        async def test_async_fake():
            fake = AsyncFakeImplementation().returns(1)
            assert await fake(a=1) == 1
        """,
    )
    result.assert_outcomes(passed=4)


def test_pytester_registrations_do_not_leak_between_tests(pytester: pytest.Pytester) -> None:
    """What one test registers, even a test that fails, is gone in the next test."""
    result = _run(
        pytester,
        """
        from toolflow.testing import FakeImplementation

        def test_1_registers_then_fails(toolflow_plugins):
            toolflow_plugins.bind("leak", FakeImplementation(), plugin="leaky")
            assert False, "fails on purpose"

        def test_2_sees_a_clean_manager(toolflow_plugins):
            assert toolflow_plugins.bindings() == {}
            assert toolflow_plugins.manager.get_plugin("leaky") is None
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*fails on purpose*"])


def test_pytester_projects_import_their_own_local_plugins(pytester: pytest.Pytester) -> None:
    """Two tests whose projects hold a local plugin module of the same name each import their own."""
    result = _run(
        pytester,
        """
        import pytest

        @pytest.mark.parametrize("name", ["first", "second"])
        def test_local_plugin(toolflow_project, name):
            toolflow_project.pyproject('[tool.toolflow]\\nplugins = ["local_tools"]\\n')
            toolflow_project.write("local_tools.py", f'''
                import toolflow.hookspecs

                @toolflow.hookspecs.hookimpl
                def toolflow_register_implementations(register):
                    register("{name}", print)
            ''')
            assert list(toolflow_project.plugins().bindings()) == [name]
        """,
    )
    result.assert_outcomes(passed=2)


def test_pytester_a_misspelt_hook_fails_the_test_with_a_suggestion(pytester: pytest.Pytester) -> None:
    """A plugin author's typo in a hook name fails their test with the hook it should have been."""
    result = _run(
        pytester,
        """
        import toolflow.hookspecs

        class Plugin:
            @toolflow.hookspecs.hookimpl
            def toolflow_register_kind(self, register):
                pass

        def test_register(toolflow_plugins):
            toolflow_plugins.register(Plugin(), "typo")
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*PluginError*toolflow_register_kind*did you mean 'toolflow_register_kinds'*"])


def test_pytester_fixtures_are_listed_with_their_docs(pytester: pytest.Pytester) -> None:
    """`pytest --fixtures` shows both fixtures with a one-line description."""
    result = _run(pytester, "def test_nothing():\n    pass\n", "--fixtures")
    result.stdout.fnmatch_lines(
        [
            "toolflow_plugins*",
            "*isolated plugin manager*",
            "toolflow_project*",
            "*temporary project directory*",
        ]
    )
