"""ToolResult and result normalisation (seed 000 §4): shapes, output_schema, the size cap for models."""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import pytest

from toolflow._model import ToolSpec
from toolflow._results import DEFAULT_MAX_RESULT_CHARS, ToolResult, truncate_text
from toolflow._validation import ResultValidator


def _normalize(value: object, output_schema: dict[str, Any] | None = None) -> ToolResult:
    spec = ToolSpec(name="tool", output_schema=output_schema)
    return ResultValidator.for_spec(spec).normalize(value)


# --- ToolResult ----------------------------------------------------------------------


def test_to_dict_of_a_success_has_success_and_data_only() -> None:
    """A plain success is {"success": true, "data": ...}: no error, no empty warnings."""
    assert ToolResult(success=True, data={"x": 1}).to_dict() == {"success": True, "data": {"x": 1}}


def test_to_dict_puts_error_warnings_and_extra_in_order() -> None:
    """error and warnings appear when set, then the extra keys, in that order."""
    result = ToolResult(success=False, data=None, error="boom", warnings=["slow"], extra={"retryable": True})
    assert list(result.to_dict().items()) == [
        ("success", False),
        ("data", None),
        ("error", "Error: boom"),
        ("warnings", ["slow"]),
        ("retryable", True),
    ]


def test_failure_builds_a_failed_result_with_other_fields() -> None:
    """ToolResult.failure(error, **kw) sets success False and the error."""
    result = ToolResult.failure("not found", warnings=("w",))
    assert (result.success, result.error, result.warnings, result.data) == (False, "Error: not found", ("w",), None)


def test_warnings_become_a_tuple() -> None:
    """Warnings given as a list are stored as a tuple, so results stay immutable."""
    assert ToolResult(success=True, warnings=["a", "b"]).warnings == ("a", "b")


def test_extra_may_not_use_a_standard_key() -> None:
    """An extra key that would overwrite success/data/error/warnings is refused."""
    with pytest.raises(ValueError, match="'success'"):
        ToolResult(success=True, extra={"success": False})


def test_extra_is_read_only_and_copied() -> None:
    """The extra mapping is a read-only copy of what was given."""
    given = {"count": 1}
    result = ToolResult(success=True, extra=given)
    given["count"] = 2
    assert result.extra == {"count": 1}
    with pytest.raises(TypeError):
        result.extra["count"] = 3  # type: ignore[index]


def test_evolve_keeps_results_valid() -> None:
    """attrs.evolve works on results (the executor adds warnings this way)."""
    result = attrs.evolve(ToolResult(success=True, data=1), warnings=("x",))
    assert result.to_dict() == {"success": True, "data": 1, "warnings": ["x"]}


# --- text for the model --------------------------------------------------------------


def test_text_for_model_is_compact_json() -> None:
    """The text is JSON without spaces, non-ASCII kept as is."""
    result = ToolResult(success=True, data={"place": "Café", "n": [1, 2]})
    assert result.text_for_model() == '{"success":true,"data":{"place":"Café","n":[1,2]}}'


def test_text_for_model_under_the_cap_is_untouched() -> None:
    """A text exactly at the cap is not cut."""
    text = ToolResult(success=True, data="x" * 10).text_for_model()
    assert ToolResult(success=True, data="x" * 10).text_for_model(len(text)) == text


def test_text_for_model_truncates_with_a_visible_marker() -> None:
    """A long result is cut to the cap and says how many characters were removed."""
    result = ToolResult(success=True, data="x" * 1000)
    full = result.text_for_model(10_000)
    text = result.text_for_model(100)
    kept = text[: text.index("... [truncated")]
    assert len(text) == 100
    assert full.startswith(kept)
    assert text == f"{kept}... [truncated {len(full) - len(kept)} characters]"


@pytest.mark.parametrize("cap", [40, 41, 45, 50, 99, 100, 101, 999, 1000])
def test_truncation_always_fits_the_cap(cap: int) -> None:
    """Wherever the marker's digit count changes, text plus marker is exactly the cap."""
    text = truncate_text("y" * 5000, cap)
    assert len(text) == cap
    removed = int(text.rsplit(" ", 2)[-2])
    assert removed == 5000 - text.index("... [truncated")


