"""The implementation-binding rules (TF401-TF404), given facts about really registered plugins.

The data-driven case runner lints without plugins, when these rules stay
silent, so they are tested here: each test registers plugin objects with a
real plugin manager (or, for edge cases, builds the plain ``PluginFacts``) and
lints real files.
"""

from __future__ import annotations

import functools
import json
import sys
import textwrap
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from toolflow._lint._config import LintConfig
from toolflow._lint._engine import lint_paths
from toolflow._lint._rule import LintContext, PluginFacts
from toolflow._lint.rules import builtin_rules
from toolflow._loader import load_specs
from toolflow._model import SpecFile, ToolSpec
from toolflow._plugins import ImplementationKind, PluginLoadWarning, Plugins, load_plugins
from toolflow._registry import Registry, RegistryError
from toolflow.hookspecs import hookimpl

BINDING_RULES = ("TF401", "TF402", "TF403", "TF404")

SEARCH = """\
toolflow: 1
tools:
  search_objects:
    description: Search the objects in the room
    implementation: {name}
    parameters:
      type: object
      properties:
        query:
          type: string
          description: Words to look for
        limit:
          type: integer
          description: Most results to return
      required: [query]
"""


class _Binds:
    """A plugin object that binds the given names to the given targets."""

    def __init__(self, **bindings: Any) -> None:
        def implementations(register: Any) -> None:
            for name, target in bindings.items():
                register(name.replace("__", "."), target)

        self.toolflow_register_implementations = hookimpl(implementations)


def _plugins(**plugins: object) -> Plugins:
    manager = load_plugins(builtins=False, entry_points=False)
    for name, plugin in plugins.items():
        assert manager.register(plugin, name)
    return manager


