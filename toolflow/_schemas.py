"""JSON-Schema work: the spec-file schema, parameter schemas, rule compilation.

Validation takes two paths. A compiled ``jsonschema_rs`` validator answers the
common question, "is this valid?", quickly; only when the answer is no does the
``jsonschema`` library walk the instance again to explain each failure with its
path. Both implement the same drafts, and a test keeps their verdicts in step.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from typing import Any, cast

import attrs
import jsonschema_rs

from toolflow._model import ParameterRule
from toolflow._provenance import Interpolated, exact_types, masked

__all__ = [
    "JSON_TYPES",
    "SchemaProblem",
    "close_matches",
    "compile_parameter_rules",
    "describe_location",
    "describe_type",
    "did_you_mean",
    "edit_distance",
    "fast_validator",
    "iter_instance_errors",
    "iter_schema_problems",
    "iter_spec_problems",
    "json_pointer",
    "spec_schema",
    "split_pointer",
    "validation_schema",
]

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


@functools.cache
def spec_schema() -> dict[str, Any]:
    """Return the JSON Schema (draft-07) of spec files, shipped as package data."""
    text = resources.files("toolflow").joinpath("data/spec-v1.schema.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


@attrs.frozen(kw_only=True)
class SchemaProblem:
    """A schema violation mapped to a diagnostic: code, message, pointer, and whether it is at a key."""

    code: str
    message: str
    pointer: str
    key: bool = False


def json_pointer(path: Sequence[str | int]) -> str:
    """Build a JSON pointer (RFC 6901) from path parts."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def split_pointer(pointer: str) -> list[str]:
    """The tokens of a JSON *pointer*, unescaped: the inverse of :func:`json_pointer` (indexes stay strings)."""
    return [token.replace("~1", "/").replace("~0", "~") for token in pointer.split("/")[1:]] if pointer else []


