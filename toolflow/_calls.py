r"""Extract tool calls from whatever a model sent (seed 000, step 1).

:func:`parse_tool_call` turns one raw call into a :class:`ToolCall`, or into a
:class:`MalformedCall` whose model-readable error (seed 003's runtime messages)
becomes the call's failure result. It never raises. It recognises four shapes,
given as a mapping, as JSON text, or as an SDK object with ``model_dump()``:

``openai``
    A Chat Completions tool call, as in ``message.tool_calls`` (openai-python
    ``types/chat/chat_completion_message_function_tool_call.py``, seed 003)::

        {"id": "call_abc123", "type": "function",
         "function": {"name": "inspect_location", "arguments": "{\"detail_level\": \"full\"}"}}

    ``arguments`` is JSON text that the model wrote and that may be invalid;
    an empty string means ``{}``, and an already decoded object is accepted
    (as some OpenAI-compatible servers send it, without ``id`` or ``type``).
    Also read as ``openai``: a Responses API item ``{"type": "function_call",
    "call_id", "name", "arguments"}`` (its ``call_id`` is the id results refer
    to) and a legacy ``function_call`` ``{"name", "arguments"}``.
``anthropic``
    A Messages API ``tool_use`` content block (anthropic-sdk-python
    ``types/tool_use_block.py``)::

        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "say", "input": {"message": "hi"}}
``gemini``
    A Gemini API ``functionCall`` part, as in a candidate's ``content.parts``
    (https://ai.google.dev/api/caching#Part; ``id`` is absent in older API
    versions, and a call without one gets ``call_<n>`` as below)::

        {"functionCall": {"id": "8f2b1a", "name": "say", "args": {"message": "hi"}}}

    Also read as ``gemini``: the google-genai SDK's ``model_dump()`` of a part
    (``function_call``), and a bare ``FunctionCall`` that carries an ``id`` key (the
    SDK's ``response.function_calls``; without ``id`` it is read as ``text``, whose
    fields it shares). A whole ``Content`` (``{"role": "model", "parts": [...]}``),
    a ``GenerateContentResponse`` candidate (``{"content": {...}, "finishReason"}``)
    or a whole response (``{"candidates": [...]}``, first candidate) stands for its
    ``functionCall`` parts: :func:`parse_tool_calls` reads each of them (other
    parts are not calls), :func:`parse_tool_call` the one (a content with none or
    several is a malformed call).
``fallback``
    Seed 000's JSON in the message content, for models without native tool
    calling: ``{"tool": NAME, "parameters": {...}, "reasoning": "..."}``.
``text``
    Seed 004's text protocol, the JSON inside a ``<tool_call>`` block:
    ``{"name": NAME, "args": {...}}``. Finding the blocks in the model's text
    (and skipping those inside code fences) is the caller's job.

Defensive parsing (seed 000): when a ``fallback`` or ``text`` call has no (or
empty) ``parameters``/``args`` but other top-level keys, those keys are taken
as the arguments and the call carries a warning saying so; keys beside
non-empty arguments are ignored, also with a warning. Arguments that were
JSON-encoded twice (a JSON string holding an object) are decoded with a warning.

The size guard: arguments whose JSON is larger than ``max_argument_bytes``
(default :data:`DEFAULT_MAX_ARGUMENT_BYTES`, 1 MiB) make a malformed call. JSON
text is measured exactly in UTF-8 bytes; arguments that arrive already decoded
are measured by a cheap estimate of their compact JSON size. Seed 003's system
used 2 KB; pass such a limit where the tools take only short arguments. The policy key
``max_argument_bytes`` sets it for the agent loop and :meth:`toolflow.Engine.execute_batch`, and
:meth:`toolflow.Engine.call` (``toolflow serve``, ``toolflow call``) checks decoded arguments
against it with :func:`arguments_problem`.

Call ids: a call keeps the id its provider gave it (results must refer to it).
A call without one (``fallback`` and ``text`` never have one) gets
``call_<n>``, *n* being its position in the batch (``id_prefix`` changes
``call_``); :func:`parse_tool_calls` also renames later calls that repeat an
earlier call's id, so the ids of one batch are unique, deterministically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, TypeAlias

import attrs

from toolflow._errors import error_text
from toolflow._json import decode_problem, loads
from toolflow._results import ToolResult, json_text

__all__ = [
    "CALL_FORMATS",
    "DEFAULT_MAX_ARGUMENT_BYTES",
    "DEFAULT_MAX_CALLS_PER_TURN",
    "MalformedCall",
    "ParsedCall",
    "ToolCall",
    "arguments_problem",
    "gemini_call_parts",
    "parse_tool_call",
    "parse_tool_calls",
    "with_call_id",
]

CALL_FORMATS = ("openai", "fallback", "anthropic", "text", "direct", "gemini")
"""``direct`` is a call made through the API or ``toolflow call``, not parsed from a model's output."""
"""The values of :attr:`ToolCall.format`; a :class:`MalformedCall` may also say ``"unknown"``."""

