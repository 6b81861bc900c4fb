"""The agent-loop policy and the loop-continuation decision (issue 5, section 1; seeds 001 and 002).

A :class:`Policy` comes from the ``policy:`` sections of the spec files
(:meth:`Policy.from_specs`): iterations, the consecutive-error cap, the token budget, which tools
the model sees, and what each category does (:class:`CategoryPolicy`: the built-in defaults,
and the merge of a file's ``categories:`` over them, live in the model module
``toolflow._categories``, which lint reads without loading this one).

:func:`check_loop_continuation` is seed 001's function: given the turn and the tokens used, it
returns a :class:`LoopDecision` (``normal``, ``token_warning``, ``token_critical`` or
``max_iterations``); the agent loop makes the other decisions (``terminal``, ``error_cap``,
``stopped``, ``killed``, ``final_answer``, ``provider_error``) with the same record.
:func:`token_advisory` is the ``_token_advisory`` a tool result carries at the warning and
critical levels.

This module is part of the model layer: pure data and arithmetic, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import attrs

from toolflow._calls import DEFAULT_MAX_ARGUMENT_BYTES, DEFAULT_MAX_CALLS_PER_TURN
from toolflow._categories import DEFAULT_CATEGORY_POLICIES, OTHER_CATEGORY, CategoryPolicy, merge_categories
from toolflow._errors import expect, expect_count, expect_names, expect_number
from toolflow._model import LoadResult
from toolflow._results import DEFAULT_MAX_RESULT_CHARS
from toolflow._rules import ToolRule

__all__ = [
    "DEFAULT_CATEGORY_POLICIES",
    "CategoryPolicy",
    "LoopDecision",
    "LoopReason",
    "Policy",
    "TokenBudget",
    "check_loop_continuation",
    "token_advisory",
]

LoopReason: TypeAlias = Literal[
    "normal",
    "token_warning",
    "token_critical",
    "max_iterations",
    "terminal",
    "error_cap",
    "stopped",
    "killed",
    "final_answer",
    "provider_error",
    "before_exit",
    "restart",
    "deferred",
]
"""Why the loop goes on (``normal``, ``token_warning``, ``before_exit``, ``restart``) or ends (everything else).

``deferred``: the run ended with calls the loop does not run (a ``deferred`` tool or category)
pending in its saved state, waiting for their results."""

OnExit: TypeAlias = Literal["wait", "cancel"]


@attrs.frozen(kw_only=True)
class TokenBudget:
    """The model's context window and the advisory thresholds (seed 001: 60 % and 80 %).

    Attributes:
        context_window: Tokens the model can hold.
        warning: Share of the window from which results carry a warning advisory.
        critical: Share of the window from which the model gets one last turn without tools.
    """

    context_window: int
    warning: float = 0.6
    critical: float = 0.8

    def __attrs_post_init__(self) -> None:
        expect_count(self.context_window, "TokenBudget: context_window", minimum=1)
        for name in ("warning", "critical"):
            share = getattr(self, name)
            expect_number(share, f"TokenBudget: {name}", "a share above 0, at most 1", lambda x: 0 < x <= 1)

    def level(self, tokens_used: int) -> Literal["normal", "warning", "critical"]:
        """The advisory level of *tokens_used*."""
        share = tokens_used / self.context_window
        if share >= self.critical:
            return "critical"
        if share >= self.warning:
            return "warning"
        return "normal"


_ADVICE = {
    "normal": "Sufficient context available",
    "warning": "Consider wrapping up current operation",
    "critical": "Recommend immediate response",
}


def token_advisory(tokens_used: int, budget: TokenBudget | None) -> dict[str, Any] | None:
    """Seed 001's ``_token_advisory`` for a tool result, or ``None`` below the warning level (or without a budget)."""
    if budget is None:
        return None
    level = budget.level(tokens_used)
    if level == "normal":
        return None
    return {
        "level": level,
        "usage_percent": round(100 * tokens_used / budget.context_window, 1),
        "tokens_used": tokens_used,
        "context_window": budget.context_window,
        "message": _ADVICE[level],
    }


@attrs.frozen(kw_only=True)
class LoopDecision:
    """Whether the agent loop goes on after a turn, and why (seed 001's ``check_loop_continuation``).

    Attributes:
        should_continue: Whether the model gets another turn.
        reason: See :data:`LoopReason`.
        message: The reason in words, for the trace and logs.
        advisory: The token advisory in force (``None`` below the warning level).
        iterations_remaining: Turns left before ``max_iterations``.
    """

    should_continue: bool
    reason: LoopReason
    message: str
    advisory: Mapping[str, Any] | None = None
    iterations_remaining: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The decision as seed 001's dictionary."""
        return {
            "should_continue": self.should_continue,
            "reason": self.reason,
            "message": self.message,
            "advisory": dict(self.advisory) if self.advisory is not None else None,
            "iterations_remaining": self.iterations_remaining,
        }


