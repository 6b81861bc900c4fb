"""The registry: built from real spec files and an isolated plugin manager, immutable, with look-ups and selections."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolflow._errors import SpecError, ToolflowError
from toolflow._loader import load_specs
from toolflow._model import ToolSpec
from toolflow._plugins import ImplementationKind, PluginError, Plugins, load_plugins
from toolflow._registry import (
    RegisteredTool,
    Registry,
    RegistryError,
    UnknownCategoryError,
    UnknownToolError,
    UnknownToolsetError,
    is_async_callable,
    load_registry,
)
from toolflow._results import ToolResult
from toolflow._validation import ArgumentValidator, ResultValidator
from toolflow.hookspecs import hookimpl

# --- implementations and plugins used by the tests ---------------------------------------------


def look(detail_level: str = "normal") -> dict[str, str]:
    return {"seen": detail_level}


async def say(message: str) -> str:
    return message


class AsyncCallable:
    async def __call__(self, **arguments: Any) -> dict[str, Any]:
        return arguments


class SyncCallable:
    def __call__(self, **arguments: Any) -> dict[str, Any]:
        return arguments


BUILDS: list[str] = []


def build_echo(spec: ToolSpec) -> Callable[..., Any]:
    BUILDS.append(spec.name)
    text = str(spec.implementation.config) if spec.implementation else ""

    async def run(**arguments: Any) -> str:
        return text.format(**arguments)

    return run


ECHO = ImplementationKind(name="echo", schema={"type": "string"}, build=build_echo, description="echo a text")


class WorldPlugin:
    """Binds the world.* implementations and provides the echo kind."""

    def __init__(self, **extra: Any) -> None:
        self.extra = extra

    @hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        register("world.look", look)
        register("world.say", say)
        register("world.async_object", AsyncCallable())
        register("world.sync_object", SyncCallable())
        for name, target in self.extra.items():
            register(name, target)

    @hookimpl
    def toolflow_register_kinds(self, register: Callable[[Any], None]) -> None:
        register(ECHO)


class RivalPlugin:
    """Binds a name the world plugin binds too, and provides the echo kind as well."""

    @hookimpl
    def toolflow_register_implementations(self, register: Callable[[str, Any], None]) -> None:
        register("world.look", look)

    @hookimpl
    def toolflow_register_kinds(self, register: Callable[[Any], None]) -> None:
        register(ECHO)


def make_plugins(*plugins: tuple[object, str]) -> Plugins:
    manager = load_plugins(entry_points=False)
    for plugin, name in plugins or ((WorldPlugin(), "world"),):
        assert manager.register(plugin, name)
    return manager


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


WORLD = """\
    toolflow: 1
    policy:
      categories:
        observe: {}
    tools:
      look:
        description: Look around the room
        implementation: world.look
      search:
        description: Search the room for an object
        parameters:
          type: object
          properties:
            query: {type: string, description: What to look for}
          required: [query]
        implementation: world.look
      say:
        description: Say something to the room
        category: terminal
        implementation: world.say
      shout:
        description: Shout to everyone
        category: terminal
        echo: "{message}!"
      drop:
        description: Drop an object
        category: dangerous
        implementation: world.sync_object
    toolsets:
      chat:
        tools: [say, shout]
      everyday:
        categories: [safe_chain, terminal]
        exclude: [shout]
      looking:
        tools: [look]
        categories: [observe]
"""

MORE = """\
    toolflow: 1
    tools:
      remember:
        description: Store a memory
        category: async_required
        implementation: world.async_object
      glance:
        description: Glance at something
        category: observe
        implementation: world.look
    toolsets:
      memory:
        tools: [remember, look]
