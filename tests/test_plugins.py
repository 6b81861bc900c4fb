"""Plugin discovery and loading, with real throwaway distributions on ``sys.path`` (no pip, no mocks).

Each test builds its distributions in ``tmp_path``: a ``*.dist-info`` folder
with ``METADATA`` and ``entry_points.txt`` beside the plugin modules, which
``importlib.metadata.entry_points()`` discovers once the folder is on
``sys.path``. Module and distribution names carry a per-test suffix, so that
modules cached in ``sys.modules`` never leak from one test into another.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import io
import json
import os
import re
import sys
import textwrap
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolflow
from toolflow._cli import run
from toolflow._diagnostics import Severity
from toolflow._lint._rule import PluginFacts, Rule
from toolflow._plugins import (
    DEFAULT_PLUGINS,
    Binding,
    ImplementationKind,
    PluginError,
    PluginLoadWarning,
    Plugins,
    load_plugins,
)
from toolflow.hookspecs import hookimpl

INSTALLED_NAMES = sorted({ep.name for ep in importlib.metadata.entry_points(group="toolflow")})
INSTALLED = ",".join(INSTALLED_NAMES)
"""Entry points installed in the test environment (first-party plugins); blocked so that tests see only their own."""

GOOD = """\
from toolflow.hookspecs import hookimpl

def look(room):
    return f"you see the {room}"

@hookimpl
def toolflow_register_implementations(register):
    register("acme.look", look)
    register("acme.lazy", "{lazy}:double")

@hookimpl
def toolflow_before_call(call):
    pass
"""

LAZY = """\
def double(x):
    return x * 2
