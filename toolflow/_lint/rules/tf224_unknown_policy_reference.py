"""A policy that names a tool or toolset that does not exist.

## What it does
Reports an entry of a `policy`'s `allow`, `deny` or `deliberate` lists that
names no tool of the linted files, and a `policy: toolset:` that no linted
file declares.

## Why is this bad?
The policy decides which tools the model sees in the agent loop. A misspelt
name in `allow` or `deliberate` hides a tool the model was meant to have; in
`deny` it lets through a tool that was meant to be kept away. `toolflow run`
refuses to start with such a policy, so the mistake shows up at run time
rather than in CI.

## Example
```yaml
policy:
  toolset: game_asistant
  deny: [execute_comand]
```

## Use instead
```yaml
policy:
  toolset: game_assistant
  deny: [execute_command]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    toolsets: list[str] | None = None
    tool_names: list[str] | None = None
    for spec_file in ctx.files:
        policy = spec_file.policy
        if not isinstance(policy, Mapping):
            continue
        toolset = policy.get("toolset")
        if isinstance(toolset, str):
            if toolsets is None:
                toolsets = sorted({t.name for f in ctx.files for t in f.toolsets})
            if toolset not in toolsets:
                message = (
                    f"policy names toolset {toolset!r}, which no spec file declares{did_you_mean(toolset, toolsets)}"
                )
                yield RULE.diag(spec_file, "/policy/toolset", message)
        for key in ("allow", "deny", "deliberate"):
            names = policy.get(key)
            if not isinstance(names, list):
                continue
            for index, name in enumerate(names):
                if not isinstance(name, str) or name in ctx.tools_by_name:
                    continue
                if tool_names is None:
                    tool_names = sorted(ctx.tools_by_name)
                message = (
                    f"policy {key!r} names tool {name!r}, which no spec file declares{did_you_mean(name, tool_names)}"
                )
                yield RULE.diag(spec_file, f"/policy/{key}/{index}", message)


RULE = Rule(code="TF224", name="unknown-policy-reference", severity=Severity.ERROR, doc=__doc__ or "", check=check)
