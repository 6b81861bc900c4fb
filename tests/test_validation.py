"""Argument validation: every stage and coercion, messages for models, and the two engines' agreement."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolflow._checking import ARGUMENTS, CompiledSchema, ParameterError
from toolflow._model import ParameterRule, ToolSpec
from toolflow._validation import ArgumentValidator, ValidationResult, coerce_value


def _validator(parameters: Mapping[str, Any], **spec: Any) -> ArgumentValidator:
    return ArgumentValidator.for_spec(ToolSpec(name="my_tool", parameters=parameters, **spec))


def _object(properties: Mapping[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), **more}


def _lines(result: ValidationResult) -> list[str]:
    return [e.describe() for e in result.errors]


ADD = _object({"a": {"type": "integer"}, "b": {"type": "integer"}}, required=["a", "b"])


# --- the happy path ---------------------------------------------------------------------


def test_valid_arguments_come_back_untouched() -> None:
    """Valid arguments with nothing to change are returned as the very same mapping."""
    args = {"a": 1, "b": 2}
    result = _validator(ADD).validate(args)
    assert result == ValidationResult(valid=True, cleaned=args)
    assert result.cleaned is args


# --- stage 1: shape ------------------------------------------------------------------------


@pytest.mark.parametrize("arguments", [[1, 2], "a=1", None, 5, ("a", 1)])
def test_arguments_must_be_a_mapping(arguments: object) -> None:
    """Anything but a mapping is one clear error about the arguments as a whole."""
    result = _validator(ADD).validate(arguments)
    assert not result.valid
    assert result.errors == (
        ParameterError(
            parameter=ARGUMENTS,
            message="Expected an object mapping parameter names to values",
            constraint="type: object",
            got=arguments,
            has_got=True,
        ),
    )


def test_a_read_only_mapping_is_accepted() -> None:
    """Any Mapping works; the cleaned arguments are a plain dict."""
    result = _validator(ADD).validate(MappingProxyType({"a": 1, "b": 2}))
    assert result.valid
    assert type(result.cleaned) is dict


def test_parameter_names_must_be_strings() -> None:
    """A non-string key is an error of its own; the other checks still run."""
    result = _validator(ADD).validate({1: "x", "a": 1, "b": 2})
    assert _lines(result) == ["1: Parameter names must be strings (got: 1)"]


def test_undeclared_keys_are_dropped_with_a_warning() -> None:
    """A key the schema does not declare is dropped, with a did-you-mean when one is close."""
    result = _validator(ADD).validate({"a": 1, "b": 2, "bb": 3, "zzz": 4})
    assert result.valid
    assert result.cleaned == {"a": 1, "b": 2}
    assert result.warnings == ("ignored unknown parameter 'bb'; did you mean 'b'?", "ignored unknown parameter 'zzz'")


def test_a_transposed_parameter_name_is_matched_to_its_own_name() -> None:
    """`numbe1r` is one swap from `number1` and two edits from `number2`: the hint names `number1`."""
    schema = {"type": "object", "properties": {"number2": {"type": "integer"}, "number1": {"type": "integer"}}}
    result = _validator(schema).validate({"numbe1r": 1})
    assert result.warnings == ("ignored unknown parameter 'numbe1r'; did you mean 'number1'?",)


def test_keys_declared_in_subschemas_and_patterns_are_kept() -> None:
    """Names from allOf/anyOf/if-then and patternProperties count as declared."""
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "allOf": [{"properties": {"b": {}}}],
        "if": {"properties": {"a": {"const": 1}}},
        "then": {"properties": {"c": {}}},
        "patternProperties": {"^x_": {"type": "integer"}},
    }
    result = _validator(schema).validate({"a": 1, "b": 2, "c": 3, "x_1": 4, "y": 5})
    assert result.cleaned == {"a": 1, "b": 2, "c": 3, "x_1": 4}
    assert result.warnings == ("ignored unknown parameter 'y'",)


def test_undeclared_keys_are_rejected_where_additional_properties_is_false() -> None:
    """additionalProperties: false turns an unknown key into an error, with a did-you-mean."""
    result = _validator({**ADD, "additionalProperties": False}).validate({"a": 1, "b": 2, "bb": 3})
    assert not result.valid
    assert _lines(result) == [
        "bb: Unknown parameter; did you mean 'b'? (expected: additionalProperties: false) (got: 3)"
    ]


def test_undeclared_keys_are_rejected_where_unevaluated_properties_is_false() -> None:
    """unevaluatedProperties: false rejects keys no subschema declares, and only those."""
    schema = {"type": "object", "allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}
    validator = _validator(schema)
    assert validator.validate({"a": 1}).valid
    assert _lines(validator.validate({"a": 1, "b": 2})) == [
        "b: Unknown parameter (expected: unevaluatedProperties: false) (got: 2)"
    ]


def test_an_error_without_words_keeps_jsonschema_words() -> None:
    """Keys declared only in a branch that did not apply are still reported, in jsonschema's words."""
    schema = {
        "type": "object",
        "if": {"properties": {"a": {"const": 1}}},
        "then": {"properties": {"b": {}}},
        "unevaluatedProperties": False,
    }
    result = _validator(schema).validate({"a": 2, "b": 1})
    line = (
        "(arguments): Unevaluated properties are not allowed ('a', 'b' were unexpected) "
        '(expected: unevaluatedProperties: false) (got: {"a": 2, "b": 1})'
    )
    assert _lines(result) == [line]


