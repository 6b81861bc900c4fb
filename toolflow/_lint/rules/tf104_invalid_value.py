"""A value is outside what the spec format allows.

## What it does
Reports values of the right type but not an allowed value: an unknown cache
scope, a duration that does not parse, zero retry attempts, an empty list, a
parameter rule with no form or two forms.

## Why is this bad?
The tool cannot be loaded as written.

## Example
```yaml
tools:
  search:
    timeout: 5 seconds
    cache: {scope: forever}
```

## Use instead
```yaml
tools:
  search:
    timeout: 5s
    cache: {scope: session}
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF104", name="invalid-value", severity=Severity.ERROR, doc=__doc__ or "")
