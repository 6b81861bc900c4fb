"""A pipeline whose category lacks a property that one of its steps' categories has.

## What it does
Checks a pipeline's declared (or default) category against the categories of
the tools its steps call, and of the steps of pipelines among them, property
by property, with the policy of the linted files (`policy: categories:` merged
over the defaults):

- `approval`: if a step's category needs approval, the pipeline's must too;
- `per_turn`: if a step's category has a `per_turn` limit (`dangerous` has 1),
  the pipeline's must have one no higher.

A step that calls a tool of an MCP server (listed under its `tools:`) counts with
the category lint can know without connecting: its override's, else `dangerous`
unless the entry trusts the server's annotations (then it is not checked).

Categories have no order, so no category is "stronger" than another: each
property is checked on its own. `ends_loop` is the pipeline's own and is not
checked. The engine's one-`dangerous`-call-per-tick gate outside an agent loop
keys on the category's name; a custom category with `per_turn: 1` passes this
rule but not that gate, so prefer `dangerous` itself for a pipeline with
`dangerous` steps.

## Why is this bad?
The loop, `toolflow serve` and the policy count and gate the model's calls by
their category: a pipeline call counts as one call of the pipeline, not of its
steps. A pipeline whose category needs no approval, or allows more calls a turn
than its steps' categories, lets the model run those steps more freely than it
could call their tools itself, and tells approvers, toolsets and MCP clients the
wrong thing about it.

## Example
```yaml
tools:
  refund_order:
    description: Refund an order
    category: dangerous
    implementation: refund_order
  refund_and_notify:
    description: Refund an order and tell the customer
    category: safe_chain
    pipeline:
      steps:
        refund:
          tool: refund_order
        notify:
          tool: notify_customer
```

## Use instead
```yaml
tools:
  refund_order:
    description: Refund an order
    category: dangerous
    implementation: refund_order
  refund_and_notify:
    description: Refund an order and tell the customer
    category: dangerous
    pipeline:
      steps:
        refund:
          tool: refund_order
        notify:
          tool: notify_customer
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import CategoryFacts, ProjectSummary, ToolSummary

_DEEPEST = 64
"""Pipelines nested deeper than this are not followed (TF229 reports cycles)."""


@attrs.frozen
class _Asker:
    """The step that asks something of a pipeline's category: its path (``outer``, ``inner``), tool and category."""

    path: tuple[str, ...]
    tool: str
    category: str

    def __str__(self) -> str:
        return f"{'.'.join(self.path)!r} ({self.tool!r}, category {self.category!r})"

    def within(self, step: str) -> _Asker:
        return attrs.evolve(self, path=(step, *self.path))


@attrs.frozen
class _Needs:
    """What a pipeline's steps ask of its category, and which step asks it first."""

    approval: _Asker | None = None
    per_turn: tuple[int, _Asker] | None = None


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    pipelines = [tool for tool in summary.tools if tool.pipeline is not None]
    if not pipelines:
        return
    categories = summary.categories
    known: dict[str, ToolSummary | str] = {}
    for name, found in summary.remote_by_name.items():
        category = found[0][0].category_of(name) if len(found) == 1 else None
        if category is not None:
            known[name] = category
    known.update({name: tools[0] for name, tools in summary.tools_by_name.items() if len(tools) == 1})
    memo: dict[str, _Needs] = {}
    for tool in pipelines:
        needs = _needs_of_steps(tool, known, categories, memo, 0)
        own = categories.get(tool.category, CategoryFacts())
        assert tool.pipeline is not None
        place = tool.pipeline.category_place
        if needs.approval is not None and not own.approval:
            message = (
                f"pipeline {tool.name!r} is in category {tool.category!r}, which needs no approval, "
                f"but its step {needs.approval} does"
            )
            yield RULE.diag_at(place, message)
        if needs.per_turn is not None and (own.per_turn is None or own.per_turn > needs.per_turn[0]):
            limit, who = needs.per_turn
            have = "has no per_turn limit" if own.per_turn is None else f"allows {own.per_turn} calls per turn"
            message = (
                f"pipeline {tool.name!r} is in category {tool.category!r}, which {have}, but its step {who} "
                f"allows {limit} per turn: give the pipeline a category with per_turn {limit} or less"
            )
            yield RULE.diag_at(place, message)


def _needs_of_steps(
    tool: ToolSummary,
    known: dict[str, ToolSummary | str],
    categories: Mapping[str, CategoryFacts],
    memo: dict[str, _Needs],
    depth: int,
) -> _Needs:
    """What the steps of the pipeline *tool* ask of its category."""
    if tool.name in memo:
        return memo[tool.name]
    memo[tool.name] = _Needs()  # a cycle (TF229) asks nothing more of itself
    approval: _Asker | None = None
    per_turn: tuple[int, _Asker] | None = None
    assert tool.pipeline is not None
    for step in tool.pipeline.steps:
        called = known.get(step.tool)
        if called is None:
            continue
        category = called if isinstance(called, str) else called.category  # a remote tool's, as lint knows it
        asker = _Asker(path=(step.name,), tool=step.tool, category=category)
        own = categories.get(category, CategoryFacts())
        inner = _Needs()
        if not isinstance(called, str) and called.pipeline is not None and depth < _DEEPEST:
            inner = _needs_of_steps(called, known, categories, memo, depth + 1)
        if approval is None:
            approval = asker if own.approval else inner.approval.within(step.name) if inner.approval else None
        limits = [(own.per_turn, asker)]
        if inner.per_turn is not None:
            limits.append((inner.per_turn[0], inner.per_turn[1].within(step.name)))
        for limit, who in limits:
            if limit is not None and (per_turn is None or limit < per_turn[0]):
                per_turn = (limit, who)
    memo[tool.name] = _Needs(approval=approval, per_turn=per_turn)
    return memo[tool.name]


RULE = Rule(
    code="TF233", name="weaker-pipeline-category", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
