"""A value has the wrong type.

## What it does
Reports values whose type the spec format does not allow at that place: a list
where a mapping belongs, a number where a string belongs, and so on.

## Why is this bad?
The value cannot mean what was intended; the tool, or the whole file, cannot be
loaded.

## Example
```yaml
tools:
  search:
    description: [Search, objects]
```

## Use instead
```yaml
tools:
  search:
    description: Search objects
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF103", name="wrong-type", severity=Severity.ERROR, doc=__doc__ or "")
