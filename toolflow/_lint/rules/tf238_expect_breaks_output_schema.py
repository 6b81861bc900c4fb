"""An example's `expect` value does not match the tool's `output_schema`.

## What it does
Checks the `expect` value of each example (the exact data `toolflow test`
compares a successful call's data with) against the tool's `output_schema`,
as a real result's data is checked, and reports the first violation at the
value that breaks it. Examples that declare `expect_error` are left alone.

## Why is this bad?
A call whose data breaks `output_schema` fails, so the data that `expect`
describes can never come back: the test fails whatever the tool does. Either
the expectation or the schema is wrong, and the schema is also what models and
MCP clients are told about the result.

## Example
```yaml
tools:
  count_words:
    output_schema:
      type: object
      properties:
        words: {type: integer}
      required: [words]
    examples:
      - args: {text: one two}
        expect: {words: "2"}
```

## Use instead
```yaml
tools:
  count_words:
    output_schema:
      type: object
      properties:
        words: {type: integer}
      required: [words]
    examples:
      - args: {text: one two}
        expect: {words: 2}
```
"""  # noqa: D214, D405, D411 - `examples:` here is YAML, not a docstring section

from __future__ import annotations

from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint.rules.tf210_invalid_example import output_mismatches
from toolflow._schemas import json_pointer


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for i, example, path, problem in output_mismatches(ctx, tool, "expect"):
            message = (
                f"examples[{i}] expects data that does not match 'output_schema', so the test can never pass: {problem}"
            )
            yield RULE.diag(tool, f"{example.pointer}/expect{json_pointer(path)}", message, key=not path)


RULE = Rule(code="TF238", name="expect-breaks-output-schema", severity=Severity.ERROR, doc=__doc__ or "", check=check)
