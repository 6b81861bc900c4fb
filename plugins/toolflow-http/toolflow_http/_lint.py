"""The plugin's lint rules for ``http:`` implementations (code prefix ``HTTP``).

They parse templates only (Jinja2, through toolflow's sandboxed environment),
so that ``toolflow lint`` never imports httpx; and they import toolflow's template functions (and
so Jinja2) only when a linted file has an ``http:`` tool, so that registering them imports neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from toolflow import LintContext, LintRule, Severity, ToolSpec

__all__ = ["RULES", "http_template_syntax", "http_unguarded_optional_parameter", "http_unknown_variable"]

KIND = "http"
TEMPLATED = ("url", "headers", "query", "json")
_WHOLE_NAME = re.compile(r"\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")


def iter_templates(config: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """``(pointer, source)`` of every templated string of an ``http:`` value (a URL or a mapping)."""
    if isinstance(config, str):
        yield pointer, config
        return
    if not isinstance(config, Mapping):
        return
    for key in TEMPLATED:
        if key in config:
            yield from _strings(config[key], f"{pointer}/{key}")


def _strings(value: Any, pointer: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        if "{" in value:
            yield pointer, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            yield from _strings(item, f"{pointer}/{escaped}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{pointer}/{index}")


def _http_tools(ctx: LintContext) -> list[tuple[ToolSpec, Any, str]]:
    return [
        (tool, implementation.config, implementation.pointer)
        for tool in ctx.tools
        for implementation in tool.implementations
        if implementation.kind == KIND
    ]


def _check_syntax(ctx: LintContext) -> Iterator[Any]:
    found = _http_tools(ctx)
    if not found:
        return
    from toolflow import TemplateProblem, parse_template  # noqa: PLC0415 - Jinja2 only for a file with http tools

    for tool, config, pointer in found:
        for where, source in iter_templates(config, pointer):
            parsed = parse_template(source)
            if isinstance(parsed, TemplateProblem):
                message = (
                    f"template of tool {tool.name!r} does not compile: {parsed.message} (template line {parsed.line})"
                )
                yield http_template_syntax.diag(tool, where, message)


def _check_variables(ctx: LintContext) -> Iterator[Any]:
    found = _http_tools(ctx)
    if not found:
        return
    from toolflow import (  # noqa: PLC0415 - Jinja2 only for a file with http tools
        TEMPLATE_GLOBALS,
        TemplateProblem,
        parse_template,
        template_variables,
    )

    for tool, config, pointer in found:
        properties = tool.parameters.get("properties") if isinstance(tool.parameters, Mapping) else None
        if not isinstance(properties, Mapping):
            continue
        lists_env = isinstance(config, Mapping) and bool(config.get("env"))
        for where, source in iter_templates(config, pointer):
            parsed = parse_template(source)
            if isinstance(parsed, TemplateProblem):
                continue
            for name in sorted(template_variables(parsed)):
                if name in properties:
                    continue
                if name == "env":
                    if not lists_env:
                        message = f"template of tool {tool.name!r} reads 'env' but 'http' lists no 'env' names"
                        yield http_unknown_variable.diag(tool, where, message)
                    continue
                if name in TEMPLATE_GLOBALS:
                    continue
                message = f"template of tool {tool.name!r} reads {name!r}, which is not a parameter of the tool"
                yield http_unknown_variable.diag(tool, where, message)


def _optional_without_default(tool: ToolSpec) -> frozenset[str]:
    """The top-level parameters a call may leave out and that no default fills in."""
    parameters = tool.parameters
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(properties, Mapping):
        return frozenset()
    required = parameters.get("required") if isinstance(parameters, Mapping) else None
    needed = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    return frozenset(
        name
        for name, schema in properties.items()
        if isinstance(name, str) and name not in needed and not (isinstance(schema, Mapping) and "default" in schema)
    )


def _check_optional_reads(ctx: LintContext) -> Iterator[Any]:
    found = _http_tools(ctx)
    if not found:
        return
    from toolflow import unguarded_template_reads  # noqa: PLC0415 - Jinja2 only for a file with http tools

    for tool, config, pointer in found:
        optional = _optional_without_default(tool)
        if not optional:
            continue
        url = pointer if isinstance(config, str) else f"{pointer}/url"
        for where, source in iter_templates(config, pointer):
            if where != url and _WHOLE_NAME.fullmatch(source):
                continue  # "{{ name }}" of an argument the call left out leaves its key out
            for name, _ in unguarded_template_reads(source, optional):
                message = (
                    f"template of tool {tool.name!r} reads optional parameter {name!r}, which has no default, "
                    f"so a call that leaves it out fails ({name!r} is undefined); give it a 'default', "
                    f"make the value exactly '{{{{ {name} }}}}' (the key is then left out), or read it under "
                    f"'{{% if {name} is defined %}}' or as '{name} | default(...)'"
                )
                yield http_unguarded_optional_parameter.diag(tool, where, message)


http_template_syntax = LintRule(
    code="HTTP101",
    name="http-template-syntax",
    severity=Severity.ERROR,
    plugin="http",
    check=_check_syntax,
    doc="""A template in an `http:` implementation does not compile.

