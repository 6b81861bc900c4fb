"""A YAML tag outside the core schema is used.

## What it does
Refuses every explicit tag other than the core ones (`!!str`, `!!int`, `!!float`,
`!!bool`, `!!null`, `!!seq`, `!!map`): `!!python/object`, custom `!tags`,
`!!timestamp`, `!!binary`, `!!set` and the like. The tagged value is dropped.

## Why is this bad?
Tags are how YAML files ask a loader to build arbitrary objects; a spec file must
be plain data that every tool reads the same way.

## Example
```yaml
tools:
  run:
    description: !!python/object/apply:os.system ["id"]
```

## Use instead
```yaml
tools:
  run:
    description: Run a command
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF003", name="forbidden-tag", severity=Severity.ERROR, doc=__doc__ or "")