"""


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    write(tmp_path, "a_world.yaml", WORLD)
    write(tmp_path, "b_more.yaml", MORE)
    return tmp_path


@pytest.fixture
def registry(specs: Path) -> Registry:
    return load_registry([specs], plugins=make_plugins())


@pytest.fixture
def fresh_builds() -> Iterator[list[str]]:
    BUILDS.clear()
    yield BUILDS
    BUILDS.clear()


def build_error(tmp_path: Path, text: str, plugins: Plugins | None = None, **kinds: Any) -> RegistryError:
    write(tmp_path, "specs.yaml", text)
    loaded = load_specs([tmp_path], kinds={"echo": ECHO.schema, **kinds})
    assert loaded.ok, [d.render() for d in loaded.diagnostics]
    with pytest.raises(RegistryError) as caught:
        Registry.build(loaded, plugins or make_plugins())
    return caught.value


# --- look-up ------------------------------------------------------------------------------------


def test_get_returns_the_registered_tool(registry: Registry) -> None:
    """get() finds a tool by name, with its spec, validators and the plugin binding."""
    tool = registry.get("say")
    assert isinstance(tool, RegisteredTool)
    assert (tool.name, tool.category, tool.description) == ("say", "terminal", "Say something to the room")
    assert tool.kind == "implementation"
    assert tool.binding is not None
    assert (tool.binding.name, tool.binding.plugin) == ("world.say", "world")
    assert tool.implementation_kind is None
    assert tool.plugin == "world"
    assert isinstance(tool.validator, ArgumentValidator)
    assert isinstance(tool.result_validator, ResultValidator)


def test_kind_tools_carry_their_implementation_kind(registry: Registry) -> None:
    """A tool of a plugin kind records the kind and the plugin that provides it."""
    tool = registry.get("shout")
    assert tool.kind == "echo"
    assert tool.binding is None
    assert tool.implementation_kind is not None
    assert (tool.implementation_kind.name, tool.implementation_kind.plugin) == ("echo", "world")
    assert tool.plugin == "world"


def test_unknown_tool_suggests_the_nearest_name(registry: Registry) -> None:
    """An unknown name raises UnknownToolError whose message a model can act on."""
    with pytest.raises(UnknownToolError) as caught:
        registry.get("serch")
    assert str(caught.value) == "Unknown tool: 'serch' (did you mean 'search'?)"
    assert caught.value.name == "serch"
    assert caught.value.suggestions == ("search",)
    assert isinstance(caught.value, LookupError)
    assert isinstance(caught.value, ToolflowError)


def test_unknown_tool_lists_several_near_names(registry: Registry) -> None:
    """Several close names are all offered, best first (equally close: the longer common prefix first)."""
    with pytest.raises(UnknownToolError, match=r"^Unknown tool: 'shayt' \(did you mean 'shout' or 'say'\?\)$"):
        registry.get("shayt")


def test_unknown_tool_lists_the_tools_when_none_is_close(registry: Registry) -> None:
    """With no close name the message lists the available tools instead."""
    with pytest.raises(UnknownToolError) as caught:
        registry.get("teleport")
    assert str(caught.value) == (
        "Unknown tool: 'teleport' (available: 'drop', 'glance', 'look', 'remember', 'say', 'search', 'shout')"
    )
    assert caught.value.suggestions == ()


def test_iteration_names_and_length_follow_load_order(registry: Registry) -> None:
    """Tools iterate in load order: files sorted by path, tools in file order."""
    order = ("look", "search", "say", "shout", "drop", "remember", "glance")
    assert registry.names() == order
    assert tuple(tool.name for tool in registry) == order
    assert len(registry) == 7
    assert "glance" in registry
    assert "teleport" not in registry
    assert 42 not in registry
    assert ["look"] not in registry


def test_by_category(registry: Registry) -> None:
    """by_category() returns the tools of one category in load order; a known unused category gives ()."""
    assert [t.name for t in registry.by_category("terminal")] == ["say", "shout"]
    assert [t.name for t in registry.by_category("observe")] == ["glance"]
    assert registry.by_category("async_required")[0].name == "remember"
    assert registry.filter(names=["look"]).by_category("dangerous") == ()


def test_by_category_rejects_an_unknown_category(registry: Registry) -> None:
    """A category that is not known at all is an error with a suggestion."""
    with pytest.raises(UnknownCategoryError, match=r"^Unknown category: 'termnal' \(did you mean 'terminal'\?\)$"):
        registry.by_category("termnal")


def test_categories_lists_built_in_policy_and_used_ones(registry: Registry) -> None:
    """categories() lists the built-in categories plus those declared or used by the specs."""
    assert registry.categories() == ("async_required", "dangerous", "observe", "safe_chain", "terminal")


# --- filters and toolsets -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("criteria", "expected"),
    [
        ({}, ["look", "search", "say", "shout", "drop", "remember", "glance"]),
        ({"include_categories": ["terminal", "dangerous"]}, ["say", "shout", "drop"]),
        ({"exclude_categories": {"safe_chain", "observe"}}, ["say", "shout", "drop", "remember"]),
        ({"names": ["glance", "say"]}, ["say", "glance"]),
        ({"exclude_names": ["look", "drop"]}, ["search", "say", "shout", "remember", "glance"]),
        (
            {
                "include_categories": {"safe_chain", "terminal"},
                "exclude_categories": {"dangerous"},
                "names": {"look", "say"},
            },
            ["look", "say"],
        ),
        ({"include_categories": ["terminal"], "exclude_names": ["say"]}, ["shout"]),
        ({"include_categories": ["terminal"], "exclude_categories": ["terminal"]}, []),
        ({"names": ["drop"], "include_categories": ["safe_chain"]}, []),
        ({"include_categories": []}, []),
    ],
)
def test_filter_combinations(registry: Registry, criteria: dict[str, Any], expected: list[str]) -> None:
    """Every criterion given narrows the selection; load order is kept."""
    assert list(registry.filter(**criteria).names()) == expected


def test_filter_shares_tools_and_leaves_the_original_alone(registry: Registry) -> None:
    """A filtered registry holds the same RegisteredTool objects; the original is unchanged."""
    selected = registry.filter(include_categories=["terminal"])
    assert isinstance(selected, Registry)
    assert selected.get("say") is registry.get("say")
    assert len(registry) == 7
    assert selected.toolset_names() == registry.toolset_names()


def test_filter_rejects_unknown_names_and_categories(registry: Registry) -> None:
    """Misspelt names and categories in a filter raise instead of selecting nothing."""
    with pytest.raises(UnknownToolError, match="did you mean 'shout'"):
        registry.filter(names=["shuot"])
    with pytest.raises(UnknownToolError, match="did you mean 'drop'"):
        registry.filter(exclude_names=["drpo"])
    with pytest.raises(UnknownCategoryError, match="did you mean 'dangerous'"):
        registry.filter(exclude_categories=["dangerus"])
    with pytest.raises(UnknownToolError, match="Unknown tool: 'look'"):
        registry.filter(names=["say"]).filter(names=["look"])


@pytest.mark.parametrize(
    ("toolset", "expected"),
    [
        ("chat", ["say", "shout"]),
        ("everyday", ["look", "search", "say"]),
        ("looking", ["look", "glance"]),
        ("memory", ["look", "remember"]),
    ],
)
def test_toolsets_select_tools_and_categories_minus_excludes(
    registry: Registry, toolset: str, expected: list[str]
) -> None:
    """A toolset selects its named tools plus its categories' tools, minus its excludes, in load order."""
    assert list(registry.toolset(toolset).names()) == expected


