"""A category whose calls run in the background but that also ends the loop, or is deferred.

## What it does
Checks each category of the policy (`policy: categories:` of every linted file,
merged in load order over the built-in defaults) that is `background: true`:
it reports one whose `ends_loop` is not `never`, and one that is also
`deferred: true`, at the key that sets the conflicting value.

## Why is this bad?
The agent loop answers a background call at once with `{"status": "started"}`
and runs it on while the model goes on: when its turn is decided, the call has
not finished, so its success or failure cannot end the loop. The loop ignores
such an `ends_loop` (the call never ends the loop), which is not what the spec
says. A `deferred` call is not run by the loop at all, so it cannot run in the
background either.

## Example
```yaml
policy:
  categories:
    report:
      background: true
      ends_loop: on_success
```

## Use instead
```yaml
policy:
  categories:
    report:
      background: true   # the model reads the outcome at a later turn and answers then
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    # A problem is reported where a file sets a key; a built-in default sets none, so it has no place.
    for name, category in summary.categories.items():
        if not category.background:
            continue
        if category.ends_loop != "never":
            place = category.places.get("ends_loop") or category.places.get("background")
            message = (
                f"category {name!r} runs its calls in the background, so none of them has finished when its "
                f"turn is decided: 'ends_loop: {category.ends_loop}' never applies; use 'ends_loop: never'"
            )
            if place is not None:
                yield RULE.diag_at(place, message)
        if category.deferred:
            place = category.places.get("deferred") or category.places.get("background")
            message = (
                f"category {name!r} is both 'background' and 'deferred': the loop does not run a deferred "
                "call, so it cannot run it in the background; choose one"
            )
            if place is not None:
                yield RULE.diag_at(place, message)


RULE = Rule(code="TF258", name="background-ends-loop", severity=Severity.ERROR, doc=__doc__ or "", check_project=check)