DEFAULT_MAX_CALLS_PER_TURN = 128
"""Default of the policy's ``max_calls_per_turn``: the most tool calls one model answer may make.

Models make a few calls a turn, a few dozen at most; a turn of hundreds is a model gone wrong or
one that was talked into it, and the calls of a batch run concurrently. A batch with more runs
none of them, and each call is answered with the limit, so the model can try again with fewer.
"""

DEFAULT_MAX_ARGUMENT_BYTES = 1 << 20
"""Default cap on the JSON of one call's arguments: 1 MiB.

Generous on purpose: it stops a runaway generation or a hostile payload from
being decoded and validated, and no sensible tool argument comes near it. Tools
that take only short arguments can use a much smaller cap (seed 003: 2 KB).
"""

_ENVELOPE_BYTES = 64 * 1024
"""Allowance on top of the argument cap for the rest of a call given as JSON text (name, id, reasoning)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})
# isinstance() tuples, built once (``X | Y`` in a call builds a union each time); dict before the slow ABC.
_TEXT_TYPES = (str, bytes, bytearray)
_MAPPING_TYPES = (dict, Mapping)
_SMALL_TYPES = (bool, float)
_SEQUENCE_TYPES = (list, tuple)
_GEMINI_CALL_KEYS = ("functionCall", "function_call")  # REST JSON, and the google-genai SDK's model_dump()
_FALLBACK_KEYS = frozenset({"tool", "parameters", "reasoning"})
_TEXT_KEYS = frozenset({"name", "args", "reasoning"})
_EXPECTED = (
    'expected an OpenAI tool call {"id", "type": "function", "function": {"name", "arguments"}}, '
    'an Anthropic tool_use block {"type": "tool_use", "id", "name", "input"}, '
    'a Gemini part {"functionCall": {"name", "args"}}, '
    '{"tool": NAME, "parameters": {...}} or {"name": NAME, "args": {...}}'
)


def _copy(value: Mapping[str, Any]) -> Mapping[str, Any]:
    # A plain dict, not a read-only proxy: the argument validator's fast path takes dicts only.
    return dict(value)


def _to_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return value if isinstance(value, tuple) else tuple(value)


@attrs.frozen(kw_only=True)
class ToolCall:
    """One well-formed tool call, ready for look-up and validation.

    Attributes:
        id: The provider's call id, or ``call_<n>`` when it sent none (see the module docs);
            the result handed back to the model refers to it.
        name: The tool asked for (not yet looked up).
        arguments: The arguments as sent (not yet validated): the call's own copy, a plain
            ``dict`` (the validator's fast path takes dicts); treat it as read-only.
        reasoning: Why the model made the call, when the format carries it (``fallback``).
        format: How the call was written: one of :data:`CALL_FORMATS`.
        warnings: What defensive parsing corrected; pass them on with the call's result.
        raw: What the model sent, as given; not compared, not shown in ``repr``.
        approves: For a pipeline call an approver is asked about: the steps that need approval
            and are approved with it (see :mod:`toolflow._pipelines`).
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_copy)
    reasoning: str = ""
    format: str
    warnings: tuple[str, ...] = attrs.field(default=(), converter=_to_tuple)
    raw: Any = attrs.field(default=None, eq=False, repr=False)
    approves: tuple[str, ...] = attrs.field(default=(), eq=False)
    """For a pipeline call put to an approver: the steps the answer covers too, as ``step (tool)``."""


