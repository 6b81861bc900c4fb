"""Public constructors and factories check their arguments and say what was expected (issue 14, section 6).

A wrong argument used to fail later, deep inside: ``Agent(None, ...)`` with an AttributeError
on ``.registry``, ``open_engine(registry, allowlist="search")`` by allowing the tools ``s``,
``e``, ``a``, ... and ``load_specs("specs/")`` by loading each character as a path (``/``
among them: the whole file system). Each now raises at once, naming the argument.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

import toolflow
from toolflow import (
    Agent,
    CategoryPolicy,
    Policy,
    Registry,
    RetryPolicy,
    TokenBudget,
    ToolResult,
    history_format,
    load_plugins,
    load_provider,
    load_registry,
    load_specs,
    validate_specs,
)
from toolflow.default_plugins._scripted import open_scripted

SPEC = "toolflow: 1\ntools:\n  look:\n    description: Look around.\n    template: You see a room.\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tools.yaml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "session.yaml").write_text("turns:\n  - text: done\n", encoding="utf-8")
    return tmp_path


def _raises(error: type[Exception], message: str, make: Callable[[], object]) -> None:
    with pytest.raises(error) as caught:
        make()
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_result_chars": 0}, "Agent: max_result_chars must be at least 1, got 0"),
        ({"engine": None}, "Agent: engine must be a toolflow.Engine (from toolflow.open_engine()), got None"),
        (
            {"provider": "scripted:session.yaml"},
            "Agent: provider must be a toolflow.ModelProvider (from toolflow.load_provider()), got 'str'",
        ),
        ({"policy": {"max_iterations": 2}}, "Agent: policy must be a toolflow.Policy or None, got 'dict'"),
        ({"system": 5}, "Agent: system must be a string or None, got 'int'"),
        ({"deliberate": "no"}, "Agent: deliberate must be True or False, got 'str'"),
        ({"approve": "yes"}, "Agent: approve must be a function or None, got 'str'"),
        ({"on_turn": 1}, "Agent: on_turn must be a function or None, got 'int'"),
        ({"model": None}, "Agent: model must be a string, got None"),
        ({"max_result_chars": "100"}, "Agent: max_result_chars must be an integer of at least 1 or None, got 'str'"),
        ({"provider_retry": {"attempts": 2}}, "Agent: provider_retry must be a toolflow.RetryPolicy, got 'dict'"),
    ],
)
async def test_agent_checks_its_arguments(project: Path, options: dict[str, Any], message: str) -> None:
    """Agent(...) with a wrong argument is a TypeError naming it, not an AttributeError in a turn."""
    registry = load_registry([project / "tools.yaml"], plugins=load_plugins(entry_points=False))
    provider = open_scripted(str(project / "session.yaml"))
    with trio.fail_after(10):
        async with toolflow.open_engine(registry) as engine:
            arguments = {"engine": engine, "provider": provider, **options}
            error = ValueError if "at least 1, got 0" in message else TypeError
            _raises(error, message, lambda: Agent(**arguments))


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"registry": None},
            TypeError,
            "open_engine: registry must be a toolflow.Registry (from toolflow.load_registry()), got None",
        ),
        ({"plugins": 1}, TypeError, "open_engine: plugins must be a toolflow.Plugins or None, got 'int'"),
        (
            {"allowlist": "look"},
            TypeError,
            "open_engine: allowlist must be a list of tool names, got the single 'str' 'look': put it in a list",
        ),
        (
            {"max_concurrency": "8"},
            TypeError,
            "open_engine: max_concurrency must be an integer of at least 1, got 'str'",
        ),
        ({"max_concurrency": 0}, ValueError, "open_engine: max_concurrency must be at least 1, got 0"),
        (
            {"max_threads": 2.5},
            TypeError,
            "open_engine: max_threads must be an integer of at least 1 or None, got 'float'",
        ),
        ({"max_malformed": True}, TypeError, "open_engine: max_malformed must be an integer of at least 0, got 'bool'"),
        ({"cache_path": 5}, TypeError, "open_engine: cache_path must be a path or None, got 'int'"),
        ({"clock": 5}, TypeError, "open_engine: clock must be a function returning seconds, got 'int'"),
        ({"cache_backend": 5}, TypeError, "open_engine: cache_backend must be a backend's name or None, got 'int'"),
        ({"cache_options": [1]}, TypeError, "open_engine: cache_options must be a mapping or None, got 'list'"),
    ],
)
async def test_open_engine_checks_its_arguments(
    project: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    """open_engine(...) refuses a wrong argument before the engine runs anything."""
    registry = load_registry([project / "tools.yaml"], plugins=load_plugins(entry_points=False))
    arguments = {"registry": registry, **options}
    with trio.fail_after(10), pytest.raises(error) as caught:
        async with toolflow.open_engine(**arguments):
            pass
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "call",
    [
        load_specs,
        validate_specs,
        lambda path: load_registry(path, plugins=load_plugins(entry_points=False)),
    ],
    ids=["load_specs", "validate_specs", "load_registry"],
)
def test_a_single_path_is_not_a_list_of_paths(project: Path, call: Callable[[Any], object]) -> None:
    """A string given as the paths is refused rather than read as one path per character."""
    path = str(project / "tools.yaml")
    message = f"paths must be a list of spec files and directories, got the single 'str' {path!r}: put it in a list"
    _raises(TypeError, message, lambda: call(path))


def test_loading_functions_check_their_other_arguments(project: Path) -> None:
    """load_specs, Registry.build, load_provider, load_plugins and history_format name the bad argument."""
    plugins = load_plugins(entry_points=False)
    loaded = load_specs([project / "tools.yaml"])
    expected = "a mapping of variable names to values, or None"
    _raises(TypeError, f"environ must be {expected}, got 'list'", lambda: load_specs([], environ=["A=1"]))  # type: ignore[arg-type]
    _raises(
        TypeError,
        "Registry.build: specs must be a toolflow.LoadResult (from toolflow.load_specs()), got 'list'",
        lambda: Registry.build(list(loaded.tools), plugins),  # type: ignore[arg-type]
    )
    _raises(
        TypeError,
        "Registry.build: plugins must be a toolflow.Plugins (from toolflow.load_plugins()), got None",
        lambda: Registry.build(loaded, None),  # type: ignore[arg-type]
    )
    _raises(
        TypeError,
        "load_provider: plugins must be a toolflow.Plugins (from toolflow.load_plugins()), got None",
        lambda: load_provider("scripted:session.yaml", plugins=None),  # type: ignore[arg-type]
    )
    _raises(
        TypeError,
        "load_provider: model must be a string such as 'openai:gpt-4o-mini', got None",
        lambda: load_provider(None, plugins=plugins),  # type: ignore[arg-type]
    )
    _raises(
        TypeError,
        "load_plugins: project_plugins must be a list of module names, got the single 'str' 'my_tools': put it in a list",
        lambda: load_plugins(entry_points=False, project_plugins="my_tools"),
    )
    _raises(
        TypeError,
        "history_format: name must be a string, one of openai, anthropic, fallback, text, gemini, got None",
        lambda: history_format(None),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("record", "fields", "error", "message"),
    [
        (
            Policy,
            {"max_iterations": "5"},
            TypeError,
            "Policy: max_iterations must be an integer of at least 1, got 'str'",
        ),
        (
            Policy,
            {"max_consecutive_errors": 0},
            ValueError,
            "Policy: max_consecutive_errors must be at least 1, got 0",
        ),
        (
            Policy,
            {"tokens": {"context_window": 8000}},
            TypeError,
            "Policy: tokens must be a toolflow.TokenBudget or None, got 'dict'",
        ),
        (
            Policy,
            {"allow": "look"},
            TypeError,
            "Policy: allow, deny and deliberate must be a list of tool names, got the single 'str' 'look': put it in a list",
        ),
        (Policy, {"system_prompt": None}, TypeError, "Policy: system_prompt must be a string, got None"),
        (
            Policy,
            {"categories": {"safe_chain": {"per_turn": 1}}},
            TypeError,
            "Policy: categories['safe_chain'] must be a toolflow.CategoryPolicy, got 'dict'",
        ),
        (
            CategoryPolicy,
            {"per_turn": "1"},
            TypeError,
            "CategoryPolicy: per_turn must be an integer of at least 1 or None, got 'str'",
        ),
        (
            CategoryPolicy,
            {"ends_loop": "sometimes"},
            ValueError,
            "CategoryPolicy: ends_loop must be 'never', 'on_success' or 'always', got 'sometimes'",
        ),
        (
            TokenBudget,
            {"context_window": "8k"},
            TypeError,
            "TokenBudget: context_window must be an integer of at least 1, got 'str'",
        ),
        (
            TokenBudget,
            {"context_window": 8000, "warning": 60},
            ValueError,
            "TokenBudget: warning must be a share above 0, at most 1, got 60",
        ),
        (
            RetryPolicy,
            {"attempts": "3"},
            TypeError,
            "RetryPolicy: attempts must be an integer of at least 0, got 'str'",
        ),
        (RetryPolicy, {"initial": -1}, ValueError, "RetryPolicy: initial must be seconds from 0, got -1"),
        (
            RetryPolicy,
            {"on": "timeout"},
            TypeError,
            "RetryPolicy: on must be a list of error classes, got the single 'str' 'timeout': put it in a list",
        ),
        (ToolResult, {"success": "yes"}, TypeError, "ToolResult: success must be True or False, got 'str'"),
        (
            ToolResult,
            {"success": False, "error": 5},
            TypeError,
            "ToolResult: error must be a string or None, got 'int'",
        ),
        (
            ToolResult,
            {"success": True, "warnings": "dropped 'x'"},
            TypeError,
            "ToolResult: warnings must be a list of strings, got the single 'str' \"dropped 'x'\": put it in a list",
        ),
        (
            ToolResult,
            {"success": True, "extra": [("a", 1)]},
            TypeError,
            "ToolResult: extra must be a mapping or None, got 'list'",
        ),
    ],
)
def test_records_check_their_fields(
    record: Callable[..., object], fields: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Policy, CategoryPolicy, TokenBudget, RetryPolicy and ToolResult refuse a wrong field, naming it."""
    _raises(error, message, lambda: record(**fields))


def test_records_still_accept_what_they_did() -> None:
    """The checks refuse only what could not work: lists, tuples and sets of names, ints for floats."""
    assert Policy(allow=["look"], deny=("say",), deliberate={"look"}).allow == ("look",)
    assert RetryPolicy(initial=1, max=2).initial == 1
    assert ToolResult(success=True, warnings=["one"], extra={"status": "ok"}).warnings == ("one",)
    assert TokenBudget(context_window=8000, warning=1).warning == 1
