"""A `${VAR}` in text the model is shown, where it shows only its reference.

## What it does
Reports each string written with `${VAR}` (or `${VAR:-default}`) in a part of a
spec that is shown to the model or to an MCP client: a tool's `description` and
`title`, anything in its `parameters` and `output_schema` (a parameter's
`description`, `default`, `examples`, `enum`, `const`, `pattern`, ...), its
`examples`, and the `system_prompt` and `text_protocol` of a `policy` section.
It points at the string.

## Why is this bad?
`${VAR}` usually carries what must stay out of a conversation: API keys,
tokens, internal host names. Whatever is in a tool definition is sent to the
model, and from there to its provider's logs and to anyone who reads the
conversation, so toolflow never shows a model a value that came from the
environment: it shows the reference as the spec writes it. The model reads
`Search ${COMPANY} docs`, is offered an `enum` value it can only guess, and is
told of a default it cannot see. The spec does not do what it seems to say.
(A `default` from `${VAR}` is still filled in when the model leaves the
parameter out, and never echoed back in messages.) Write what the model reads
out in full, and keep values from the environment in the implementation's
configuration, which runs the tool and is never shown: a command's `argv` or
`env`, a header or URL of an `http` tool.

## Example
```yaml
tools:
  search_docs:
    description: Search the ${COMPANY} knowledge base
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
        space:
          type: string
          description: Which space to search
          enum: [public, "${PRIVATE_SPACE}"]
      required: [query, space]
    command: [wiki-search, --space, "{{ space }}", --, "{{ query }}"]
```

## Use instead
```yaml
tools:
  search_docs:
    description: Search the company knowledge base
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
        private:
          type: boolean
          description: Search the private space instead of the public one
          default: false
      required: [query]
    command:
      argv: [wiki-search, --private-space, "${PRIVATE_SPACE}", "--private={{ private }}", --, "{{ query }}"]
```
"""

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import describe_location, split_pointer

TOOL_PARTS = frozenset({"description", "title", "parameters", "output_schema", "examples"})
"""The keys of a tool whose strings reach the model or an MCP client (tool definitions, examples)."""

POLICY_PARTS = ("system_prompt", "text_protocol")
"""The keys of a ``policy`` section that the agent loop sends to the model."""


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        for tool in spec_file.tools:
            for pointer, string in tool.interpolated:
                path: list[str | int] = [int(t) if t.isdigit() else t for t in split_pointer(pointer)]
                if len(path) < 3 or path[2] not in TOOL_PARTS:  # ["tools", name, part, ...]
                    continue
                message = (
                    f"{describe_location(path)} takes {string!r} from the environment; the model is shown that "
                    "reference, never the value: write the text out, and keep values from the environment in the "
                    "implementation's configuration"
                )
                yield RULE.diag(tool, pointer, message)
        for pointer, string in spec_file.interpolated:
            if pointer in {f"/policy/{part}" for part in POLICY_PARTS}:
                message = (
                    f"{describe_location(split_pointer(pointer))} takes {string!r} from the environment; the model "
                    "is shown that reference, never the value: write the prompt out"
                )
                yield RULE.diag(spec_file, pointer, message)


RULE = Rule(
    code="TF505",
    name="environment-value-shown-to-model",
    severity=Severity.ERROR,
    doc=__doc__ or "",
    check=check,
)