def test_undeclared_keys_are_validated_where_additional_properties_is_a_schema() -> None:
    """additionalProperties with a schema keeps extra keys and checks them against it."""
    validator = _validator({**ADD, "additionalProperties": {"type": "string"}})
    assert validator.validate({"a": 1, "b": 2, "note": "hi"}).cleaned == {"a": 1, "b": 2, "note": "hi"}
    assert _lines(validator.validate({"a": 1, "b": 2, "note": 5})) == [
        "note: Expected string (expected: type: string) (got: 5)"
    ]


def test_undeclared_keys_are_kept_where_additional_properties_is_true() -> None:
    """additionalProperties: true is an explicit allowance: nothing is dropped."""
    result = _validator({**ADD, "additionalProperties": True}).validate({"a": 1, "b": 2, "c": 3})
    assert (result.valid, result.warnings, dict(result.cleaned)) == (True, (), {"a": 1, "b": 2, "c": 3})


def test_nothing_is_dropped_when_a_ref_hides_the_properties() -> None:
    """With a top-level $ref the declared names are unknown, so no key is dropped."""
    schema = {"$defs": {"args": {"type": "object", "properties": {"a": {}}}}, "$ref": "#/$defs/args"}
    result = _validator(schema).validate({"a": 1, "z": 2})
    assert (result.valid, result.warnings, dict(result.cleaned)) == (True, (), {"a": 1, "z": 2})


# --- stage 2: coercion ------------------------------------------------------------------------

COERCIONS: list[tuple[list[str], str, object]] = [
    (["integer"], "5", 5),
    (["integer"], "-3", -3),
    (["integer"], "0", 0),
    (["integer"], "12345678901234567890", 12345678901234567890),
    (["number"], "2.5", 2.5),
    (["number"], "5", 5),
    (["number"], "-0.5", -0.5),
    (["number"], "1e3", 1000.0),
    (["boolean"], "true", True),
    (["boolean"], "false", False),
    (["boolean"], "True", True),
    (["boolean"], "FALSE", False),
    (["array"], "[1, 2]", [1, 2]),
    (["array"], ' ["a"] ', ["a"]),
    (["object"], '{"k": 1}', {"k": 1}),
    (["integer", "null"], "7", 7),
    (["boolean", "integer"], "true", True),
    (["boolean", "integer"], "1", 1),
    (["array", "object"], "{}", {}),
]

NOT_COERCED: list[tuple[list[str], str]] = [
    (["integer"], "5.5"),
    (["integer"], "5.0"),
    (["integer"], "05"),
    (["integer"], "1e3"),
    (["integer"], " 5"),
    (["integer"], "+5"),
    (["integer"], "\u0665"),
    (["integer"], "five"),
    (["integer"], "9" * 5000),
    (["number"], "1e999"),
    (["number"], "nan"),
    (["number"], "Infinity"),
    (["number"], ".5"),
    (["number"], "1,5"),
    (["boolean"], "yes"),
    (["boolean"], "1"),
    (["boolean"], "t"),
    (["array"], "[1,"),
    (["array"], '{"a": 1}'),
    (["object"], "[1]"),
    (["object"], "null"),
    (["integer", "string"], "5"),
    (["null"], "null"),
    ([], "5"),
]


@pytest.mark.parametrize(("types", "value", "expected"), COERCIONS)
def test_safe_coercions(types: list[str], value: str, expected: object) -> None:
    """A string converts when the type wants something else and nothing is lost."""
    converted = coerce_value(value, types)
    assert converted == expected
    assert type(converted) is type(expected)


@pytest.mark.parametrize(("types", "value"), NOT_COERCED)
def test_lossy_or_ambiguous_strings_are_not_coerced(types: list[str], value: str) -> None:
    """Strings that would lose information or need a guess stay strings."""
    assert coerce_value(value, types) is value


@pytest.mark.parametrize(
    ("schema", "value", "expected", "warning"),
    [
        ({"type": "integer"}, "5", 5, "converted 'p' from a string to an integer"),
        ({"type": "number"}, "2.5", 2.5, "converted 'p' from a string to a number"),
        ({"type": "boolean"}, "true", True, "converted 'p' from a string to a boolean"),
        ({"type": "array", "items": {"type": "integer"}}, "[1, 2]", [1, 2], "converted 'p' from a string to an array"),
        ({"type": "object"}, '{"x": 1}', {"x": 1}, "converted 'p' from a string to an object"),
    ],
)
def test_validate_coerces_and_says_so(schema: dict[str, Any], value: str, expected: object, warning: str) -> None:
    """validate() converts what models commonly send, and warns what it converted."""
    result = _validator(_object({"p": schema})).validate({"p": value})
    assert (result.valid, dict(result.cleaned), result.warnings) == (True, {"p": expected}, (warning,))


def test_a_coerced_value_is_still_checked_against_constraints() -> None:
    """Coercion happens before the constraints: "7" becomes 7, which breaks maximum 5."""
    result = _validator(_object({"n": {"type": "integer", "maximum": 5}})).validate({"n": "7"})
    assert _lines(result) == ["n: Must be at most 5 (expected: maximum: 5) (got: 7)"]


def test_a_string_that_does_not_coerce_is_a_type_error() -> None:
    """ "5.5" for an integer stays a string and is reported as received."""
    result = _validator(ADD).validate({"a": "5.5", "b": "yes"})
    assert _lines(result) == [
        'a: Expected integer (expected: type: integer) (got: "5.5")',
        'b: Expected integer (expected: type: integer) (got: "yes")',
    ]


