"""An `implementation` name that no plugin binds.

## What it does
Reports a tool whose `implementation:` names an implementation that none of
the loaded plugins binds, with the closest bound name when there is one. The
rule runs only when plugins were loaded (`toolflow lint` loads them); when a
plugin failed to load, TF404 reports the name instead.

## Why is this bad?
The registry cannot be built: every `toolflow call` and agent run that loads
these specs stops with an error, and no tool runs. The name is usually a typo,
or the plugin that binds it is not installed.

## Example
```yaml
tools:
  search_objects:
    description: Search the objects in the room
    implementation: assistant.serch_objects
```

## Use instead
```yaml
tools:
  search_objects:
    description: Search the objects in the room
    implementation: assistant.search_objects
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._binding_facts import implementations
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    facts = ctx.plugins
    if facts is None or facts.failed:
        return
    bound: list[str] | None = None
    for tool, implementation, name in implementations(ctx):
        if name in facts.bindings:
            continue
        if bound is None:
            bound = sorted(facts.bindings)
        message = f"implementation {name!r} of tool {tool.name!r} is bound by no plugin{did_you_mean(name, bound)}"
        yield RULE.diag(tool, implementation.pointer, message)


RULE = Rule(code="TF401", name="unbound-implementation", severity=Severity.ERROR, doc=__doc__ or "", check=check)