@attrs.frozen(kw_only=True)
class MalformedCall:
    """A call that cannot be run as sent; the model gets :attr:`error` as the call's result.

    Attributes:
        id: As :attr:`ToolCall.id`.
        name: The tool asked for, when the call named one as a string.
        error: What is wrong, for the model: ``Error: Invalid JSON arguments - ...``,
            ``Error: Arguments must be a JSON object, got list``, ``Error: Missing tool name``, ...
        format: As :attr:`ToolCall.format`, or ``"unknown"`` when the shape was not recognised.
        raw: What the model sent, as given; not compared, not shown in ``repr``.
    """

    id: str
    name: str | None = None
    error: str
    format: str
    raw: Any = attrs.field(default=None, eq=False, repr=False)

    def to_result(self) -> ToolResult:
        """Return the failure result that answers this call: its :attr:`error`, nothing else."""
        return ToolResult.failure(self.error)


ParsedCall: TypeAlias = ToolCall | MalformedCall
"""What parsing one raw call gives."""

_PARSED_TYPES = (ToolCall, MalformedCall)


def parse_tool_call(
    raw: object,
    *,
    index: int = 0,
    id_prefix: str = "call_",
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
) -> ParsedCall:
    """Read one tool call in any of the formats of the module docs; never raises on *raw*.

    Args:
        raw: The call: a mapping, JSON text, or an object with ``model_dump()`` (SDK models).
        index: The call's position in its batch; a call without an id gets ``f"{id_prefix}{index}"``.
        id_prefix: The prefix of generated ids.
        max_argument_bytes: The largest JSON of the arguments accepted (see the module docs).

    Raises:
        ValueError: *max_argument_bytes* is not positive.
    """
    _check_limit(max_argument_bytes)
    return _parse_safely(raw, f"{id_prefix}{index}", max_argument_bytes)[0]


def parse_tool_calls(
    raw_calls: Iterable[object] | None,
    *,
    id_prefix: str = "call_",
    max_argument_bytes: int = DEFAULT_MAX_ARGUMENT_BYTES,
) -> list[ParsedCall]:
    """Read the calls of one model turn, in order, with unique ids; never raises on a call.

    A call without an id gets ``f"{id_prefix}{n}"`` (*n* its 0-based position). A
    call repeating the id of an earlier call keeps its place but gets a generated
    id, with a warning when it is well-formed. A generated id that some provider
    id of the batch already uses gets a suffix (``call_1_2``). *raw_calls* may also
    be ``None`` (no calls) or a single call (a mapping or JSON text). Calls parsed already
    (:class:`ToolCall`, :class:`MalformedCall`) are taken as they are, ids included.

    Raises:
        ValueError: *max_argument_bytes* is not positive.
    """
    _check_limit(max_argument_bytes)
    parsed = [_parse_safely(raw, f"{id_prefix}{n}", max_argument_bytes) for n, raw in enumerate(_items(raw_calls))]
    provided = {call.id for call, given in parsed if given}
    if len(provided) == len(parsed):  # every call brought its own id, and no two share one
        return [call for call, _ in parsed]
    return _unique_ids(parsed, provided, id_prefix)


def _items(raw_calls: Iterable[object] | None) -> Iterable[object]:
    """The calls of *raw_calls*: none for ``None``, one for a single call (a mapping or JSON text)."""
    if raw_calls is None:
        return ()
    if isinstance(raw_calls, _SEQUENCE_TYPES):  # the usual, asked first: the ABCs below run Python code
        return raw_calls
    if isinstance(raw_calls, _TEXT_TYPES):
        return (raw_calls,)
    # A pydantic model is iterable (its fields): ask for model_dump() before Iterable.
    if isinstance(raw_calls, _MAPPING_TYPES) or callable(getattr(raw_calls, "model_dump", None)):
        return _container_items(raw_calls)
    if not isinstance(raw_calls, Iterable):
        return (raw_calls,)
    return raw_calls


