"""toolflow: declarative YAML tool pipelines for LLM tool calling.

The public API is re-exported here (everything else lives in ``_private``
modules). Names are imported on first use, so that ``import toolflow`` and
``toolflow --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolflow._approval import ApprovalReason, ApprovalWarning, Approver, asking_approval, defer_approval
    from toolflow._cache import CacheBackend, CacheWarning
    from toolflow._calls import MalformedCall, ToolCall, parse_tool_call, parse_tool_calls
    from toolflow._categories import CategoryPolicy
    from toolflow._context import CallContext, providing_context
    from toolflow._deferred import PendingCall
    from toolflow._diagnostics import Diagnostic, Severity, Span
    from toolflow._errors import ConfigError, SpecError, ToolflowError, UsageError
    from toolflow._executor import Abort, BatchOutcome, Engine, HistoryEntry, open_engine
    from toolflow._history import HistoryFormat, history_format
    from toolflow._invoke import CallHookWarning, invoke
    from toolflow._lint._rule import LintContext, LintRule
    from toolflow._loader import load_specs, validate_specs
    from toolflow._loop import Agent, LoopResult, TurnRecord
    from toolflow._loop_records import TaskOutcome
    from toolflow._mcp_sources import open_registry
    from toolflow._mcp_specs import ToolSourceError, ToolSourceWarning
    from toolflow._model import (
        CachePolicy,
        CacheScope,
        Category,
        Example,
        Implementation,
        LoadResult,
        McpServer,
        ParameterRule,
        Pipeline,
        PipelineStep,
        RateLimit,
        RemoteTool,
        RetryPolicy,
        SpecFile,
        ToolDependency,
        Toolset,
        ToolSpec,
        parse_duration,
    )
    from toolflow._plugins import (
        Binding,
        ImplementationKind,
        PluginError,
        PluginInfo,
        PluginLoadWarning,
        Plugins,
        load_plugins,
    )
    from toolflow._policy import LoopDecision, Policy, TokenBudget, check_loop_continuation
    from toolflow._provenance import Interpolated
    from toolflow._providers import ModelProvider, ModelRequest, ModelResponse, ProviderError, Usage, load_provider
    from toolflow._registry import (
        RegisteredTool,
        Registry,
        RegistryError,
        UnknownCategoryError,
        UnknownToolError,
        UnknownToolsetError,
        load_registry,
    )
    from toolflow._rendering import render_template, run_in_template_worker
    from toolflow._results import StepRecord, ToolResult
    from toolflow._retrying import retry_after_seconds
    from toolflow._rules import ToolRule
    from toolflow._run_state import SavedRun
    from toolflow._state import HandleKeys, StateBackend
    from toolflow._state_config import state_from_url
    from toolflow._telemetry import Operation, trace_context
    from toolflow._template_guards import unguarded_template_reads
    from toolflow._templates import (
        DEFAULT_TEMPLATE_BUDGET,
        TEMPLATE_GLOBALS,
        CompiledTemplate,
        TemplateError,
        TemplateProblem,
        compile_template,
        parse_template,
        template_environment,
        template_variables,
    )
    from toolflow._validation import ArgumentValidator, ParameterError, ResultValidator, ValidationResult
    from toolflow.hookspecs import hookimpl

__version__ = "0.1.0"

_EXPORTS = {
    "Abort": "toolflow._executor",
    "Agent": "toolflow._loop",
    "ApprovalReason": "toolflow._approval",
    "ApprovalWarning": "toolflow._approval",
    "Approver": "toolflow._approval",
    "ArgumentValidator": "toolflow._validation",
    "BatchOutcome": "toolflow._executor",
    "Binding": "toolflow._plugins",
    "CacheBackend": "toolflow._cache",
    "CachePolicy": "toolflow._model",
    "CacheScope": "toolflow._model",
    "CacheWarning": "toolflow._cache",
    "CallContext": "toolflow._context",
    "CallHookWarning": "toolflow._invoke",
    "Category": "toolflow._model",
    "CompiledTemplate": "toolflow._templates",
    "CategoryPolicy": "toolflow._categories",
    "ConfigError": "toolflow._errors",
    "Diagnostic": "toolflow._diagnostics",
    "Engine": "toolflow._executor",
    "Example": "toolflow._model",
    "HistoryEntry": "toolflow._executor",
    "HistoryFormat": "toolflow._history",
    "Implementation": "toolflow._model",
    "ImplementationKind": "toolflow._plugins",
    "Interpolated": "toolflow._provenance",
    "LintContext": "toolflow._lint._rule",
    "LintRule": "toolflow._lint._rule",
    "LoadResult": "toolflow._model",
    "LoopDecision": "toolflow._policy",
    "LoopResult": "toolflow._loop",
    "MalformedCall": "toolflow._calls",
    "McpServer": "toolflow._model",
    "ModelProvider": "toolflow._providers",
    "ModelRequest": "toolflow._providers",
    "ModelResponse": "toolflow._providers",
    "ParameterError": "toolflow._validation",
    "PendingCall": "toolflow._deferred",
    "ParameterRule": "toolflow._model",
    "Pipeline": "toolflow._model",
    "Operation": "toolflow._telemetry",
    "PipelineStep": "toolflow._model",
    "PluginError": "toolflow._plugins",
    "PluginInfo": "toolflow._plugins",
    "PluginLoadWarning": "toolflow._plugins",
    "Plugins": "toolflow._plugins",
    "Policy": "toolflow._policy",
    "ProviderError": "toolflow._providers",
    "RegisteredTool": "toolflow._registry",
    "Registry": "toolflow._registry",
    "RegistryError": "toolflow._registry",
    "RateLimit": "toolflow._model",
    "RemoteTool": "toolflow._model",
    "ResultValidator": "toolflow._validation",
    "RetryPolicy": "toolflow._model",
    "SavedRun": "toolflow._run_state",
    "Severity": "toolflow._diagnostics",
    "Span": "toolflow._diagnostics",
    "SpecError": "toolflow._errors",
    "StateBackend": "toolflow._state",
    "HandleKeys": "toolflow._state",
    "SpecFile": "toolflow._model",
    "StepRecord": "toolflow._results",
    "DEFAULT_TEMPLATE_BUDGET": "toolflow._templates",
    "TEMPLATE_GLOBALS": "toolflow._templates",
    "TaskOutcome": "toolflow._loop_records",
    "TemplateError": "toolflow._templates",
    "TemplateProblem": "toolflow._templates",
    "TokenBudget": "toolflow._policy",
    "ToolRule": "toolflow._rules",
    "ToolCall": "toolflow._calls",
    "ToolDependency": "toolflow._model",
    "ToolResult": "toolflow._results",
    "ToolSourceError": "toolflow._mcp_specs",
    "ToolSourceWarning": "toolflow._mcp_specs",
    "ToolSpec": "toolflow._model",
    "ToolflowError": "toolflow._errors",
    "Toolset": "toolflow._model",
    "TurnRecord": "toolflow._loop",
    "UnknownCategoryError": "toolflow._registry",
    "UnknownToolError": "toolflow._registry",
    "UnknownToolsetError": "toolflow._registry",
    "Usage": "toolflow._providers",
    "UsageError": "toolflow._errors",
    "ValidationResult": "toolflow._validation",
    "asking_approval": "toolflow._approval",
    "defer_approval": "toolflow._approval",
    "check_loop_continuation": "toolflow._policy",
    "compile_template": "toolflow._templates",
    "history_format": "toolflow._history",
    "hookimpl": "toolflow.hookspecs",
    "invoke": "toolflow._invoke",
    "load_plugins": "toolflow._plugins",
    "load_provider": "toolflow._providers",
    "load_registry": "toolflow._registry",
    "load_specs": "toolflow._loader",
    "open_engine": "toolflow._executor",
    "open_registry": "toolflow._mcp_sources",
    "parse_duration": "toolflow._model",
    "parse_template": "toolflow._templates",
    "parse_tool_call": "toolflow._calls",
    "parse_tool_calls": "toolflow._calls",
    "providing_context": "toolflow._context",
    "render_template": "toolflow._rendering",
    "retry_after_seconds": "toolflow._retrying",
    "state_from_url": "toolflow._state_config",
    "run_in_template_worker": "toolflow._rendering",
    "template_environment": "toolflow._templates",
    "template_variables": "toolflow._templates",
    "trace_context": "toolflow._telemetry",
    "unguarded_template_reads": "toolflow._template_guards",
    "validate_specs": "toolflow._loader",
}

__all__ = [
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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        msg = f"module 'toolflow' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