def _names(value: Any) -> tuple[str, ...] | None:
    expect_names(value, "Policy: allow, deny and deliberate", what="tool names", optional=True)
    return None if value is None else tuple(str(name) for name in value)


def _name_tuple(value: Any) -> tuple[str, ...]:
    return _names(value) or ()


def _rules(value: Any) -> tuple[ToolRule, ...]:
    rules = tuple(ToolRule.from_mapping(rule) if isinstance(rule, Mapping) else rule for rule in value)
    for rule in rules:
        expect(rule, ToolRule, "Policy: rules", "a list of toolflow.ToolRule (or their mappings)")
    return rules


def _triggers(value: Any) -> Mapping[str, tuple[str, ...]]:
    expect(value, Mapping, "Policy: triggers", "a mapping of tool names to lists of phrases")
    triggers = {}
    for name, phrases in value.items():
        expect_names(phrases, f"Policy: triggers[{name!r}]", what="phrases")
        triggers[str(name)] = tuple(str(phrase) for phrase in phrases)
    return MappingProxyType(triggers)


@attrs.frozen(kw_only=True)
class Policy:
    """The agent-loop policy of a project (the ``policy:`` sections of its spec files).

    Attributes:
        max_iterations: Most model turns of one loop.
        soft_warn_iterations: From this turn on, results say how many turns are left
            (``None``: ``max_iterations - 2``, at least 1).
        max_consecutive_errors: Failed calls in a row that end the loop.
        tokens: The token budget; ``None``: no advisory.
        toolset: Expose only this toolset's tools.
        allow: Expose only these tools (``None``: every tool).
        deny: Never expose these tools.
        deliberate: The allowlist of deliberate mode (``None``: the mode has none).
        triggers: In deliberate mode, the phrases of a user message that expose each of these
            tools (a tool of the allowlist with triggers is hidden until one matches).
        retain_turns: In deliberate mode, how many further user messages a triggered tool stays
            exposed after a successful call.
        rules: The order rules and call limits (:class:`~toolflow.ToolRule`), in order.
        max_restarts: Most turn restarts a tool's result may ask for in one run; then the call
            is recorded as a normal result.
        max_result_chars: The longest result text the model is shown.
        max_argument_bytes: The largest JSON of a call's arguments accepted (larger: a
            malformed call).
        max_calls_per_turn: The most tool calls one model answer (a batch) may make; a batch
            with more runs none of them.
        system_prompt: The loop's system prompt unless the caller gives one.
        text_protocol: A template replacing the text format's tool-protocol section.
        categories: Behaviour per category, the defaults merged with the spec files' overrides.
        answer_at_limit: At ``max_iterations``, give the model one more turn, without tools, to
            answer with what it found (as at the token budget's critical level); default off.
        on_exit: What a stop or a final answer does with background calls still running:
            ``wait`` (they finish and the model gets their outcomes) or ``cancel``. A kill
            always cancels.
        bound_arguments: What the engine does with arguments that set a parameter the tool
            binds to the caller's context: ``refuse`` the call (a model-readable error) or
            ``ignore`` the value. The context's value is used either way.
    """

    max_iterations: int = 10
    soft_warn_iterations: int | None = None
    max_consecutive_errors: int = 3
    tokens: TokenBudget | None = None
    toolset: str | None = None
    allow: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    deny: tuple[str, ...] = attrs.field(default=(), converter=_name_tuple)
    deliberate: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    triggers: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict, converter=_triggers)
    retain_turns: int = 2
    rules: tuple[ToolRule, ...] = attrs.field(default=(), converter=_rules)
    max_restarts: int = 2
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES
    max_calls_per_turn: int = DEFAULT_MAX_CALLS_PER_TURN
    system_prompt: str = ""
    text_protocol: str | None = None
    categories: Mapping[str, CategoryPolicy] = DEFAULT_CATEGORY_POLICIES
    answer_at_limit: bool = False
    on_exit: OnExit = "wait"
    bound_arguments: Literal["refuse", "ignore"] = "refuse"

    @property
    def soft_warn_at(self) -> int:
        """The first turn whose results carry a ``_loop_advisory``."""
        if self.soft_warn_iterations is not None:
            return self.soft_warn_iterations
        return max(1, self.max_iterations - 2)

    def __attrs_post_init__(self) -> None:
        expect_count(self.max_iterations, "Policy: max_iterations", minimum=1)
        expect_count(self.soft_warn_iterations, "Policy: soft_warn_iterations", minimum=1, optional=True)
        expect_count(self.max_consecutive_errors, "Policy: max_consecutive_errors", minimum=1)
        expect(self.tokens, (TokenBudget, type(None)), "Policy: tokens", "a toolflow.TokenBudget or None")
        expect(self.toolset, (str, type(None)), "Policy: toolset", "a toolset's name or None")
        expect(self.system_prompt, str, "Policy: system_prompt", "a string")
        expect(self.text_protocol, (str, type(None)), "Policy: text_protocol", "a template or None")
        expect(self.answer_at_limit, bool, "Policy: answer_at_limit", "True or False")
        if self.on_exit not in ("wait", "cancel"):
            msg = f"Policy: on_exit must be 'wait' or 'cancel', got {self.on_exit!r}"
            raise ValueError(msg)
        if self.bound_arguments not in ("refuse", "ignore"):
            msg = f"Policy: bound_arguments must be 'refuse' or 'ignore', got {self.bound_arguments!r}"
            raise ValueError(msg)
        expect_count(self.retain_turns, "Policy: retain_turns", minimum=0)
        expect_count(self.max_restarts, "Policy: max_restarts", minimum=0)
        expect_count(self.max_result_chars, "Policy: max_result_chars", minimum=1)
        expect_count(self.max_argument_bytes, "Policy: max_argument_bytes", minimum=1)
        expect_count(self.max_calls_per_turn, "Policy: max_calls_per_turn", minimum=1)
        expect(self.categories, Mapping, "Policy: categories", "a mapping of category names to CategoryPolicy")
        for name, behaviour in self.categories.items():
            expect(behaviour, CategoryPolicy, f"Policy: categories[{name!r}]", "a toolflow.CategoryPolicy")

    def category(self, name: str) -> CategoryPolicy:
        """The behaviour of category *name* (a category nobody describes chains on without limits)."""
        return self.categories.get(name, OTHER_CATEGORY)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], *, base: Policy | None = None) -> Policy:
        """The policy *mapping* (a schema-valid ``policy:`` section) describes, over *base* (default: the defaults)."""
        policy = base if base is not None else cls()
        changes: dict[str, Any] = {
            key: mapping[key]
            for key in (
                "max_iterations",
                "soft_warn_iterations",
                "max_consecutive_errors",
                "toolset",
                "allow",
                "deny",
                "deliberate",
                "system_prompt",
                "text_protocol",
                "answer_at_limit",
                "on_exit",
                "bound_arguments",
                "max_restarts",
                "max_result_chars",
                "max_argument_bytes",
                "max_calls_per_turn",
            )
            if key in mapping
        }
        if "rules" in mapping:
            changes["rules"] = mapping["rules"]
        deliberate = mapping.get("deliberate")
        if isinstance(deliberate, Mapping):  # the object form: tools, triggers, retain_turns
            changes["deliberate"] = deliberate.get("tools", ())
            changes.update({key: deliberate[key] for key in ("triggers", "retain_turns") if key in deliberate})
        tokens = mapping.get("tokens")
        if isinstance(tokens, Mapping):
            changes["tokens"] = TokenBudget(
                context_window=int(tokens["context_window"]),
                warning=float(tokens.get("warning", 0.6)),
                critical=float(tokens.get("critical", 0.8)),
            )
        declared = mapping.get("categories")
        if isinstance(declared, Mapping):
            changes["categories"] = merge_categories(policy.categories, declared)
        return attrs.evolve(policy, **changes)

    @classmethod
    def from_specs(cls, specs: LoadResult) -> Policy:
        """The policy of every ``policy:`` section of *specs*, merged in load order (a later file wins key by key)."""
        policy = cls()
        for spec_file in specs.files:
            if isinstance(spec_file.policy, Mapping):
                policy = cls.from_mapping(spec_file.policy, base=policy)
        return policy