def test_coerced_json_is_checked_deeply() -> None:
    """The items of a JSON string that became an array are validated like any array."""
    schema = _object({"tags": {"type": "array", "items": {"type": "string"}}})
    result = _validator(schema).validate({"tags": '["a", 2]'})
    assert _lines(result) == ["tags[1]: Expected string (expected: type: string) (got: 2)"]


def test_strict_mode_does_not_coerce() -> None:
    """With strict: true the arguments are validated exactly as sent."""
    result = _validator(ADD, strict=True).validate({"a": "5", "b": 2})
    assert _lines(result) == ['a: Expected integer (expected: type: integer) (got: "5")']
    assert result.warnings == ()


def test_nested_strings_are_not_coerced() -> None:
    """Coercion applies to top-level parameters only; nested values are checked as sent."""
    schema = _object({"point": _object({"x": {"type": "integer"}})})
    assert _lines(_validator(schema).validate({"point": {"x": "1"}})) == [
        'point.x: Expected integer (expected: type: integer) (got: "1")'
    ]


# --- stage 3: defaults ----------------------------------------------------------------------

SEARCH = _object(
    {
        "query": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "default": 10},
        "tags": {"type": "array", "default": []},
    },
    required=["query"],
)


def test_defaults_are_filled_in() -> None:
    """A missing parameter with a default gets it."""
    result = _validator(SEARCH).validate({"query": "lamp"})
    assert (result.valid, dict(result.cleaned)) == (True, {"query": "lamp", "limit": 10, "tags": []})


def test_given_values_win_over_defaults() -> None:
    """A parameter that was sent keeps its value."""
    result = _validator(SEARCH).validate({"query": "lamp", "limit": 3, "tags": ["x"]})
    assert dict(result.cleaned) == {"query": "lamp", "limit": 3, "tags": ["x"]}


def test_mutable_defaults_are_copied_per_call() -> None:
    """A list default is a fresh copy each call, so a tool that mutates it cannot leak state."""
    validator = _validator(SEARCH)
    first = validator.validate({"query": "a"}).cleaned
    first["tags"].append("leak")
    assert validator.validate({"query": "b"}).cleaned["tags"] == []


def test_defaults_are_filled_in_strict_mode() -> None:
    """strict: true turns off coercion only; defaults still apply."""
    assert _validator(SEARCH, strict=True).validate({"query": "q"}).cleaned["limit"] == 10


def test_an_invalid_default_is_reported_as_the_spec_s_fault() -> None:
    """Defaults are validated with the rest, and an invalid one is blamed on the spec (TF208 catches it in lint)."""
    schema = _object(
        {
            "n": {"type": "integer", "default": "ten"},
            "where": {"type": "object", "properties": {"city": {"type": "string"}}, "default": {"city": None}},
        }
    )
    assert _lines(_validator(schema).validate({})) == [
        (
            "n: The tool's default for 'n' is invalid, a fault of the tool's spec, not of this call "
            "(give 'n' a value to avoid it): expected integer (expected: type: integer) (got: \"ten\")"
        ),
        (
            "where.city: The tool's default for 'where' is invalid, a fault of the tool's spec, not of this call "
            "(give 'where' a value to avoid it): expected string (expected: type: string) (got: null)"
        ),
    ]


def test_a_value_the_call_gave_is_the_call_s_fault_even_where_a_default_exists() -> None:
    """Only values the validator filled in are blamed on the spec."""
    schema = _object({"n": {"type": "integer", "default": "ten"}})
    assert _lines(_validator(schema).validate({"n": "x"})) == [
        'n: Expected integer (expected: type: integer) (got: "x")'
    ]


