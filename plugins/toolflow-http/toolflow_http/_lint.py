"""The plugin's lint rules for ``http:`` implementations (code prefix ``HTTP``).

They parse templates only (Jinja2, through toolflow's sandboxed environment),
so that ``toolflow lint`` never imports httpx.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from toolflow import (
    TEMPLATE_GLOBALS,
    LintContext,
    LintRule,
    Severity,
    TemplateProblem,
    ToolSpec,
    parse_template,
    template_variables,
)

__all__ = ["RULES", "http_template_syntax", "http_unknown_variable"]

KIND = "http"
TEMPLATED = ("url", "headers", "query", "json")


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


def _http_tools(ctx: LintContext) -> Iterator[tuple[ToolSpec, Any, str]]:
    for tool in ctx.tools:
        for implementation in tool.implementations:
            if implementation.kind == KIND:
                yield tool, implementation.config, implementation.pointer


def _check_syntax(ctx: LintContext) -> Iterator[Any]:
    for tool, config, pointer in _http_tools(ctx):
        for where, source in iter_templates(config, pointer):
            parsed = parse_template(source)
            if isinstance(parsed, TemplateProblem):
                message = (
                    f"template of tool {tool.name!r} does not compile: {parsed.message} (template line {parsed.line})"
                )
                yield http_template_syntax.diag(tool, where, message)


def _check_variables(ctx: LintContext) -> Iterator[Any]:
    for tool, config, pointer in _http_tools(ctx):
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

RULES = (http_template_syntax, http_unknown_variable)
"""The rules the plugin registers."""
