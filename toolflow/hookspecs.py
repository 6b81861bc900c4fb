"""The plugin hooks of toolflow: every hook a plugin may implement, with its contract.

Plugins implement hooks with the ``toolflow.hookimpl`` marker, in functions or
methods named exactly like the hook. Hooks follow the register-callback style:
toolflow calls the hook once with a ``register`` callable and the plugin calls
it for each thing it contributes, so that one plugin may contribute many::

    import toolflow

    @toolflow.hookimpl
    def toolflow_register_implementations(register):
        register("assistant.say", "toolflow_assistant.tools:say")   # lazy: imported on first call
        register("assistant.look", look)                            # or the callable itself

Every hook is documented in ``docs/plugin-hooks.md`` as well; a test keeps the
two in step. A misspelt hook name in a plugin is an error, with a suggestion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

__all__ = [
    "hookimpl",
    "hookspec",
    "toolflow_after_call",
    "toolflow_approve_call",
    "toolflow_before_call",
    "toolflow_register_cache_backends",
    "toolflow_register_implementations",
    "toolflow_register_kinds",
    "toolflow_register_lint_rules",
    "toolflow_register_model_providers",
    "toolflow_register_tool_packs",
    "toolflow_restart_turn",
    "toolflow_retryable",
    "toolflow_validate_arguments",
    "toolflow_wrap_call",
    "toolflow_wrap_operation",
]

PROJECT = "toolflow"

hookspec = pluggy.HookspecMarker(PROJECT)
"""Marks a hook specification (used by this module only)."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marks a plugin's hook implementation: ``@toolflow.hookimpl``."""


@hookspec
def toolflow_register_implementations(register: Callable[[str, Any], None]) -> None:
    """Bind implementation names to Python callables.

    Call ``register(name, target)`` once per implementation. ``name`` is what
    specs write after ``implementation:``; ``target`` is a callable (sync or
    async) or a lazy ``"module:attribute"`` string that is imported only when
    the tool is first called, so that linting and listing never import heavy
    SDKs. The callable receives the validated arguments as keyword arguments;
    an async callable may also accept a ``ctx`` keyword with the call's context.

    Two plugins registering the same name is an error naming both.
    """


@hookspec
def toolflow_register_kinds(register: Callable[[Any], None]) -> None:
    """Add implementation kinds: ways to implement a tool other than a bound name.

    Call ``register(kind)`` with a :class:`toolflow.ImplementationKind`: its
    ``name`` is the spec key that selects it (``template``, ``command``, ``http``),
    ``schema`` the JSON Schema of that key's value (so the linter checks it), and
    ``build(spec)`` returns the callable that runs a tool of that kind. The
    built-in ``template`` and ``command`` kinds are registered this way. A kind
    named like a key tools already have (``timeout``, ``retry``, ...) fails its
    plugin.
    """


@hookspec
def toolflow_register_lint_rules(register: Callable[[Any], None]) -> None:
    """Add lint rules.

    Call ``register(rule)`` with a :class:`toolflow.LintRule` whose code starts
    with the plugin's own prefix (letters then digits, e.g. ``ACME101``), never
    with ``TF``. The rule's ``check(ctx)`` yields diagnostics like the built-in
    rules; a rule that raises is reported once as a warning naming its plugin.
    """


@hookspec
def toolflow_register_cache_backends(register: Callable[[str, Any], None]) -> None:
    """Provide cache backends for the ``persistent`` cache scope.

    Call ``register(name, factory)``; the engine calls ``factory(**options)`` to
    open the backend named by its ``cache_backend`` (the project's
    ``[tool.toolflow.cache] backend``). The backend has the methods of
    :class:`toolflow.CacheBackend`; its failures become warnings naming the plugin.
    The factory and the methods are called from worker threads, one at a time, and
    a call waits for each at most the engine's ``cache_timeout``.
    """


@hookspec
def toolflow_register_model_providers(register: Callable[[str, Any], None]) -> None:
    """Provide model providers for ``toolflow run --model NAME:...``.

    Call ``register(name, factory)``; for ``--model NAME:TARGET`` the agent loop
    calls ``factory(TARGET, **options)`` and talks to the model through the
    :class:`toolflow.ModelProvider` it returns (``options`` are the provider's
    own settings, such as ``base_url`` for ``openai``). The built-in ``scripted``
    and ``openai`` providers are registered this way.
    """


@hookspec
def toolflow_register_tool_packs(register: Callable[[str, Any], None]) -> None:
    """Ship YAML tools: spec files a project includes by the pack's name.

    Call ``register(name, files)`` with the pack's name (``http-examples``: lower-case words
    joined by ``-`` or ``_``) and the spec files it holds, a list of paths (``str``,
    ``os.PathLike`` or an ``importlib.resources`` file of the plugin's package that is a real
    file). A spec file that says ``include: [http-examples]`` at its top level brings the pack's
    files into every command that reads it (lint, list, schema, call, run, serve), with
    diagnostics at their own lines in the plugin's files. Two plugins registering one name
    is reported where the name is included.
    """


