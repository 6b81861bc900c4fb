"""A `${VAR}` refers to an environment variable that is not set.

## What it does
Reports each `${VAR}` in a string value whose variable is not set in the
environment and that gives no default. The value is replaced by an empty string.
`${VAR:-default}` uses `default` when the variable is unset or empty, and `$${`
writes a literal `${`.

## Why is this bad?
The tool would run with an empty string where a URL, a path or a key belongs.

## Example
```yaml
command: [curl, "${API_URL}/status"]
```

## Use instead
```yaml
command: [curl, "${API_URL:-http://127.0.0.1:8080}/status"]
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF007", name="undefined-variable", severity=Severity.WARNING, doc=__doc__ or "")
