"""A template reads an optional parameter that has no default, outside an `is defined` guard.

## What it does
Reports each read of a parameter that is not `required` and has no `default`
in a `template:` source, a `command:` argv item, or a pipeline's `with:`,
`when:`, `for_each:` or `result:`, unless the read is guarded:

- `{% if tone is defined %}...{{ tone }}...{% endif %}` (and the `else` of
  `is not defined`);
- `tone | default('plain')`;
- `tone is defined and tone != 'plain'`, `tone if tone is defined else 'plain'`;
- under a guard of a parameter that a `parameter_rules` entry ties it to:
  with `when: target` and `require: [message]`, `{% if target is defined %}`
  guards `message` too.

Rules of the other forms prove nothing here: with `when: {mode: advanced}`,
`{% if mode == 'advanced' %}` does not guard what it requires, nor does
`exactly_one` guard one name in the `else` of the other. Test the name
itself (`{% if expression is defined %}`), or silence the line with
`# toolflow: ignore[TF236]`.

## Why is this bad?
Templates render with strict undefined variables. The tool lints and works
while callers give the parameter, and the first call that leaves it out (which
the schema allows) fails with `'tone' is undefined`.

## Example
```yaml
tools:
  greet:
    description: Greet someone
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet}
        tone: {type: string, description: How to greet}
      required: [name]
    template: "Hello {{ name }}, in a {{ tone }} way"
```

## Use instead
```yaml
tools:
  greet:
    description: Greet someone
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet}
        tone: {type: string, description: How to greet, default: friendly}
      required: [name]
    template: "Hello {{ name }}{% if tone is defined %}, in a {{ tone }} way{% endif %}"
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._model import ToolSpec


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for spec_file in ctx.files:
        for tool in spec_file.tools:
            optional = _optional_without_default(tool)
            if not optional:
                continue
            implied = _implied(tool)
            if any(impl.kind in ("template", "command") for impl in tool.implementations):
                yield from _templates(tool, optional, implied)
            if tool.pipeline is not None:
                yield from _pipeline(spec_file.text, tool, optional, implied)


def _optional_without_default(tool: ToolSpec) -> frozenset[str]:
    """The top-level parameters a call may leave out and that no default fills in."""
    parameters = tool.parameters
    if not isinstance(parameters, Mapping):
        return frozenset()
    properties, required = parameters.get("properties"), parameters.get("required")
    if not isinstance(properties, Mapping):
        return frozenset()
    needed = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    return frozenset(
        name
        for name, schema in properties.items()
        if isinstance(name, str) and name not in needed and not (isinstance(schema, Mapping) and "default" in schema)
    )


def _implied(tool: ToolSpec) -> dict[str, set[str]]:
    """For each parameter, the parameters that `when: NAME` rules require whenever it is given (transitively)."""
    implied: dict[str, set[str]] = {}
    for rule in tool.parameter_rules:
        if rule.kind == "requires" and rule.when is not None and rule.when_values is None:
            implied.setdefault(rule.when, set()).update(rule.params)
    changed = True
    while changed:  # a few names at most: repeat until nothing is added
        changed = False
        for required in implied.values():
            more = set().union(*(implied.get(name, set()) for name in required)) - required
            changed |= bool(more)
            required.update(more)
    return implied


def _templates(tool: ToolSpec, optional: frozenset[str], implied: dict[str, set[str]]) -> Iterator[Diagnostic]:
    # Imported here: Jinja2 is loaded only when some tool has a template.
    from toolflow._lint._template_facts import file_position, template_facts  # noqa: PLC0415
    from toolflow._template_guards import unguarded_template_reads  # noqa: PLC0415

    for facts in template_facts(tool):
        candidates = optional & facts.variables
        if not candidates:
            continue
        what = "template" if facts.label == "template" else f"command {facts.label}"
        for name, line in unguarded_template_reads(facts.source, candidates, implied):
            diagnostic = RULE.diag(tool, facts.pointer, _message(what, name))
            position = file_position(tool, facts.pointer, line)
            if position is not None:
                diagnostic = attrs.evolve(diagnostic, line=position[0], column=position[1], end_line=0, end_column=0)
            yield diagnostic


def _pipeline(
    text: str, tool: ToolSpec, optional: frozenset[str], implied: dict[str, set[str]]
) -> Iterator[Diagnostic]:
    from toolflow._lint._pipeline_facts import moved, name_span, pipeline_strings  # noqa: PLC0415
    from toolflow._template_guards import unguarded_template_reads  # noqa: PLC0415

    for string in pipeline_strings(tool):
        candidates = optional & string.variables
        if not candidates:
            continue
        where = "the result" if string.step is None else f"the '{string.key}' of step {string.step!r}"
        for name, _ in unguarded_template_reads(string.source, candidates, implied):
            diagnostic = RULE.diag(tool, string.pointer, _message(where, name))
            yield moved(diagnostic, name_span(text, tool, string, name))


def _message(what: str, name: str) -> str:
    return (
        f"{what} reads optional parameter {name!r}, which has no default, so a call that leaves it out fails "
        f"({name!r} is undefined); give it a 'default', or read it under '{{% if {name} is defined %}}' "
        f"or as '{name} | default(...)'"
    )


RULE = Rule(code="TF236", name="unguarded-optional-parameter", severity=Severity.ERROR, doc=__doc__ or "", check=check)
