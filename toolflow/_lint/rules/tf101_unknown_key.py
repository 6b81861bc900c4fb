"""A key that the spec format does not define.

## What it does
Reports keys the spec format does not know, at the top level, in `defaults:`, in
a tool and in each of its sections, and suggests the closest known key.

A key of a tool with no close match may be an implementation kind that a plugin
adds (`http:` comes with toolflow-http): the message then says so and lists the
entry points of group `toolflow` that are installed (`none` where the plugin is
missing, as in a pre-commit hook's environment without it in
`additional_dependencies`). `toolflow lint --no-plugins` loads no plugin, so it
reports every plugin kind this way.

## Why is this bad?
A misspelt key is silently meaningless: `timout: 5s` leaves the tool with the
default timeout.

## Example
```yaml
tools:
  search:
    timout: 5s
```

## Use instead
```yaml
tools:
  search:
    timeout: 5s
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF101", name="unknown-key", severity=Severity.ERROR, doc=__doc__ or "")
