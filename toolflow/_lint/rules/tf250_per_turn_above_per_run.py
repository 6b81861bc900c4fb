"""A `max_calls` rule whose `per_turn` is above its `per_run`.

## What it does
Reports, as a warning, the `per_turn` of a `max_calls` rule in a policy's
`rules:` that is larger than the same rule's `per_run`, at the `per_turn`
value.

## Why is this bad?
A run never makes more calls of the tool than `per_run` allows, so it never
reaches the `per_turn` limit: the rule says two things, and only one of them
holds. Usually the two numbers were swapped, or `per_run` was meant to be
larger; the model is told both, which makes the limit harder to follow.

## Example
```yaml
tools:
  web_search:
    description: Search the web
policy:
  rules:
    - tool: web_search
      max_calls: {per_turn: 5, per_run: 2}
```

## Use instead
```yaml
tools:
  web_search:
    description: Search the web
policy:
  rules:
    - tool: web_search
      max_calls: {per_turn: 2, per_run: 5}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    for spec_file in summary.files:
        rules = spec_file.policy.rules if spec_file.policy is not None else None
        for rule in rules or ():
            if rule.per_turn is None or rule.per_run is None or rule.tool is None:
                continue
            per_turn, place = rule.per_turn
            if per_turn > rule.per_run:
                message = (
                    f"'per_turn: {per_turn}' of tool {rule.tool.name!r} is above its 'per_run: {rule.per_run}': "
                    f"a run makes at most {rule.per_run} call(s) of it, so the per-turn limit is never reached"
                )
                yield RULE.diag_at(place, message)


RULE = Rule(
    code="TF250", name="per-turn-above-per-run", severity=Severity.WARNING, doc=__doc__ or "", check_project=check
)