def test_toolset_names_in_load_order(registry: Registry) -> None:
    """toolset_names() lists every file's toolsets in load order."""
    assert registry.toolset_names() == ("chat", "everyday", "looking", "memory")


def test_unknown_toolset_lists_the_nearest(registry: Registry) -> None:
    """An unknown toolset raises with a suggestion, or the list of toolsets."""
    with pytest.raises(UnknownToolsetError) as caught:
        registry.toolset("chatt")
    assert str(caught.value) == "Unknown toolset: 'chatt' (did you mean 'chat'?)"
    assert isinstance(caught.value, UnknownToolError)
    with pytest.raises(UnknownToolsetError, match=r"available: 'chat', 'everyday', 'looking', 'memory'\)$"):
        registry.toolset("admin")


def test_toolset_of_a_filtered_registry_keeps_only_what_is_left(registry: Registry) -> None:
    """A toolset applied after a filter selects among the remaining tools only."""
    assert list(registry.filter(exclude_names=["say"]).toolset("chat").names()) == ["shout"]


# --- immutability -------------------------------------------------------------------------------


def test_registry_is_immutable(registry: Registry) -> None:
    """A registry has no public mutator and its attributes cannot be assigned."""
    mutators = {"add", "register", "remove", "set", "update", "clear", "pop", "unregister", "__setitem__"}
    assert not mutators & set(dir(registry))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        registry._tools = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        registry._tools["x"] = registry.get("say")  # type: ignore[index]
    with pytest.raises(TypeError):
        registry._toolsets["x"] = None  # type: ignore[index]


