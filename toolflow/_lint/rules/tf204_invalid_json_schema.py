"""A tool's `parameters` or `output_schema` is not valid JSON Schema.

## What it does
Checks `parameters` and `output_schema` against the JSON Schema 2020-12
metaschema and reports each problem at the offending node: a misspelt type,
a `required` that is not a list, a negative `minLength`. It also reports
schemas that the metaschema accepts but that cannot be compiled: a `pattern`
that is not a regular expression, a `$ref` to a place that does not exist.

## Why is this bad?
Arguments cannot be validated against a broken schema, so every call of the
tool fails, and providers reject requests that carry one.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query:
          type: text
          description: What to look for
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        query:
          type: string
          description: What to look for
```
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import dotted, local_target, refs, resolves, subschemas
from toolflow._model import ToolSpec
from toolflow._schemas import fast_validator, iter_schema_problems, json_pointer

SCHEMA_FIELDS = ("parameters", "output_schema")


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for field in SCHEMA_FIELDS:
            schema = getattr(tool, field)
            if schema is None:
                continue
            if not ctx.schema_ok(tool, field):
                for message, path in iter_schema_problems(schema):
                    pointer = f"{tool.pointer}/{field}{json_pointer(path)}"
                    text = f"invalid JSON Schema at {dotted(field, tuple(path))!r}: {message}"
                    yield RULE.diag(tool, pointer, text)
            else:
                # Valid against the metaschema, which asserts neither regular expressions nor
                # reference targets; both stop the schema from compiling.
                yield from _regex_problems(tool, field)
                yield from _dangling_refs(tool, field)


@functools.lru_cache(maxsize=4096)
def _regex_problem(pattern: str) -> bool:
    """True when *pattern* is not a regular expression the validator accepts (cached: specs repeat them)."""
    try:
        fast_validator({"pattern": pattern})
    except Exception:  # noqa: BLE001 - whatever the compiler raises, the pattern is unusable
        return True
    return False


def _regex_problems(tool: ToolSpec, field: str) -> Iterator[Diagnostic]:
    base = f"{tool.pointer}/{field}"
    for sub in subschemas(tool, field):
        pattern = sub.schema.get("pattern")
        if isinstance(pattern, str) and _regex_problem(pattern):
            path = (*sub.path, "pattern")
            message = f"invalid JSON Schema at {dotted(field, path)!r}: {pattern!r} is not a regular expression"
            yield RULE.diag(tool, base + json_pointer(path), message)
        patterns = sub.schema.get("patternProperties")
        if type(patterns) is dict:
            for key in patterns:
                if isinstance(key, str) and _regex_problem(key):
                    path = (*sub.path, "patternProperties", key)
                    message = (
                        f"invalid JSON Schema at {dotted(field, path[:-1])!r}: {key!r} is not a regular expression"
                    )
                    yield RULE.diag(tool, base + json_pointer(path), message, key=True)


def _dangling_refs(tool: ToolSpec, field: str) -> Iterator[Diagnostic]:
    found = refs(tool, field)
    if not found:
        return
    subs = subschemas(tool, field)
    if any("$id" in s.schema for s in subs[1:]):
        return  # references resolve against nested resources; leave them to the validator
    schema = getattr(tool, field)
    anchors = {s.schema.get(k) for s in subs for k in ("$anchor", "$dynamicAnchor")}
    for sub, keyword, value in found:
        if not isinstance(value, str) or not value.startswith("#"):
            continue
        tokens = local_target(value)
        exists = resolves(schema, tokens) if tokens is not None else value[1:] in anchors
        if not exists:
            pointer = f"{tool.pointer}/{field}{json_pointer([*sub.path, keyword])}"
            yield RULE.diag(tool, pointer, f"{keyword!r} target {value!r} does not exist in {field!r}")


RULE = Rule(code="TF204", name="invalid-json-schema", severity=Severity.ERROR, doc=__doc__ or "", check=check)
