"""The file is not well-formed YAML.

## What it does
Reports YAML syntax errors at the line and column where the parser stopped, and
files that hold more than one YAML document or a non-scalar mapping key.

## Why is this bad?
A file that does not parse declares no tools at all; every tool in it is lost.

## Example
```yaml
toolflow: 1
tools:
  say:
    description: "Say something
```

## Use instead
```yaml
toolflow: 1
tools:
  say:
    description: "Say something"
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF001", name="yaml-syntax", severity=Severity.ERROR, doc=__doc__ or "")