def test_messages_quote_values_as_json() -> None:
    """`null`, `true` and `"a"`, never Python's `None`, `True` or `'a'`, in every message the validator writes."""
    schema = _object(
        {
            "has": {"type": "array", "contains": {"type": "string"}},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
            "rest": {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
            "tag": {"type": "string", "pattern": "^a"},
        }
    )
    lines = _lines(_validator(schema).validate({"has": [None, True], "pair": [1, None], "rest": [1, True], "tag": "b"}))
    assert lines == [
        (
            'has: Must contain an item that matches the schema {"type": "string"} (expected: contains: '
            '{"type": "string"}) (got: [null, true])'
        ),
        "pair: Must have at most 1 item (expected: items: false) (got: [1, null])",
        "rest: Must not have items the schema does not describe (expected: unevaluatedItems: false) (got: [1, true])",
        'tag: Must match the pattern ^a (expected: pattern: ^a) (got: "b")',
    ]
    assert not any(word in line for line in lines for word in ("None", "True", "False"))


# --- stage 4: required, types, constraints ---------------------------------------------------


def test_missing_required_parameters() -> None:
    """Each missing required parameter is one error without a value."""
    result = _validator(ADD).validate({})
    assert result.errors == (
        ParameterError(parameter="a", message="Missing required parameter"),
        ParameterError(parameter="b", message="Missing required parameter"),
    )


def test_missing_nested_property_is_named_by_its_path() -> None:
    """A required key inside an object parameter is reported at its dotted path."""
    schema = _object({"address": _object({"city": {"type": "string"}}, required=["city"])})
    assert _lines(_validator(schema).validate({"address": {}})) == ["address.city: Missing required property"]


TYPE_CASES: list[tuple[Any, object, str]] = [
    ("string", 123, "Expected string (expected: type: string) (got: 123)"),
    ("integer", 1.5, "Expected integer (expected: type: integer) (got: 1.5)"),
    ("integer", True, "Expected integer (expected: type: integer) (got: true)"),
    ("number", "x", 'Expected number (expected: type: number) (got: "x")'),
    ("number", math.nan, "Expected number (expected: type: number) (got: NaN)"),
    ("number", math.inf, "Expected number (expected: type: number) (got: Infinity)"),
    ("boolean", 0, "Expected boolean (expected: type: boolean) (got: 0)"),
    ("array", {"a": 1}, 'Expected array (expected: type: array) (got: {"a": 1})'),
    ("object", [1], "Expected object (expected: type: object) (got: [1])"),
    ("null", 0, "Expected null (expected: type: null) (got: 0)"),
    (["integer", "null"], "x", 'Expected integer or null (expected: type: ["integer", "null"]) (got: "x")'),
]


@pytest.mark.parametrize(("type_", "value", "line"), TYPE_CASES)
def test_type_errors(type_: Any, value: object, line: str) -> None:
    """A value of the wrong type is reported with the type expected and the value received."""
    result = _validator(_object({"p": {"type": type_}}), strict=True).validate({"p": value})
    assert _lines(result) == [f"p: {line}"]


@pytest.mark.parametrize(
    ("type_", "value"),
    [("integer", 2.0), ("number", 3), ("array", (1, 2)), ("integer", 2**70), ("number", -0.0)],
)
def test_values_of_the_right_type(type_: str, value: object) -> None:
    """JSON Schema's notion of types: 2.0 is an integer, a tuple is an array, big ints are fine."""
    assert _validator(_object({"p": {"type": type_}})).validate({"p": value}).valid


CONSTRAINT_CASES: list[tuple[dict[str, Any], object, str]] = [
    (
        {"enum": ["brief", "normal", "detailed"]},
        "normall",
        (
            'Must be one of "brief", "normal", "detailed"; did you mean \'normal\'? '
            '(expected: enum: ["brief", "normal", "detailed"]) (got: "normall")'
        ),
    ),
    ({"enum": [1, 2]}, 3, "Must be one of 1, 2 (expected: enum: [1, 2]) (got: 3)"),
    ({"const": "yes"}, "no", 'Must be "yes" (expected: const: yes) (got: "no")'),
    ({"minimum": 1}, 0, "Must be at least 1 (expected: minimum: 1) (got: 0)"),
    ({"maximum": 50}, 51, "Must be at most 50 (expected: maximum: 50) (got: 51)"),
    ({"exclusiveMinimum": 0}, 0, "Must be greater than 0 (expected: exclusiveMinimum: 0) (got: 0)"),
    ({"exclusiveMaximum": 1.5}, 1.5, "Must be less than 1.5 (expected: exclusiveMaximum: 1.5) (got: 1.5)"),
    ({"multipleOf": 5}, 12, "Must be a multiple of 5 (expected: multipleOf: 5) (got: 12)"),
    ({"minLength": 1}, "", 'Must not be empty (expected: minLength: 1) (got: "")'),
    ({"minLength": 3}, "ab", 'Must be at least 3 characters long (expected: minLength: 3) (got: "ab")'),
    ({"maxLength": 1}, "ab", 'Must be at most 1 character long (expected: maxLength: 1) (got: "ab")'),
    ({"pattern": "^[a-z]+$"}, "A1", 'Must match the pattern ^[a-z]+$ (expected: pattern: ^[a-z]+$) (got: "A1")'),
    ({"format": "email"}, "nobody", 'Must be a valid email (expected: format: email) (got: "nobody")'),
    ({"format": "date"}, "2024-02-30", 'Must be a valid date (expected: format: date) (got: "2024-02-30")'),
    (
        {"format": "date-time"},
        "2024-01-01",
        'Must be a valid date-time (expected: format: date-time) (got: "2024-01-01")',
    ),
    ({"format": "uuid"}, "123", 'Must be a valid uuid (expected: format: uuid) (got: "123")'),
    ({"format": "ipv4"}, "256.0.0.1", 'Must be a valid ipv4 (expected: format: ipv4) (got: "256.0.0.1")'),
    ({"format": "uri"}, "no scheme", 'Must be a valid uri (expected: format: uri) (got: "no scheme")'),
    ({"minItems": 2}, [1], "Must have at least 2 items (expected: minItems: 2) (got: [1])"),
    ({"maxItems": 1}, [1, 2], "Must have at most 1 item (expected: maxItems: 1) (got: [1, 2])"),
    ({"uniqueItems": True}, [1, 1], "Must not contain duplicate items (expected: uniqueItems: true) (got: [1, 1])"),
    ({"minProperties": 1}, {}, "Must have at least 1 property (expected: minProperties: 1) (got: {})"),
    ({"not": {"const": 0}}, 0, 'Must not match the schema {"const": 0} (expected: not: {"const": 0}) (got: 0)'),
    (
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        1.5,
        'Expected string or integer (expected: type: ["string", "integer"]) (got: 1.5)',
    ),
    (
        {"oneOf": [{"minimum": 0}, {"maximum": 10}]},
        5,
        (
            "Must match exactly one of the allowed forms, but matches several "
            '(expected: oneOf: [{"minimum": 0}, {"maximum": 10}]) (got: 5)'
        ),
    ),
    (
        {"anyOf": [{"minimum": 10}, {"maximum": 0}]},
        5,
        'Must match at least one of the allowed forms (expected: anyOf: [{"minimum": 10}, {"maximum": 0}]) (got: 5)',
    ),
]


@pytest.mark.parametrize(("schema", "value", "line"), CONSTRAINT_CASES)
def test_constraint_errors(schema: dict[str, Any], value: object, line: str) -> None:
    """Each constraint is reported in words, with the constraint and the value received."""
    assert _lines(_validator(_object({"p": schema})).validate({"p": value})) == [f"p: {line}"]


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"format": "email"}, "someone@example.com"),
        ({"format": "date"}, "2024-02-29"),
        ({"format": "unknown-format"}, "anything"),
        ({"format": "email"}, 5),
        ({"multipleOf": 0.1}, 0.3),
        ({"pattern": "\\p{L}"}, "é"),
    ],
)
def test_constraints_satisfied(schema: dict[str, Any], value: object) -> None:
    """Valid formats pass, unknown formats are ignored, multipleOf is exact, ECMA classes work."""
    assert _validator(_object({"p": schema})).validate({"p": value}).valid