def test_registered_tool_is_frozen(registry: Registry) -> None:
    """A registered tool's attributes cannot be assigned; evolve makes a new one."""
    tool = registry.get("look")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tool.kind = "template"  # type: ignore[misc]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tool.spec = tool.spec  # type: ignore[misc]
    assert attrs.evolve(tool, kind="other").kind == "other"
    assert tool.kind == "implementation"


def test_registry_is_not_changed_by_a_changed_source_mapping(specs: Path) -> None:
    """Building copies the tool mapping, so the caller's dict cannot change the registry."""
    registry = load_registry([specs], plugins=make_plugins())
    tools = {tool.name: tool for tool in registry}
    copy = Registry(tools=tools)
    tools.clear()
    assert len(copy) == 7
    assert copy.categories() == ("async_required", "dangerous", "observe", "safe_chain", "terminal")
    assert copy.toolset_names() == ()


# --- resolve and is_async -----------------------------------------------------------------------


def test_resolve_returns_the_bound_callable_once(registry: Registry) -> None:
    """resolve() returns the bound callable and caches it."""
    tool = registry.get("look")
    assert tool.resolve() is look
    assert tool.resolve() is tool.resolve()
    assert tool.is_async is False


def test_is_async_for_functions_and_callable_objects(registry: Registry) -> None:
    """is_async is true for async functions and objects with an async __call__, false otherwise."""
    assert registry.get("say").is_async is True
    assert registry.get("remember").is_async is True
    assert registry.get("drop").is_async is False
    assert registry.get("look").is_async is False


def test_is_async_callable_helper() -> None:
    """The helper recognises coroutine functions, bound async methods and async callable objects."""
    assert is_async_callable(say)
    assert is_async_callable(AsyncCallable())
    assert is_async_callable(AsyncCallable().__call__)
    assert not is_async_callable(look)
    assert not is_async_callable(SyncCallable())
    assert not is_async_callable(AsyncCallable)  # calling the class builds an object, not a coroutine


def test_kind_builds_the_callable_once(specs: Path, fresh_builds: list[str]) -> None:
    """A kind's build(spec) runs on first resolve, not at registry build, and only once."""
    registry = load_registry([specs], plugins=make_plugins())
    assert fresh_builds == []
    tool = registry.get("shout")
    first = tool.resolve()
    assert tool.resolve() is first
    assert tool.is_async is True
    assert fresh_builds == ["shout"]


async def test_kind_callable_runs(registry: Registry) -> None:
    """The callable a kind built runs with the arguments."""
    assert await registry.get("shout").resolve()(message="hello") == "hello!"