"""


class Site:
    """A folder on ``sys.path`` that holds throwaway distributions and modules."""

    def __init__(self, folder: Path, suffix: str) -> None:
        self.folder = folder
        self.suffix = suffix

    def name(self, stem: str) -> str:
        """A module or entry-point name unique to this test."""
        return f"{stem}_{self.suffix}"

    def module(self, stem: str, text: str) -> str:
        """Write module ``<stem>_<suffix>.py`` and return its name."""
        name = self.name(stem)
        (self.folder / f"{name}.py").write_text(textwrap.dedent(text))
        return name

    def dist(self, stem: str, entry_points: dict[str, str], version: str = "1.0") -> str:
        """Write distribution ``<stem>-<suffix>`` with *entry_points* in group ``toolflow``; return its name."""
        dist = f"{stem}-{self.suffix}"
        info = self.folder / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[toolflow]\n{lines}")
        return dist

    def plugin(self, stem: str, text: str, version: str = "1.0") -> tuple[str, str]:
        """A distribution ``<stem>-<suffix>`` whose entry point ``<stem>_<suffix>`` loads module *text*."""
        module = self.module(stem, text)
        return module, self.dist(stem, {module: module}, version)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    made = Site(folder, uuid.uuid4().hex[:10])
    yield made
    for name in [n for n in sys.modules if n.endswith(made.suffix)]:
        del sys.modules[name]


def _load(environ: dict[str, str] | None = None, **kwargs: Any) -> Plugins:
    """load_plugins with the installed first-party plugins blocked, and no builtins unless asked."""
    env = dict(environ or {})
    env["TOOLFLOW_DISABLE_PLUGINS"] = ",".join(filter(None, (INSTALLED, env.get("TOOLFLOW_DISABLE_PLUGINS"))))
    kwargs.setdefault("builtins", False)
    return load_plugins(environ=env, **kwargs)


def _info(plugins: Plugins, name: str) -> Any:
    found = [i for i in plugins.infos if i.name == name]
    assert len(found) == 1, plugins.infos
    return found[0]


def _load_warnings(record: Any) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, PluginLoadWarning)]


# --- a good plugin ---------------------------------------------------------------------------------------------


def test_entry_point_plugin_loads_with_its_distribution_hooks_and_bindings(site: Site) -> None:
    """A plugin found through its entry point is loaded, described and its bindings resolve."""
    lazy = site.module("lazy", LAZY)
    name, dist = site.plugin("good", GOOD.replace("{lazy}", lazy), version="2.3.1")
    plugins = _load()
    info = _info(plugins, name)
    assert (info.source, info.status, info.distribution, info.version) == ("entry-point", "loaded", dist, "2.3.1")
    assert info.module == name
    assert info.hooks == ("toolflow_before_call", "toolflow_register_implementations")
    assert info.implementations == ("acme.look", "acme.lazy")
    bindings = plugins.bindings()
    assert [b.plugin for b in bindings["acme.look"]] == [name]
    assert bindings["acme.look"][0].resolve()(room="hall") == "you see the hall"
    lazy_binding = bindings["acme.lazy"][0]
    assert lazy_binding.lazy
    assert lazy_binding.target == f"{lazy}:double"
    assert lazy not in sys.modules
    assert lazy_binding.resolve()(x=21) == 42


def test_builtins_are_registered_first_as_toolflow_plugins() -> None:
    """The default plugins come first, from distribution toolflow-yaml, and register the template kind."""
    plugins = load_plugins(entry_points=False)
    assert [i.name for i in plugins.infos] == list(DEFAULT_PLUGINS)
    assert {(i.source, i.distribution, i.status) for i in plugins.infos} == {("builtin", "toolflow-yaml", "loaded")}
    assert "template" in plugins.kinds()


def test_the_block_list_disables_a_builtin_but_the_allow_list_does_not(site: Site) -> None:
    """TOOLFLOW_DISABLE_PLUGINS may name a builtin; TOOLFLOW_LOAD_PLUGINS restricts third-party plugins only."""
    plugins = _load(
        {"TOOLFLOW_LOAD_PLUGINS": "nothing-else", "TOOLFLOW_DISABLE_PLUGINS": "toolflow.default_plugins.template"},
        builtins=True,
    )
    statuses = {i.name: i.status for i in plugins.infos if i.source == "builtin"}
    assert statuses == {name: "disabled" if name.endswith(".template") else "loaded" for name in DEFAULT_PLUGINS}
    assert "template" not in plugins.kinds()


def test_hooks_of_loaded_plugins_are_called_through_the_relay(site: Site) -> None:
    """Call hooks (before_call) reach a loaded plugin's implementation."""
    name, _ = site.plugin(
        "observer",
        """\
        from toolflow.hookspecs import hookimpl
        seen = []

        @hookimpl
        def toolflow_before_call(call):
            seen.append(call)
        """,
    )
    plugins = _load()
    plugins.hook.toolflow_before_call(call="c1")
    assert sys.modules[name].seen == ["c1"]


# --- a plugin whose import raises ---------------------------------------------------------------------------------


def test_plugin_whose_import_raises_is_one_warning_and_the_others_keep_working(site: Site) -> None:
    """An import error gives one PluginLoadWarning naming entry point, distribution, version and error."""
    good, _ = site.plugin("good", GOOD.replace("{lazy}", "nowhere"))
    broken, dist = site.plugin("broken", "import heavy_sdk_that_is_not_installed\n", version="0.4")
    with pytest.warns(PluginLoadWarning) as record:
        plugins = _load()
    messages = _load_warnings(record)
    assert len(messages) == 1
    assert messages[0] == (
        f"plugin {broken!r} (distribution {dist} 0.4) failed to load: ModuleNotFoundError: "
        f"No module named 'heavy_sdk_that_is_not_installed' (disable it with TOOLFLOW_DISABLE_PLUGINS={broken})"
    )
    info = _info(plugins, broken)
    assert (info.status, info.distribution, info.version) == ("failed", dist, "0.4")
    assert info.error == "ModuleNotFoundError: No module named 'heavy_sdk_that_is_not_installed'"
    assert _info(plugins, good).status == "loaded"
    assert list(plugins.bindings()) == ["acme.look", "acme.lazy"]


