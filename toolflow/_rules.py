"""The policy's order rules and call limits (issue 20, section 1; Letta's tool rules, LangChain's call limits).

A ``policy:`` section's ``rules:`` list says which tool may run *when*::

    rules:
      - first: [inspect_location]          # the conversation's first tool call is one of these
      - before_exit: [say]                 # a final answer is refused until one of these succeeded
      - after: lookup_order                # after this tool, only these may be called next
        only: [refund_order, say]
      - tool: web_search                   # call-count limits, per turn and per run
        max_calls: {per_turn: 2, per_run: 5}

Each entry is a :class:`ToolRule`. Every rule must allow a call (two ``first`` rules allow the
tools both name; two ``after`` rules of one tool, the tools both allow next).

:class:`RuleBook` is the state of one conversation (an agent loop's run, a served session): the
engine asks it about every call of the model in call order (:meth:`RuleBook.admit`), which
refuses a call that breaks a rule with a model-readable ``blocked`` result naming the rule and
what is allowed now, and otherwise counts it, whatever happens to it next (the model called the
tool). A pipeline's call counts once, its steps not at all. The agent loop offers the model only
the tools the rules allow now (:meth:`RuleBook.allowed`), and refuses a final answer while a
``before_exit`` rule is unmet (:meth:`RuleBook.missing`).

This module is part of the model layer: pure data and bookkeeping, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal, TypeAlias

import attrs

from toolflow._errors import expect, expect_count, expect_names
from toolflow._results import ToolResult

__all__ = ["RuleBook", "RuleKind", "ToolRule", "describe_rules"]

RuleKind: TypeAlias = Literal["first", "before_exit", "after", "max_calls"]
"""What a :class:`ToolRule` constrains."""


def _names(value: Any) -> tuple[str, ...]:
    expect_names(value, "ToolRule: tools", what="tool names")
    return tuple(str(name) for name in value)


@attrs.frozen(kw_only=True)
class ToolRule:
    """One entry of a policy's ``rules:`` list.

    Attributes:
        kind: ``first`` (the first call is one of *tools*), ``before_exit`` (a final answer
            waits for a successful call of one of *tools*), ``after`` (after a call of *tool*,
            the next call is one of *tools*: the YAML's ``only``) or ``max_calls`` (at most
            *per_turn* calls of *tool* per turn and *per_run* per run).
        tools: The tools of ``first``, ``before_exit`` and ``after`` (empty for ``max_calls``).
        tool: The tool an ``after`` or ``max_calls`` rule is about.
        per_turn: ``max_calls``' limit per turn (``None``: none).
        per_run: ``max_calls``' limit per run (``None``: none).
    """

    kind: RuleKind
    tools: tuple[str, ...] = attrs.field(default=(), converter=_names)
    tool: str | None = None
    per_turn: int | None = None
    per_run: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in ("first", "before_exit", "after", "max_calls"):
            msg = f"ToolRule: kind must be 'first', 'before_exit', 'after' or 'max_calls', got {self.kind!r}"
            raise ValueError(msg)
        expect(self.tool, (str, type(None)), "ToolRule: tool", "a tool's name or None")
        expect_count(self.per_turn, "ToolRule: per_turn", minimum=1, optional=True)
        expect_count(self.per_run, "ToolRule: per_run", minimum=1, optional=True)
        if self.kind in ("after", "max_calls") and not self.tool:
            msg = f"ToolRule: a {self.kind!r} rule needs the tool it is about"
            raise ValueError(msg)
        if self.kind != "max_calls" and not self.tools:
            msg = f"ToolRule: a {self.kind!r} rule needs at least one tool"
            raise ValueError(msg)
        if self.kind == "max_calls" and self.per_turn is None and self.per_run is None:
            msg = "ToolRule: a 'max_calls' rule needs per_turn, per_run or both"
            raise ValueError(msg)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ToolRule:
        """The rule of one schema-valid entry of ``rules:``."""
        if "first" in mapping:
            return cls(kind="first", tools=mapping["first"])
        if "before_exit" in mapping:
            return cls(kind="before_exit", tools=mapping["before_exit"])
        if "after" in mapping:
            return cls(kind="after", tool=str(mapping["after"]), tools=mapping["only"])
        limits = mapping["max_calls"]
        return cls(
            kind="max_calls", tool=str(mapping["tool"]), per_turn=limits.get("per_turn"), per_run=limits.get("per_run")
        )

    def describe(self) -> str:
        """The rule in a sentence, as the model and the operator read it."""
        listed = _listed(self.tools)
        if self.kind == "first":
            return f"your first tool call must be one of {listed}"
        if self.kind == "before_exit":
            return f"before your final answer, call one of {listed} successfully"
        if self.kind == "after":
            return f"after {self.tool!r}, call only {listed} next"
        limits = [f"{n} per {period}" for n, period in ((self.per_turn, "turn"), (self.per_run, "run")) if n]
        return f"call {self.tool!r} at most {' and '.join(limits)}"


def _listed(names: Iterable[str]) -> str:
    return ", ".join(repr(name) for name in names) or "none"


def describe_rules(rules: Iterable[ToolRule]) -> str:
    """The rules as a section of the system prompt (empty without rules)."""
    lines = [f"- {rule.describe()}" for rule in rules]
    return "## Tool rules\n" + "\n".join(lines) if lines else ""


@attrs.define
class RuleBook:
    """The rules of a policy and what one conversation did under them (see the module's docstring).

    Args:
        rules: The policy's rules, in order.
    """

    rules: tuple[ToolRule, ...]
    _first: tuple[ToolRule, ...] = attrs.field(init=False)
    _after: dict[str, list[ToolRule]] = attrs.field(init=False)
    _limits: dict[str, list[ToolRule]] = attrs.field(init=False)
    _exits: tuple[ToolRule, ...] = attrs.field(init=False)
    _turn_calls: dict[str, int] = attrs.Factory(dict)
    _run_calls: dict[str, int] = attrs.Factory(dict)
    _last: str | None = None
    _called: bool = False
    _succeeded: set[str] = attrs.Factory(set)

    def __attrs_post_init__(self) -> None:
        self._first = tuple(rule for rule in self.rules if rule.kind == "first")
        self._exits = tuple(rule for rule in self.rules if rule.kind == "before_exit")
        self._after = {}
        self._limits = {}
        for rule in self.rules:
            if rule.kind in ("after", "max_calls"):
                by_tool = self._after if rule.kind == "after" else self._limits
                by_tool.setdefault(str(rule.tool), []).append(rule)

    def new_turn(self) -> None:
        """Start a new turn: the ``per_turn`` counts start again."""
        self._turn_calls.clear()

    def new_run(self) -> None:
        """Start a new run (an agent loop's): every count, the last call and the successes start again."""
        self._turn_calls.clear()
        self._run_calls.clear()
        self._last = None
        self._called = False
        self._succeeded.clear()

    def _breaks(self, name: str, *, new_turn: bool = False) -> ToolRule | None:
        """The first rule a call of *name* breaks now (*new_turn*: first in the next turn), else ``None``."""
        if not self._called:
            for rule in self._first:
                if name not in rule.tools:
                    return rule
        if self._last is not None:
            for rule in self._after.get(self._last, ()):
                if name not in rule.tools:
                    return rule
        for rule in self._limits.get(name, ()):
            if not new_turn and rule.per_turn is not None and self._turn_calls.get(name, 0) >= rule.per_turn:
                return rule
            if rule.per_run is not None and self._run_calls.get(name, 0) >= rule.per_run:
                return rule
        return None

    def allowed(self, names: Collection[str], *, new_turn: bool = False) -> frozenset[str]:
        """Those of *names* that a call now (*new_turn*: first in the next turn) may name without breaking a rule."""
        return frozenset(name for name in names if self._breaks(name, new_turn=new_turn) is None)

    def admit(self, name: str, offered: Collection[str]) -> ToolResult | None:
        """Count a call of *name*, or refuse it: the ``blocked`` result naming the rule and what *offered* allows."""
        rule = self._breaks(name)
        if rule is None:
            self._called = True
            self._last = name
            self._turn_calls[name] = self._turn_calls.get(name, 0) + 1
            self._run_calls[name] = self._run_calls.get(name, 0) + 1
            return None
        allowed = sorted(self.allowed(offered))
        if rule.kind == "max_calls" and rule.per_turn is not None and self._turn_calls.get(name, 0) >= rule.per_turn:
            why = f"{name!r} was called {rule.per_turn} time(s) this turn, its limit; call it again next turn"
        elif rule.kind == "max_calls":
            why = f"{name!r} was called {rule.per_run} time(s) in this run, its limit"
        else:
            why = f"{name!r} breaks the rule: {rule.describe()}"
        message = f"Error: {why}. Allowed now: {_listed(allowed)}"
        return ToolResult.failure(message, extra={"status": "blocked", "rule": rule.kind, "allowed": allowed})

    def succeeded(self, name: str) -> None:
        """Note a successful call of *name* (for ``before_exit``)."""
        self._succeeded.add(name)

    def missing(self) -> tuple[ToolRule, ...]:
        """The ``before_exit`` rules no successful call has met yet."""
        return tuple(rule for rule in self._exits if self._succeeded.isdisjoint(rule.tools))

    def dump(self) -> dict[str, Any]:
        """What this conversation did under the rules, as plain JSON data (a saved run, ``toolflow._run_state``)."""
        return {
            "turn_calls": dict(self._turn_calls),
            "run_calls": dict(self._run_calls),
            "last": self._last,
            "called": self._called,
            "succeeded": sorted(self._succeeded),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Take up the conversation :meth:`dump` wrote (*data* of that shape, checked by the caller)."""
        self._turn_calls = {str(name): int(count) for name, count in data["turn_calls"].items()}
        self._run_calls = {str(name): int(count) for name, count in data["run_calls"].items()}
        self._last = None if data["last"] is None else str(data["last"])
        self._called = bool(data["called"])
        self._succeeded = {str(name) for name in data["succeeded"]}