def _spec(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _lint(path: Path, facts: PluginFacts | None) -> list[tuple[str, int, int, str]]:
    report = lint_paths([path], LintConfig(select=BINDING_RULES), plugins=facts)
    return [(d.code, d.line, d.column, d.message) for d in report.diagnostics]


def _codes(path: Path, facts: PluginFacts | None) -> list[tuple[str, int, int]]:
    return [(code, line, column) for code, line, column, _ in _lint(path, facts)]


def search(query: str, limit: int = 10) -> list[str]:
    """A well-fitting implementation of search_objects."""
    return [query] * limit


# --- without plugins -------------------------------------------------------------------------------------------


def test_binding_rules_are_silent_when_plugins_were_not_loaded(tmp_path: Path) -> None:
    """plugins=None (the case runner, lint without plugins): no TF4xx diagnostic, whatever the spec says."""
    spec = _spec(tmp_path, SEARCH.format(name="nobody.binds.this"))
    assert _lint(spec, None) == []


def test_binding_rules_are_registered_builtins() -> None:
    """TF401-TF404 are built-in rules with their kebab names."""
    names = {r.code: r.name for r in builtin_rules() if r.code.startswith("TF4")}
    assert names == {
        "TF401": "unbound-implementation",
        "TF402": "conflicting-bindings",
        "TF403": "implementation-signature",
        "TF404": "plugin-failed",
    }


# --- TF401 unbound-implementation ------------------------------------------------------------------------------


def test_unbound_implementation_points_at_the_name_with_a_did_you_mean(tmp_path: Path) -> None:
    """An implementation no plugin binds is reported at its value, suggesting the closest bound name."""
    spec = _spec(tmp_path, SEARCH.format(name="acme.serch"))
    facts = _plugins(acme=_Binds(acme__search=search, acme__say=print)).lint_facts()
    assert _lint(spec, facts) == [
        (
            "TF401",
            5,
            21,
            "implementation 'acme.serch' of tool 'search_objects' is bound by no plugin; did you mean 'acme.search'?",
        )
    ]


def test_bound_implementations_and_other_kinds_are_not_reported(tmp_path: Path) -> None:
    """A bound name, a template and a command are all fine."""
    spec = _spec(
        tmp_path,
        SEARCH.format(name="acme.search")
        + """\
  say:
    description: Say something
    template: "You say hello"
  date:
    description: Print the date
    command: [date]
""",
    )
    assert _lint(spec, _plugins(acme=_Binds(acme__search=search)).lint_facts()) == []


def test_unbound_without_any_bound_name_has_no_suggestion(tmp_path: Path) -> None:
    """With nothing bound at all, TF401 still reports, without a did-you-mean."""
    spec = _spec(tmp_path, SEARCH.format(name="acme.search"))
    ((code, _, _, message),) = _lint(spec, PluginFacts())
    assert code == "TF401"
    assert message == "implementation 'acme.search' of tool 'search_objects' is bound by no plugin"


# --- TF404 plugin-failed --------------------------------------------------------------------------------------


def test_unbound_name_while_a_plugin_failed_is_tf404_naming_the_plugin_and_error(tmp_path: Path) -> None:
    """When a plugin failed to load, an unbound name is TF404 (not TF401), naming the plugin and its error."""
    plugins = _plugins(acme=_Binds(acme__search=search))

    class Broken:
        @hookimpl
        def toolflow_register_implementations(self, register: Any) -> None:
            """Fails while registering."""
            raise RuntimeError("no API key")

    with pytest.warns(PluginLoadWarning):
        plugins.register(Broken(), "weather")
    spec = _spec(tmp_path, SEARCH.format(name="weather.forecast"))
    assert _lint(spec, plugins.lint_facts()) == [
        (
            "TF404",
            5,
            21,
            (
                "implementation 'weather.forecast' of tool 'search_objects' is bound by no loaded plugin, and plugin "
                "failed to load: 'weather' (toolflow_register_implementations raised RuntimeError: no API key)"
            ),
        )
    ]


def test_tf404_lists_every_failed_plugin_and_keeps_the_suggestion(tmp_path: Path) -> None:
    """Several failed plugins are all named, sorted; a close bound name is still suggested."""
    spec = _spec(tmp_path, SEARCH.format(name="acme.serch"))
    facts = PluginFacts(
        bindings={"acme.search": ("acme",)},
        targets={"acme.search": "acme_not_imported:search"},
        failed={"zeta": "ImportError: zeta", "alpha": "ValueError: alpha"},
    )
    ((code, _, _, message),) = _lint(spec, facts)
    assert code == "TF404"
    assert message.endswith(
        "plugins failed to load: 'alpha' (ValueError: alpha); 'zeta' (ImportError: zeta); did you mean 'acme.search'?"
    )


def test_a_failed_plugin_does_not_touch_bound_names(tmp_path: Path) -> None:
    """A bound name is fine even when some other plugin failed."""
    spec = _spec(tmp_path, SEARCH.format(name="acme.search"))
    facts = PluginFacts(bindings={"acme.search": ("acme",)}, targets={"acme.search": search}, failed={"x": "boom"})
    assert _lint(spec, facts) == []


# --- TF402 conflicting-bindings -------------------------------------------------------------------------------


def test_name_bound_by_two_plugins_names_both(tmp_path: Path) -> None:
    """Two plugins binding one name: TF402 at the name, naming both in registration order."""
    spec = _spec(tmp_path, SEARCH.format(name="shared.search"))
    facts = _plugins(beta=_Binds(shared__search=search), alpha=_Binds(shared__search=print)).lint_facts()
    assert _lint(spec, facts) == [
        (
            "TF402",
            5,
            21,
            (
                "implementation 'shared.search' of tool 'search_objects' is bound by more than one plugin: "
                "'beta' and 'alpha'"
            ),
        )
    ]


def test_three_plugins_binding_one_name_are_listed(tmp_path: Path) -> None:
    """A conflict between three plugins lists all three; TF403 does not check a conflicting name."""
    spec = _spec(tmp_path, SEARCH.format(name="x"))
    facts = PluginFacts(bindings={"x": ("a", "b", "c")}, targets={"x": lambda: None})
    ((code, _, _, message),) = _lint(spec, facts)
    assert (code, message.rsplit(": ", 1)[1]) == ("TF402", "'a', 'b' and 'c'")


class _Kind:
    """A plugin object that provides the `canned` kind."""

    def __init__(self) -> None:
        def kinds(register: Any) -> None:
            register(ImplementationKind(name="canned", schema={"type": "string"}, build=lambda spec: search))

        self.toolflow_register_kinds = hookimpl(kinds)


def test_kind_provided_by_two_plugins_is_reported_as_the_registry_refuses_it(tmp_path: Path) -> None:
    """Two plugins providing one kind: TF402 at the tool's kind key, and the registry refuses to build."""
    spec = _spec(
        tmp_path,
        """\
        toolflow: 1
        tools:
          answer:
            description: Gives the canned answer
            canned: hello
        """,
    )
    plugins = _plugins(first=_Kind(), second=_Kind())
    report = lint_paths(
        [spec], LintConfig(select=BINDING_RULES), plugins=plugins.lint_facts(), kinds=plugins.kind_schemas()
    )
    assert [(d.code, d.line, d.column, d.message) for d in report.diagnostics] == [
        ("TF402", 5, 5, "the 'canned' kind of tool 'answer' is provided by more than one plugin: 'first' and 'second'")
    ]
    with pytest.raises(RegistryError, match="the 'canned' kind of tool 'answer' is provided by 2 plugins"):
        Registry.build(load_specs([spec], kinds=plugins.kind_schemas()), plugins)
    single = _plugins(only=_Kind())
    assert (
        lint_paths(
            [spec], LintConfig(select=BINDING_RULES), plugins=single.lint_facts(), kinds=single.kind_schemas()
        ).diagnostics
        == ()
    )


# --- TF403 implementation-signature ---------------------------------------------------------------------------


def _tf403(tmp_path: Path, target: object, parameters: dict[str, Any] | None = None) -> list[tuple[int, int, str]]:
    params = parameters or {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
    }
    tool = {"description": "Search the objects in the room", "implementation": "acme.search", "parameters": params}
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps({"toolflow": 1, "tools": {"search_objects": tool}}, indent=2))
    facts = PluginFacts(bindings={"acme.search": ("acme",)}, targets={"acme.search": target})
    return [(line, column, message) for code, line, column, message in _lint(spec, facts) if code == "TF403"]


