"""The result of one tool call, as the engine hands it on: to the caller, to history, to the model.

Every implementation's return value is normalised to a :class:`ToolResult` (see
``toolflow._validation.ResultValidator``). Its dictionary form follows seed 000 §4::

    {"success": true, "data": ..., "error": "..." (failures), "warnings": [...] (when any), ...extra}

and :meth:`ToolResult.text_for_model` is that dictionary as compact JSON, capped in size.

Every error text starts with :data:`ERROR_PREFIX` (``Error: ``, seed 003): the field's converter
adds it to text that lacks it (a tool's own ``{"success": false, "error": ...}``, an exception's
message, a remote server's), so the model, the Python API and ``toolflow serve`` read the same text.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

import attrs

from toolflow._errors import expect, expect_names
from toolflow._json import encoder

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "ERROR_PREFIX",
    "MAX_WRITTEN_DEPTH",
    "RESERVED_RESULT_KEYS",
    "STEP_STATUSES",
    "ResultMessage",
    "StepRecord",
    "ToolResult",
    "json_text",
    "truncate_text",
    "valid_text",
    "without_prefix",
]

DEFAULT_MAX_RESULT_CHARS = 16_000
"""Default cap on the text of one result handed to a model, in characters.

About 4,000 tokens at the usual 3.5-4 characters per token: 3 % of a 128k-token context and
12 % of a 32k one. Seed 001's token advisory warns at 60 % of the context, so one oversized
result (a whole web page, a log dump) must not be able to reach that alone, while ordinary
structured results (a location, a search page, a memory list) stay far below the cap and are
never cut. Raise it per call for tools whose results are known to be large and useful.
"""

ERROR_PREFIX = "Error: "
"""How every error text of a result starts (seed 003: ``"Error: " + specific problem``).

The shape after it: what went wrong, naming the tool and the bad value where there is one, then
(after ``; ``) what to do, when there is something to do:
``Error: 'refund' was not approved, so it did not run; do not retry it unchanged``.
"""

RESERVED_RESULT_KEYS = frozenset({"success", "data", "error", "warnings"})
"""Keys of the result dictionary that :attr:`ToolResult.extra` may not use."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _freeze_extra(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not value:
        return _EMPTY
    if type(value) is not dict:  # a dict needs no check (the ABC's isinstance costs more than the copy)
        expect(value, Mapping, "ToolResult: extra", "a mapping or None")
    if not RESERVED_RESULT_KEYS.isdisjoint(value):
        clash = sorted(RESERVED_RESULT_KEYS.intersection(value))
        msg = f"extra keys must not be standard result keys, got {clash!r}"
        raise ValueError(msg)
    return MappingProxyType(dict(value))


def _error_text(value: Any) -> Any:
    """*value* as :func:`valid_text` with :data:`ERROR_PREFIX` in front (or not text: checked later)."""
    if type(value) is not str:
        return value
    value = valid_text(value)
    return value if value.startswith(ERROR_PREFIX) else ERROR_PREFIX + value


def without_prefix(error: str) -> str:
    """*error* without its :data:`ERROR_PREFIX`: for quoting a step's error inside another one."""
    return error.removeprefix(ERROR_PREFIX)


def _to_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if not value:
        return ()
    if not isinstance(value, tuple):
        expect_names(value, "ToolResult: warnings", what="strings")
    return tuple(valid_text(text) if type(text) is str else text for text in value)


