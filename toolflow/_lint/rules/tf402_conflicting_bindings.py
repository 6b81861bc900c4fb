"""An `implementation` name that more than one plugin binds.

## What it does
Reports a tool whose `implementation:` names an implementation bound by two or
more of the loaded plugins, naming each of them. The rule runs only when
plugins were loaded (`toolflow lint` loads them).

## Why is this bad?
toolflow never picks one of them silently: building the registry fails with
an error naming both plugins, so no tool of these specs can run until one of
the plugins is uninstalled, disabled with `TOOLFLOW_DISABLE_PLUGINS`, or
renames its implementation.

## Example
```yaml
# plugins 'acme' and 'acme-legacy' both bind 'search'
tools:
  search_objects:
    description: Search the objects in the room
    implementation: search
```

## Use instead
```yaml
# 'acme' binds 'acme.search', 'acme-legacy' binds 'legacy.search'
tools:
  search_objects:
    description: Search the objects in the room
    implementation: acme.search
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._binding_facts import implementations
from toolflow._lint._rule import LintContext, Rule


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    facts = ctx.plugins
    if facts is None:
        return
    for tool, implementation, name in implementations(ctx):
        plugins = facts.bindings.get(name, ())
        if len(plugins) < 2:
            continue
        listed = [repr(p) for p in plugins]
        owners = f"{', '.join(listed[:-1])} and {listed[-1]}"
        message = f"implementation {name!r} of tool {tool.name!r} is bound by more than one plugin: {owners}"
        yield RULE.diag(tool, implementation.pointer, message)


RULE = Rule(code="TF402", name="conflicting-bindings", severity=Severity.ERROR, doc=__doc__ or "", check=check)
