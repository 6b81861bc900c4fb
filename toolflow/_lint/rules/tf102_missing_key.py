"""A required key is missing.

## What it does
Reports a mapping that lacks a key the spec format requires, pointing at the key
of the mapping that lacks it: `toolflow:` at the top of every file, `args:` in an
example, `tool:` in a dependency mapping, `source:` in a template mapping, `argv:`
in a command mapping.

## Why is this bad?
The declaration cannot be understood without it.

## Example
```yaml
tools:
  search:
    examples:
      - description: finds the sword
```

## Use instead
```yaml
tools:
  search:
    examples:
      - description: finds the sword
        args: {query: sword}
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF102", name="missing-key", severity=Severity.ERROR, doc=__doc__ or "")