@pytest.mark.parametrize(("pattern", "value"), [("^[a-z]+$", "abc\n"), ("^\\d+$", "١٢"), ("^\\w+$", "é")])
def test_patterns_are_ecma_regular_expressions(pattern: str, value: str) -> None:
    """$ does not match before a newline, and \\d and \\w are ASCII, as in JSON Schema (not Python)."""
    result = _validator(_object({"p": {"pattern": pattern}})).validate({"p": value})
    assert not result.valid


def test_a_python_only_regex_still_validates() -> None:
    """A pattern only Python's re understands takes the slow path instead of failing."""
    validator = _validator(_object({"p": {"pattern": "a\\Z"}}))
    assert validator.validate({"p": "ba"}).valid
    assert not validator.validate({"p": "ab"}).valid


def test_errors_come_in_stage_order() -> None:
    """Required first, then types, then constraints, then dependency rules; each in property order."""
    schema = _object(
        {"z": {"type": "string"}, "m": {"maximum": 1}, "a": {"type": "integer"}, "x": {}, "y": {}},
        required=["q"],
    )
    rules = (ParameterRule(kind="exclusive", params=("x", "y")),)
    result = _validator(schema, parameter_rules=rules).validate({"z": 1, "m": 5, "a": "s", "x": 1, "y": 2})
    assert [e.parameter for e in result.errors] == ["q", "z", "a", "m", "x, y"]


# --- dependency rules ------------------------------------------------------------------------

RULE_PARAMS = _object({name: {"type": "string"} for name in ("a", "b", "c", "mode")})

RULE_CASES: list[tuple[ParameterRule, dict[str, Any], list[str]]] = [
    (
        ParameterRule(kind="exclusive", params=("a", "b")),
        {"a": "1", "b": "2"},
        ["a, b: At most one of 'a', 'b' may be given"],
    ),
    (
        ParameterRule(kind="exclusive", params=("a", "b", "c")),
        {"a": "1", "c": "3"},
        ["a, c: At most one of 'a', 'b', 'c' may be given"],
    ),
    (ParameterRule(kind="at_least_one", params=("a", "b")), {}, ["a, b: At least one of 'a', 'b' must be given"]),
    (ParameterRule(kind="exactly_one", params=("a", "b")), {}, ["a, b: Exactly one of 'a', 'b' must be given"]),
    (
        ParameterRule(kind="exactly_one", params=("a", "b")),
        {"a": "1", "b": "2"},
        ["a, b: Exactly one of 'a', 'b' must be given"],
    ),
    (
        ParameterRule(kind="requires", params=("b", "c"), when="a"),
        {"a": "1"},
        ["b: 'b' is required when 'a' is given", "c: 'c' is required when 'a' is given"],
    ),
    (
        ParameterRule(kind="requires", params=("b",), when_values={"mode": "advanced"}),
        {"mode": "advanced"},
        ["b: 'b' is required when 'mode' is \"advanced\""],
    ),
]


@pytest.mark.parametrize(("rule", "args", "lines"), RULE_CASES)
def test_dependency_rules_in_words(rule: ParameterRule, args: dict[str, Any], lines: list[str]) -> None:
    """A broken parameter rule is reported in friendly words, not as JSON Schema."""
    result = _validator(RULE_PARAMS, parameter_rules=(rule,)).validate(args)
    assert _lines(result) == lines


@pytest.mark.parametrize(
    ("rule", "args"),
    [
        (ParameterRule(kind="exclusive", params=("a", "b")), {"a": "1"}),
        (ParameterRule(kind="at_least_one", params=("a", "b")), {"b": "1"}),
        (ParameterRule(kind="exactly_one", params=("a", "b")), {"b": "1"}),
        (ParameterRule(kind="requires", params=("b",), when="a"), {"c": "1"}),
        (ParameterRule(kind="requires", params=("b",), when_values={"mode": "advanced"}), {"mode": "simple"}),
    ],
)
def test_dependency_rules_satisfied(rule: ParameterRule, args: dict[str, Any]) -> None:
    """Arguments that keep a rule pass."""
    assert _validator(RULE_PARAMS, parameter_rules=(rule,)).validate(args).valid


def test_rules_after_hand_written_all_of_are_found() -> None:
    """Rules appended after an existing allOf are still reported in words, and the allOf in its own."""
    schema = {**RULE_PARAMS, "allOf": [{"properties": {"a": {"maxLength": 1}}}]}
    rule = ParameterRule(kind="exclusive", params=("a", "b"))
    result = _validator(schema, parameter_rules=(rule,)).validate({"a": "long", "b": "x"})
    assert _lines(result) == [
        'a: Must be at most 1 character long (expected: maxLength: 1) (got: "long")',
        "a, b: At most one of 'a', 'b' may be given",
    ]


