"""The file declares a spec format version this toolflow does not read.

## What it does
Reports a `toolflow:` version other than `1`.

## Why is this bad?
A file written for another format version may mean something else by the same
keys.

## Example
```yaml
toolflow: 2
```

## Use instead
```yaml
toolflow: 1
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF105", name="unsupported-version", severity=Severity.ERROR, doc=__doc__ or "")