def describe_type(value: object) -> str:
    """Name *value*'s type in YAML terms: mapping, list, string, integer, number, boolean, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def edit_distance(a: str, b: str) -> int:
    """The optimal-string-alignment distance of *a* and *b*.

    Insertions, deletions, substitutions and transpositions of two adjacent characters each
    cost one (``numbe1r`` is one edit from ``number1``, two from ``number2``); no substring is
    edited twice (Damerau-Levenshtein's restricted form).
    """
    if len(a) < len(b):
        a, b = b, a
    previous: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous, row = previous, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
            if before is not None and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[len(b)]


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def close_matches(word: str, choices: Iterable[str], n: int = 1) -> list[str]:
    """The at most *n* choices close to *word*, closest first.

    Close means at most ``max(1, 2 * len // 5)`` edits (:func:`edit_distance`, where *len* is
    the longer of the two names) and fewer edits than that length (a one-letter name is not
    close to another one-letter name). Ties go, in this order, to the smaller distance, the
    longer common prefix with *word*, then the alphabetically first choice, so the answer never
    depends on the order of *choices*. A string from ``${...}`` (as *word* or a choice) takes
    no part: the choice closest to a value from the environment, or the closeness of a guess to
    one, would tell what the value is.
    """
    if type(word) is Interpolated:
        return []
    ranked: list[tuple[int, int, str]] = []
    for choice in set(choices):
        if type(choice) is Interpolated:
            continue
        longest = max(len(word), len(choice))
        limit = min(max(1, 2 * longest // 5), longest - 1)
        if abs(len(word) - len(choice)) > limit:
            continue  # at least that many insertions: skip the table
        distance = edit_distance(word, choice)
        if distance <= limit:
            ranked.append((distance, -_common_prefix(word, choice), choice))
    return [choice for _, _, choice in sorted(ranked)[:n]]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``"; did you mean 'x'?"`` for the closest choice (:func:`close_matches`), or ``""``."""
    close = close_matches(word, choices)
    return f"; did you mean {close[0]!r}?" if close else ""


def describe_location(path: Sequence[str | int]) -> str:
    """Describe a location in a spec document for messages: ``tool 'x'``, ``'retry' of tool 'x'``."""
    parts = list(path)
    if not parts:
        return "the spec file"
    if parts[0] == "tools" and len(parts) >= 2:
        tool = f"tool {parts[1]!r}"
        rest = parts[2:]
        if not rest:
            return tool
        return f"{_dotted(rest)!r} of {tool}"
    return repr(_dotted(parts))


def _dotted(parts: Sequence[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _short(value: object, limit: int = 40) -> str:
    text = json.dumps(masked(value), default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kinds_key(kinds: Mapping[str, Mapping[str, Any]] | None) -> str:
    """A hashable key of plugin kinds (their names and schemas), for the validator caches."""
    return json.dumps(kinds or {}, sort_keys=True, default=str)


@functools.cache
def spec_schema_with_kinds(kinds_key: str) -> dict[str, Any]:
    """The spec schema with plugin kinds (from :func:`_kinds_key`) added as tool keys."""
    kinds = json.loads(kinds_key)
    if not kinds:
        return spec_schema()
    schema = json.loads(json.dumps(spec_schema()))
    properties = schema["definitions"]["tool"]["properties"]
    for name, kind_schema in kinds.items():
        properties.setdefault(name, kind_schema)
    return schema  # type: ignore[no-any-return]


@functools.cache
def _fast_spec_validator(kinds_key: str) -> Any:
    return jsonschema_rs.Draft7Validator(spec_schema_with_kinds(kinds_key))


@functools.cache
def _explaining_spec_validator(kinds_key: str) -> Any:
    import jsonschema  # noqa: PLC0415 - imported only to explain failures

    return jsonschema.Draft7Validator(spec_schema_with_kinds(kinds_key))


def iter_spec_problems(
    data: object, kinds: Mapping[str, Mapping[str, Any]] | None = None, *, exact: object = None
) -> Iterator[SchemaProblem]:
    """Yield every violation of the spec-file schema by *data*, mapped to TF1xx codes.

    *kinds* adds plugin implementation kinds: a tool may then have each key,
    whose value must match the kind's schema. *exact* is *data* with plain
    strings for ``${...}`` ones, when the caller has it (``jsonschema_rs`` refuses
    ``str`` subclasses; the messages still name the references).
    """
    key = _kinds_key(kinds)
    if exact_types(_fast_spec_validator(key).is_valid, data if exact is None else exact):
        return
    errors = _explaining_spec_validator(key).iter_errors(data)
    errors = sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        yield from _map_spec_error(error)


def _map_spec_error(error: Any) -> Iterator[SchemaProblem]:
    path = list(error.absolute_path)
    pointer = json_pointer(path)
    validator, instance, schema = error.validator, error.instance, error.schema
    name = path[-1] if path else None
    # "'timeout' in tool 'x'" for a key; "'command[1]' of tool 'x'" for a list item.
    label = f"{name!r} in {describe_location(path[:-1])}" if isinstance(name, str) else describe_location(path)
    if validator == "additionalProperties" and isinstance(instance, dict):
        yield from _unknown_keys(instance, schema, path)
    elif validator == "required" and isinstance(instance, dict):
        yield from _missing_keys(instance, error.validator_value, path)
    elif validator == "type":
        yield SchemaProblem(code="TF103", message=_type_message(error, label, path), pointer=pointer)
    elif validator == "const" and path == ["toolflow"]:
        message = f"unsupported spec format version {_short(instance)}; this toolflow reads format 1"
        yield SchemaProblem(code="TF105", message=message, pointer=pointer)
    else:
        yield SchemaProblem(code="TF104", message=_value_message(error, label, path), pointer=pointer)


def _unknown_keys(instance: dict[str, Any], schema: Any, path: list[str | int]) -> Iterator[SchemaProblem]:
    """TF101 at each key of *instance* that *schema* does not declare, with a did-you-mean."""
    known = list(schema.get("properties", {}))
    for key in instance:
        if key not in known:
            hint = did_you_mean(key, known)
            if not hint and len(path) == 2 and path[0] == "tools":
                hint = _plugin_hint()
            message = f"unknown key {key!r} in {describe_location(path)}{hint}"
            yield SchemaProblem(code="TF101", message=message, pointer=json_pointer([*path, key]), key=True)


def _plugin_hint() -> str:
    """Where an unknown key of a tool may come from: the implementation kind of a plugin that is not loaded.

    The installed entry points are read, never loaded: ``toolflow lint`` imports no plugin for this.
    """
    seen = sorted(
        {f"{e.name} ({e.dist.name})" if e.dist else e.name for e in importlib.metadata.entry_points(group="toolflow")}
    )
    installed = ", ".join(seen) if seen else "none"
    return (
        f"; a plugin may provide it as an implementation kind (installed 'toolflow' entry points: {installed};"
        " 'toolflow lint --no-plugins' skips plugin kinds)"
    )


def _missing_keys(instance: dict[str, Any], required: Any, path: list[str | int]) -> Iterator[SchemaProblem]:
    """TF102 for each *required* key missing from *instance*, at the parent's key."""
    for key in required:
        if key not in instance:
            extra = " (the format version; add 'toolflow: 1')" if not path and key == "toolflow" else ""
            message = f"{describe_location(path)} is missing required key {key!r}{extra}"
            yield SchemaProblem(code="TF102", message=message, pointer=json_pointer(path), key=bool(path))


def _type_message(error: Any, label: str, path: list[str | int]) -> str:
    instance = error.instance
    if not path:
        return f"a spec file must be a mapping, got {describe_type(instance)}"
    expected = error.validator_value
    names = [expected] if isinstance(expected, str) else list(expected)
    want = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
    got = describe_type(instance) if instance is None else f"{describe_type(instance)} {_short(instance)}"
    return f"{label} must be {want}, got {got}"


def _value_message(error: Any, label: str, path: list[str | int]) -> str:
    validator, value, instance = error.validator, error.validator_value, error.instance
    where = label if path else "the spec file"
    got = _short(instance)
    if validator == "enum":
        choices = ", ".join(repr(v) for v in value)
        hint = did_you_mean(instance, [str(v) for v in value]) if isinstance(instance, str) else ""
        return f"{where} must be one of {choices}, got {got}{hint}"
    if validator == "pattern":
        if "ms|s|m|h" in value:
            return f"{where} must be a positive duration like '500ms', '30s', '5m' or a number of seconds, got {got}"
        if value.startswith("^[Hh][Tt][Tt][Pp]"):
            return f"{where} must be an http:// or https:// URL with a host, got {got}"
        if "rate_limit" in value:
            return (
                f"{where} must be one of 'timeout', 'connection', 'network', 'temporary', 'rate_limit' "
                f"or a 'module:ExceptionClass' path, got {got}"
            )
        return f"{where} must match {value!r}, got {got}"
    if validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        word = {
            "minimum": "at least",
            "exclusiveMinimum": "greater than",
            "maximum": "at most",
            "exclusiveMaximum": "less than",
        }[validator]
        return f"{where} must be {word} {value}, got {got}"
    if validator in ("minItems", "minLength", "minProperties"):
        return f"{where} must not be empty"
    return f"{where}: {error.message}"


# --- parameter schemas (JSON Schema 2020-12) ---------------------------------------


_KNOWN_DIALECT = re.compile(r"^https?://json-schema\.org/(draft-0[467]/|draft/(2019-09|2020-12)/)schema#?$")


def iter_schema_problems(schema: Mapping[str, Any]) -> Iterator[tuple[str, list[str | int]]]:
    """Yield ``(message, path)`` for each way *schema* is not valid JSON Schema 2020-12.

    The path is relative to the schema. Nothing is yielded for a valid schema.
    A ``$schema`` naming a dialect other than the known JSON Schema drafts is
    one problem: it is never fetched.
    """
    dialect = schema.get("$schema") if isinstance(schema, Mapping) else None
    if dialect is not None and not (isinstance(dialect, str) and _KNOWN_DIALECT.match(dialect)):
        yield f"unsupported $schema {dialect!r}; use a JSON Schema draft (2020-12 by default)", ["$schema"]
        return
    if exact_types(jsonschema_rs.meta.is_valid, schema):
        return
    import jsonschema  # noqa: PLC0415 - imported only to explain failures

    meta = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    for error in meta.iter_errors(schema):
        leaf = min(_leaves(error), key=lambda e: -len(e.absolute_path))
        path = list(leaf.absolute_path)
        yield _type_name_problem(leaf.instance, path) or leaf.message, path


JSON_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")

_FOREIGN_TYPES = {
    **dict.fromkeys(("dict", "map", "mapping", "hash", "hashmap", "record", "struct", "obj"), "object"),
    **dict.fromkeys(("float", "double", "decimal", "real", "numeric", "float32", "float64"), "number"),
    **dict.fromkeys(("int", "long", "int32", "int64", "uint", "short"), "integer"),
    **dict.fromkeys(("tuple", "list", "set", "sequence", "seq", "vector"), "array"),
    **dict.fromkeys(("str", "text", "char", "varchar", "uuid", "date", "datetime"), "string"),
    **dict.fromkeys(("bool",), "boolean"),
    **dict.fromkeys(("none", "nil", "void", "nonetype"), "null"),
}
"""Type names of Python, TypeScript, SQL and other schema languages, and the JSON Schema type each means."""

_ANY_TYPES = frozenset({"any", "unknown", "mixed", "object?", "*"})


def _type_name_problem(instance: object, path: list[str | int]) -> str | None:
    """The message for a ``type`` that names no JSON Schema type, with what it likely meant; else ``None``."""
    at_type = (path[-1:] == ["type"]) or (len(path) >= 2 and path[-2] == "type" and isinstance(path[-1], int))
    if not at_type or instance in JSON_TYPES or isinstance(instance, list | dict):
        return None
    if not isinstance(instance, str):
        return f"{_short(instance)} is not a JSON Schema type (one of {', '.join(JSON_TYPES)})"
    if instance.lower() in _ANY_TYPES:
        hint = "; leave 'type' out to accept any value"
        if path == ["type"]:
            hint += " (the parameters of a tool need 'type: object')"
    elif instance.lower() in _FOREIGN_TYPES:
        hint = f"; did you mean {_FOREIGN_TYPES[instance.lower()]!r}?"
    else:
        hint = did_you_mean(instance, JSON_TYPES)
    if not hint:
        hint = f" (one of {', '.join(JSON_TYPES)})"
    return f"{instance!r} is not a JSON Schema type{hint}"


def _leaves(error: Any) -> Iterator[Any]:
    if not error.context:
        yield error
        return
    for child in error.context:
        yield from _leaves(child)


def fast_validator(schema: Mapping[str, Any], *, validate_formats: bool = False) -> Any:
    """Compile *schema* (2020-12 unless it names its ``$schema``) for fast ``is_valid`` checks.

    With *validate_formats*, ``format`` is asserted whatever the dialect, as the runtime
    validators (``toolflow._checking.CompiledSchema``) do; unknown formats are ignored. Without
    it, the dialect decides, as ``jsonschema_rs`` does by default: asserted in drafts 4 to 7,
    an annotation in 2019-09 and 2020-12.
    """
    document = cast("dict[str, Any]", schema)
    # None is jsonschema_rs's "as the dialect says"; False would turn it off for draft-07 too.
    formats = True if validate_formats else None
    # offline: a remote "$ref" is an error, never a request from the linter or the engine.
    if "$schema" in document:
        return exact_types(
            functools.partial(jsonschema_rs.validator_for, offline=True, validate_formats=formats), document
        )
    return exact_types(
        functools.partial(jsonschema_rs.Draft202012Validator, offline=True, validate_formats=formats), document
    )


def iter_instance_errors(schema: Mapping[str, Any], instance: object) -> Iterator[tuple[str, list[str | int]]]:
    """Yield ``(message, path)`` for each way *instance* violates *schema*, best errors first."""
    import jsonschema  # noqa: PLC0415 - imported only to explain failures

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = cls(schema).iter_errors(instance)  # type: ignore[arg-type]
    for error in sorted(errors, key=jsonschema.exceptions.relevance):
        yield error.message, list(error.absolute_path)


# --- friendly parameter rules ---------------------------------------------------


def compile_parameter_rules(rules: Sequence[ParameterRule], *, draft7: bool = False) -> list[dict[str, Any]]:
    """Compile friendly parameter rules to JSON-Schema fragments (to be combined with ``allOf``).

    With *draft7*, ``when``/``require`` compiles to draft-07's ``dependencies``
    instead of 2020-12's ``dependentRequired``, which older dialects ignore.
    """
    fragments: list[dict[str, Any]] = []
    for rule in rules:
        names = list(dict.fromkeys(rule.params))  # a name listed twice counts once
        if rule.kind == "requires":
            if rule.when_values is not None:
                condition = {
                    "properties": {k: {"const": v} for k, v in rule.when_values.items()},
                    "required": list(rule.when_values),
                }
                fragments.append({"if": condition, "then": {"required": names}})
            elif rule.when is not None:
                fragments.append({"dependencies" if draft7 else "dependentRequired": {rule.when: names}})
        elif rule.kind == "exclusive":
            pairs = [[a, b] for i, a in enumerate(names) for b in names[i + 1 :]]
            fragments.append({"not": {"anyOf": [{"required": pair} for pair in pairs]}})
        elif rule.kind == "at_least_one":
            fragments.append({"anyOf": [{"required": [n]} for n in names]})
        else:
            fragments.append({"oneOf": [{"required": [n]} for n in names]})
    return fragments


def validation_schema(parameters: Mapping[str, Any], rules: Sequence[ParameterRule]) -> dict[str, Any]:
    """Return *parameters* with the compiled *rules* added under ``allOf``."""
    schema = dict(parameters)
    dialect = str(schema.get("$schema", ""))
    fragments = compile_parameter_rules(rules, draft7="draft-0" in dialect)
    if fragments:
        schema["allOf"] = [*schema.get("allOf", []), *fragments]
    return schema
