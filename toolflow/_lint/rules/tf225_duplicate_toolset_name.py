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

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule, duplicate_declarations
from toolflow._lint._summary import Place, ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    declared: dict[str, list[Place]] = {}
    for spec_file in summary.files:
        for toolset in spec_file.toolsets:
            declared.setdefault(toolset.name, []).append(toolset.place)
    for name, place, others in duplicate_declarations(declared):
        yield RULE.diag_at(place, f"toolset {name!r} is also declared at {others}")


RULE = Rule(
    code="TF225", name="duplicate-toolset-name", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
