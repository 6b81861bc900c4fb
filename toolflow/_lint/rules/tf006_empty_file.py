"""A spec file is empty.

## What it does
Reports files that hold no YAML document: nothing, only blank lines, or only
comments.

## Why is this bad?
An empty file in a spec directory is usually a mistake: a file that lost its
content, or a tool that was meant to be declared there.

## Example
```yaml
# tools for the search service
```

## Use instead
```yaml
toolflow: 1
tools: {}
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF006", name="empty-file", severity=Severity.WARNING, doc=__doc__ or "")
