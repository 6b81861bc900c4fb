"""A suppression comment suppresses nothing.

## What it does
Reports `# toolflow: ignore[...]` comments, or codes inside them, that matched no
diagnostic: the problem was fixed, or the comment sits on the wrong line.

## Why is this bad?
Stale suppressions hide the next real problem on that line.

## Example
```yaml
tools:
  search:  # toolflow: ignore[TF501]
    description: Search objects
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

RULE = Rule(code="TF901", name="unused-suppression", severity=Severity.WARNING, doc=__doc__ or "")
