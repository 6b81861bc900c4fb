"""Order rules of a policy that can never all be met.

## What it does
Reports the entries of a policy's `rules:` that no sequence of calls can
satisfy, each at the key of the offending rule, saying what can never happen:

- `first` rules whose tools have nothing in common (no first call is
  possible), and two `after` rules of one tool whose `only` lists have nothing
  in common (no call is possible after it);
- a `first`, `only` or `before_exit` list none of whose tools the policy ever
  offers: each is denied, has `expose: false`, or is left out by the policy's
  `toolset` or `allow` (and is not in its `deliberate` list either);
- a `before_exit` rule none of whose tools can be reached: starting from the
  tools `first` allows (every offered tool without a `first` rule), and
  following each tool's `only` list (every offered tool after a tool without
  an `after` rule), no call of them is possible.

The rules in force are those of the last file that declares `rules:` (the
policy is merged key by key in load order); the offered tools are those of the
merged `toolset`, `allow`, `deny` and `deliberate`. A tool lint cannot see
(a server that imports every tool it lists) counts as offered; a name no file
declares is TF224's.

## Why is this bad?
The agent loop enforces every rule on every call: with a contradiction, the
model's first call, every call after some tool, or its final answer is refused
each time, until the loop runs out of iterations. The model is told what is
allowed, but nothing is.

## Example
```yaml
tools:
  lookup_order:
    description: Look an order up by its id
  refund_order:
    description: Refund an order
  say:
    description: Say something to the customer
policy:
  deny: [refund_order]
  rules:
    - first: [lookup_order]
    - after: lookup_order
      only: [refund_order]
    - before_exit: [say]
```

## Use instead
```yaml
tools:
  lookup_order:
    description: Look an order up by its id
  refund_order:
    description: Refund an order
  say:
    description: Say something to the customer
policy:
  deny: [refund_order]
  rules:
    - first: [lookup_order]
    - after: lookup_order
      only: [refund_order, say]
    - before_exit: [say]
```
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._exposure import Exposure
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary, RuleSummary

Known = tuple[RuleSummary, frozenset[str]]
"""A rule and the names of its list that are declared or may be remote."""

_OUTCOME = {
    "first": "no first call is possible",
    "before_exit": "a final answer can never be given",
}


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    exposure = Exposure.of(summary)
    # A rule's names that no file declares are TF224's: the checks below see the others only,
    # and skip a rule with none (its contradiction is the typo).
    rules = [(rule, _existing(summary, rule)) for rule in exposure.rules]
    rules = [(rule, names) for rule, names in rules if names or rule.kind == "max_calls"]
    if not rules:
        return
    reported: set[int] = set()
    for found in (*_disjoint(rules), *_never_offered(exposure, rules)):
        reported.add(id(found[0]))
        yield found[1]
    yield from _unreachable(exposure, rules, reported)


def _outcome(rule: RuleSummary) -> str:
    if rule.kind == "after" and rule.tool is not None:
        return f"after {rule.tool.name!r} no call is possible"
    return _OUTCOME[rule.kind]


def _disjoint(rules: list[Known]) -> Iterator[tuple[RuleSummary, Diagnostic]]:
    """The first rule of each group (the ``first`` rules; the ``after`` rules of one tool) that leaves no tool."""
    groups: dict[str | None, list[Known]] = {}
    for rule, names in rules:
        if rule.kind == "first" or (rule.kind == "after" and rule.tool is not None):
            groups.setdefault(rule.tool.name if rule.tool is not None else None, []).append((rule, names))
    for group in groups.values():
        allowed = group[0][1]
        for index, (rule, names) in enumerate(group[1:], start=1):
            allowed &= names
            if not allowed:
                earlier = ", ".join(r.place.position for r, _ in group[:index])
                key = "first" if rule.kind == "first" else "only"
                message = (
                    f"{_outcome(rule)}: this {key!r} list and the one(s) at {earlier} have no tool in common, "
                    "and a call must meet them all"
                )
                yield rule, RULE.diag_at(rule.place, message)
                break


def _existing(summary: ProjectSummary, rule: RuleSummary) -> frozenset[str]:
    """The names of *rule*'s list that are declared or may be remote."""
    return frozenset(entry.name for entry in rule.tools if summary.may_exist(entry.name))


def _never_offered(exposure: Exposure, rules: list[Known]) -> Iterator[tuple[RuleSummary, Diagnostic]]:
    for rule, names in rules:
        if rule.kind == "max_calls" or any(exposure.may_offer(name) for name in names):
            continue
        listed = ", ".join(f"{name!r} ({exposure.why_not(name)})" for name in sorted(names))
        yield rule, RULE.diag_at(rule.place, f"{_outcome(rule)}: the policy never offers {listed}")


def _unreachable(exposure: Exposure, rules: list[Known], reported: set[int]) -> Iterator[Diagnostic]:
    """``before_exit`` rules that no allowed sequence of calls reaches, and a ``first`` that allows none offered."""
    summary = exposure.summary
    universe = {*summary.declared_names, *(name for _, names in rules for name in names)}
    offered = frozenset(name for name in universe if summary.may_exist(name) and exposure.may_offer(name))
    firsts = [(rule, names) for rule, names in rules if rule.kind == "first"]
    start = set(offered)
    for _, names in firsts:
        start &= names
    if firsts and not start:
        if not any(id(rule) in reported for rule, _ in firsts):
            common = sorted(frozenset.intersection(*(names for _, names in firsts)))
            listed = ", ".join(f"{name!r} ({exposure.why_not(name)})" for name in common)
            message = (
                f"{_OUTCOME['first']}: the 'first' rules together allow only {listed}, which the policy never offers"
            )
            yield RULE.diag_at(firsts[-1][0].place, message)
        return
    reached = _reach(start, offered, _successors(rules))
    for rule, names in rules:
        if rule.kind != "before_exit" or id(rule) in reported or reached & names:
            continue
        message = (
            f"{_OUTCOME['before_exit']}: no sequence of calls that the 'first' and 'after' rules allow reaches "
            + ", ".join(repr(name) for name in sorted(names))
        )
        yield RULE.diag_at(rule.place, message)


def _successors(rules: list[Known]) -> dict[str, frozenset[str]]:
    """The tools each tool with ``after`` rules allows next (the intersection of its ``only`` lists)."""
    after: dict[str, frozenset[str]] = {}
    for rule, names in rules:
        if rule.kind == "after" and rule.tool is not None:
            name = rule.tool.name
            after[name] = after[name] & names if name in after else names
    return after


def _reach(start: Iterable[str], offered: frozenset[str], after: dict[str, frozenset[str]]) -> set[str]:
    """The offered tools some allowed sequence of calls from *start* calls."""
    reached: set[str] = set()
    pending = list(start)
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        following = after.get(name)
        if following is None:  # no 'after' rule: every offered tool may come next
            return set(offered)
        pending.extend(following & offered)
    return reached


RULE = Rule(
    code="TF249", name="contradictory-tool-rules", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