def test_strict_mode_raises_plugin_error_for_an_import_failure(site: Site) -> None:
    """With strict=True the failing plugin raises PluginError naming it, instead of warning."""
    broken, dist = site.plugin("broken", "raise RuntimeError('no licence key')\n")
    with pytest.raises(PluginError, match=rf"plugin '{broken}' \(distribution {dist} 1.0\).*no licence key") as caught:
        _load(strict=True)
    assert caught.value.plugin == broken
    assert caught.value.exit_code == 2


# --- a plugin whose register hook raises ------------------------------------------------------------------------

RAISES_IN_REGISTER = """\
from toolflow.hookspecs import hookimpl
calls = []

@hookimpl
def toolflow_register_implementations(register):
    register("flaky.first", len)
    raise ValueError("config file missing")

@hookimpl
def toolflow_before_call(call):
    calls.append(call)
"""


def test_register_hook_that_raises_fails_the_plugin_once_and_keeps_nothing_of_it(site: Site) -> None:
    """A raising register hook is one warning; none of the plugin's contributions or hooks remain."""
    flaky, dist = site.plugin("flaky", RAISES_IN_REGISTER)
    good, _ = site.plugin("good", GOOD.replace("{lazy}", "nowhere"))
    with pytest.warns(PluginLoadWarning) as record:
        plugins = _load()
    messages = _load_warnings(record)
    assert len(messages) == 1
    assert f"plugin {flaky!r} (distribution {dist} 1.0) failed to load: " in messages[0]
    assert "toolflow_register_implementations raised ValueError: config file missing" in messages[0]
    assert _info(plugins, flaky).status == "failed"
    assert _info(plugins, good).status == "loaded"
    assert "flaky.first" not in plugins.bindings()
    plugins.hook.toolflow_before_call(call="c")
    assert sys.modules[flaky].calls == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "acme.look" in plugins.bindings()  # contributions are collected once: no second warning
        assert plugins.lint_facts().failed == {flaky: _info(plugins, flaky).error}


def test_register_hook_that_raises_in_strict_mode_raises(site: Site) -> None:
    """Strict mode turns a raising register hook into PluginError."""
    site.plugin("flaky", RAISES_IN_REGISTER)
    with pytest.raises(PluginError, match="config file missing"):
        _load(strict=True)


# --- a misspelt hook --------------------------------------------------------------------------------------------

MISSPELT = """\
from toolflow.hookspecs import hookimpl

@hookimpl
def toolflow_register_implementation(register):
    register("typo.look", len)
"""


def test_misspelt_hook_is_an_error_with_a_did_you_mean(site: Site) -> None:
    """A hook name that does not exist fails the plugin, suggesting the real hook."""
    typo, _ = site.plugin("typo", MISSPELT)
    with pytest.warns(PluginLoadWarning) as record:
        plugins = _load()
    (message,) = _load_warnings(record)
    expected = (
        "implements unknown hook 'toolflow_register_implementation'; did you mean 'toolflow_register_implementations'?"
    )
    assert expected in message
    assert _info(plugins, typo).error == expected
    assert plugins.manager.get_plugin(typo) is None
    assert plugins.bindings() == {}


def test_misspelt_hook_in_strict_mode_raises(site: Site) -> None:
    """Strict mode raises PluginError for the misspelt hook, with the suggestion."""
    site.plugin("typo", MISSPELT)
    with pytest.raises(PluginError, match="did you mean 'toolflow_register_implementations'"):
        _load(strict=True)


def test_misspelt_hook_without_the_prefix_is_caught_too() -> None:
    """Any hookimpl-marked function that matches no hook is an error, whatever its name."""
    plugins = load_plugins(builtins=False, entry_points=False)

    class Plugin:
        @hookimpl
        def register_kinds(self, register: Any) -> None:
            """Misses the toolflow_ prefix."""

    with pytest.warns(PluginLoadWarning, match="unknown hook 'register_kinds'"):
        assert not plugins.register(Plugin(), "noprefix")


