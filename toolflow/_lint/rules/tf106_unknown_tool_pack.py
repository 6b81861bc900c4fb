"""A spec file includes a tool pack that no installed plugin provides.

## What it does
Reports each name in the file's `include:` list that no loaded plugin registers with
`toolflow_register_tool_packs`, with the nearest pack name and the packs that are installed, and
a name that two plugins register.

## Why is this bad?
The tools of the pack are missing: every reference to them (`depends_on`, toolsets, pipeline
steps) fails, and the agent loop cannot offer them. Usually the plugin that ships the pack is
not installed in this environment (a CI job or a pre-commit hook needs it among its
dependencies), or the name is misspelt.

## Example
```yaml
toolflow: 1
include: [http-exampels]
```

## Use instead
```yaml
toolflow: 1
include: [http-examples]
```
"""

from toolflow._diagnostics import Severity
from toolflow._lint._rule import Rule

RULE = Rule(code="TF106", name="unknown-tool-pack", severity=Severity.ERROR, doc=__doc__ or "")