def test_a_cap_smaller_than_the_marker_returns_the_marker() -> None:
    """A tiny cap cannot hold any text: only the marker is returned."""
    assert truncate_text("z" * 50, 5) == "... [truncated 50 characters]"


@pytest.mark.parametrize("cap", [0, -1])
def test_a_cap_must_be_positive(cap: int) -> None:
    """max_chars of zero or less is a programming error."""
    with pytest.raises(ValueError, match="positive"):
        ToolResult(success=True).text_for_model(cap)


def test_default_cap_is_the_module_constant() -> None:
    """Without max_chars the cap is DEFAULT_MAX_RESULT_CHARS (16,000)."""
    assert DEFAULT_MAX_RESULT_CHARS == 16_000
    text = ToolResult(success=True, data="a" * 20_000).text_for_model()
    assert len(text) == DEFAULT_MAX_RESULT_CHARS
    assert "... [truncated" in text


class _Opaque:
    def __str__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ((1, 2), [1, 2]),
        ({"s": frozenset()}, {"s": "frozenset()"}),
        (_Opaque(), "<opaque>"),
        ({(1, 2): "tuple key"}, {"(1, 2)": "tuple key"}),
        ({"n": math.nan, "i": math.inf}, {"n": "nan", "i": "inf"}),
        (b"raw", "b'raw'"),
    ],
)
def test_text_for_model_never_fails_on_odd_data(data: object, expected: object) -> None:
    """Values JSON cannot express are written as text, and the result is still valid JSON."""
    text = ToolResult(success=True, data=data).text_for_model()
    assert json.loads(text)["data"] == expected


def test_text_for_model_survives_a_cycle() -> None:
    """A self-referencing structure is written with a '<cycle>' marker instead of failing."""
    data: list[object] = [1]
    data.append(data)
    assert json.loads(ToolResult(success=True, data=data).text_for_model())["data"] == [1, "<cycle>"]


# --- normalisation ---------------------------------------------------------------------


def test_every_error_starts_with_error_once() -> None:
    """The error gets `Error: ` when it lacks it, once; evolve and a success's None keep it so."""
    result = ToolResult.failure("boom")
    assert result.error == "Error: boom"
    assert ToolResult.failure("Error: boom").error == "Error: boom"
    assert attrs.evolve(result, warnings=("w",)).error == "Error: boom"
    assert ToolResult(success=False, error="error: lower case").error == "Error: error: lower case"
    assert ToolResult(success=True).error is None
    assert json.loads(result.text_for_model())["error"] == "Error: boom"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, {"success": False, "data": None, "error": "Error: tool returned no result"}),
        (5, {"success": True, "data": 5}),
        ("done", {"success": True, "data": "done"}),
        ([1, 2], {"success": True, "data": [1, 2]}),
        ({"location": "Town Square"}, {"success": True, "data": {"location": "Town Square"}}),
        ({"error": "not found"}, {"success": True, "data": {"error": "not found"}}),
        ({"success": True, "data": [1]}, {"success": True, "data": [1]}),
        (
            {"success": True, "location": "Town Square", "exits": 3},
            {"success": True, "data": None, "location": "Town Square", "exits": 3},
        ),
        (
            {"success": False, "error": "boom", "retryable": True},
            {"success": False, "data": None, "error": "Error: boom", "retryable": True},
        ),
        (
            {"success": False},
            {"success": False, "data": None, "error": "Error: the tool reported a failure without an error message"},
        ),
        ({"success": True, "error": None, "data": 1}, {"success": True, "data": 1}),
        ({"success": True, "warnings": ["slow"]}, {"success": True, "data": None, "warnings": ["slow"]}),
        ({"success": True, "warnings": "slow"}, {"success": True, "data": None, "warnings": ["slow"]}),
        (
            {"success": "yes"},
            {
                "success": False,
                "data": None,
                "error": "Error: invalid tool result: 'success' must be a boolean, got \"yes\"",
            },
        ),
        (
            {"success": 1, "data": 2},
            {"success": False, "data": None, "error": "Error: invalid tool result: 'success' must be a boolean, got 1"},
        ),
        (
            {"success": False, "error": {"code": 7}},
            {
                "success": False,
                "data": None,
                "error": "Error: invalid tool result: 'error' must be a string, got {\"code\": 7}",
            },
        ),
    ],
)
def test_normalize(value: object, expected: dict[str, Any]) -> None:
    """Each shape a tool may return becomes the expected result dictionary."""
    assert _normalize(value).to_dict() == expected


