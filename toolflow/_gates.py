"""The gates of an engine: what may run now, before a call is validated (issue 4 step 2; issue 20 section 1).

In the order a call meets them (:meth:`toolflow.Engine.call`, a batch's call):

1. the allowlist in force (the exposed tools): a tool outside it gets a model-visible
   ``blocked`` result listing the tools allowed (a pipeline's step is not held to it, but to the
   policy's ``deny`` list);
2. the policy's order rules and call limits (:mod:`toolflow._rules`): a call of the model that
   breaks one gets a ``blocked`` result naming the rule; a call that passes counts. A batch asks
   about its calls in call order before any runs; a pipeline's steps are not the model's calls
   and are not asked about;
3. ``depends_on``: a tool whose dependency has not succeeded yet, in this loop or this session
   (per the dependency's ``scope``), gets a result saying what must run first.

:class:`Gates` keeps what they need of one engine's life: the rules' state (one conversation:
an agent loop's run, a served session) and the tools that succeeded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import attrs

from toolflow._attempts import Plan
from toolflow._results import ToolResult
from toolflow._rules import RuleBook, ToolRule

__all__ = ["Gates"]


@attrs.define
class Gates:
    """The state of an engine's gates (see the module's docstring)."""

    _rules: RuleBook | None = None
    _succeeded_loop: set[str] = attrs.Factory(set)
    _succeeded_session: set[str] = attrs.Factory(set)

    @property
    def rules(self) -> RuleBook | None:
        """The rules in force and what this conversation did under them; ``None`` without rules."""
        return self._rules

    def follow(self, rules: tuple[ToolRule, ...]) -> None:
        """Enforce *rules* from now on (a new policy), with fresh counts."""
        self._rules = RuleBook(rules) if rules else None

    def tick(self) -> None:
        """A new turn: the rules' ``per_turn`` counts start again."""
        if self._rules is not None:
            self._rules.new_turn()

    def new_loop(self) -> None:
        """A new agent loop: ``depends_on`` of scope ``loop`` and the rules' counts start again."""
        self._succeeded_loop.clear()
        if self._rules is not None:
            self._rules.new_run()

    def refusal(
        self, plan: Plan, allowlist: frozenset[str] | None, *, step: bool, deny: Collection[str] = ()
    ) -> ToolResult | None:
        """The model-visible refusal of a call that *allowlist* or a ``depends_on`` rule does not allow yet.

        A pipeline's *step* is held to the policy's *deny* list instead of the allowlist.
        """
        name = plan.name
        if step and name in deny:
            return ToolResult.failure(
                f"Error: tool {name!r} is denied by the policy, so no pipeline may call it",
                extra={"status": "blocked", "allowed": []},
            )
        if allowlist is not None and name not in allowlist and not step:
            allowed = sorted(allowlist)
            listed = ", ".join(repr(n) for n in allowed) or "none"
            return ToolResult.failure(
                f"Error: tool {name!r} is not available now; allowed tools: {listed}",
                extra={"status": "blocked", "allowed": allowed},
            )
        missing = [
            dependency.tool
            for dependency in plan.depends_on
            if dependency.tool
            not in (self._succeeded_session if dependency.scope == "session" else self._succeeded_loop)
        ]
        if missing:
            first = ", ".join(repr(n) for n in missing)
            return ToolResult.failure(
                f"Error: {name!r} cannot run yet - run {first} successfully first",
                extra={"status": "dependency", "requires": missing},
            )
        return None

    def ruled(self, name: str, offered: Collection[str]) -> ToolResult | None:
        """Count the model's call of *name* under the rules, or its ``blocked`` result (what *offered* allows now)."""
        return None if self._rules is None else self._rules.admit(name, offered)

    def succeeded(self, name: str) -> None:
        """Note a successful call of *name* (a pipeline's step too) for ``depends_on``."""
        self._succeeded_loop.add(name)
        self._succeeded_session.add(name)

    def answered(self, name: str, result: ToolResult) -> None:
        """Note the result of the model's call of *name* for the rules (``before_exit`` waits for a success)."""
        if self._rules is not None and result.success:
            self._rules.succeeded(name)

    def dump(self) -> dict[str, Any]:
        """The gates' state as plain JSON data (a saved run, ``toolflow._run_state``): the rules', the successes."""
        return {
            "rules": None if self._rules is None else self._rules.dump(),
            "succeeded_loop": sorted(self._succeeded_loop),
            "succeeded_session": sorted(self._succeeded_session),
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """Take up the state :meth:`dump` wrote; the rules' part only when the rules in force are not ``None``.

        A saved run resumed under a policy with other rules gets their counts as far as they go:
        the counts name tools, not rules.
        """
        self._succeeded_loop = {str(name) for name in data["succeeded_loop"]}
        self._succeeded_session = {str(name) for name in data["succeeded_session"]}
        if self._rules is not None and data["rules"] is not None:
            self._rules.restore(data["rules"])