def test_hand_written_dependent_required_in_words() -> None:
    """dependentRequired written in the parameters reads like the friendly rule."""
    schema = {**RULE_PARAMS, "dependentRequired": {"a": ["b"]}}
    assert _lines(_validator(schema).validate({"a": "1"})) == ["b: 'b' is required when 'a' is given"]


def test_draft7_dependencies_in_words() -> None:
    """A draft-07 schema's rules compile to dependencies and are reported the same way."""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", **RULE_PARAMS}
    rule = ParameterRule(kind="requires", params=("b",), when="a")
    result = _validator(schema, parameter_rules=(rule,)).validate({"a": "1"})
    assert _lines(result) == ["b: 'b' is required when 'a' is given"]


# --- unusable schemas and odd input ----------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "strng"},
            (
                "the schema is not valid JSON Schema: 'strng' is not a JSON Schema type; did you mean 'string'? "
                "(at 'type')"
            ),
        ),
        (
            {"type": "object", "required": "a"},
            "the schema is not valid JSON Schema: 'a' is not of type 'array' (at 'required')",
        ),
        (
            {"$schema": "http://example.com/my-schema", "type": "object"},
            "unsupported '$schema' 'http://example.com/my-schema'",
        ),
    ],
)
def test_an_unusable_schema_rejects_every_call(schema: dict[str, Any], problem: str) -> None:
    """A parameter schema that cannot be used is reported on every call, never raised."""
    validator = _validator(schema)
    assert validator.problem == problem
    assert _lines(validator.validate({})) == [f"{ARGUMENTS}: The tool's schema cannot be used: {problem}"]


def test_a_ref_cycle_is_rejected_not_raised() -> None:
    """A $ref that loops without consuming the instance makes the call fail, without raising."""
    schema = {"$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x", "type": "object", "required": ["a"]}
    result = _validator(schema).validate({})
    assert not result.valid
    assert result.errors[0].parameter == ARGUMENTS


@pytest.mark.parametrize(
    "value",
    [{1, 2}, object(), b"bytes", {"nested": {3: "int key"}}, [math.nan], 10**5000, frozenset()],
    ids=lambda value: type(value).__name__,
)
@pytest.mark.parametrize("type_", ["array", "integer", "object"])
def test_validate_never_raises_on_python_values(value: object, type_: str) -> None:
    """Values no JSON parser produces are checked by the explaining library, never raised."""
    result = _validator(_object({"p": {"type": type_}})).validate({"p": value})
    assert isinstance(result, ValidationResult)
    assert all(error.describe() for error in result.errors)


# --- format_for_llm ---------------------------------------------------------------------------


def test_format_for_llm_matches_seed_001() -> None:
    """The text for the model is seed 001's, to the character."""
    result = _validator(_object({"name": {"type": "string"}})).validate({"name": 123})
    assert result.format_for_llm("my_tool") == (
        "Parameter validation failed for 'my_tool':\n  - name: Expected string (expected: type: string) (got: 123)"
    )


def test_format_for_llm_lists_every_error_then_the_warnings() -> None:
    """Errors one per line, then a Warnings section, so a misspelt key is easy to fix."""
    schema = _object({"name": {"type": "string"}, "count": {"type": "integer"}}, required=["name", "count"])
    result = _validator(schema).validate({"nme": "x", "count": "many"})
    assert result.format_for_llm("my_tool") == (
        "Parameter validation failed for 'my_tool':\n"
        "  - name: Missing required parameter\n"
        '  - count: Expected integer (expected: type: integer) (got: "many")\n'
        "Warnings:\n"
        "  - ignored unknown parameter 'nme'; did you mean 'name'?"
    )


def test_format_for_llm_is_empty_when_valid() -> None:
    """A valid result has nothing to tell the model."""
    assert _validator(ADD).validate({"a": 1, "b": 2}).format_for_llm("add") == ""


def test_long_values_are_shortened_in_messages() -> None:
    """A long received value is cut in the message so that errors stay readable."""
    line = _validator(_object({"p": {"type": "integer"}}), strict=True).validate({"p": "x" * 500}).errors[0].describe()
    assert line == 'p: Expected integer (expected: type: integer) (got: "' + "x" * 76 + "...)"


# --- the two engines agree ---------------------------------------------------------------------

NAMES = ["a", "b", "c", "d"]
TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]
PATTERNS = [
    "^a",
    "a$",
    "^[a-z]+$",
    "^\\d+$",
    "\\w",
    "^\\s*$",
    "^.{2,3}$",
    "b|c",
    "(?=a)a",
    "^\\p{L}+$",
    "é",
    "[0-9]{2}",
]
FORMATS = ["date", "date-time", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference"]
FORMATS += ["uuid", "regex", "json-pointer", "iri", "idn-hostname", "uri-template", "idn-email", "no-such-format"]
STRINGS = [
    "", "a", "ab", "abc", "aé", "a\n", "12", "١٢", "x", "A", "ab c", "😀", "true", "5", "[1]",
    "2024-01-31", "2024-02-30", "2024-01-31T12:00:00Z", "12:00:00Z", "P1D", "PT", "a@b.co", "no email",
    "example.com", "-bad-.com", "127.0.0.1", "256.1.1.1", "::1", "1::2::3", "http://x.y/z", "foo", "//x/y",
    "123e4567-e89b-12d3-a456-426614174000", "[a-", "/a/b", "a/b", "0/a", "{x}", "{x", "bücher.de",
]  # fmt: skip
NUMBERS = [0, 1, -1, 2, 3, 10, 2**53 + 1, 2**64 + 1, -(2**63) - 1, 0.0, -0.0, 0.1, 0.3, 0.5, 1.5, 2.0, 1e-9, 1e308]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(NUMBERS),
    st.integers(-100, 100),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(STRINGS),
)


