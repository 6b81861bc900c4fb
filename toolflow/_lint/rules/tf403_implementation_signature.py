"""A bound implementation whose signature does not fit the tool's parameters.

## What it does
Checks the Python callable bound to a tool's `implementation:` against the
tool's `parameters`. The callable receives the validated arguments as keyword
arguments, so it must take every declared parameter by keyword (or have
`**kwargs`), and each of its parameters without a default must be one that
every call carries: declared and either `required` or given a `default` in the
schema. An optional `ctx` parameter (the call's context) is always allowed.
It also reports a lazy `module:attribute` target that names no attribute of
its module, or something that is not callable.

Lint never imports an implementation to check it: the rule looks at callables
that plugins registered directly, and at lazy targets whose module is already
imported (usually the plugin's own module). Others are checked when called.

## Why is this bad?
The call fails with a `TypeError` every time the model sends an argument the
function does not take, or leaves out one it requires. The spec and the code
disagree, and the model sees a failure it cannot fix.

## Example
```yaml
# the plugin binds: def search(query): ...
tools:
  search_objects:
    description: Search the objects in the room
    implementation: assistant.search_objects
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        limit: {type: integer, description: Most results to return}
      required: [query]
```

## Use instead
```yaml
# the plugin binds: def search(query, limit=10): ...
tools:
  search_objects:
    description: Search the objects in the room
    implementation: assistant.search_objects
    parameters:
      type: object
      properties:
        query: {type: string, description: Words to look for}
        limit: {type: integer, description: Most results to return}
      required: [query]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._binding_facts import (
    CONTEXT_PARAMETER,
    Target,
    declared,
    describe_target,
    implementations,
    inspect_target,
    property_pointer,
)
from toolflow._lint._rule import LintContext, Rule


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    facts = ctx.plugins
    if facts is None:
        return
    inspected: dict[str, Target | None] = {}
    for tool, implementation, name in implementations(ctx):
        if len(facts.bindings.get(name, ())) != 1 or name not in facts.targets:
            continue
        target = facts.targets[name]
        if name not in inspected:
            inspected[name] = inspect_target(target)
        found = inspected[name]
        if found is None:
            continue
        where = describe_target(target)
        if found.problem is not None:
            message = f"implementation {name!r} of tool {tool.name!r} is bound to {where!r}, but {found.problem}"
            yield RULE.diag(tool, implementation.pointer, message)
            continue
        accepts = found.accepts
        params = declared(tool.parameters) if isinstance(tool.parameters, Mapping) else None
        if accepts is None or params is None:
            continue
        for parameter in accepts.positional_only:
            message = (
                f"{where!r}, bound to tool {tool.name!r}, has positional-only parameter {parameter!r} without a "
                "default, which the keyword arguments of a call cannot fill"
            )
            yield RULE.diag(tool, implementation.pointer, message)
        if not accepts.any_keyword:
            for parameter in params.names:
                if parameter not in accepts.keywords:
                    message = (
                        f"parameter {parameter!r} of tool {tool.name!r} cannot be passed to {where!r}, "
                        "which has no such keyword parameter and no **kwargs"
                    )
                    yield RULE.diag(tool, property_pointer(tool, parameter), message, key=True)
        for parameter in accepts.required:
            if parameter in params.present:
                continue
            if parameter not in params.names:
                if parameter == CONTEXT_PARAMETER:
                    message = (
                        f"{where!r}, bound to tool {tool.name!r}, requires {parameter!r}; "
                        f"give it a default ({parameter}=None) so that calls without a context work"
                    )
                    yield RULE.diag(tool, implementation.pointer, message)
                elif params.complete:
                    message = (
                        f"{where!r}, bound to tool {tool.name!r}, requires argument {parameter!r}, "
                        "which the tool's parameters do not declare"
                    )
                    yield RULE.diag(tool, implementation.pointer, message)
            elif params.complete:
                message = (
                    f"{where!r}, bound to tool {tool.name!r}, requires argument {parameter!r}, which the tool "
                    "neither requires nor gives a default: add it to 'required' or give it a default in Python"
                )
                yield RULE.diag(tool, property_pointer(tool, parameter), message, key=True)


RULE = Rule(code="TF403", name="implementation-signature", severity=Severity.ERROR, doc=__doc__ or "", check=check)
