"""A `dangerous` tool that is retried automatically but is not idempotent.

## What it does
Reports a tool of category `dangerous`, without `idempotent: true`, whose retry
policy asks for more than one attempt: `retry: true` or `attempts` above 1, in
the tool or in the file's `defaults` (a `retry` mapping without `attempts` does
not ask). The engine never retries such a tool, so the retries asked for would
silently not happen. The diagnostic points at the `retry` that asked.

## Why is this bad?
A dangerous tool changes state. An attempt that timed out or lost its
connection may well have taken effect, and retrying it does the change twice:
two payments, two messages, a file appended to twice.

## Example
```yaml
tools:
  send_payment:
    description: Send a payment
    category: dangerous
    implementation: send_payment
    retry: {attempts: 3}
```

## Use instead
```yaml
tools:
  send_payment:
    description: Send a payment (the request id makes repeats harmless)
    category: dangerous
    idempotent: true
    implementation: send_payment
    retry: {attempts: 3}
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import Category


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        data = spec_file.data if isinstance(spec_file.data, dict) else {}
        bodies = data.get("tools")
        if not isinstance(bodies, dict):
            bodies = {}
        defaults = data.get("defaults")
        default = defaults.get("retry") if isinstance(defaults, dict) else None
        for tool in spec_file.tools:
            if tool.category != Category.DANGEROUS or tool.idempotent or tool.retry.attempts <= 1:
                continue
            body = bodies.get(tool.name)
            own = body.get("retry") if isinstance(body, dict) else None
            attempts = tool.retry.attempts
            if default is not None and not (own is True or (isinstance(own, dict) and "attempts" in own)):
                message = (
                    f"the file's default 'retry' asks for up to {attempts} attempts of dangerous tool "
                    f"{tool.name!r}, which is not idempotent: it is never retried, since a retry may repeat "
                    "its side effects"
                )
                yield RULE.diag(tool, "/defaults/retry", message, key=True)
            else:
                message = (
                    f"dangerous tool {tool.name!r} asks for up to {attempts} attempts but is not idempotent: "
                    "it is never retried, since a retry may repeat its side effects"
                )
                yield RULE.diag(tool, f"{tool.pointer}/retry", message, key=True)


RULE = Rule(code="TF219", name="dangerous-retry", severity=Severity.ERROR, doc=__doc__ or "", check=check)