## What it does
Parses every string of the `url`, `headers`, `query` and `json` of an `http:`
implementation as a Jinja2 template.

## Why is this bad?
The tool cannot be built: every call fails until the spec is fixed.

## Example
```yaml
http:
  url: https://api.example.com/users/{{ user }
```

## Use instead
```yaml
http:
  url: https://api.example.com/users/{{ user }}
```
""",
)

http_unknown_variable = LintRule(
    code="HTTP102",
    name="http-unknown-variable",
    severity=Severity.ERROR,
    plugin="http",
    check=_check_variables,
    doc="""A template in an `http:` implementation reads a variable that is not a parameter of the tool.

## What it does
Checks that every variable a template of `url`, `headers`, `query` or `json`
reads is one of the tool's parameters, or `env` when the `http:` value lists
`env` names.

## Why is this bad?
Only the call's arguments (and the listed environment variables) are visible
to the templates, so the variable is always undefined: the call fails, or the
key is always left out.

## Example
```yaml
parameters:
  type: object
  properties:
    query: {type: string, description: What to search for.}
http:
  url: https://api.example.com/search
  query: {q: "{{ q }}"}
```

## Use instead
```yaml
http:
  url: https://api.example.com/search
  query: {q: "{{ query }}"}
```
""",
)

http_unguarded_optional_parameter = LintRule(
    code="HTTP103",
    name="http-unguarded-optional-parameter",
    severity=Severity.ERROR,
    plugin="http",
    check=_check_optional_reads,
    doc="""A template in an `http:` implementation reads an optional parameter without a default, unguarded.

## What it does
Reports a read of a parameter that is neither `required` nor has a `default`
in the `url`, or inside a longer string of `headers`, `query` or `json`,
unless the read is guarded (`{% if tone is defined %}`, `tone | default(...)`,
`tone is defined and ...`). A value that is exactly `{{ name }}` in `headers`,
`query` or `json` is fine: the key is left out when the call does not give
`name`. TF236 is the same rule for the `template` and `command` kinds.

## Why is this bad?
Templates render with strict undefined variables: the first call that leaves
the parameter out (which the schema allows) fails with `'page' is undefined`.

## Example
```yaml
parameters:
  type: object
  properties:
    q: {type: string, description: What to search for.}
    page: {type: integer, description: Which page.}
  required: [q]
http:
  url: https://api.example.com/search/{{ q }}
  query: {page: "page-{{ page }}"}
```

## Use instead
```yaml
http:
  url: https://api.example.com/search/{{ q }}
  query: {page: "{{ page }}"}
```
""",
)

RULES = (http_template_syntax, http_unknown_variable, http_unguarded_optional_parameter)
"""The rules the plugin registers."""