@hookspec(firstresult=True)
def toolflow_approve_call(call: Any, category: str) -> bool | None:
    """Approve or refuse a call whose category requires approval (``policy: categories: X: approval: true``).

    Return ``True`` to let the call run, ``False`` to refuse it, ``None`` to
    leave the decision to the next plugin. The first answer wins; when nobody
    answers, the call is refused. A refused call is not run and the model gets a
    result saying so. Asked by the engine in every front end, after the caller's
    own approver and before the request's asker (``toolflow serve``'s client),
    about calls that passed the gates, validation and the cache. A tool's own ``approval:``
    asks the same way; *category* is then a :class:`toolflow.ApprovalReason` (the category's
    name, saying why).
    """


@hookspec
def toolflow_validate_arguments(call: Any, arguments: Any) -> Any:
    """Check a call's arguments in ways the tool's schema cannot (seed 000's third validation stage).

    Asked by the engine (and ``toolflow.invoke``) for every call, from every front end and
    pipeline step, after the schema and the parameter rules passed, before the cache, approval
    and the call run. *call* is the :class:`toolflow.ToolCall`; *arguments* the validated
    arguments (defaults filled in, parameters bound to the caller's context filled; do not
    change them). Return ``None`` (or an empty value) when they are fine, else what is wrong: a
    string, a list of strings, or a mapping of parameter name to message. Every plugin is asked;
    their errors together fail the call in the validator's format, which the model reads and
    corrects (``Parameter validation failed for 'tool':`` then ``  - name: message`` lines). A
    hook that raises is reported as a :class:`toolflow.CallHookWarning` and fails the call
    (a check that cannot run does not let the call through).
    """


@hookspec
def toolflow_before_call(call: Any) -> None:
    """Observe a tool call after its arguments were validated, before it runs."""


@hookspec
def toolflow_after_call(call: Any, result: Any) -> None:
    """Observe a tool call's normalised result (success or failure)."""


@hookspec
def toolflow_wrap_call(call: Any) -> Any:
    """Wrap a tool call in middleware (tracing, auth, metering).

    Return an async context manager that the engine enters around the call's
    execution, or ``None`` to leave the call alone. Wrappers nest in plugin
    registration order.
    """


@hookspec
def toolflow_wrap_operation(operation: Any) -> Any:
    """Wrap a whole operation in a context manager (tracing): a tool call, an agent loop's run, a model request.

    Return a plain (not async) context manager that toolflow enters when the operation starts
    and leaves when it ends, in the task that runs it, or ``None`` to leave it alone. Wrappers
    nest in plugin registration order. ``operation`` is a :class:`toolflow.Operation`: its
    ``kind`` (``execute_tool``, ``invoke_agent``, ``chat``), ``name``, ``call_id`` and
    ``details`` say what starts; its ``result`` (a ``ToolResult``, ``LoopResult`` or
    ``ModelResponse``) is set before the context is left, unless an exception ends the
    operation, which the context manager's ``__exit__`` then sees. A tool call's scope covers
    everything the engine does with it (gates, validation, caches, approval, every attempt, a
    pipeline's steps, which are operations of their own inside it); ``toolflow_wrap_call``
    wraps each attempt. A hook that raises is reported as a warning and left out.

    When an engine or an agent loop is made, the hook is called once with ``operation=None``: an
    implementation that returns ``None`` then is not called for its operations (the ``otel``
    plugin does so while OpenTelemetry has no tracer provider), so an idle tracer costs nothing.
    """


@hookspec(firstresult=True)
def toolflow_restart_turn(call: Any, result: Any) -> str | None:
    """Ask the agent loop to restart the turn after a call, with more context (seed 002's enhanced-context restart).

    Asked by the agent loop about each call of a turn that offered tools, once the turn's calls
    ran, when the call's result did not ask for a restart itself (its ``restart`` key). *call*
    is the :class:`toolflow.ToolCall`, *result* its :class:`toolflow.ToolResult`. Return the
    context (a non-empty string) that the next request carries instead of the turn, or ``None``
    to leave the result as it is; the first answer wins. The loop takes a restart only while it
    would go on and at most ``policy.max_restarts`` times per run; then the result is recorded
    as it is. Only the agent loop asks: ``toolflow call``, ``serve`` and pipelines do not. A hook
    that raises is reported as a warning and counts as no answer.
    """


@hookspec(firstresult=True)
def toolflow_retryable(call: Any, error: BaseException) -> bool | None:
    """Decide whether *error*, raised by a tool, may be retried.

    Return ``True`` or ``False`` to decide, ``None`` to leave it to the spec's
    ``retry.on`` classes. The first plugin that decides wins. ``trio.Cancelled``
    never reaches this hook.
    """
