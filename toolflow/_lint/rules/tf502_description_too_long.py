"""A tool description longer than 200 characters.

## What it does
Reports tool descriptions longer than 200 characters (leading and trailing
whitespace aside), at the description.

## Why is this bad?
Every tool's description is sent to the model on every turn, so long ones
crowd the context and bury the sentence that says when to use the tool. Seed
003 limits descriptions to 200 characters "for LLM context efficiency"; the
details belong in the parameters' descriptions, next to what they explain.

## Example
```yaml
tools:
  page:
    description: >
      Send a private message to a player anywhere in the game. Use it when the
      player is not in the room, when the message is private, or when they asked
      to be notified later. Messages longer than 500 characters are cut.
```

## Use instead
```yaml
tools:
  page:
    description: Send a private message to a player who is anywhere in the game
    parameters:
      type: object
      properties:
        message:
          type: string
          description: The text to send, at most 500 characters
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule

MAX_DESCRIPTION = 200


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        if not isinstance(tool.description, str):
            continue
        length = len(tool.description.strip())
        if length > MAX_DESCRIPTION:
            message = (
                f"description of tool {tool.name!r} is {length} characters, more than {MAX_DESCRIPTION}; "
                "keep what the tool does and when to call it, and move details to parameter descriptions"
            )
            yield RULE.diag(tool, f"{tool.pointer}/description", message)


RULE = Rule(code="TF502", name="description-too-long", severity=Severity.WARNING, doc=__doc__ or "", check=check)
