"""toolflow._json gives exactly what the json module gives: the same values, the same text, the same errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._json import encoder, loads

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities: json writes and reads them
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def _outcome(function: Any, value: Any) -> tuple[str, Any]:
    try:
        result = function(value)
    except Exception as exc:  # noqa: BLE001 - the exceptions are what is compared
        return "error", (type(exc), str(exc))
    return "value", result


def _same(left: tuple[str, Any], right: tuple[str, Any]) -> bool:
    # NaN != NaN: compare the texts json would write of both values.
    if left[0] == right[0] == "value":
        return json.dumps(left[1], sort_keys=True) == json.dumps(right[1], sort_keys=True)
    return left == right


@given(_JSON_VALUES, st.sampled_from(["", " ", "\n", "x", "]", ",1"]), st.sampled_from(["", " ", "\t"]))
def test_loads_matches_json_on_documents_and_their_variations(value: Any, tail: str, head: str) -> None:
    """Written documents, with whitespace or garbage around them, decode (or fail) as json.loads decodes them."""
    for separators in ((",", ":"), (", ", ": ")):
        text = head + json.dumps(value, separators=separators) + tail
        assert _same(_outcome(loads, text), _outcome(json.loads, text)), text


@settings(max_examples=300)
@given(st.text(alphabet='{}[]",:0123456789.eE+-truefalsnul \\/bNIiy\u00e9\ud800', max_size=30))
def test_loads_matches_json_on_arbitrary_text(text: str) -> None:
    """Text that is mostly not JSON fails with json's own error, at the same position."""
    assert _same(_outcome(loads, text), _outcome(json.loads, text)), text


@pytest.mark.parametrize("text", [b'{"a": 1}', bytearray(b"[1]"), "", "   ", '"\\ud800"', "1" * 5000, "[" * 100_000])
def test_loads_hands_other_input_to_json(text: Any) -> None:
    """Bytes, empty text, lone surrogates, huge numbers and deep nesting behave as in json.loads."""
    assert _same(_outcome(loads, text), _outcome(json.loads, text))


class _Odd:
    def __str__(self) -> str:
        return "odd"


_ANY_VALUES = st.recursive(
    _JSON_VALUES | st.builds(_Odd) | st.sets(st.integers(), max_size=3) | st.tuples(st.integers(), st.text(max_size=3)),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.booleans(), st.none(), st.floats()), children, max_size=4
        )
    ),
    max_leaves=20,
)


@given(
    _ANY_VALUES,
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, str, repr]),
    st.sampled_from([(",", ":"), (", ", ": ")]),
)
def test_encoder_matches_json(
    value: Any, ensure_ascii: bool, allow_nan: bool, sort_keys: bool, default: Any, separators: tuple[str, str]
) -> None:
    """Any value, with any options, is written (or refused) exactly as json.JSONEncoder writes it."""
    ours = encoder(
        ensure_ascii=ensure_ascii, allow_nan=allow_nan, sort_keys=sort_keys, default=default, separators=separators
    )
    theirs = json.JSONEncoder(
        ensure_ascii=ensure_ascii, allow_nan=allow_nan, sort_keys=sort_keys, default=default, separators=separators
    ).encode
    assert _outcome(ours, value) == _outcome(theirs, value)


def test_encoder_reports_cycles_as_json_does() -> None:
    """A list that contains itself is json's ValueError, not a RecursionError."""
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference detected"):
        encoder()(cycle)
    assert encoder(allow_nan=False)([1.5, "é"]) == '[1.5,"\\u00e9"]'
    with pytest.raises(ValueError, match="Out of range float values"):
        encoder(allow_nan=False)([math.nan])