def _messages(found: list[tuple[int, int, str]]) -> list[str]:
    return [message for _, _, message in found]


def _where(target: Callable[..., Any]) -> str:
    return f"'{__name__}:{target.__qualname__}'"


def test_a_fitting_signature_is_clean(tmp_path: Path) -> None:
    """Every declared parameter accepted, every required one guaranteed: no diagnostic."""
    assert _tf403(tmp_path, search) == []


def test_kwargs_accepts_every_parameter(tmp_path: Path) -> None:
    """**kwargs takes any declared parameter."""

    def anything(query: str, **kwargs: Any) -> None:
        """Takes all."""

    assert _tf403(tmp_path, anything) == []


def test_a_declared_parameter_the_callable_cannot_take_is_reported_at_the_parameter(tmp_path: Path) -> None:
    """A parameter the function lacks is reported at the parameter's key, naming the function."""

    def narrow(query: str) -> None:
        """Lacks limit."""

    found = _tf403(tmp_path, narrow)
    assert found == [
        (
            13,
            11,
            (
                f"parameter 'limit' of tool 'search_objects' cannot be passed to {_where(narrow)}, "
                "which has no such keyword parameter and no **kwargs"
            ),
        )
    ]


def test_a_required_argument_the_spec_does_not_declare_is_reported_at_the_implementation(tmp_path: Path) -> None:
    """A function parameter without default that the spec does not declare fails every call."""

    def needs_room(query: str, room: str, limit: int = 1) -> None:
        """Needs room."""

    assert _tf403(tmp_path, needs_room) == [
        (
            6,
            25,
            (
                f"{_where(needs_room)}, bound to tool 'search_objects', requires argument 'room', "
                "which the tool's parameters do not declare"
            ),
        )
    ]