def _container_items(raw: object) -> Iterable[object]:
    """The ``functionCall`` parts of a Gemini content, candidate or response *raw*; else *raw* as one call."""
    try:
        value = raw if isinstance(raw, _MAPPING_TYPES) else raw.model_dump()  # type: ignore[attr-defined]
        parts = gemini_call_parts(value) if isinstance(value, _MAPPING_TYPES) else None
    except Exception:  # noqa: BLE001 - parsing the call itself reports what is wrong with it
        parts = None
    return (raw,) if parts is None else parts


def gemini_call_parts(value: Mapping[Any, Any]) -> list[object] | None:
    """The ``functionCall`` parts of a Gemini ``Content``, candidate or ``GenerateContentResponse``.

    ``None`` when *value* is none of them (it has no ``parts`` list, at its place); a response
    stands for its first candidate, the one a reply is made of.
    """
    candidates = value.get("candidates")
    if isinstance(candidates, _SEQUENCE_TYPES):
        value = candidates[0] if candidates and isinstance(candidates[0], _MAPPING_TYPES) else {}
        if not value.get("content"):  # a candidate with no content (finishReason SAFETY, ...) calls nothing
            return []
    content = value.get("content")
    if isinstance(content, _MAPPING_TYPES):
        value = content
    parts = value.get("parts")
    if not isinstance(parts, _SEQUENCE_TYPES):
        return None
    return [part for part in parts if isinstance(part, _MAPPING_TYPES) and _gemini_call(part) is not None]


def _gemini_call(part: Mapping[Any, Any]) -> object:
    """The ``functionCall`` of a Gemini part, or ``None`` (a text part; the SDK's dump writes ``None`` for it)."""
    for key in _GEMINI_CALL_KEYS:
        call = part.get(key)
        if call is not None:
            return call
    return None


def with_call_id(raw: object, call_id: str) -> object:
    """A copy of the raw call *raw* (a mapping or a pydantic model) carrying the id *call_id*.

    The id goes where the call's format keeps it: inside a Gemini part's ``functionCall``, at
    the top of any other call. The agent loop writes the ids :func:`parse_tool_calls` gave into
    the assistant message it keeps, so that every result answers an id the message has.
    """
    if isinstance(raw, _MAPPING_TYPES):
        value: Mapping[Any, Any] = raw
    else:
        dump = getattr(raw, "model_dump", None)
        if not callable(dump):
            return raw  # nothing to write an id into (a call the provider sent as bare text)
        value = dump()
    for key in _GEMINI_CALL_KEYS:
        call = value.get(key)
        if isinstance(call, _MAPPING_TYPES):
            return {**value, key: {**call, "id": call_id}}
    return {**value, "id": call_id}


def _unique_ids(parsed: list[tuple[ParsedCall, bool]], provided: set[str], id_prefix: str) -> list[ParsedCall]:
    """The calls of *parsed*, a call that repeats an earlier id or has none given a fresh one.

    *provided* holds the ids the provider gave, which a generated id must not take.
    """
    used: set[str] = set()
    calls: list[ParsedCall] = []
    for n, (call, given) in enumerate(parsed):
        if given and call.id not in used:
            used.add(call.id)
            calls.append(call)
            continue
        fresh = f"{id_prefix}{n}"
        suffix = 1
        while fresh in provided or fresh in used:
            suffix += 1
            fresh = f"{id_prefix}{n}_{suffix}"
        used.add(fresh)
        if fresh == call.id:
            calls.append(call)
        elif given and isinstance(call, ToolCall):
            note = f"call id {call.id!r} was already used by an earlier call of this turn; renamed to {fresh!r}"
            calls.append(attrs.evolve(call, id=fresh, warnings=(*call.warnings, note)))
        else:
            calls.append(attrs.evolve(call, id=fresh))
    return calls


def arguments_problem(arguments: object, max_argument_bytes: int) -> str | None:
    """Why decoded *arguments* (:meth:`toolflow.Engine.call`'s) cannot be run, as the model reads it, or ``None``.

    A mapping with a key that is not a string, or whose JSON is estimated at more than
    *max_argument_bytes* bytes, has a problem; anything else is left to the tool's validator.
    *max_argument_bytes* is a :class:`~toolflow.Policy`'s, positive by construction.
    """
    return _object_problem(arguments, max_argument_bytes) if isinstance(arguments, _MAPPING_TYPES) else None


