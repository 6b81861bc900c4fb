"""A template that reads a variable the tool does not declare.

## What it does
Reports variables that a `template:` source or a `command:` argv item reads but
that are neither parameters of the tool nor template globals (`env`, `range`,
`dict`, `lipsum`, `cycler`, `joiner`, `namespace`). For a `template:`, it also
reports environment variables read as `env.NAME` that the template's `env:` list
does not name (the string form lists none).

It also reports `env.NAME` in a `command:` argv item (commands take environment
values through `${NAME}`, which the loader interpolates), and a template with an
`env:` list on a tool that has a parameter named `env`, which would hide it.

## Why is this bad?
Templates render with strict undefined variables: reading a name that is not
an argument fails the call at run time, typically after a parameter was renamed
or misspelt. An environment variable that is not listed is never passed to the
template.

## Example
```yaml
tools:
  greet:
    description: Greet someone
    parameters:
      type: object
      properties:
        name: {type: string, description: Who to greet}
    template: "Hello {{ nmae }}, from {{ env.HOST }}"
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
    template:
      source: "Hello {{ name }}, from {{ env.HOST }}"
      env: [HOST]
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._schemas import close_matches, did_you_mean


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    templated = [tool for tool in ctx.tools if any(i.kind in ("template", "command") for i in tool.implementations)]
    if not templated:
        return
    # Imported here: Jinja2 is loaded only when some tool has a template.
    from toolflow._lint._template_facts import template_facts  # noqa: PLC0415
    from toolflow._templates import TEMPLATE_GLOBALS  # noqa: PLC0415

    for tool in templated:
        properties = tool.parameters.get("properties", {}) if isinstance(tool.parameters, Mapping) else None
        declared = sorted(str(name) for name in properties) if isinstance(properties, Mapping) else None
        for facts in template_facts(tool):
            what = "template" if facts.label == "template" else f"command {facts.label}"
            unknown = sorted(v for v in facts.variables if v not in TEMPLATE_GLOBALS)
            if declared is not None:
                unknown = [v for v in unknown if v not in declared]
                if unknown:
                    yield RULE.diag(tool, facts.pointer, _unknown_message(what, tool.name, unknown, declared))
            if facts.env_listed is None:
                if facts.env_reads:
                    # The command kind refuses env.NAME at run time: the loader interpolates ${NAME} instead.
                    names = ", ".join(f"${{{n}}}" for n in facts.env_reads)
                    yield RULE.diag(tool, facts.pointer, f"{what} reads env.NAME, which commands cannot; write {names}")
                continue
            unlisted = [n for n in facts.env_reads if n not in facts.env_listed]
            if unlisted:
                yield RULE.diag(tool, facts.pointer, _env_message(what, unlisted, sorted(facts.env_listed)))
            if facts.env_listed and declared is not None and "env" in declared:
                message = f"tool {tool.name!r} has a parameter named 'env', which hides the template's environment"
                yield RULE.diag(tool, facts.pointer, message)


def _listing(names: Sequence[str], choices: Sequence[str], prefix: str = "") -> str:
    """``'a' (did you mean 'b'?) and 'c'``: the names, each with its closest choice."""
    parts = []
    for name in names:
        close = close_matches(name, choices)
        parts.append(f"{prefix + name!r} (did you mean {prefix + close[0]!r}?)" if close else repr(prefix + name))
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _unknown_message(what: str, tool: str, unknown: Sequence[str], declared: Sequence[str]) -> str:
    if not declared:
        return f"{what} reads {_listing(unknown, ())}, but tool {tool!r} declares no parameters"
    if len(unknown) == 1:
        hint = did_you_mean(unknown[0], declared)
        return f"{what} reads {unknown[0]!r}, which is not a parameter of tool {tool!r}{hint}"
    return f"{what} reads {_listing(unknown, declared)}, which are not parameters of tool {tool!r}"


def _env_message(what: str, unlisted: Sequence[str], listed: Sequence[str]) -> str:
    if not listed:
        listing = _listing(unlisted, (), "env.")
        return f"{what} reads {listing}, but the template lists no environment variables in 'env'"
    return f"{what} reads {_listing(unlisted, listed, 'env.')}, which its 'env' list does not name"


RULE = Rule(code="TF216", name="undeclared-template-variable", severity=Severity.ERROR, doc=__doc__ or "", check=check)