def test_a_required_argument_the_spec_leaves_optional_is_reported(tmp_path: Path) -> None:
    """A function parameter without default that the spec declares but neither requires nor defaults."""

    def strict_limit(query: str, limit: int) -> None:
        """Limit has no default."""

    ((line, column, message),) = _tf403(tmp_path, strict_limit)
    assert (line, column) == (13, 11)
    assert message.endswith(
        "requires argument 'limit', which the tool neither requires nor gives a default: "
        "add it to 'required' or give it a default in Python"
    )


def test_a_schema_default_makes_a_parameter_always_present(tmp_path: Path) -> None:
    """A declared default is filled in by the validator, so the function may require it."""

    def strict_limit(query: str, limit: int) -> None:
        """Limit has no default."""

    params = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 5}},
        "required": ["query"],
    }
    assert _tf403(tmp_path, strict_limit, params) == []


def test_an_optional_ctx_is_allowed_and_a_required_one_is_not(tmp_path: Path) -> None:
    """ctx=None is the call context and fine; a ctx without default would break calls without context."""

    def optional_ctx(query: str, limit: int = 1, ctx: Any = None) -> None:
        """Optional context."""

    def required_ctx(query: str, ctx: Any, limit: int = 1) -> None:
        """Required context."""

    assert _tf403(tmp_path, optional_ctx) == []
    assert _messages(_tf403(tmp_path, required_ctx)) == [
        (
            f"{_where(required_ctx)}, bound to tool 'search_objects', requires 'ctx'; "
            "give it a default (ctx=None) so that calls without a context work"
        )
    ]


def test_positional_only_parameters_without_default_are_reported(tmp_path: Path) -> None:
    """Keyword arguments cannot fill a positional-only parameter; it is reported, and it does not accept its name."""

    def positional(query: str, /, limit: int = 1) -> None:
        """Positional-only query."""

    messages = _messages(_tf403(tmp_path, positional))
    assert messages[0] == (
        f"{_where(positional)}, bound to tool 'search_objects', has positional-only parameter 'query' "
        "without a default, which the keyword arguments of a call cannot fill"
    )
    assert messages[1].startswith("parameter 'query' of tool 'search_objects' cannot be passed to")
    assert len(messages) == 2


def test_top_level_composition_silences_the_undeclared_checks(tmp_path: Path) -> None:
    """With allOf/anyOf at the top level, parameters may be declared elsewhere: only certain problems are reported."""

    def needs_room(query: str, room: str, limit: int = 1) -> None:
        """Needs room."""

    params = {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"],
        "allOf": [{"properties": {"room": {"type": "string"}}, "required": ["room"]}],
    }
    assert _tf403(tmp_path, needs_room, params) == []


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(functools.partial(lambda query, limit, extra: None, extra=1), id="partial"),
        pytest.param(type("Callable", (), {"__call__": lambda self, query, limit=1: None})(), id="instance"),
        pytest.param(type("Tool", (), {"__init__": lambda self, query, limit=1: None}), id="class"),
    ],
)
def test_other_callables_are_inspected_through_their_signature(tmp_path: Path, target: Any) -> None:
    """Partials, callable instances and classes are checked by what calling them accepts."""
    found = _messages(_tf403(tmp_path, target))
    assert all("limit" in message for message in found)
    assert len(found) == (1 if isinstance(target, functools.partial) else 0)


def test_callables_without_a_signature_are_skipped(tmp_path: Path) -> None:
    """A builtin whose signature cannot be read is not guessed at."""
    assert _tf403(tmp_path, dict) == []


@pytest.fixture
def imported_module() -> Iterator[types.ModuleType]:
    name = f"tf403_tools_{uuid.uuid4().hex[:10]}"
    module = types.ModuleType(name)
    exec(
        "def narrow(query):\n    pass\nclass Tools:\n    def method(self, query, limit=1):\n        pass\nVALUE = 3\n",
        module.__dict__,
    )
    sys.modules[name] = module
    yield module
    del sys.modules[name]