def _check_limit(limit: int) -> None:
    if limit <= 0:
        msg = f"max_argument_bytes must be positive, got {limit!r}"
        raise ValueError(msg)


def _parse_safely(raw: object, default_id: str, limit: int) -> tuple[ParsedCall, bool]:
    """Parse *raw*; also say whether the call's id came from the provider."""
    if isinstance(raw, _PARSED_TYPES):  # parsed already: the agent loop parses before it gates
        return raw, True
    try:
        return _parse(raw, default_id, limit)
    except Exception as exc:  # noqa: BLE001 - odd objects (a mapping whose items() raises, ...) are malformed calls
        error = f"Error: Could not read the tool call - {error_text(exc)}"
        return MalformedCall(id=default_id, error=error, format="unknown", raw=raw), False


class _Shape(NamedTuple):
    """The parts of a call as its format writes them, not yet checked."""

    format: str
    id: object = None
    name: object = None
    arguments: object = None
    reasoning: object = None
    warnings: tuple[str, ...] = ()
    problem: str | None = None
    """Why the call cannot be read any further, if it cannot."""


def _parse(raw: object, default_id: str, limit: int) -> tuple[ParsedCall, bool]:
    value, error = _load(raw, limit)
    if error is not None or not isinstance(value, _MAPPING_TYPES):
        error = error or f"Error: Unrecognised tool call - {_EXPECTED}; got {_kind(value, article=True)}"
        return MalformedCall(id=default_id, error=error, format="unknown", raw=raw), False
    shape = _shape(value)
    given = _id(shape.id)
    ident = given or default_id
    if shape.problem is not None:
        return MalformedCall(id=ident, error=shape.problem, format=shape.format, raw=raw), given is not None
    warnings = shape.warnings
    if shape.id is not None and given is None:
        warnings = (*warnings, f"call id {shape.id!r} is not a non-empty string; using {ident!r}")
    name, problem = _check_name(shape.name)
    if problem is not None:
        return MalformedCall(id=ident, error=problem, format=shape.format, raw=raw), given is not None
    arguments, problem, notes = _decode_arguments(shape.arguments, limit)
    if problem is not None:
        return MalformedCall(id=ident, name=name, error=problem, format=shape.format, raw=raw), given is not None
    call = ToolCall(
        id=ident,
        name=name,
        arguments=arguments,
        reasoning=_reasoning(shape.reasoning),
        format=shape.format,
        warnings=(*warnings, *notes),
        raw=raw,
    )
    return call, given is not None


def _shape(value: Mapping[Any, Any]) -> _Shape:
    """Which of the module docs' formats the call *value* is written in, and its parts."""
    kind = value.get("type")
    if kind == "tool_use" or (
        "name" in value and isinstance(value.get("input"), _MAPPING_TYPES) and "args" not in value
    ):
        return _Shape("anthropic", value.get("id"), value.get("name"), value.get("input"))
    if "function" in value:
        return _openai_shape(value, kind)
    if kind == "function_call":  # the Responses API
        return _Shape("openai", value.get("call_id", value.get("id")), value.get("name"), value.get("arguments"))
    if "tool" in value:
        return _defensive(value, "fallback", "tool", "parameters", _FALLBACK_KEYS)
    if "name" in value and "arguments" in value:  # a legacy function_call
        return _Shape("openai", value.get("id"), value["name"], value["arguments"])
    if "name" in value and "args" in value and "id" in value:  # a bare Gemini FunctionCall
        return _Shape("gemini", value.get("id"), value.get("name"), value.get("args"))
    if "name" in value:
        return _defensive(value, "text", "name", "args", _TEXT_KEYS)
    return _gemini_shape(value)