def _json(odd: bool) -> st.SearchStrategy[Any]:
    base = st.one_of(scalars, st.sampled_from([math.nan, math.inf, -math.inf])) if odd else scalars
    return st.recursive(
        base,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.sampled_from([*NAMES, "x", "ab", "1"]), inner, max_size=3),
        ),
        max_leaves=6,
    )


_types = st.one_of(st.sampled_from(TYPES), st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True))
_names = st.lists(st.sampled_from(NAMES), max_size=3, unique=True)
KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "type": _types,
    "enum": st.lists(scalars, min_size=1, max_size=4),
    "const": scalars,
    "minimum": st.sampled_from(NUMBERS),
    "maximum": st.sampled_from(NUMBERS),
    "exclusiveMinimum": st.sampled_from(NUMBERS),
    "exclusiveMaximum": st.sampled_from(NUMBERS),
    "multipleOf": st.sampled_from([2, 3, 0.1, 0.5, 0.01, 1.5, 1e-9]),
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 3),
    "pattern": st.sampled_from(PATTERNS),
    "format": st.sampled_from(FORMATS),
    "minItems": st.integers(0, 3),
    "maxItems": st.integers(0, 3),
    "uniqueItems": st.booleans(),
    "minProperties": st.integers(0, 3),
    "maxProperties": st.integers(0, 3),
    "required": _names,
    "dependentRequired": st.dictionaries(st.sampled_from(NAMES), _names, max_size=2),
    "propertyNames": st.one_of(
        st.sampled_from(PATTERNS).map(lambda p: {"pattern": p}), st.integers(0, 2).map(lambda n: {"maxLength": n})
    ),
}
_keyword_sets = st.lists(st.sampled_from(sorted(KEYWORDS)), max_size=3, unique=True)
_leaf = _keyword_sets.flatmap(lambda keys: st.fixed_dictionaries({k: KEYWORDS[k] for k in keys}))


def _drop_none(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if v is not None}


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    maybe = st.one_of(st.none(), inner)
    properties = st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    return st.one_of(
        st.builds(
            lambda p, r, ap: _drop_none({"type": "object", "properties": p, "required": r, "additionalProperties": ap}),
            properties,
            _names,
            st.one_of(st.none(), st.booleans(), inner),
        ),
        st.builds(lambda p, up: {"properties": p, "unevaluatedProperties": up}, properties, st.one_of(st.booleans(), inner)),
        st.builds(
            lambda pp, ap: _drop_none({"patternProperties": pp, "additionalProperties": ap}),
            st.dictionaries(st.sampled_from(PATTERNS), inner, max_size=2),
            st.one_of(st.none(), st.booleans()),
        ),
        st.builds(lambda i, n: _drop_none({"type": "array", "items": i, "minItems": n}), inner, st.one_of(st.none(), st.integers(0, 2))),
        st.builds(lambda pi, i: _drop_none({"prefixItems": pi, "items": i}), st.lists(inner, min_size=1, max_size=2), maybe),
        st.builds(lambda pi, ui: {"prefixItems": pi, "unevaluatedItems": ui}, st.lists(inner, min_size=1, max_size=2), st.booleans()),
        st.builds(
            lambda c, lo, hi: _drop_none({"contains": c, "minContains": lo, "maxContains": hi}),
            inner,
            st.one_of(st.none(), st.integers(0, 2)),
            st.one_of(st.none(), st.integers(1, 2)),
        ),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"allOf": xs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"anyOf": xs}),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: {"oneOf": xs}),
        inner.map(lambda x: {"not": x}),
        st.builds(lambda i, t, e: _drop_none({"if": i, "then": t, "else": e}), inner, maybe, maybe),
        st.dictionaries(st.sampled_from(NAMES), inner, max_size=2).map(lambda d: {"dependentSchemas": d}),
    )  # fmt: skip


_inner = st.recursive(st.one_of(st.booleans(), _leaf), _compound, max_leaves=6)
SCHEMAS = st.one_of(
    _inner,
    st.builds(lambda d, t: {"$defs": {"x": d}, "$ref": "#/$defs/x", **t}, _inner, st.fixed_dictionaries({}, optional={"type": _types})),
    _inner.map(
        lambda v: {
            "$defs": {"node": {"type": "object", "properties": {"v": v, "next": {"$ref": "#/$defs/node"}}}},
            "$ref": "#/$defs/node",
        }
    ),
)  # fmt: skip
"""JSON Schemas (2020-12) with every keyword family; booleans as schemas; local and recursive $refs."""

AGREEMENT = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@AGREEMENT
@given(SCHEMAS, st.lists(_json(odd=True), min_size=1, max_size=5))
def test_fast_and_explaining_engines_agree(schema: Any, instances: list[Any]) -> None:
    """jsonschema_rs and the configured jsonschema give the same verdict on generated schemas and values."""
    compiled = CompiledSchema.compile(schema if isinstance(schema, dict) else {"allOf": [schema]})
    assert compiled.problem is None
    explainer = compiled.explainer()
    for instance in instances:
        fast = compiled.fast
        if fast is None:
            continue
        try:
            verdict = fast(instance)
        except ValueError:  # a value jsonschema_rs cannot read: the slow path decides alone
            continue
        assert verdict == explainer.is_valid(instance), (schema, instance)


