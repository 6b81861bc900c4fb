"""A `default` or `enum` value does not match its own schema.

## What it does
Checks, in `parameters` and `output_schema`, each `default` against the
schema it belongs to (with its `enum`, if any) and each `enum` value against
the rest of its schema, and reports the values that do not validate: a string
default of an integer parameter, a default that is not one of the enum
values, an enum value of the wrong type, a default that is not the `format`
it declares. Values are judged as the runtime validators judge arguments and
results: `format` is asserted (email, date, uri, ...; unknown formats are
ignored) and `pattern` is an ECMA-262 regular expression.

## Why is this bad?
Models copy defaults and enum values into their calls, and a parameter's
default is filled in before the call's arguments are validated. A value the
schema rejects makes the call fail validation, or, when the model is told a
value is allowed that the implementation never expects, produces wrong results.

## Example
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          default: "5"
          description: Most results to return
        order:
          type: string
          enum: [relevance, newest, 1]
          description: How to sort the results
        notify:
          type: string
          format: email
          default: nobody
          description: Who to tell when the search is done
```

## Use instead
```yaml
tools:
  search:
    parameters:
      type: object
      properties:
        limit:
          type: integer
          default: 5
          description: Most results to return
        order:
          type: string
          enum: [relevance, newest, oldest]
          description: How to sort the results
        notify:
          type: string
          format: email
          default: search-bot@example.com
          description: Who to tell when the search is done
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from toolflow._checking import CompiledSchema, ErrorExplainer, ParameterError, show
from toolflow._diagnostics import Diagnostic, Severity
from toolflow._lint._rule import LintContext, Rule
from toolflow._lint._schema_facts import (
    Subschema,
    friendly_label,
    has_remote_ref,
    local_target,
    refs,
    subschemas,
)
from toolflow._model import ToolSpec
from toolflow._provenance import exact_types
from toolflow._schemas import fast_validator, json_pointer

SCHEMA_FIELDS = ("parameters", "output_schema")

_NOT_ASSERTIONS = frozenset(
    {
        "$comment",
        "$schema",
        "$id",
        "$anchor",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
    }
)


DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

Refs = tuple[tuple[Subschema, str, object], ...]


def _short(value: object) -> str:
    return show(value, limit=40)


def _standalone(root: dict[str, Any], refs: Refs, sub: Subschema, drop: tuple[str, ...]) -> dict[str, Any] | None:
    """*sub* without the *drop* keywords, made to compile on its own; ``None`` when there is nothing to check."""
    schema = {k: v for k, v in sub.schema.items() if k not in drop}
    if _NOT_ASSERTIONS.issuperset(schema):
        return None
    depth = len(sub.path)
    for inner, _, value in refs:
        if inner.path[:depth] != sub.path:
            continue
        # References resolve against the whole document; carry its definitions over, and give
        # up on any other kind of reference.
        tokens = local_target(value)
        if not tokens or tokens[0] not in ("$defs", "definitions") or type(root.get(tokens[0])) is not dict:
            return None
        schema.setdefault(tokens[0], root[tokens[0]])
    return schema


def _compiled(schema: dict[str, Any]) -> Any:
    try:
        # Formats asserted, as CompiledSchema (the runtime's validators) does.
        return fast_validator(schema, validate_formats=True)
    except Exception:  # noqa: BLE001 - a part that does not compile alone is TF204's business, not ours
        return None


def _values(root: dict[str, Any], refs: Refs, subs: tuple[Subschema, ...]) -> Iterator[tuple[Subschema, str, Any]]:
    """Yield ``(subschema, kind, schema)`` for each default and each enum to check; *schema* must accept it."""
    for sub in subs:
        if "default" in sub.schema and (alone := _standalone(root, refs, sub, ("default", "examples"))):
            yield sub, "default", alone
        enum = sub.schema.get("enum")
        if type(enum) is list and enum and (alone := _standalone(root, refs, sub, ("default", "examples", "enum"))):
            yield sub, "enum", alone


def _all_valid(root: dict[str, Any], found: list[tuple[Subschema, str, Any]]) -> bool:
    """Check every value at once: one array schema with one item schema per value (each enum as a list)."""
    if root.get("$schema", DRAFT_2020_12) != DRAFT_2020_12:
        return False
    combined: dict[str, Any] = {k: root[k] for k in ("$defs", "definitions") if k in root}
    combined["prefixItems"] = [alone if kind == "default" else {"items": alone} for _, kind, alone in found]
    validator = _compiled(combined)
    instance = [sub.schema["default"] if kind == "default" else sub.schema["enum"] for sub, kind, _ in found]
    return validator is not None and bool(exact_types(validator.is_valid, instance))


def check(ctx: LintContext) -> Iterator[Diagnostic]:
    for tool in ctx.tools:
        for field in SCHEMA_FIELDS:
            root = getattr(tool, field)
            if type(root) is not dict or not ctx.schema_ok(tool, field) or has_remote_ref(tool, field):
                continue
            found = list(_values(root, refs(tool, field), subschemas(tool, field)))
            if found and not _all_valid(root, found):
                yield from _explain(tool, field, root, found)


def _explain(
    tool: ToolSpec, field: str, root: dict[str, Any], found: list[tuple[Subschema, str, Any]]
) -> Iterator[Diagnostic]:
    for sub, kind, alone in found:
        schema = {"$schema": root["$schema"], **alone} if "$schema" in root else alone
        validator = _compiled(schema)
        if validator is None:
            continue
        explaining: CompiledSchema | None = None
        label = friendly_label(field, sub.path)
        base = f"{tool.pointer}/{field}{json_pointer(sub.path)}"
        values = (
            [("default", sub.schema["default"])]
            if kind == "default"
            else [(f"enum/{i}", item) for i, item in enumerate(sub.schema["enum"])]
        )
        for where, value in values:
            if exact_types(validator.is_valid, value):
                continue
            # The runtime's engines: jsonschema_rs decided, jsonschema (made to agree with it) explains.
            explaining = explaining or CompiledSchema.compile(schema)
            error = _first_error(explaining, value)
            what = "default" if kind == "default" else "enum value"
            message = f"{what} {_short(value)} of {label} does not match its schema: {error}"
            yield RULE.diag(tool, f"{base}/{where}", message)


def _first_error(compiled: CompiledSchema, value: object) -> str:
    """The most relevant reason *value* is rejected, in the words a call's validation error uses."""
    import jsonschema  # noqa: PLC0415 - imported only to explain a failure

    errors = list(compiled.iter_errors(value))
    problem = next((e for e in errors if isinstance(e, ParameterError)), None)
    if problem is None:
        try:
            best = jsonschema.exceptions.best_match(errors)
        except TypeError:  # paths that do not compare (keys and indexes at one depth) cannot be ranked
            best = errors[0] if errors else None
        if best is None:
            return "it is not valid"
        explainer = ErrorExplainer(root=_ROOT, noun="property")
        explainer.explain(best)
        problem = next(iter(explainer.result(())), None)
        if problem is None:
            return str(best.message)
    text = problem.message[:1].lower() + problem.message[1:]
    return text if problem.parameter == _ROOT else f"{problem.parameter}: {text}"


_ROOT = "(value)"


RULE = Rule(code="TF208", name="invalid-default", severity=Severity.ERROR, doc=__doc__ or "", check=check)
