"""A tool name that a `--target` provider rejects although TF201 accepts it.

## What it does
With `toolflow lint --target ...`, reports tool names that match TF201's
`^[a-zA-Z0-9_-]{1,64}$` but break a rule of a chosen target:

- gemini: a function name must start with a letter or an underscore, so
  `3d_render` and `-debug` are refused.

The other targets accept every name TF201 accepts, so there is nothing more
to report for them: OpenAI uses exactly TF201's pattern, Anthropic allows
`^[a-zA-Z0-9_-]{1,128}$`, and MCP allows 1 to 128 characters of
`A-Z a-z 0-9 _ - .`. Names TF201 already reports are not reported again.

## Why is this bad?
The Gemini API documents `FunctionDeclaration.name` as: "Must start with a
letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots,
colons and dashes, with a maximum length of 64" (googleapis/java-genai and
Vertex AI `FunctionDeclaration` reference). A declaration that breaks it fails
the whole request. For comparison, Anthropic's API answers
`tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`
(home-assistant/core#147760), and the MCP specification (2025-11-25, from
SEP-986) says tool names SHOULD be 1 to 128 characters of `[A-Za-z0-9_.-]`.

## Example
```yaml
# toolflow lint --target gemini
tools:
  3d_render:
    description: Render the scene in 3D
```

## Use instead
```yaml
tools:
  render_3d:
    description: Render the scene in 3D
```
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._target_facts import active_targets

# TF201's pattern: names it rejects are its to report.
_PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_NAME_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "gemini": (
        re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$"),
        "a Gemini function name must start with a letter or an underscore",
    ),
}


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    rules = [(target, *_NAME_RULES[target]) for target in active_targets(ctx) if target in _NAME_RULES]
    if not rules:
        return
    for tool in ctx.tools:
        if not _PROVIDER_NAME.match(tool.name):
            continue
        for target, pattern, reason in rules:
            if not pattern.match(tool.name):
                message = f"{target} rejects tool name {tool.name!r}: {reason}; rename the tool"
                yield RULE.diag(tool, tool.pointer, message, key=True)


RULE = Rule(code="TF303", name="target-name", severity=Severity.ERROR, doc=__doc__ or "", check=check)