def _rules() -> st.SearchStrategy[tuple[ParameterRule, ...]]:
    pair = st.lists(st.sampled_from(NAMES), min_size=2, max_size=3, unique=True).map(tuple)
    rule = st.one_of(
        st.builds(ParameterRule, kind=st.sampled_from(["exclusive", "at_least_one", "exactly_one"]), params=pair),
        st.builds(
            lambda when, params: ParameterRule(kind="requires", params=params, when=when),
            st.sampled_from(NAMES),
            pair,
        ),
        st.builds(
            lambda key, value, params: ParameterRule(kind="requires", params=params, when_values={key: value}),
            st.sampled_from(NAMES),
            scalars,
            pair,
        ),
    )
    return st.lists(rule, max_size=2).map(tuple)


PARAMETERS = st.builds(
    lambda props, required, extra: _drop_none(
        {"type": "object", "properties": props, "required": required, "additionalProperties": extra}
    ),
    st.dictionaries(
        st.sampled_from(NAMES),
        st.one_of(
            _inner,
            st.fixed_dictionaries({"type": _types}, optional={"default": scalars, "minimum": st.sampled_from(NUMBERS)}),
        ),
        max_size=4,
    ),
    _names,
    st.one_of(st.none(), st.booleans(), _inner),
)
ARGUMENTS_STRATEGY = st.dictionaries(
    st.sampled_from([*NAMES, "x", "ab"]),
    st.one_of(_json(odd=False), st.sampled_from(["5", "2.5", "true", "[1]", '{"a": 1}', "yes"])),
    max_size=5,
)


@AGREEMENT
@given(PARAMETERS, _rules(), st.booleans(), ARGUMENTS_STRATEGY)
def test_validate_agrees_with_jsonschema_on_the_cleaned_arguments(
    parameters: dict[str, Any], rules: tuple[ParameterRule, ...], strict: bool, arguments: dict[str, Any]
) -> None:
    """validate() is valid exactly when jsonschema accepts its cleaned arguments, and errors say why."""
    validator = _validator(parameters, parameter_rules=rules, strict=strict)
    assert validator.problem is None
    result = validator.validate(arguments)
    assert result.valid == validator.compiled.explainer().is_valid(dict(result.cleaned)), (parameters, arguments)
    assert result.valid == (not result.errors)
    assert result.valid == (result.format_for_llm("t") == "")


@settings(max_examples=300, deadline=None)
@given(PARAMETERS, _rules(), st.booleans(), ARGUMENTS_STRATEGY)
def test_clean_arguments_are_what_the_full_validation_passes_unchanged(
    parameters: dict[str, Any], rules: tuple[ParameterRule, ...], strict: bool, arguments: dict[str, Any]
) -> None:
    """is_clean() says yes only to arguments the full stages pass as they are, without a warning."""
    validator = _validator(parameters, parameter_rules=rules, strict=strict)
    if validator.is_clean(arguments):
        full = validator._validate(arguments)  # the stages is_clean() lets validate() skip
        assert full.valid, (parameters, arguments)
        assert dict(full.cleaned) == arguments
        assert full.warnings == ()
        assert validator.validate(arguments).cleaned is arguments


@pytest.mark.parametrize(
    ("arguments", "clean"),
    [
        ({"a": 1, "b": 2}, True),
        ({"a": "1", "b": 2}, False),  # coerced
        ({"a": 1}, False),  # b's default filled
        ({"a": 1, "b": 2, "c": 3}, False),  # c dropped
        ({"a": 1.5, "b": 2}, False),  # invalid
        ([1, 2], False),
    ],
)
def test_is_clean_is_the_happy_path(arguments: object, clean: bool) -> None:
    """Only arguments needing no change pass is_clean(); validate() does the rest."""
    validator = _validator(_object({"a": {"type": "integer"}, "b": {"type": "integer", "default": 0}}))
    assert validator.is_clean(arguments) is clean


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"pattern": "^a$"}, "a\n"),
        ({"pattern": "^\\d+$"}, "١٢"),
        ({"multipleOf": 0.1}, 0.3),
        ({"format": "uri"}, "foo"),
        ({"format": "email"}, "a@"),
        ({"type": "number"}, math.nan),
        ({"minimum": 0}, -math.inf),
        ({"type": "array"}, (1, 2)),
        ({"patternProperties": {"^\\p{L}$": False}}, {"é": 1}),
        ({"properties": {"a": {}}, "additionalProperties": False, "patternProperties": {"^\\d$": {}}}, {"٣": 1}),
    ],
)
def test_known_differences_of_plain_jsonschema_are_configured_away(schema: dict[str, Any], instance: object) -> None:
    """Each case where plain jsonschema and jsonschema_rs differ agrees once configured (see _checking)."""
    rust = jsonschema_rs.Draft202012Validator(schema, validate_formats=True).is_valid(instance)
    try:
        plain = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).is_valid(instance)
    except Exception:  # noqa: BLE001 - e.g. Python's re rejects \p{L}: plain jsonschema cannot even answer
        plain = None
    assert plain != rust
    assert CompiledSchema.compile(schema).explainer().is_valid(instance) == rust


def test_a_schema_with_pattern_properties_and_unevaluated_properties_is_not_trusted() -> None:
    """The one combination the configured explainer cannot match is kept off the fast path."""
    schema = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert CompiledSchema.compile(schema).fast is None
    assert CompiledSchema.compile({"patternProperties": {"^a": {}}}).fast is not None