def test_hook_arguments_the_spec_does_not_have_are_one_line_errors() -> None:
    """A hook implementation taking a misspelt argument fails with pluggy's reason on one line."""
    plugins = load_plugins(builtins=False, entry_points=False)

    class Plugin:
        @hookimpl
        def toolflow_register_implementations(self, regster: Any) -> None:
            """Misspelt argument."""

    with pytest.warns(PluginLoadWarning) as record:
        plugins.register(Plugin(), "badargs")
    (message,) = _load_warnings(record)
    assert "PluginValidationError" in message
    assert "regster" in message
    assert "\n" not in message


# --- conflicts --------------------------------------------------------------------------------------------------


def test_two_plugins_binding_one_name_are_both_listed(site: Site) -> None:
    """bindings() keeps both plugins of a name, and lint facts name both."""
    text = """\
    from toolflow.hookspecs import hookimpl

    @hookimpl
    def toolflow_register_implementations(register):
        register("shared.search", "{module}:search")
    """
    first, _ = site.plugin("alpha", text.replace("{module}", "alpha"))
    second, _ = site.plugin("beta", text.replace("{module}", "beta"))
    plugins = _load()
    bindings = plugins.bindings()
    assert [(b.plugin, b.target) for b in bindings["shared.search"]] == [
        (first, "alpha:search"),
        (second, "beta:search"),
    ]
    assert plugins.lint_facts().bindings == {"shared.search": (first, second)}


def test_two_entry_points_with_one_name_fail_the_second_clearly(site: Site) -> None:
    """Two distributions using one entry-point name: the second fails naming the first's distribution."""
    module = site.module("same", GOOD.replace("{lazy}", "nowhere"))
    other = site.module("same_other", "")
    first = site.dist("first", {site.name("shared"): module})
    second = site.dist("second", {site.name("shared"): other})
    with pytest.warns(PluginLoadWarning) as record:
        plugins = _load()
    (message,) = _load_warnings(record)
    failed, loaded = sorted((i for i in plugins.infos if i.name == site.name("shared")), key=lambda i: i.status)
    assert (failed.status, loaded.status) == ("failed", "loaded")
    assert (loaded.distribution, failed.distribution) == (first, second)  # ties load in distribution order
    assert f"another plugin named {site.name('shared')!r} from distribution {loaded.distribution}" in message


# --- allow-list and block-list ----------------------------------------------------------------------------------

EXPLODES = "raise RuntimeError('this plugin must never be imported')\n"


def test_allow_list_loads_only_the_named_plugins_and_never_imports_the_others(
    site: Site, recwarn: pytest.WarningsRecorder
) -> None:
    """TOOLFLOW_LOAD_PLUGINS: a plugin it does not name is disabled before import."""
    good, _ = site.plugin("good", GOOD.replace("{lazy}", "nowhere"))
    bomb, _ = site.plugin("bomb", EXPLODES)
    plugins = _load({"TOOLFLOW_LOAD_PLUGINS": good})
    assert _info(plugins, good).status == "loaded"
    assert _info(plugins, bomb).status == "disabled"
    assert bomb not in sys.modules
    assert _load_warnings(recwarn) == []


@pytest.mark.parametrize("how", ["entry point", "distribution", "normalised distribution", "module"])
def test_block_list_disables_by_entry_point_distribution_or_module_before_import(
    site: Site, recwarn: pytest.WarningsRecorder, how: str
) -> None:
    """TOOLFLOW_DISABLE_PLUGINS matches the entry point, the distribution (any spelling) or the module."""
    module = site.module("bomb", EXPLODES)
    dist = site.dist("bomb-dist", {site.name("bomb_ep"): module})
    name = {
        "entry point": site.name("bomb_ep"),
        "distribution": dist,
        "normalised distribution": dist.upper().replace("-", "_"),
        "module": module,
    }[how]
    plugins = _load({"TOOLFLOW_DISABLE_PLUGINS": f" other , {name} "})
    info = _info(plugins, site.name("bomb_ep"))
    assert (info.status, info.distribution) == ("disabled", dist)
    assert module not in sys.modules
    assert _load_warnings(recwarn) == []