def _gemini_shape(value: Mapping[Any, Any]) -> _Shape:
    """A Gemini ``functionCall`` part, or a content (candidate, response) holding exactly one."""
    call = _gemini_call(value)
    if call is None:
        parts = gemini_call_parts(value)
        if parts is None:
            error = f"Error: Unrecognised tool call - {_EXPECTED}; got {_kind(value, article=True)}"
            return _Shape("unknown", problem=error)
        if len(parts) != 1:
            problem = f"Error: Expected one functionCall part in the Gemini content, got {len(parts)}"
            return _Shape("gemini", problem=problem)
        call = _gemini_call(parts[0])  # type: ignore[arg-type] # gemini_call_parts gives mappings
    if not isinstance(call, _MAPPING_TYPES):
        problem = f"Error: 'functionCall' must be an object with 'name' and 'args', got {_kind(call)}"
        return _Shape("gemini", problem=problem)
    return _Shape("gemini", call.get("id"), call.get("name"), call.get("args"))


def _openai_shape(value: Mapping[Any, Any], kind: object) -> _Shape:
    """A Chat Completions tool call ``{"id", "type": "function", "function": {"name", "arguments"}}``."""
    call_id, function = value.get("id"), value["function"]
    if kind is not None and kind != "function":
        problem = f"Error: Unsupported tool call type {kind!r} - only 'function' tool calls can be run"
        return _Shape("openai", call_id, problem=problem)
    if not isinstance(function, _MAPPING_TYPES):
        problem = f"Error: 'function' must be an object with 'name' and 'arguments', got {_kind(function)}"
        return _Shape("openai", call_id, problem=problem)
    return _Shape("openai", call_id, function.get("name"), function.get("arguments"))


def _load(raw: object, limit: int) -> tuple[object, str | None]:
    """Decode a call given as JSON text or as an SDK model; return ``(value, error)``."""
    if isinstance(raw, _TEXT_TYPES):
        if _text_size_over(raw, limit + _ENVELOPE_BYTES):
            return None, f"Error: Tool call is too large - more than {limit + _ENVELOPE_BYTES} bytes of JSON"
        try:
            return loads(raw), None
        except (ValueError, RecursionError) as exc:
            return None, f"Error: Invalid JSON tool call - {decode_problem(exc)}"
    if not isinstance(raw, _MAPPING_TYPES):
        dump = getattr(raw, "model_dump", None)
        if callable(dump):
            return dump(), None
    return raw, None


def _defensive(value: Mapping[Any, Any], fmt: str, name_key: str, arguments_key: str, meta: frozenset[str]) -> _Shape:
    """Read a ``fallback`` or ``text`` call (it has no id).

    Stray top-level keys become the arguments when the call has none (seed 000's defensive parsing).
    """
    stray = {key: item for key, item in value.items() if key not in meta}
    arguments = value.get(arguments_key)
    if stray and _is_empty(arguments):
        note = f"parameters were sent at the top level of the call; accepted: {_names(stray)}"
        return _Shape(fmt, None, value.get(name_key), stray, value.get("reasoning"), (note,))
    warnings = (f"keys outside {arguments_key!r} were ignored: {_names(stray)}",) if stray else ()
    return _Shape(fmt, None, value.get(name_key), arguments, value.get("reasoning"), warnings)


def _is_empty(arguments: object) -> bool:
    if arguments is None:
        return True
    if isinstance(arguments, str):
        return not arguments.strip() or arguments.strip() in ("{}", "null")
    return isinstance(arguments, Mapping) and not arguments


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _check_name(name: object) -> tuple[str, str | None]:
    if name is None or (isinstance(name, str) and not name.strip()):
        return "", "Error: Missing tool name"
    if not isinstance(name, str):
        return "", f"Error: Tool name must be a string, got {_kind(name)}"
    return name.strip(), None