@attrs.frozen(kw_only=True)
class ToolResult:
    """The normalised outcome of a tool call.

    Attributes:
        success: Whether the tool did what was asked.
        data: The tool's output (any JSON-like value) for a success; may be set on failures too.
        error: What went wrong, for failures: always starting with :data:`ERROR_PREFIX`, which
            is added when the text given lacks it (the model reads this text as it is).
        warnings: Notes for the caller and the model (dropped parameters, truncation, ...).
        extra: Any other keys the tool put in its result dictionary, kept in order; never one of
            :data:`RESERVED_RESULT_KEYS`. Read-only.
        steps: For a pipeline call, a :class:`StepRecord` per step (per item of a ``for_each``).
    """

    success: bool
    data: Any = None
    error: str | None = attrs.field(default=None, converter=_error_text)
    warnings: tuple[str, ...] = attrs.field(default=(), converter=_to_tuple)
    extra: Mapping[str, Any] = attrs.field(default=_EMPTY, converter=_freeze_extra)
    steps: tuple[StepRecord, ...] = attrs.field(default=(), eq=False, repr=False)
    """For a pipeline call: what each of its steps did, in the order they were written (the
    trace: not part of :meth:`to_dict`, so models never see it; not cached)."""

    def __attrs_post_init__(self) -> None:
        if self.success is not True and self.success is not False:
            expect(self.success, bool, "ToolResult: success", "True or False")
        if self.error is not None and type(self.error) is not str:
            expect(self.error, str, "ToolResult: error", "a string or None")

    @classmethod
    def failure(cls, error: str, **kw: Any) -> ToolResult:
        """Return a failed result with *error* (``Error: `` added when it lacks it); other fields from *kw*."""
        return cls(success=False, error=error, **kw)

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a plain dictionary, in the key order models and history see.

        ``success`` and ``data`` always; ``error`` only when set; ``warnings`` only when there
        are any; then the ``extra`` keys.
        """
        out: dict[str, Any] = {"success": self.success, "data": self.data}
        if self.error is not None:
            out["error"] = self.error
        if self.warnings:
            out["warnings"] = list(self.warnings)
        out.update(self.extra)
        return out

    def text_for_model(self, max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> str:
        """Return :meth:`to_dict` as compact JSON of at most *max_chars* characters.

        Longer text is cut and ends with the visible marker ``... [truncated N characters]``
        (N counts the characters removed), so the model knows the result is incomplete; the
        cut text is then no longer valid JSON. Values JSON cannot express are written as text
        (:func:`json_text`). Never raises for odd data.

        Raises:
            ValueError: *max_chars* is not positive.
        """
        text = json_text(self.to_dict())
        # truncate_text's checks, inline: every result of every turn comes this way.
        return text if max_chars > 0 and len(text) <= max_chars else truncate_text(text, max_chars)


STEP_STATUSES = ("succeeded", "failed", "skipped", "cancelled", "not_run")
"""What became of a pipeline's step: it ran and succeeded or failed, its ``when:`` was false, it
was cancelled while it ran (a failed step's ``on_error: stop``, the pipeline's timeout, a kill),
or it never started (a stop, or the pipeline ended first)."""


class ResultMessage(Protocol):
    """What a history format needs of one call's result: :class:`toolflow.HistoryEntry` has these."""

    @property
    def call_id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def result(self) -> ToolResult: ...


@attrs.frozen(kw_only=True)
class StepRecord:
    """What one step of a pipeline call did (one record per item of a ``for_each`` step).

    Attributes:
        step: The step's name.
        tool: The tool it calls.
        status: One of :data:`STEP_STATUSES`.
        call_id: The id of the step's call (``<pipeline call id>.<step>``, ``...[<item>]``).
        item: The item's index, for a ``for_each`` step.
        arguments: The arguments the step's templates gave (``None`` when they were not rendered).
        result: The call's result (its ``extra`` has ``attempts`` and ``cached``; a pipeline
            step's has its own :attr:`ToolResult.steps`); ``None`` when the call did not end.
        duration: Seconds the call took, when it ran.
    """

    step: str
    tool: str
    status: str
    call_id: str = ""
    item: int | None = None
    arguments: Mapping[str, Any] | None = None
    result: ToolResult | None = None
    duration: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data (``toolflow call --trace --output json``, ``toolflow run --output json``)."""
        out: dict[str, Any] = {"step": self.step, "tool": self.tool, "status": self.status, "call_id": self.call_id}
        if self.item is not None:
            out["item"] = self.item
        if self.arguments is not None:
            out["arguments"] = dict(self.arguments)
        if self.result is not None:
            out["result"] = self.result.to_dict()
            if self.result.steps:
                out["steps"] = [record.to_dict() for record in self.result.steps]
        if self.duration is not None:
            out["duration_ms"] = round(self.duration * 1000, 3)
        return out


def truncate_text(text: str, max_chars: int) -> str:
    """Cap *text* at *max_chars* characters, ending a cut text with ``... [truncated N characters]``.

    The marker counts against the cap; a cap smaller than the marker itself returns the marker
    alone.

    Raises:
        ValueError: *max_chars* is not positive.
    """
    if max_chars <= 0:
        msg = f"max_chars must be positive, got {max_chars!r}"
        raise ValueError(msg)
    if len(text) <= max_chars:
        return text
    # The marker's length depends on how much is cut, which depends on the marker: settle it.
    # keep only ever shrinks, so this ends after a step or two.
    keep = max_chars
    while True:
        marker = f"... [truncated {len(text) - keep} characters]"
        fits = max(0, max_chars - len(marker))
        if fits == keep:
            return text[:keep] + marker
        keep = fits


_result_json = encoder(ensure_ascii=False, allow_nan=False, default=str)

MAX_WRITTEN_DEPTH = 100
"""How deeply nested data :func:`json_text` writes when the JSON encoder cannot write it whole.