def test_block_list_wins_over_allow_list(site: Site) -> None:
    """A plugin on both lists stays disabled."""
    bomb, _ = site.plugin("bomb", EXPLODES)
    plugins = _load({"TOOLFLOW_LOAD_PLUGINS": bomb, "TOOLFLOW_DISABLE_PLUGINS": bomb})
    assert _info(plugins, bomb).status == "disabled"
    assert bomb not in sys.modules


def test_environ_defaults_to_os_environ(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without environ=, the lists are read from the process environment."""
    bomb, _ = site.plugin("bomb", EXPLODES)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", f"{INSTALLED},{bomb}")
    plugins = load_plugins(builtins=False)
    assert _info(plugins, bomb).status == "disabled"


# --- local, unpackaged plugins ----------------------------------------------------------------------------------


def test_project_plugins_import_from_the_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A module named in [tool.toolflow] plugins loads from project_root, and its lazy targets resolve."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    suffix = uuid.uuid4().hex[:10]
    project = tmp_path / "project"
    project.mkdir()
    (project / f"local_tools_{suffix}.py").write_text(LAZY)
    plugin = f"local_plugin_{suffix}"
    (project / f"{plugin}.py").write_text(GOOD.replace("{lazy}", f"local_tools_{suffix}"))
    plugins = _load(entry_points=False, project_plugins=[plugin], project_root=project)
    info = _info(plugins, plugin)
    assert (info.source, info.status, info.module, info.distribution) == ("project", "loaded", plugin, None)
    assert plugins.bindings()["acme.lazy"][0].resolve()(x=2) == 4
    for name in (plugin, f"local_tools_{suffix}"):
        sys.modules.pop(name, None)


def test_project_plugin_that_fails_to_import_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A local plugin that cannot be imported is reported like an entry-point plugin."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin = f"missing_local_{uuid.uuid4().hex[:10]}"
    with pytest.warns(PluginLoadWarning, match=rf"plugin '{plugin}' failed to load: ModuleNotFoundError"):
        plugins = _load(entry_points=False, project_plugins=[plugin], project_root=tmp_path)
    assert _info(plugins, plugin).source == "project"


def test_project_plugins_obey_the_block_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A blocked local plugin is never imported."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    plugin = f"local_bomb_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{plugin}.py").write_text(EXPLODES)
    plugins = _load(
        {"TOOLFLOW_DISABLE_PLUGINS": plugin}, entry_points=False, project_plugins=[plugin], project_root=tmp_path
    )
    assert _info(plugins, plugin).status == "disabled"
    assert plugin not in sys.modules


# --- what register() accepts ------------------------------------------------------------------------------------


def _manual() -> Plugins:
    return load_plugins(builtins=False, entry_points=False)


class _Registers:
    """A plugin object whose implementations hook registers what it is given."""

    def __init__(self, *calls: Any, hook: str = "toolflow_register_implementations") -> None:
        def implementation(register: Any) -> None:
            for call in calls:
                register(*call)

        setattr(self, hook, hookimpl(implementation))


@pytest.mark.parametrize(
    ("calls", "error"),
    [
        ((("only-a-name",),), "missing 1 required positional argument: 'target'"),
        (((None, len),), "implementation name must be a non-empty string, not None"),
        ((("x", "no_colon"),), "lazy target 'no_colon' of 'x' is not 'module:attribute'"),
        ((("x", 42),), "target of 'x' must be callable or a 'module:attribute' string, not 42"),
        ((("x", len), ("x", len)), "implementation name 'x' registered twice"),
    ],
)
def test_malformed_bindings_fail_the_plugin(calls: tuple[tuple[Any, ...], ...], error: str) -> None:
    """register(name, target) checks its arguments; a malformed binding fails the whole plugin."""
    plugins = _manual()
    with pytest.warns(PluginLoadWarning, match="failed to load") as record:
        assert not plugins.register(_Registers(*calls), "malformed")
    assert error in _load_warnings(record)[0]
    assert plugins.bindings() == {}


def _rule(code: str) -> Rule:
    return Rule(code=code, name="no-todo", severity=Severity.WARNING, doc="No TODO.", check=lambda ctx: iter(()))


def test_lint_rules_get_their_plugin_and_must_not_use_tf_codes() -> None:
    """A plugin rule is recorded with its plugin; a TF code or a non-rule fails the plugin."""
    plugins = _manual()
    assert plugins.register(_Registers((_rule("ACME101"),), hook="toolflow_register_lint_rules"), "acme")
    ((plugin, rule),) = plugins.lint_rules()
    assert (plugin, rule.code, rule.plugin) == ("acme", "ACME101", "acme")
    assert _info(plugins, "acme").lint_rules == ("ACME101",)
    with pytest.warns(PluginLoadWarning, match="rule code 'TF999' must be the plugin's own prefix"):
        plugins.register(_Registers((_rule("TF999"),), hook="toolflow_register_lint_rules"), "rogue")
    with pytest.warns(PluginLoadWarning, match="expected a toolflow.LintRule, not str"):
        plugins.register(_Registers(("ACME1",), hook="toolflow_register_lint_rules"), "notarule")


def test_kinds_are_recorded_with_their_plugin() -> None:
    """register(kind) keeps an ImplementationKind with its plugin filled in; anything else fails."""
    plugins = _manual()
    kind = ImplementationKind(name="http", schema={"type": "object"}, build=lambda spec: len)
    assert plugins.register(_Registers((kind,), hook="toolflow_register_kinds"), "web")
    assert plugins.kinds()["http"][0].plugin == "web"
    assert _info(plugins, "web").kinds == ("http",)
    with pytest.warns(PluginLoadWarning, match="expected a toolflow.ImplementationKind, not dict"):
        plugins.register(_Registers(({"name": "x"},), hook="toolflow_register_kinds"), "dicty")


@pytest.mark.parametrize("name", ["timeout", "description", "implementation", "cache"])
def test_a_kind_named_like_a_tool_key_fails_its_plugin(name: str) -> None:
    """A kind named like a key every tool may have (`timeout: 5s` would also select the kind) fails its plugin."""
    plugins = _manual()
    kind = ImplementationKind(name=name, schema={"type": "string"}, build=lambda spec: len)
    with pytest.warns(PluginLoadWarning, match=f"kind name '{name}' is a key of the spec format's tools"):
        assert not plugins.register(_Registers((kind,), hook="toolflow_register_kinds"), "clash")
    assert name not in plugins.kinds()


def test_named_factories_are_collected_per_hook() -> None:
    """Cache backends and model providers: registered(hook) maps names to (plugin, factory)."""
    plugins = _manual()
    plugins.register(_Registers(("redis", dict), hook="toolflow_register_cache_backends"), "cachey")
    assert plugins.registered("toolflow_register_cache_backends") == {"redis": [("cachey", dict)]}
    assert plugins.registered("toolflow_register_model_providers") == {}
    with pytest.raises(ValueError, match="did you mean 'toolflow_register_model_providers'"):
        plugins.registered("toolflow_register_model_provider")


def test_register_hooks_must_be_plain_functions_that_return_nothing() -> None:
    """An async register hook, or one returning its bindings instead of calling register, fails clearly."""
    plugins = _manual()

    class Async:
        @hookimpl
        async def toolflow_register_implementations(self, register: Any) -> None:
            """Async by mistake."""
            register("x", len)

    class Returns:
        @hookimpl
        def toolflow_register_implementations(self, register: Any) -> dict[str, Any]:
            """Returns instead of registering."""
            return {"x": len}

    with pytest.warns(PluginLoadWarning, match="must be a plain function, not async"):
        plugins.register(Async(), "async")
    with pytest.warns(PluginLoadWarning, match="returned dict; call register"):
        plugins.register(Returns(), "returns")


def test_register_called_after_the_hook_returned_is_an_error() -> None:
    """A register callback kept and called later raises PluginError instead of changing the bindings."""
    plugins = _manual()
    kept: list[Any] = []

    class Keeps:
        @hookimpl
        def toolflow_register_implementations(self, register: Any) -> None:
            """Keeps the callback."""
            kept.append(register)

    assert plugins.register(Keeps(), "keeps")
    with pytest.raises(PluginError, match="register\\(\\) called after the hook returned"):
        kept[0]("late", len)
    assert plugins.bindings() == {}


def test_the_same_object_under_two_names_fails_the_second() -> None:
    """Registering one plugin object twice names the first registration."""
    plugins = _manual()
    plugin = _Registers(("x", len))
    assert plugins.register(plugin, "first")
    with pytest.warns(PluginLoadWarning, match="registered already as plugin 'first'"):
        assert not plugins.register(plugin, "second")


def test_unregister_forgets_hooks_contributions_and_info() -> None:
    """unregister(name) undoes a registration completely (the testing fixture relies on it)."""
    plugins = _manual()
    plugins.register(_Registers(("x", len)), "temp")
    plugins.unregister("temp")
    assert plugins.bindings() == {}
    assert plugins.infos == []
    assert plugins.manager.get_plugin("temp") is None
    assert plugins.register(_Registers(("x", len)), "temp")


# --- bindings and lint facts ------------------------------------------------------------------------------------


def test_binding_resolve_reports_a_missing_module_or_attribute_as_plugin_error(site: Site) -> None:
    """A lazy target that cannot be imported, or is not callable, raises PluginError naming the plugin."""
    module = site.module("values", "NOT_CALLABLE = 3\n")
    with pytest.raises(PluginError, match=r"implementation 'x' of plugin 'p': cannot import 'nowhere_at_all:f'"):
        Binding(name="x", target="nowhere_at_all:f", plugin="p").resolve()
    with pytest.raises(PluginError, match="has no attribute 'missing'"):
        Binding(name="x", target=f"{module}:missing", plugin="p").resolve()
    with pytest.raises(PluginError, match="is not callable"):
        Binding(name="x", target=f"{module}:NOT_CALLABLE", plugin="p").resolve()


def test_lint_facts_hold_bindings_targets_and_failures(site: Site) -> None:
    """lint_facts() is plain data: name to plugins, name to target, failed plugin to error."""
    good, _ = site.plugin("good", GOOD.replace("{lazy}", "lazy_mod"))
    broken, _ = site.plugin("broken", "import not_installed_anywhere\n")
    with pytest.warns(PluginLoadWarning):
        facts = _load().lint_facts()
    assert isinstance(facts, PluginFacts)
    assert facts.bindings == {"acme.look": (good,), "acme.lazy": (good,)}
    assert facts.targets["acme.lazy"] == "lazy_mod:double"
    assert inspect.isfunction(facts.targets["acme.look"])
    assert facts.failed == {broken: "ModuleNotFoundError: No module named 'not_installed_anywhere'"}


# --- toolflow plugins ---------------------------------------------------------------------------------------------


@pytest.fixture
def project(site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder as the working directory, with the installed first-party plugins blocked."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    monkeypatch.chdir(folder)
    monkeypatch.setenv("TOOLFLOW_DISABLE_PLUGINS", INSTALLED)
    monkeypatch.delenv("TOOLFLOW_LOAD_PLUGINS", raising=False)
    return folder


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["plugins", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_lists_plugins_with_source_distribution_status_hooks_and_tools(site: Site, project: Path) -> None:
    """The table has one row per plugin; all loaded exits 0 with nothing on stderr."""
    good, dist = site.plugin("good", GOOD.replace("{lazy}", "nowhere"), version="3.0")
    code, out, err = _cli()
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["PLUGIN", "SOURCE", "DISTRIBUTION", "STATUS", "HOOKS", "TOOLS"]
    assert lines[1].split()[:5] == [
        "toolflow.default_plugins.template",
        "builtin",
        "toolflow-yaml",
        toolflow.__version__,
        "loaded",
    ]
    row = next(line for line in lines if line.startswith(good))
    assert re.split(r"\s{2,}", row) == [
        good,
        "entry-point",
        f"{dist} 3.0",
        "loaded",
        "before_call, register_implementations",
        "acme.look, acme.lazy",
    ]
    n = len(INSTALLED_NAMES)
    b = len(DEFAULT_PLUGINS)
    assert lines[-1] == f"{b + 1 + n} plugins: {b + 1} loaded, 0 failed, {n} disabled"


def test_cli_failed_plugin_exits_1_with_its_error_and_one_warning_line(site: Site, project: Path) -> None:
    """A failed plugin shows its error under its row, exits 1, and warns once as 'toolflow: warning: ...'."""
    broken, dist = site.plugin("broken", "import not_installed_anywhere\n")
    code, out, err = _cli()
    assert code == 1
    error = "ModuleNotFoundError: No module named 'not_installed_anywhere'"
    assert err == (
        f"toolflow: warning: plugin {broken!r} (distribution {dist} 1.0) failed to load: {error} "
        f"(disable it with TOOLFLOW_DISABLE_PLUGINS={broken})\n"
    )
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith(broken))
    assert "failed" in lines[row].split()
    assert lines[row + 1] == f"  error: {error}"
    n = len(INSTALLED_NAMES)
    b = len(DEFAULT_PLUGINS)
    assert lines[-1] == f"{b + 1 + n} plugins: {b} loaded, 1 failed, {n} disabled"


def test_cli_json_lists_every_plugin_with_its_details(site: Site, project: Path) -> None:
    """--output-format json prints {"plugins": [...]} with name, source, distribution, version, status, hooks, tools, error."""
    good, dist = site.plugin("good", GOOD.replace("{lazy}", "nowhere"))
    blocked, _ = site.plugin("bomb", EXPLODES)
    (project / "pyproject.toml").write_text(f'[tool.toolflow]\nplugins = ["{site.module("local", MISSPELT)}"]\n')
    os.environ["TOOLFLOW_DISABLE_PLUGINS"] += f",{blocked}"
    code, out, err = _cli("--output-format", "json")
    assert code == 1
    assert err.startswith("toolflow: warning: plugin 'local_")
    document = json.loads(out)
    by_name = {p["name"]: p for p in document["plugins"]}
    assert by_name[good] == {
        "name": good,
        "source": "entry-point",
        "status": "loaded",
        "distribution": dist,
        "version": "1.0",
        "module": good,
        "hooks": ["toolflow_before_call", "toolflow_register_implementations"],
        "implementations": ["acme.look", "acme.lazy"],
        "kinds": [],
        "lint_rules": [],
        "error": None,
    }
    assert by_name[blocked]["status"] == "disabled"
    assert blocked not in sys.modules
    local = by_name[site.name("local")]
    assert (local["source"], local["status"]) == ("project", "failed")
    assert "did you mean 'toolflow_register_implementations'?" in local["error"]
    assert [p["source"] for p in document["plugins"]][:2] == ["builtin", "builtin"]


def test_cli_strict_stops_at_a_failing_plugin_with_exit_2(site: Site, project: Path) -> None:
    """--strict turns the first failure into 'toolflow: error: ...' and exit code 2, with no table."""
    broken, _ = site.plugin("broken", RAISES_IN_REGISTER)
    code, out, err = _cli("--strict")
    assert (code, out) == (2, "")
    assert err.startswith(f"toolflow: error: plugin {broken!r}")
    assert "config file missing" in err
    assert err.count("\n") == 1