def check_loop_continuation(*, policy: Policy, iteration: int, tokens_used: int | None = None) -> LoopDecision:
    """Seed 001's continuation check after turn *iteration* (from 1), with *tokens_used* of the context.

    The hard limits first: ``token_critical`` at the critical level, even on the last turn (the
    agent loop then gives the model one more turn, without tools, to answer), then
    ``max_iterations`` once *iteration* reaches it; then ``token_warning`` at the warning level,
    else ``normal``.
    """
    remaining = max(0, policy.max_iterations - iteration)
    advisory = token_advisory(tokens_used, policy.tokens) if tokens_used is not None else None
    if advisory is not None and advisory["level"] == "critical":
        message = f"context {advisory['usage_percent']}% full: the model answers now, without tools"
        return LoopDecision(
            should_continue=False,
            reason="token_critical",
            message=message,
            advisory=advisory,
            iterations_remaining=remaining,
        )
    if remaining == 0:
        message = f"reached the limit of {policy.max_iterations} iterations"
        return LoopDecision(should_continue=False, reason="max_iterations", message=message, advisory=advisory)
    if advisory is not None:
        message = f"context {advisory['usage_percent']}% full: {advisory['message'].lower()}"
        return LoopDecision(
            should_continue=True,
            reason="token_warning",
            message=message,
            advisory=advisory,
            iterations_remaining=remaining,
        )
    return LoopDecision(should_continue=True, reason="normal", message="continue", iterations_remaining=remaining)
