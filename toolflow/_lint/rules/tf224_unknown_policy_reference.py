"""A policy that names a tool or toolset that does not exist.

## What it does
Reports a tool name that a `policy` writes and no linted file declares: an
entry of its `allow`, `deny` or `deliberate` lists (`deliberate`'s object
form: its `tools` and the keys of its `triggers`), and every tool its `rules`
name (`first`, `before_exit`, `after` and its `only`, the `tool` of
`max_calls`); and a `policy: toolset:` that no linted file declares.

Tools listed under an MCP server's `tools:` count as declared; a name that
may be a tool of a server importing all its tools is TF244's (a warning).

## Why is this bad?
The policy decides which tools the model sees in the agent loop. A misspelt
name in `allow` or `deliberate` hides a tool the model was meant to have; in
`deny` it lets through a tool that was meant to be kept away. In `rules`, it
makes a rule that no call can meet (a `first` or `before_exit` naming only
a typo blocks every first call, or every final answer) or one that never
applies (an `after` or `max_calls` rule about a tool that does not exist).
`toolflow run` refuses to start with an unknown name in `toolset`, `allow`,
`deny` or `deliberate`, so the mistake shows up at run time rather than in
CI.

## Example
```yaml
policy:
  toolset: game_asistant
  deny: [execute_comand]
  rules:
    - before_exit: [sya]
```

## Use instead
```yaml
policy:
  toolset: game_assistant
  deny: [execute_command]
  rules:
    - before_exit: [say]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary
from toolflow._schemas import did_you_mean


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    toolsets: list[str] | None = None
    tool_names: list[str] | None = None
    for spec_file in summary.files:
        policy = spec_file.policy
        if policy is None:
            continue
        if policy.toolset is not None:
            toolset = policy.toolset.name
            if toolsets is None:
                toolsets = sorted({t.name for f in summary.files for t in f.toolsets})
            if toolset not in toolsets:
                message = (
                    f"policy names toolset {toolset!r}, which no spec file declares{did_you_mean(toolset, toolsets)}"
                )
                yield RULE.diag_at(policy.toolset.place, message)
        for by, entry in policy.references():
            name = entry.name
            if summary.may_exist(name):  # declared, or TF244's: it may be remote
                continue
            if tool_names is None:
                tool_names = summary.declared_names
            message = f"{by} tool {name!r}, which no spec file declares{did_you_mean(name, tool_names)}"
            yield RULE.diag_at(entry.place, message)


RULE = Rule(
    code="TF224", name="unknown-policy-reference", severity=Severity.ERROR, doc=__doc__ or "", check_project=check
)
