"""An `implementation` name that more than one plugin binds, or a kind that more than one provides.

## What it does
Reports a tool whose `implementation:` names an implementation bound by two or
more of the loaded plugins, and a tool of an implementation kind (`http:`, say)
that two or more of them provide, naming each of the plugins. The rule runs only
when plugins were loaded (`toolflow lint` loads them).

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
        owners = _owners(plugins)
        message = f"implementation {name!r} of tool {tool.name!r} is bound by more than one plugin: {owners}"
        yield RULE.diag(tool, implementation.pointer, message)
    for tool in ctx.tools:
        for implementation in tool.implementations:
            plugins = facts.kinds.get(implementation.kind, ())
            if len(plugins) < 2:
                continue
            owners = _owners(plugins)
            message = (
                f"the {implementation.kind!r} kind of tool {tool.name!r} is provided by more than one plugin: {owners}"
            )
            yield RULE.diag(tool, implementation.pointer, message, key=True)


def _owners(plugins: tuple[str, ...]) -> str:
    listed = [repr(p) for p in plugins]
    return f"{', '.join(listed[:-1])} and {listed[-1]}"


RULE = Rule(code="TF402", name="conflicting-bindings", severity=Severity.ERROR, doc=__doc__ or "", check=check)
