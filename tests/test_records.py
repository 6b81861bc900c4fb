"""unchecked_init builds the same records as their attrs __init__, and refuses classes it cannot build."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import attrs
import pytest

from toolflow._calls import ToolCall
from toolflow._executor import HistoryEntry
from toolflow._loop import TurnRecord
from toolflow._policy import LoopDecision
from toolflow._providers import ModelRequest, ModelResponse, Usage
from toolflow._records import unchecked_init
from toolflow._results import ToolResult
from toolflow._validation import ValidationResult

_CALL = ToolCall(id="c1", name="add", arguments={"a": 1}, format="openai")
_RESULT = ToolResult(success=True, data=2, extra={"attempts": 1})
_DECISION = LoopDecision(should_continue=True, reason="normal", message="continue", iterations_remaining=3)

# Each record with field values already in their final form (what the callers guarantee).
CASES: list[tuple[type[Any], dict[str, Any]]] = [
    (ToolCall, {"id": "c1", "name": "add", "arguments": {"a": 1}, "format": "openai", "warnings": ("w",)}),
    (ToolResult, {"success": False, "data": [1], "error": "no", "warnings": ("w",), "extra": _RESULT.extra}),
    (ToolResult, {"success": True, "data": {"x": None}}),
    (ValidationResult, {"valid": True, "errors": (), "warnings": (), "cleaned": {"a": 1}}),
    (HistoryEntry, {"call_id": "c1", "tool_name": "add", "call": _CALL, "result": _RESULT, "success": True}),
    (LoopDecision, {"should_continue": False, "reason": "terminal", "message": "'say' ended the loop"}),
    (
        TurnRecord,
        {"turn": 2, "text": "", "entries": (), "usage": Usage(prompt_tokens=3), "decision": _DECISION, "duration": 0.5},
    ),
    (ModelRequest, {"format": "openai", "system": "s", "messages": ({"role": "user", "content": "hi"},), "turn": 4}),
    (ModelResponse, {"message": MappingProxyType({"role": "assistant", "content": "ok"}), "finish_reason": "stop"}),
]


@pytest.mark.parametrize(("cls", "values"), CASES, ids=[f"{cls.__name__}-{n}" for n, (cls, _) in enumerate(CASES)])
def test_unchecked_records_equal_constructed_ones(cls: type[Any], values: dict[str, Any]) -> None:
    """The record has every field, defaults included, as the attrs __init__ sets it, and stays frozen."""
    fast = unchecked_init(cls)(**values)
    slow = cls(**values)
    assert type(fast) is cls
    assert fast == slow
    assert repr(fast) == repr(slow)
    assert attrs.asdict(fast, recurse=False) == attrs.asdict(slow, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fast.__setattr__(attrs.fields(cls)[0].name, None)


def test_missing_and_unknown_fields_are_refused_as_by_init() -> None:
    """The function's parameters are the __init__'s: keyword-only, required where __init__ requires them."""
    make = unchecked_init(LoopDecision)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'message'"):
        make(should_continue=True, reason="normal")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        make(should_continue=True, reason="normal", message="m", bogus=1)
    with pytest.raises(TypeError, match="positional"):
        make(True, "normal", "m")


@attrs.frozen
class _WithFactory:
    items: list[int] = attrs.Factory(list)


@attrs.define(slots=False)
class _NotSlotted:
    value: int = 0


class _NotAttrs:
    pass


@pytest.mark.parametrize("cls", [_WithFactory, _NotSlotted, _NotAttrs])
def test_classes_it_cannot_build_are_refused(cls: type[Any]) -> None:
    """A factory default, a class without slots or a plain class is a TypeError when the function is made."""
    with pytest.raises(TypeError):
        unchecked_init(cls)