def test_lazy_target_of_an_imported_module_is_checked(tmp_path: Path, imported_module: types.ModuleType) -> None:
    """A "module:attr" target whose module is imported already is inspected without importing anything."""
    name = imported_module.__name__
    assert _messages(_tf403(tmp_path, f"{name}:narrow")) == [
        (
            f"parameter 'limit' of tool 'search_objects' cannot be passed to '{name}:narrow', "
            "which has no such keyword parameter and no **kwargs"
        )
    ]
    assert "requires argument 'self'" in _messages(_tf403(tmp_path, f"{name}:Tools.method"))[0]


def test_lazy_target_naming_nothing_or_something_uncallable(tmp_path: Path, imported_module: types.ModuleType) -> None:
    """A missing attribute or a non-callable value of an imported module is reported at the implementation."""
    name = imported_module.__name__
    assert _tf403(tmp_path, f"{name}:missing") == [
        (
            6,
            25,
            (
                f"implementation 'acme.search' of tool 'search_objects' is bound to '{name}:missing', "
                f"but module {name!r} has no attribute 'missing'"
            ),
        )
    ]
    assert _messages(_tf403(tmp_path, f"{name}:Tools.nope")) == [
        (
            f"implementation 'acme.search' of tool 'search_objects' is bound to '{name}:Tools.nope', "
            f"but '{name}:Tools' has no attribute 'nope'"
        )
    ]
    assert _messages(_tf403(tmp_path, f"{name}:VALUE"))[0].endswith("but it is a int, which is not callable")


def test_lazy_target_of_a_module_not_imported_is_never_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lint does not import a lazy target's module: a module that would explode on import stays unimported."""
    name = f"tf403_bomb_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text("raise RuntimeError('lint imported me')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _tf403(tmp_path, f"{name}:search") == []
    assert name not in sys.modules


def test_module_with_getattr_is_not_probed(tmp_path: Path, imported_module: types.ModuleType) -> None:
    """A module-level __getattr__ may import on demand, so an absent attribute is left alone."""
    imported_module.__dict__["__getattr__"] = lambda attribute: search
    assert _tf403(tmp_path, f"{imported_module.__name__}:lazily_made") == []


# --- robustness ------------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(
    parameters=st.dictionaries(
        st.sampled_from(["type", "properties", "required", "allOf", "anyOf", "$ref", "default"]),
        JSON_VALUES,
        max_size=4,
    ),
    names=st.lists(st.sampled_from(["acme.a", "acme.b", "other"]), max_size=3),
)
def test_rules_never_raise_on_odd_parameters(parameters: dict[str, Any], names: list[str]) -> None:
    """Non-mapping properties, odd required lists, boolean schemas: the TF4xx rules yield, never raise."""

    def target(query: Any, limit: Any = 1, *args: Any, ctx: Any = None) -> None:
        """Some signature."""

    from toolflow._model import Implementation

    tools = tuple(
        ToolSpec(
            name=f"t{index}",
            parameters=parameters,
            implementations=(Implementation(kind="implementation", config=name, pointer=f"/tools/t{index}/i"),),
            pointer=f"/tools/t{index}",
        )
        for index, name in enumerate(names)
    )
    facts = PluginFacts(
        bindings={"acme.a": ("acme",), "acme.b": ("acme", "beta")},
        targets={"acme.a": target, "acme.b": "json:dumps"},
        failed={"gamma": "ImportError: x"} if len(names) == 2 else {},
    )
    ctx = LintContext(files=(SpecFile(path="s.yaml", tools=tools),), plugins=facts)
    for rule in builtin_rules():
        if rule.code in BINDING_RULES and rule.check is not None:
            for diagnostic in rule.check(ctx):
                assert diagnostic.message[0].islower() or diagnostic.message[0] == "'"
                assert not diagnostic.message.endswith(".")
