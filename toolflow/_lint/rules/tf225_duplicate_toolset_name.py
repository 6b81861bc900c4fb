"""The same toolset name is declared in more than one file.

## What it does
Reports every declaration of a toolset name that another spec file declares too,
naming the other places as `path:line:col`. (The same name twice in one file is a
duplicate key, TF002.)

## Why is this bad?
A toolset is referred to by its name alone (`--toolset`, a policy's `toolset`,
`registry.toolset()`), so two selections under one name cannot both be meant: the
registry refuses to build, and every `toolflow call`, `run` and `serve` of the
project fails, while each file on its own looks right.

## Example
```yaml
# specs/chat.yaml
toolsets:
  core:
    tools: [say, whisper]
# specs/world.yaml
toolsets:
  core:
    tools: [look, inspect_location]
```

## Use instead
```yaml
# specs/chat.yaml
toolsets:
  chat:
    tools: [say, whisper]
# specs/world.yaml
toolsets:
  world:
    tools: [look, inspect_location]
```
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import SpecFile


def _where(spec_file: SpecFile, pointer: str) -> str:
    if spec_file.locator is None:
        return spec_file.path
    span = spec_file.locator.locate(pointer, key=True)
    return f"{spec_file.path}:{span.line}:{span.column}"


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    declared: dict[str, list[tuple[SpecFile, str, str]]] = {}
    for spec_file in ctx.files:
        for toolset in spec_file.toolsets:
            entry = (spec_file, toolset.pointer, os.path.realpath(spec_file.path))
            declared.setdefault(toolset.name, []).append(entry)
    for name, places in declared.items():
        # The same file named twice on the command line is not a duplicate declaration.
        if len({path for _, _, path in places}) < 2:
            continue
        for spec_file, pointer, path in places:
            others = dict.fromkeys(_where(f, p) for f, p, other in places if other != path)
            yield RULE.diag(spec_file, pointer, f"toolset {name!r} is also declared at {', '.join(others)}", key=True)


RULE = Rule(code="TF225", name="duplicate-toolset-name", severity=Severity.ERROR, doc=__doc__ or "", check=check)
