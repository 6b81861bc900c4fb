"""A template that does not compile.

## What it does
Compiles every `template:` source, every item of a `command:` argv and every
string of a pipeline's steps (`with:`, `when:`, `for_each:`) and `result:` (each
is a template too) in toolflow's sandboxed Jinja2 environment, and reports syntax
errors and unknown filters or tests at the line inside the YAML file where the
template goes wrong, and templates nested deeper than Python can compile (more
than 20 nested `for` loops, or about 100 nested blocks).

## Why is this bad?
The template is compiled when the tool is first called, so the mistake surfaces
as a failed tool call in the middle of an agent's work instead of in CI. (A
pipeline's templates are compiled when the registry is built, which refuses to
build with one that does not compile.)

## Example
```yaml
tools:
  say:
    description: Say something to the room
    parameters:
      type: object
      properties:
        message: {type: string, description: What to say}
    template: |
      You say:
      {{ message | uper }
```

## Use instead
```yaml
tools:
  say:
    description: Say something to the room
    parameters:
      type: object
      properties:
        message: {type: string, description: What to say}
    template: |
      You say:
      {{ message | upper }}
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec

if TYPE_CHECKING:
    from toolflow._templates import TemplateProblem


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    templated = [tool for tool in ctx.tools if any(i.kind in ("template", "command") for i in tool.implementations)]
    if templated:
        yield from _templates(templated)
    if any(tool.pipeline is not None for tool in ctx.tools):
        yield from _pipelines(ctx)


def _templates(tools: list[ToolSpec]) -> Iterator[Diagnostic]:
    # Imported here: Jinja2 is loaded only when some tool has a template.
    from toolflow._lint._template_facts import template_facts  # noqa: PLC0415

    for tool in tools:
        for facts in template_facts(tool):
            what = "template" if facts.label == "template" else f"command {facts.label}"
            for problem in facts.problems:
                yield _problem(tool, facts.pointer, what, problem)


def _pipelines(ctx: LintContext) -> Iterator[Diagnostic]:
    from toolflow._lint._pipeline_facts import iter_pipelines, pipeline_strings  # noqa: PLC0415

    for _, tool, _ in iter_pipelines(ctx.files):
        for string in pipeline_strings(tool):
            where = "the result" if string.step is None else f"the '{string.key}' of step {string.step!r}"
            for problem in string.problems:
                yield _problem(tool, string.pointer, where, problem)


def _problem(tool: ToolSpec, pointer: str, what: str, problem: TemplateProblem) -> Diagnostic:
    """The diagnostic of *problem* of the template at *pointer*, at its line inside the file."""
    from toolflow._lint._template_facts import file_position  # noqa: PLC0415

    diagnostic = RULE.diag(tool, pointer, f"{what} does not compile: {_sentence(problem.message)}")
    position = file_position(tool, pointer, problem.line)
    if position is None:
        return diagnostic
    line, column = position
    return attrs.evolve(diagnostic, line=line, column=column, end_line=0, end_column=0)


def _sentence(message: str) -> str:
    """Jinja2's message as a clause of ours: lower-case start, no final period."""
    message = message.strip().removesuffix(".")
    if len(message) > 1 and message[0].isupper() and message[1].islower():
        message = message[0].lower() + message[1:]
    return message


RULE = Rule(code="TF215", name="template-syntax", severity=Severity.ERROR, doc=__doc__ or "", check=check)
