"""Which tools the linted files' policy offers a model, as far as lint knows (TF249-TF253).

The policy is merged across files in load order, as :meth:`toolflow.Policy.from_specs` merges it:
a later file's key wins key by key (a later ``rules:`` list replaces an earlier one). What the
merged policy offers follows :meth:`toolflow.Registry.exposed`: the ``toolset`` (else every
tool), then ``allow``; in deliberate mode the ``deliberate`` list instead; never a tool of
``deny`` nor one with ``expose: false``.

Lint does not know everything a run knows: the tools of a server that imports all it lists
(without ``--connect``), and the category of a remote tool whose server's annotations are
trusted. Two questions get two answers, each on the safe side of its rules:
:meth:`Exposure.may_offer` (may the model ever be offered the tool? an unknown counts as yes,
so that no rule calls a rule contradictory on a guess) and :meth:`Exposure.count` (how many
tools is a model surely offered at once? an unknown counts as no, so that no rule calls a
project too big on a guess).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import attrs

from toolflow._lint._summary import Named, Place, ProjectSummary, RuleSummary, ToolsetSummary

__all__ = ["Exposure", "Members", "Offer"]


@attrs.frozen(kw_only=True)
class Offer:
    """A set of tools a model is offered at once, and where it is declared.

    Attributes:
        what: It in words: ``toolset 'chat'``, ``the policy's 'allow'``.
        names: The tools surely in it.
        place: Where a problem with its size is reported.
    """

    what: str
    names: frozenset[str]
    place: Place


@attrs.frozen(kw_only=True)
class Members:
    """The names a toolset lists under ``exclude``, ``tools`` and ``categories``."""

    exclude: frozenset[str]
    tools: frozenset[str]
    categories: frozenset[str]


@attrs.define
class Exposure:
    """The merged policy of the linted files and what it offers (see the module's docstring)."""

    summary: ProjectSummary
    toolset: Named | None = None
    allow: frozenset[str] | None = None
    allow_place: Place | None = None
    deny: frozenset[str] = frozenset()
    deliberate: frozenset[str] | None = None
    deliberate_place: Place | None = None
    rules: tuple[RuleSummary, ...] = ()
    policy_place: Place | None = None
    _sets: dict[int, Members] = attrs.Factory(dict)

    @classmethod
    def of(cls, summary: ProjectSummary) -> Exposure:
        """The merged policy of *summary*'s files."""
        exposure = cls(summary)
        for spec_file in summary.files:
            policy = spec_file.policy
            if policy is None:
                continue
            exposure.policy_place = exposure.policy_place or policy.place
            if policy.toolset is not None:
                exposure.toolset = policy.toolset
            lists = dict(policy.lists)
            if "allow" in lists:
                exposure.allow = frozenset(entry.name for entry in lists["allow"])
                exposure.allow_place = policy.keys.get("allow")
            if "deny" in lists:
                exposure.deny = frozenset(entry.name for entry in lists["deny"])
            if "deliberate" in lists:
                exposure.deliberate = frozenset(entry.name for entry in lists["deliberate"])
                exposure.deliberate_place = policy.keys.get("deliberate")
            if policy.rules is not None:
                exposure.rules = policy.rules
        return exposure

    @functools.cached_property
    def _toolsets(self) -> dict[str, list[ToolsetSummary]]:
        found: dict[str, list[ToolsetSummary]] = {}
        for toolset in (t for f in self.summary.files for t in f.toolsets):
            found.setdefault(toolset.name, []).append(toolset)
        return found

    @functools.cached_property
    def _hidden(self) -> frozenset[str]:
        local = {tool.name for tool in self.summary.tools if not tool.exposed}
        return frozenset(local.union(*(server.hidden for server in self.summary.servers)))

    def category(self, name: str) -> str | None:
        """The category of tool *name*; ``None``: lint cannot know it."""
        local = self.summary.tools_by_name.get(name)
        if local:
            return local[0].category
        remote = self.summary.remote_by_name.get(name)
        return remote[0][0].category_of(name) if remote else None

    def _members(self, toolset: ToolsetSummary) -> Members:
        """The names of *toolset*'s ``exclude``, ``tools`` and ``categories`` (computed once per toolset)."""
        found = self._sets.get(id(toolset))
        if found is None:
            found = Members(
                exclude=frozenset(entry.name for entry in toolset.exclude),
                tools=frozenset(entry.name for entry in toolset.tools),
                categories=frozenset(entry.name for entry in toolset.categories),
            )
            self._sets[id(toolset)] = found
        return found

    def _selects(self, toolset: ToolsetSummary, name: str, *, unknown: bool) -> bool:
        """Whether *toolset* selects *name*; *unknown* when that depends on a category lint cannot know."""
        members = self._members(toolset)
        if name in members.exclude:
            return False
        if name in members.tools:
            return True
        if not members.categories:
            return False
        category = self.category(name)
        return unknown if category is None else category in members.categories

    def _normal(self, name: str, *, unknown: bool) -> bool:
        """Whether the policy's ``toolset`` and ``allow`` choose *name* outside deliberate mode."""
        if self.allow is not None and name not in self.allow:
            return False
        if self.toolset is None:
            return True
        toolsets = self._toolsets.get(self.toolset.name)
        if not toolsets:
            return unknown  # TF224 reports the toolset
        return any(self._selects(toolset, name, unknown=unknown) for toolset in toolsets)

    def may_offer(self, name: str) -> bool:
        """Whether a model may ever be offered *name*, in normal or deliberate mode (unknowns count as yes)."""
        if name in self.deny or name in self._hidden:
            return False
        return (self.deliberate is not None and name in self.deliberate) or self._normal(name, unknown=True)

    def why_not(self, name: str) -> str:
        """Why :meth:`may_offer` says no for *name*, in a few words."""
        if name in self.deny:
            return "denied"
        if name in self._hidden:
            return "'expose: false'"
        if self.allow is not None and name not in self.allow:
            return "not in 'allow'"
        return f"not in toolset {self.toolset.name!r}" if self.toolset is not None else "not offered"

    def offers(self) -> Iterator[Offer]:
        """The sets of tools a model is offered at once: each toolset, the policy's choice, deliberate mode.

        The policy's choice is left out when it is exactly a toolset's (``toolset`` without
        ``allow``): that toolset is reported already.
        """
        shown = [name for name in self.summary.declared_names if name not in self.deny and name not in self._hidden]
        for toolset in (t for f in self.summary.files for t in f.toolsets):
            yield self._toolset_offer(toolset, shown)
        chosen = frozenset(name for name in shown if self._normal(name, unknown=False))
        policy = self._policy_offer(chosen)
        if policy is not None:
            yield policy
        if self.deliberate is not None and self.deliberate_place is not None:
            chosen = frozenset(name for name in shown if name in self.deliberate)
            yield Offer(what="deliberate mode", names=chosen, place=self.deliberate_place)

    def _toolset_offer(self, toolset: ToolsetSummary, shown: list[str]) -> Offer:
        chosen = frozenset(name for name in shown if self._selects(toolset, name, unknown=False))
        return Offer(what=f"toolset {toolset.name!r}", names=chosen, place=toolset.place)

    def _policy_offer(self, chosen: frozenset[str]) -> Offer | None:
        """The policy's choice outside deliberate mode, unless it is a toolset's (``None`` also without files)."""
        if self.allow is not None and self.allow_place is not None:
            return Offer(what="the policy's 'allow'", names=chosen, place=self.allow_place)
        if self.toolset is not None:
            return None
        if self.policy_place is not None:
            return Offer(what="the policy, with neither 'toolset' nor 'allow',", names=chosen, place=self.policy_place)
        first = next(iter(self.summary.files), None)
        if first is None:
            return None
        return Offer(what="the project, without a policy,", names=chosen, place=Place(file=first.path, pointer=""))
