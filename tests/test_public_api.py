"""The public API is exactly the names in ``toolflow.__all__``, and each of them resolves."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect

import pytest

import toolflow

EXPECTED = [
    "DEFAULT_TEMPLATE_BUDGET",
    "TEMPLATE_GLOBALS",
    "Abort",
    "Agent",
    "ApprovalReason",
    "ApprovalWarning",
    "Approver",
    "ArgumentValidator",
    "BatchOutcome",
    "Binding",
    "CacheBackend",
    "CachePolicy",
    "CacheScope",
    "CacheWarning",
    "CallContext",
    "CallHookWarning",
    "Category",
    "CategoryPolicy",
    "CompiledTemplate",
    "ConfigError",
    "Diagnostic",
    "Engine",
    "Example",
    "HandleKeys",
    "HistoryEntry",
    "HistoryFormat",
    "Implementation",
    "ImplementationKind",
    "Interpolated",
    "LintContext",
    "LintRule",
    "LoadResult",
    "LoopDecision",
    "LoopResult",
    "MalformedCall",
    "McpServer",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Operation",
    "ParameterError",
    "ParameterRule",
    "PendingCall",
    "Pipeline",
    "PipelineStep",
    "PluginError",
    "PluginInfo",
    "PluginLoadWarning",
    "Plugins",
    "Policy",
    "ProviderError",
    "RateLimit",
    "RegisteredTool",
    "Registry",
    "RegistryError",
    "RemoteTool",
    "ResultValidator",
    "RetryPolicy",
    "SavedRun",
    "Severity",
    "Span",
    "SpecError",
    "SpecFile",
    "StateBackend",
    "StepRecord",
    "TaskOutcome",
    "TemplateError",
    "TemplateProblem",
    "TokenBudget",
    "ToolCall",
    "ToolDependency",
    "ToolResult",
    "ToolRule",
    "ToolSourceError",
    "ToolSourceWarning",
    "ToolSpec",
    "ToolflowError",
    "Toolset",
    "TurnRecord",
    "UnknownCategoryError",
    "UnknownToolError",
    "UnknownToolsetError",
    "Usage",
    "UsageError",
    "ValidationResult",
    "__version__",
    "asking_approval",
    "check_loop_continuation",
    "compile_template",
    "defer_approval",
    "history_format",
    "hookimpl",
    "invoke",
    "load_plugins",
    "load_provider",
    "load_registry",
    "load_specs",
    "open_engine",
    "open_registry",
    "parse_duration",
    "parse_template",
    "parse_tool_call",
    "parse_tool_calls",
    "providing_context",
    "render_template",
    "retry_after_seconds",
    "run_in_template_worker",
    "state_from_url",
    "template_environment",
    "template_variables",
    "trace_context",
    "unguarded_template_reads",
    "validate_specs",
]


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions and the rest."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def test_all_is_sorted() -> None:
    """`__all__` is in ruff's isort-style order (constants, classes, then the rest)."""
    assert toolflow.__all__ == sorted(toolflow.__all__, key=_isort_key)


def test_all_is_the_expected_list() -> None:
    """`__all__` is exactly the reviewed list; changing the public API means changing this test."""
    assert toolflow.__all__ == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_every_name_resolves(name: str) -> None:
    """Each exported name is an attribute of the package, defined in a private module."""
    value = getattr(toolflow, name)
    assert value is not None
    if inspect.isclass(value) or inspect.isfunction(value):
        module = value.__module__
        assert module.startswith("toolflow._"), f"{name} is defined in {module}"
        assert name in getattr(importlib.import_module(module), "__all__", ())


def test_dir_matches_all() -> None:
    """`dir(toolflow)` lists the public names, nothing more."""
    assert dir(toolflow) == sorted(toolflow.__all__)


def test_unknown_name_raises_attribute_error() -> None:
    """A name outside the public API is an AttributeError, naming the name."""
    with pytest.raises(AttributeError, match="'load_spec'"):
        _ = toolflow.load_spec


def test_version_matches_the_distribution() -> None:
    """`__version__` is the version of the installed distribution."""
    assert toolflow.__version__ == importlib.metadata.version("toolflow-yaml")