def _decode_arguments(arguments: object, limit: int) -> tuple[Mapping[str, Any], str | None, tuple[str, ...]]:
    """Return ``(arguments, error, warnings)``; *error* is ``None`` when they are usable."""
    notes: tuple[str, ...] = ()
    value = arguments
    if value is None:
        return _EMPTY, None, notes
    if isinstance(value, str):
        if _text_size_over(value, limit):
            return (
                _EMPTY,
                f"Error: Arguments are too large - more than {limit} bytes of JSON; send smaller arguments",
                notes,
            )
        if not value.strip():
            return _EMPTY, None, notes
        try:
            value = loads(value)
        except (ValueError, RecursionError) as exc:
            return _EMPTY, f"Error: Invalid JSON arguments - {decode_problem(exc)}", notes
        if value is None:
            return _EMPTY, None, notes
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                inner = loads(value)
            except (ValueError, RecursionError):
                inner = None
            if isinstance(inner, dict):
                value = inner
                notes = ("the arguments were JSON-encoded twice; decoded them",)
        if not isinstance(value, dict):
            return _EMPTY, f"Error: Arguments must be a JSON object, got {_kind(value)}", notes
        return value, None, notes  # decoded JSON: string keys only
    if not isinstance(value, _MAPPING_TYPES):
        return _EMPTY, f"Error: Arguments must be a JSON object, got {_kind(value)}", notes
    problem = _object_problem(value, limit)
    if problem is not None:
        return _EMPTY, problem, notes
    return value, None, notes


def _object_problem(value: Mapping[Any, Any], limit: int) -> str | None:
    """Check decoded arguments: string keys, and JSON of at most *limit* bytes (estimated)."""
    size = 2
    nested: list[object] = []
    for key, member in value.items():
        if type(key) is not str and not isinstance(key, str):
            return f"Error: Argument names must be strings, got {json_text(key)}"  # repr() of a long int raises
        # One test per value of the exact types JSON decodes to (every call of every door
        # passes here); anything else, subclasses included, is estimated with the nested values.
        kind = type(member)
        if kind is str:
            size += len(key) + len(member) + 6
        elif kind is int:
            size += len(key) + member.bit_length() // 3 + 5
        elif member is None or kind is bool or kind is float:
            size += len(key) + 10
        else:
            size += len(key) + 4
            nested.append(member)
        if size > limit:
            break
    if size <= limit and nested:
        size += _estimated_json_size(nested, limit - size)
    if size > limit:
        return f"Error: Arguments are too large - more than {limit} bytes of JSON; send smaller arguments"
    return None


def _text_size_over(text: str | bytes | bytearray, limit: int) -> bool:
    """Whether *text* is more than *limit* bytes in UTF-8, encoding it only when its length cannot tell."""
    if not isinstance(text, str) or len(text) > limit:
        return len(text) > limit
    if len(text) * 4 <= limit or text.isascii():
        return False
    return len(text.encode("utf-8", "surrogatepass")) > limit


def _estimated_json_size(value: object, limit: int) -> int:
    """Estimate the size of *value*'s compact JSON, stopping as soon as it passes *limit*.

    Iterative, so deep nesting cannot overflow the stack; a cycle only grows the
    estimate until it passes the limit.
    """
    size = 0
    stack = [value]
    while stack and size <= limit:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 3
        elif isinstance(item, _SMALL_TYPES) or item is None:
            size += 6
        elif isinstance(item, int):
            size += item.bit_length() // 3 + 2
        elif isinstance(item, _MAPPING_TYPES):
            size += 2
            for key, member in item.items():
                size += len(key) + 4 if isinstance(key, str) else 24
                stack.append(member)
        elif isinstance(item, _SEQUENCE_TYPES):
            size += 2
            stack.extend(item)
        else:
            size += 24
    return size


def _reasoning(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _names(mapping: Mapping[Any, Any]) -> str:
    return ", ".join(repr(key) for key in mapping)


def _kind(value: object, *, article: bool = False) -> str:
    """Name *value*'s type the way a model reads JSON (seed 003 says ``got list``)."""
    if isinstance(value, Mapping):
        if not article:
            return "object"
        keys = list(value)
        shown = ", ".join(repr(key) for key in keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"an object with keys {shown}" if keys else "an empty object"
    if value is None:
        name = "null"
    elif isinstance(value, bool):
        name = "boolean"
    elif isinstance(value, int):
        name = "integer"
    elif isinstance(value, float):
        name = "number"
    elif isinstance(value, str):
        name = "string"
    elif isinstance(value, _SEQUENCE_TYPES):
        name = "list"
    else:
        name = type(value).__name__
    if not article:
        return name
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}" if name != "null" else "null"