def test_lazy_binding_is_imported_on_first_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A "module:attr" binding is not imported by building the registry, and is imported once on resolve."""
    module = "registry_lazy_target"
    write(tmp_path, f"{module}.py", "IMPORTS = []\nIMPORTS.append(1)\n\ndef run(**arguments):\n    return arguments\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    specs = write(
        tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  lazy:\n    description: x\n    implementation: lazy\n"
    )
    plugins = make_plugins((WorldPlugin(lazy=f"{module}:run"), "world"))
    registry = load_registry([specs], plugins=plugins)
    tool = registry.get("lazy")
    assert tool.binding is not None
    assert tool.binding.lazy
    assert module not in sys.modules
    function = tool.resolve()
    assert tool.resolve() is function
    assert sys.modules[module].IMPORTS == [1]
    assert function(a=1) == {"a": 1}


def test_lazy_binding_that_cannot_be_imported_raises_plugin_error(tmp_path: Path) -> None:
    """A lazy target that does not import raises PluginError on resolve, not at build."""
    specs = write(
        tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  lazy:\n    description: x\n    implementation: lazy\n"
    )
    registry = load_registry([specs], plugins=make_plugins((WorldPlugin(lazy="no_such_module_xyz:run"), "world")))
    with pytest.raises(PluginError, match="cannot import 'no_such_module_xyz:run'"):
        registry.get("lazy").resolve()


def test_kind_that_fails_to_build_raises_plugin_error(tmp_path: Path) -> None:
    """A kind whose build() raises, or returns something not callable, gives a PluginError naming the plugin."""

    def broken(spec: ToolSpec) -> Callable[..., Any]:
        msg = "no template engine"
        raise RuntimeError(msg)

    def inert(spec: ToolSpec) -> Any:
        return 42

    class BrokenKinds:
        @hookimpl
        def toolflow_register_kinds(self, register: Callable[[Any], None]) -> None:
            register(ImplementationKind(name="broken", schema={"type": "string"}, build=broken))
            register(ImplementationKind(name="inert", schema={"type": "string"}, build=inert))

    text = "toolflow: 1\ntools:\n  a:\n    description: x\n    broken: x\n  b:\n    description: x\n    inert: x\n"
    specs = write(tmp_path, "specs.yaml", text)
    registry = load_registry([specs], plugins=make_plugins((BrokenKinds(), "brokenkinds")))
    with pytest.raises(PluginError, match=r"the 'broken' kind of plugin 'brokenkinds' cannot build tool 'a': no templ"):
        registry.get("a").resolve()
    with pytest.raises(PluginError, match=r"built 42 for tool 'b', which is not callable"):
        registry.get("b").is_async  # noqa: B018 - the property resolves


# --- build errors -------------------------------------------------------------------------------


def test_spec_errors_raise_spec_error(tmp_path: Path) -> None:
    """A load with error diagnostics cannot be built into a registry."""
    write(tmp_path, "bad.yaml", "toolflow: 1\ntools:\n  look:\n    descripton: typo\n    implementation: world.look\n")
    with pytest.raises(SpecError) as caught:
        load_registry([tmp_path], plugins=make_plugins())
    assert [d.code for d in caught.value.diagnostics] == ["TF101"]


def test_unbound_implementation_suggests_a_bound_name(tmp_path: Path) -> None:
    """An implementation name no plugin binds is an error with file position and a did-you-mean."""
    error = build_error(tmp_path, "toolflow: 1\ntools:\n  look:\n    description: x\n    implementation: world.lok\n")
    path = tmp_path / "specs.yaml"
    assert error.problems == (
        f"{path}:5:21: tool 'look' uses implementation 'world.lok', which no plugin binds; did you mean 'world.look'?",
    )
    assert str(error) == error.problems[0]
    assert error.exit_code == 1


def test_name_bound_by_two_plugins_names_both(tmp_path: Path) -> None:
    """Two plugins binding the same name is an error naming both, never a silent override."""
    plugins = make_plugins((WorldPlugin(), "world"), (RivalPlugin(), "rival"))
    text = "toolflow: 1\ntools:\n  look:\n    description: x\n    implementation: world.look\n"
    error = build_error(tmp_path, text, plugins)
    assert len(error.problems) == 1
    assert "implementation 'world.look' of tool 'look' is bound by 2 plugins: 'world' and 'rival'" in str(error)


def test_conflicting_binding_nobody_uses_is_no_error(tmp_path: Path) -> None:
    """A name two plugins bind but no spec uses does not stop the registry."""
    plugins = make_plugins((WorldPlugin(), "world"), (RivalPlugin(), "rival"))
    write(tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  hi:\n    description: x\n    implementation: world.say\n")
    assert load_registry([tmp_path], plugins=plugins).names() == ("hi",)


def test_kind_no_plugin_provides(tmp_path: Path) -> None:
    """A tool of a kind no plugin provides is an error at build time."""
    text = "toolflow: 1\ntools:\n  fetch:\n    description: x\n    http: {url: 'https://example.com'}\n"
    error = build_error(tmp_path, text, http={"type": "object"})
    assert error.problems == (f"{tmp_path / 'specs.yaml'}:5:5: tool 'fetch': no plugin provides the 'http' kind",)


def test_kind_provided_by_two_plugins_names_both(tmp_path: Path) -> None:
    """Two plugins providing the kind a tool uses is an error naming both."""
    plugins = make_plugins((WorldPlugin(), "world"), (RivalPlugin(), "rival"))
    error = build_error(tmp_path, "toolflow: 1\ntools:\n  shout:\n    description: x\n    echo: hi\n", plugins)
    assert "the 'echo' kind of tool 'shout' is provided by 2 plugins: 'world' and 'rival'" in str(error)


def test_builtin_kinds_need_their_plugins(tmp_path: Path) -> None:
    """Without the default plugins a template tool has no kind to build it."""
    write(tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  hi:\n    description: x\n    template: hello\n")
    bare = load_plugins(builtins=False, entry_points=False)
    with pytest.raises(RegistryError, match="tool 'hi': no plugin provides the 'template' kind"):
        load_registry([tmp_path], plugins=bare)


def test_tool_without_or_with_two_implementations(tmp_path: Path) -> None:
    """A tool needs exactly one implementation to be registered."""
    text = """\
        toolflow: 1
        tools:
          none:
            description: x
          both:
            description: x
            implementation: world.look
            echo: hi
    """
    error = build_error(tmp_path, text)
    assert [p.split(": ", 1)[1] for p in error.problems] == [
        "tool 'none' has no implementation",
        "tool 'both' has 2 implementations ('implementation', 'echo'); keep one",
    ]


def test_duplicate_tool_names_across_files(tmp_path: Path) -> None:
    """The same tool name in two files is an error naming the first file."""
    write(tmp_path, "a.yaml", "toolflow: 1\ntools:\n  look:\n    description: x\n    implementation: world.look\n")
    write(tmp_path, "b.yaml", "toolflow: 1\ntools:\n  look:\n    description: y\n    implementation: world.look\n")
    with pytest.raises(RegistryError) as caught:
        load_registry([tmp_path], plugins=make_plugins())
    assert caught.value.problems == (
        f"{tmp_path / 'b.yaml'}:3:3: tool 'look' is declared twice (first in {tmp_path / 'a.yaml'})",
    )


def test_toolset_problems_are_build_errors(tmp_path: Path) -> None:
    """Toolsets naming unknown tools or categories, and duplicate toolsets, stop the build (like TF222)."""
    write(
        tmp_path,
        "a.yaml",
        """\
        toolflow: 1
        tools:
          say:
            description: x
            category: terminal
            implementation: world.say
        toolsets:
          chat:
            tools: [say, sya]
            categories: [termnal]
            exclude: [shout]
        """,
    )
    write(tmp_path, "b.yaml", "toolflow: 1\ntoolsets:\n  chat:\n    tools: [say]\n")
    with pytest.raises(RegistryError) as caught:
        load_registry([tmp_path], plugins=make_plugins())
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    assert caught.value.problems == (
        f"{a}:9:18: toolset 'chat' names tool 'sya', which no spec file declares; did you mean 'say'?",
        f"{a}:11:15: toolset 'chat' excludes tool 'shout', which no spec file declares",
        (
            f"{a}:10:18: toolset 'chat' includes category 'termnal', which is not built in, declared by a policy "
            "or used by any tool; did you mean 'terminal'?"
        ),
        f"{b}:3:3: toolset 'chat' is declared twice (first in {a})",
    )
    assert str(caught.value).startswith("4 problems building the tool registry:\n  - ")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    """Build collects every problem before raising."""
    text = """\
        toolflow: 1
        tools:
          a:
            description: x
            implementation: nowhere.a
          b:
            description: x
            implementation: nowhere.b
    """
    error = build_error(tmp_path, text)
    assert len(error.problems) == 2
    assert "2 problems building the tool registry" in str(error)


def test_load_registry_passes_plugin_kinds_to_the_loader(tmp_path: Path) -> None:
    """load_registry() tells the loader about plugin kinds, so their keys are not unknown keys."""
    write(tmp_path, "specs.yaml", "toolflow: 1\ntools:\n  shout:\n    description: x\n    echo: hi\n")
    assert load_registry([tmp_path], plugins=make_plugins()).get("shout").kind == "echo"
    with pytest.raises(SpecError):
        load_registry([tmp_path], plugins=load_plugins(entry_points=False))


def test_registered_tool_validates_and_normalises(registry: Registry) -> None:
    """The compiled validators of a registered tool are the real ones: arguments and results."""
    tool = registry.get("search")
    assert tool.validator.validate({"query": "key"}).valid
    checked = tool.validator.validate({})
    assert not checked.valid
    assert checked.errors[0].parameter == "query"
    result = tool.result_validator.normalize(tool.resolve()(detail_level="key"))
    assert isinstance(result, ToolResult)
    assert result.success
    assert result.data == {"seen": "key"}


def test_default_kinds_come_from_the_default_plugins(tmp_path: Path) -> None:
    """template and command tools are built by the default plugins, into async callables."""
    text = "toolflow: 1\ntools:\n  hi:\n    description: x\n    template: hello\n  ls:\n    description: x\n    command: [ls]\n"
    write(tmp_path, "specs.yaml", text)
    registry = load_registry([tmp_path], plugins=load_plugins(entry_points=False))
    assert [(t.kind, t.plugin) for t in registry] == [
        ("template", "toolflow.default_plugins.template"),
        ("command", "toolflow.default_plugins.command"),
    ]
    assert all(tool.is_async for tool in registry)


def test_unusable_schemas_are_build_errors(tmp_path: Path) -> None:
    """A parameters or output_schema that is not valid JSON Schema stops the build, at the field."""
    text = """\
        toolflow: 1
        tools:
          look:
            description: x
            parameters:
              type: object
              properties:
                a: {type: strin}
            output_schema: {type: 12}
            implementation: world.look
    """
    error = build_error(tmp_path, text)
    path = tmp_path / "specs.yaml"
    assert error.problems == (
        (
            f"{path}:5:5: tool 'look': its parameters cannot be used: the schema is not valid JSON Schema: "
            "'strin' is not a JSON Schema type; did you mean 'string'? (at 'properties.a.type'); "
            "'toolflow lint' lists every problem of the specs"
        ),
        (
            f"{path}:9:5: tool 'look': its output_schema cannot be used: the schema is not valid JSON Schema: "
            "12 is not a JSON Schema type (one of array, boolean, integer, null, number, object, string) (at 'type'); "
            "'toolflow lint' lists every problem of the specs"
        ),
    )