def test_normalize_keeps_a_tool_result() -> None:
    """A ToolResult returned by a tool is taken as it is."""
    result = ToolResult(success=True, data=3, warnings=("w",))
    assert _normalize(result) is result


def test_normalize_never_raises_on_an_odd_mapping() -> None:
    """A mapping whose keys are not strings still normalises; its keys become text."""
    assert _normalize({"success": True, 7: "seven"}).extra == {"7": "seven"}


# --- output_schema ---------------------------------------------------------------------

COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 0}, "items": {"type": "array"}},
    "required": ["count"],
}


def test_output_schema_accepts_matching_data() -> None:
    """Data that matches the output_schema passes through unchanged."""
    assert _normalize({"count": 2, "items": []}, COUNT_SCHEMA).to_dict() == {
        "success": True,
        "data": {"count": 2, "items": []},
    }


def test_output_schema_violation_is_a_failure_naming_it() -> None:
    """Data that does not match becomes a failure that names the path, the rule and the value."""
    result = _normalize({"success": True, "data": {"count": "3"}}, COUNT_SCHEMA)
    assert result.to_dict() == {
        "success": False,
        "data": None,
        "error": "Error: the tool's result does not match its output_schema: "
        'data.count: Expected integer (expected: type: integer) (got: "3")',
    }


def test_output_schema_reports_several_violations() -> None:
    """Each violation is listed, missing properties included."""
    result = _normalize({"items": 5}, COUNT_SCHEMA)
    assert result.error == (
        "Error: the tool's result does not match its output_schema: data.count: Missing required property; "
        "data.items: Expected array (expected: type: array) (got: 5)"
    )


def test_output_schema_checks_the_data_of_a_bare_value() -> None:
    """A bare value is the data that must match."""
    result = _normalize("text", {"type": "integer"})
    assert result.error == (
        "Error: the tool's result does not match its output_schema: data: Expected integer (expected: type: integer) "
        '(got: "text")'
    )


def test_output_schema_checks_the_flat_keys_when_there_is_no_data() -> None:
    """Seed 000's flat result dictionary is checked as the mapping of its other keys."""
    ok = _normalize({"success": True, "count": 1}, COUNT_SCHEMA)
    bad = _normalize({"success": True, "count": -1}, COUNT_SCHEMA)
    assert ok.success
    assert ok.extra == {"count": 1}
    assert bad.error == (
        "Error: the tool's result does not match its output_schema: data.count: Must be at least 0 "
        "(expected: minimum: 0) (got: -1)"
    )


def test_output_schema_is_not_applied_to_failures() -> None:
    """A failure is passed on as it is, whatever its data."""
    result = _normalize({"success": False, "error": "boom", "data": "partial"}, COUNT_SCHEMA)
    assert result.to_dict() == {"success": False, "data": "partial", "error": "Error: boom"}


def test_output_schema_format_is_asserted() -> None:
    """Formats are checked in results too."""
    result = _normalize({"success": True, "data": "not-a-date"}, {"type": "string", "format": "date"})
    assert result.error == (
        "Error: the tool's result does not match its output_schema: data: Must be a valid date "
        '(expected: format: date) (got: "not-a-date")'
    )


def test_an_unusable_output_schema_fails_every_success() -> None:
    """An output_schema that is not JSON Schema turns successes into failures that say so."""
    result = _normalize(1, {"type": "integr"})
    assert result.error == (
        "Error: the tool's output_schema cannot be used: the schema is not valid JSON Schema: "
        "'integr' is not a JSON Schema type; did you mean 'integer'? (at 'type')"
    )
