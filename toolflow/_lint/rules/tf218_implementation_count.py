"""A tool without an implementation, or with more than one kind of implementation.

## What it does
Reports a tool that declares none of `implementation`, `template` and `command`,
and a tool that declares more than one of them (at the second one in the file).

## Why is this bad?
Without an implementation the tool cannot run; with two, which one runs would
be an arbitrary choice, and the other one is dead code that readers trust.

## Example
```yaml
tools:
  say:
    description: Say something to the room
    implementation: say
    template: "You say: {{ message }}"
```

## Use instead
```yaml
tools:
  say:
    description: Say something to the room
    template: "You say: {{ message }}"
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity, Span
from toolflow._lint._rule import LintContext, Rule
from toolflow._loader import IMPLEMENTATION_KINDS


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        implementations = tool.implementations
        if len(implementations) == 1:
            continue
        if not implementations:
            choices = ", ".join(repr(k) for k in IMPLEMENTATION_KINDS[:-1])
            message = f"tool {tool.name!r} has no implementation: add one of {choices} or {IMPLEMENTATION_KINDS[-1]!r}"
            yield RULE.diag(tool, tool.pointer, message, key=True)
            continue
        if tool.locator is not None:
            locator = tool.locator
            implementations = tuple(
                sorted(implementations, key=lambda i: _position(locator.locate(i.pointer, key=True)))
            )
        kinds = [repr(impl.kind) for impl in implementations]
        listed = f"both {kinds[0]} and {kinds[1]}" if len(kinds) == 2 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
        message = f"tool {tool.name!r} declares {listed}: keep exactly one implementation kind"
        yield RULE.diag(tool, implementations[1].pointer, message, key=True)


def _position(span: Span) -> tuple[int, int]:
    return (span.line, span.column)


RULE = Rule(code="TF218", name="implementation-count", severity=Severity.ERROR, doc=__doc__ or "", check=check)
