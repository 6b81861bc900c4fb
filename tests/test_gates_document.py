"""The gates document (``toolflow._gates_document``): its two readers, a saved run and a stored conversation, agree.

A saved run refuses a document its JSON Schema rejects (a ``UsageError``); a conversation's part
of the fleet's state reads one as nothing stored. Hypothesis draws documents near the shape
(every field sometimes of another type, a key missing or one too many) and checks that whatever
one reader takes, the other takes too, and that ``Gates.restore`` can take it.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from toolflow import ToolResult, UsageError
from toolflow._conversation import FORMAT, KEY, empty_part, part_of
from toolflow._gates import Gates
from toolflow._gates_document import GATES_SCHEMA, gates_ok
from toolflow._rules import ToolRule
from toolflow._run_state import _SCHEMA, SavedRun

SAVED_RUN: dict[str, Any] = {
    "version": 1,
    "format": "openai",
    "system": "",
    "history": [],
    "run": {
        "iteration": 0,
        "errors": 0,
        "restarts": 0,
        "tools_offered": True,
        "last_turn": "token_critical",
        "required": [],
        "final_answer": "",
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
    },
    "decision": None,
    "pending": [],
    "held": None,
    "gates": {"rules": None, "succeeded_loop": [], "succeeded_session": []},
    "retention": {"message": 0, "until": {}},
}
"""A saved run with nothing in it but a gates document to replace."""


def saved_run_takes(gates: object) -> bool:
    """Whether a saved run with *gates* loads (else it is refused with a message)."""
    try:
        SavedRun.from_dict({**SAVED_RUN, "gates": gates})
    except UsageError:
        return False
    return True


def conversation_takes(gates: object) -> bool:
    """Whether a conversation's stored part with *gates* is read as it is (else: as nothing stored)."""
    part = part_of({KEY: {"v": FORMAT, "turns": 1, "gates": gates}})
    if part == empty_part():
        return False
    assert part["gates"] == gates
    return True


# --------------------------------------------------------------------------- documents near the shape

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 3) | st.floats(-2, 3) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=4,
)
"""Any JSON value, small: what a damaged or foreign document may hold anywhere."""


def _or_junk(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """*valid*, mostly; now and then any JSON value instead."""
    return st.integers(0, 15).flatmap(lambda dice: _JSON if dice == 0 else valid)


_NAME = st.sampled_from(["a", "b", "c"])
_COUNT = st.integers(0, 15).flatmap(
    lambda dice: st.sampled_from([-1, 2.0, 1.5, True]) if dice == 0 else st.integers(0, 5)
)
_NAMES = _or_junk(st.lists(_or_junk(_NAME), max_size=3))
_COUNTS = _or_junk(st.dictionaries(_NAME, _COUNT, max_size=3))


@st.composite
def _object(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """An object with *fields*, but now and then one of them missing or a key of no field's."""
    document = draw(st.fixed_dictionaries(fields))
    if draw(st.integers(0, 15)) == 0:
        del document[draw(st.sampled_from(sorted(document)))]
    if draw(st.integers(0, 15)) == 0:
        document[draw(st.sampled_from(["extra", "v", "rules"]))] = draw(_JSON)
    return document


_RULES = _object(
    {
        "turn_calls": _COUNTS,
        "run_calls": _COUNTS,
        "last": _or_junk(st.none() | _NAME),
        "called": _or_junk(st.booleans()),
        "succeeded": _NAMES,
    }
)
_GATES = _or_junk(
    _object({"rules": _or_junk(st.none() | _RULES), "succeeded_loop": _NAMES, "succeeded_session": _NAMES})
).filter(lambda gates: gates is not None)  # a part's null gates: no gates' state kept, no document


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gates=_GATES)
def test_what_one_reader_takes_the_other_takes_and_gates_can_restore(gates: Any) -> None:
    """A saved run and a stored conversation take the same gates documents, and restore() takes what they take."""
    taken = saved_run_takes(gates)
    assert conversation_takes(gates) == taken
    assert gates_ok(gates) == taken
    if taken:
        ruled = Gates()
        ruled.follow((ToolRule(kind="max_calls", tool="a", per_run=3),))
        ruled.restore(gates)
        Gates().restore(gates)


def test_the_dump_of_gates_that_saw_calls_is_taken_by_both() -> None:
    """What Gates.dump writes after calls under rules (counts, a last call, successes) is a gates document."""
    gates = Gates()
    gates.follow((ToolRule(kind="max_calls", tool="a", per_run=3), ToolRule(kind="before_exit", tools=("b",))))
    assert gates.ruled("a", ["a", "b"]) is None
    gates.succeeded("a")
    gates.answered("b", ToolResult(success=True, data="done"))
    dumped = gates.dump()
    assert dumped["rules"]["run_calls"] == {"a": 1}
    assert saved_run_takes(dumped)
    assert conversation_takes(dumped)
    assert saved_run_takes(Gates().dump())
    assert conversation_takes(Gates().dump())


@pytest.mark.parametrize(
    ("gates", "where"),
    [
        ({"rules": None, "succeeded_loop": [1], "succeeded_session": []}, ".gates.succeeded_loop[0]"),
        ({"rules": {"run_calls": {}}, "succeeded_loop": [], "succeeded_session": []}, ".gates.rules"),
        ({"rules": None, "succeeded_loop": []}, ".gates"),
    ],
)
def test_a_bad_gates_document_is_refused_by_both_readers(gates: dict[str, Any], where: str) -> None:
    """The saved run's message says where; the conversation starts afresh (fail closed)."""
    with pytest.raises(UsageError) as refused:
        SavedRun.from_dict({**SAVED_RUN, "gates": gates})
    assert str(refused.value).startswith(f"the saved run: not a saved run: at {where}: ")
    assert part_of({KEY: {"v": FORMAT, "turns": 1, "gates": gates}}) == empty_part()


def test_the_saved_run_schema_holds_the_one_gates_schema() -> None:
    """One schema: the saved run's "gates" record is the gates document's, not a copy of it."""
    assert _SCHEMA["properties"]["gates"] is GATES_SCHEMA
