"""A mapping has the same key twice.

## What it does
Reports the second (and each later) occurrence of a key in one mapping, naming the
line of the first.

## Why is this bad?
YAML parsers silently keep one of the values, so half of what was written is
ignored without a word: a tool declared twice, or a `timeout` set twice.

## Example
```yaml
tools:
  search:
    timeout: 5s
    timeout: 30s
```

## Use instead
```yaml
tools:
  search:
    timeout: 30s
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF002", name="duplicate-key", severity=Severity.ERROR, doc=__doc__ or "")
