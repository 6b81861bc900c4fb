"""A suppression comment names a rule that does not exist.

## What it does
Reports codes and names inside `# toolflow: ignore[...]` that are not rules.

## Why is this bad?
A misspelt code suppresses nothing, and the reader believes it does.

## Example
```yaml
tools:
  search:  # toolflow: ignore[TF5O1]
```

## Use instead
```yaml
tools:
  search:  # toolflow: ignore[TF501]
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF902", name="unknown-rule", severity=Severity.ERROR, doc=__doc__ or "")