Deeper values are written as ``"<too deep>"``. Real results nest a dozen levels or so; data
that Python's encoder refuses (it recurses once per level) comes from a bug or a hostile service.
"""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    r"""*text* with each lone surrogate replaced by U+FFFD, the replacement character.

    A lone surrogate is not a character, and UTF-8 cannot carry it: Python makes one from a
    file name that is not UTF-8 (``os.listdir``'s ``surrogateescape``) and from a JSON escape
    such as ``"\ud800"`` in a model's answer. Text that leaves toolflow (for a model, an MCP
    client, a terminal) must be encodable, or its writer fails.
    """
    return _LONE_SURROGATE.sub("\ufffd", text)


def json_text(value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None) -> str:
    """*value* as JSON text; what JSON cannot express is written as text. Never raises for odd data.

    Non-string keys become their ``str()``, NaN and infinities ``"nan"``/``"inf"``, other objects
    their ``str()`` (or ``"<TypeName object>"`` when that fails too), a cycle ``"<cycle>"``, an
    integer too long for Python to write in digits a note of its length, and a value nested
    deeper than :data:`MAX_WRITTEN_DEPTH` levels ``"<too deep>"``, when the JSON encoder
    cannot write the whole value as it is; a lone surrogate becomes U+FFFD (:func:`valid_text`),
    so the text is always valid UTF-8. Compact unless *indent* or *separators* (as
    :func:`json.dumps` takes them) are given.
    """
    compact = indent is None and separators is None
    layout: dict[str, Any] = {"indent": indent, "separators": (",", ":") if compact else separators}
    try:
        if compact:
            text = _result_json(value)
        else:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str, **layout)
    except Exception:  # noqa: BLE001 - a cycle, NaN, a key, an int too long, a depth, a __str__ that raises
        text = json.dumps(_jsonable(value, set(), 0), ensure_ascii=False, **layout)
    return valid_text(text)


def _jsonable(value: Any, seen: set[int], depth: int) -> Any:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return value if _writable(value) else f"<an integer of about {_digits(value):,} digits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        if depth >= MAX_WRITTEN_DEPTH:
            return "<too deep>"
        if id(value) in seen:
            return "<cycle>"
        seen = seen | {id(value)}
        try:
            if isinstance(value, Mapping):
                return {_key(k): _jsonable(v, seen, depth + 1) for k, v in value.items()}
            return [_jsonable(v, seen, depth + 1) for v in value]
        except Exception:  # noqa: BLE001 - a collection whose iteration fails is written as text
            return _text(value)
    return _text(value)


def _writable(value: int) -> bool:
    """Whether Python writes *value* in digits (``sys.set_int_max_str_digits`` bounds it)."""
    limit = sys.get_int_max_str_digits()
    return limit == 0 or _digits(value) <= limit


def _digits(value: int) -> int:
    """The number of decimal digits of *value*, or one more: an upper bound from its length in bits."""
    return max(1, int(abs(value).bit_length() * math.log10(2)) + 1)


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - an object whose __str__ fails is named by its type
        return f"<{type(value).__qualname__} object>"


def _key(key: object) -> str:
    return key if isinstance(key, str) else _text(key)
