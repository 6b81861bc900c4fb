"""A model is offered more tools at once than the configured limit (default 10).

## What it does
Reports, as a warning, each set of tools a model is offered at once that has
more tools than `max-tools` of `[tool.toolflow.lint]` (default 10):

- each toolset (its `tools` and `categories`, less its `exclude`), at its key;
- the policy's choice: with `allow`, at `allow` (a `toolset` without `allow`
  is that toolset's, reported there); with neither, every tool, at the first
  `policy` key, or at the start of the first file without one;
- the tools of deliberate mode, at `deliberate`.

Tools denied by the policy or with `expose: false` are not offered and not
counted, nor are tools lint cannot see (a server without `tools:`, unless
`--connect` lists them).

## Why is this bad?
Every tool's name, description and schema goes into every request: the more
tools, the more context each turn costs, and the more often a model picks a
similar-sounding wrong tool or invents arguments. Seed 003 caps a character's
tools list at 10 "to avoid overwhelming the LLM". Split the tools into
toolsets for distinct jobs, hide pipeline-only tools with `expose: false`, or
raise `max-tools` for a project whose models cope with more.

## Example
```yaml
tools:
  look: {description: Look around}
  take: {description: Take an object}
  drop: {description: Drop an object}
  open: {description: Open a door}
  close: {description: Close a door}
  lock: {description: Lock a door}
  unlock: {description: Unlock a door}
  say: {description: Say something}
  whisper: {description: Whisper to someone}
  shout: {description: Shout to the room}
  wave: {description: Wave at someone}
```

## Use instead
```yaml
tools:
  look: {description: Look around}
  take: {description: Take an object}
  drop: {description: Drop an object}
  open: {description: Open a door}
  close: {description: Close a door}
  lock: {description: Lock a door}
  unlock: {description: Unlock a door}
  say: {description: Say something}
  whisper: {description: Whisper to someone}
  shout: {description: Shout to the room}
  wave: {description: Wave at someone}
toolsets:
  explore: {tools: [look, take, drop, open, close, lock, unlock]}
  talk: {tools: [say, whisper, shout, wave]}
policy:
  toolset: explore
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._exposure import Exposure
from toolflow._lint._rule import Rule
from toolflow._lint._summary import ProjectSummary


def check(summary: ProjectSummary) -> Iterator[Diagnostic]:
    limit = summary.max_tools
    for offer in Exposure.of(summary).offers():
        if len(offer.names) > limit:
            message = (
                f"{offer.what} offers a model {len(offer.names)} tools at once, more than {limit}: models choose "
                "poorly among many tools; split them into toolsets, or raise 'max-tools' in [tool.toolflow.lint]"
            )
            yield RULE.diag_at(offer.place, message)


RULE = Rule(code="TF252", name="too-many-tools", severity=Severity.WARNING, doc=__doc__ or "", check_project=check)
