"""History formats: every message matches the provider's published shapes, and each format reads back what it wrote.

The shapes are checked with the official SDKs' own request types (``openai``, ``anthropic`` and
google-genai's for ``gemini``), by the helpers of ``tests/_sdk_shapes.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _sdk_shapes import (
    anthropic_message,
    anthropic_request,
    conforms,
    gemini_content,
    keys_of,
    openai_message,
    openai_request,
)
from anthropic.types import ToolParam
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionToolParam
from openai.types.shared_params import FunctionDefinition

from toolflow._calls import MalformedCall, ToolCall, parse_tool_calls
from toolflow._errors import UsageError
from toolflow._executor import HistoryEntry
from toolflow._history import (
    AnthropicFormat,
    FallbackFormat,
    GeminiFormat,
    HistoryFormat,
    OpenAIFormat,
    TextFormat,
    get_format,
)
from toolflow._loader import load_specs
from toolflow._model import ToolSpec
from toolflow._providers import HISTORY_FORMATS
from toolflow._results import ToolResult

ROOT = Path(__file__).resolve().parent.parent

# -- checking shapes against the SDKs ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (openai_message, {"role": "tool", "tool_call_id": "call_1", "content": "{}", "name": "say"}),
        (openai_message, {"role": "tool", "content": "{}"}),
        (
            openai_message,
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "a", "arguments": {}}}],
            },
        ),
        (
            anthropic_message,
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]},
        ),
        (anthropic_message, {"role": "user", "content": [{"type": "tool_result", "id": "t", "content": "{}"}]}),
        (
            anthropic_message,
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "a", "input": "{}"}]},
        ),
    ],
)
def test_shape_checks_catch_wrong_keys_and_types(check: Any, message: dict[str, Any]) -> None:
    """The checks are not vacuous: an unknown key, a missing key or a wrong type fails them."""
    with pytest.raises((AssertionError, ValueError)):
        check(message)


# -- fixtures ----------------------------------------------------------------------------------------------------

INSPECT = ToolSpec(
    name="inspect_location",
    description="Describe the current location.",
    parameters={
        "type": "object",
        "properties": {"detail_level": {"type": "string", "enum": ["brief", "full"]}},
        "required": ["detail_level"],
        "additionalProperties": False,
    },
)
SAY = ToolSpec(
    name="say",
    description="Say something to the room.",
    category="terminal",
    parameters={"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
)
PING = ToolSpec(name="ping", description="Check the connection.")
TOOLS = (INSPECT, SAY, PING)

CALLS = (
    ToolCall(id="call_abc123", name="inspect_location", arguments={"detail_level": "full"}, format="openai"),
    ToolCall(id="call_def456", name="say", arguments={"message": "Hello, <b>world</b> ✓"}, format="openai"),
)


def entry(call_id: str, name: str, result: ToolResult) -> HistoryEntry:
    call = ToolCall(id=call_id, name=name, arguments={}, format="openai")
    return HistoryEntry(call_id=call_id, tool_name=name, call=call, result=result, success=result.success)


OK = ToolResult(success=True, data={"location": "Town Square", "exits": ["north", "east"]})
FAILED = ToolResult.failure("Error: Missing required parameter: message")
RESULTS = (
    entry("call_abc123", "inspect_location", OK),
    entry("call_def456", "say", FAILED),
    entry("call_ghi789", "ping", ToolResult(success=True, data="pong")),
)


def shipped_tools() -> tuple[ToolSpec, ...]:
    loaded = load_specs([ROOT / "specs"])
    assert loaded.ok, loaded.diagnostics
    assert loaded.tools
    return loaded.tools


def fmt(name: str) -> HistoryFormat:
    return get_format(name)


def round_trip(history: HistoryFormat, text: str, calls: Sequence[ToolCall]) -> tuple[str, list[ToolCall]]:
    """What the engine gets back from the assistant message *history* writes for *text* and *calls*."""
    read_text, raw = history.read_response(history.assistant_message(text, calls))
    parsed = parse_tool_calls(raw)
    assert all(isinstance(call, ToolCall) for call in parsed), parsed
    return read_text, [call for call in parsed if isinstance(call, ToolCall)]


# -- get_format --------------------------------------------------------------------------------------------------


def test_get_format_returns_each_format() -> None:
    """get_format knows the five formats of HISTORY_FORMATS, each of its own class and name."""
    classes = {
        "openai": OpenAIFormat,
        "anthropic": AnthropicFormat,
        "fallback": FallbackFormat,
        "text": TextFormat,
        "gemini": GeminiFormat,
    }
    for name in HISTORY_FORMATS:
        history = get_format(name)
        assert isinstance(history, classes[name])
        assert history.name == name


def test_unknown_format_is_a_usage_error() -> None:
    """An unknown format name is a UsageError listing the formats and suggesting the closest."""
    with pytest.raises(UsageError, match=r"unknown history format 'antropic'.*did you mean 'anthropic'"):
        get_format("antropic")


# -- openai ------------------------------------------------------------------------------------------------------


def test_openai_tool_definitions_of_the_shipped_specs_are_chat_completions_tools() -> None:
    """Every shipped tool exports as a ChatCompletionToolParam with only the keys the SDK knows."""
    tools = shipped_tools()
    definitions = fmt("openai").tool_definitions(tools)
    assert [d["function"]["name"] for d in definitions] == [t.name for t in tools]
    for definition in definitions:
        conforms(ChatCompletionToolParam, definition)
        keys_of(ChatCompletionToolParam, definition)
        keys_of(FunctionDefinition, definition["function"])


def test_openai_assistant_message_with_calls() -> None:
    """The assistant message carries tool_calls with compact JSON arguments and content None (seed 000 §7)."""
    message = fmt("openai").assistant_message("", CALLS)
    assert message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc123",
                "type": "function",
                "function": {"name": "inspect_location", "arguments": '{"detail_level":"full"}'},
            },
            {
                "id": "call_def456",
                "type": "function",
                "function": {"name": "say", "arguments": '{"message":"Hello, <b>world</b> ✓"}'},
            },
        ],
    }
    openai_message(message)


def test_openai_assistant_message_without_calls_has_no_tool_calls_key() -> None:
    """A final answer is a plain assistant message: no tool_calls key at all (an empty list is refused)."""
    message = fmt("openai").assistant_message("The square is empty.", [])
    assert message == {"role": "assistant", "content": "The square is empty."}
    openai_message(message)


def test_openai_result_messages_answer_each_call_in_order() -> None:
    """One role=tool message per result, in call order, with the result's JSON as content."""
    messages = fmt("openai").result_messages(RESULTS)
    assert [m["tool_call_id"] for m in messages] == ["call_abc123", "call_def456", "call_ghi789"]
    assert [json.loads(m["content"]) for m in messages] == [r.result.to_dict() for r in RESULTS]
    assert json.loads(messages[1]["content"]) == {"success": False, "data": None, "error": FAILED.error}
    for message in messages:
        assert set(message) == {"role", "tool_call_id", "content"}
        openai_message(message)


def test_openai_read_response_returns_content_and_tool_calls_as_given() -> None:
    """read_response hands back the content text and the tool_calls list untouched, for parse_tool_calls."""
    tool_calls = [
        {"id": "call_1", "type": "function", "function": {"name": "say", "arguments": '{"message": "hi"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "say", "arguments": "{not json"}},
    ]
    text, raw = fmt("openai").read_response({"role": "assistant", "content": "Greeting.", "tool_calls": tool_calls})
    assert text == "Greeting."
    assert raw == tool_calls
    assert raw[0] is tool_calls[0]
    good, bad = parse_tool_calls(raw)
    assert good == ToolCall(id="call_1", name="say", arguments={"message": "hi"}, format="openai")
    assert isinstance(bad, MalformedCall)
    assert bad.id == "call_2"
    assert bad.error.startswith("Error: Invalid JSON arguments - ")


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, ""),
        ("plain", "plain"),
        (
            [{"type": "text", "text": "one"}, {"type": "refusal", "refusal": "no"}, {"type": "text", "text": "two"}],
            "one\ntwo",
        ),
    ],
)
def test_openai_read_response_reads_every_content_form(content: object, text: str) -> None:
    """Content may be null, a string or a list of parts; the text parts are the visible text."""
    assert fmt("openai").read_response({"role": "assistant", "content": content}) == (text, [])


def test_openai_read_response_takes_a_legacy_function_call() -> None:
    """A legacy function_call (no tool_calls) is read as the one call."""
    legacy = {"name": "ping", "arguments": "{}"}
    text, raw = fmt("openai").read_response({"role": "assistant", "content": None, "function_call": legacy})
    assert (text, raw) == ("", [legacy])
    assert parse_tool_calls(raw) == [ToolCall(id="call_0", name="ping", arguments={}, format="openai")]


async def test_openai_exchange_is_a_valid_chat_completions_request() -> None:
    """User, assistant with calls, one tool message per call: a whole request validates with the SDK's types."""
    history = fmt("openai")
    system = await history.system_prompt("You are a helpful game assistant.", TOOLS)
    assert system == "You are a helpful game assistant."
    messages = [
        history.user_message("What is around me?"),
        history.assistant_message("Let me look.", CALLS),
        *history.result_messages(RESULTS[:2]),
        history.assistant_message("You are in the town square.", []),
    ]
    openai_request(system, messages, history.tool_definitions(TOOLS))


# -- anthropic ---------------------------------------------------------------------------------------------------


def test_anthropic_tool_definitions_of_the_shipped_specs_are_tool_params() -> None:
    """Every shipped tool exports as an Anthropic ToolParam (name, description, input_schema)."""
    tools = shipped_tools()
    definitions = fmt("anthropic").tool_definitions(tools)
    assert [d["name"] for d in definitions] == [t.name for t in tools]
    for definition in definitions:
        conforms(ToolParam, definition)
        keys_of(ToolParam, definition)
        assert definition["input_schema"]["type"] == "object"


def test_anthropic_assistant_message_has_text_then_tool_use_blocks() -> None:
    """The assistant's content is a text block, then one tool_use block per call with its input object."""
    message = fmt("anthropic").assistant_message("Let me look.", CALLS)
    assert message == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_abc123", "name": "inspect_location", "input": {"detail_level": "full"}},
            {"type": "tool_use", "id": "call_def456", "name": "say", "input": {"message": "Hello, <b>world</b> ✓"}},
        ],
    }
    anthropic_message(message)


def test_anthropic_assistant_message_writes_no_empty_text_block() -> None:
    """The API refuses empty text blocks, so calls without text give tool_use blocks only."""
    message = fmt("anthropic").assistant_message("", CALLS[:1])
    assert [block["type"] for block in message["content"]] == ["tool_use"]
    anthropic_message(message)


def test_anthropic_results_are_one_user_message_with_is_error_on_failures() -> None:
    """All results of a turn are tool_result blocks of ONE user message, in call order; failures say is_error."""
    messages = fmt("anthropic").result_messages(RESULTS)
    assert len(messages) == 1
    (message,) = messages
    assert message["role"] == "user"
    blocks = message["content"]
    assert [b["tool_use_id"] for b in blocks] == ["call_abc123", "call_def456", "call_ghi789"]
    assert [b.get("is_error") for b in blocks] == [None, True, None]
    assert [json.loads(b["content"]) for b in blocks] == [r.result.to_dict() for r in RESULTS]
    anthropic_message(message)


def test_anthropic_no_results_give_no_message() -> None:
    """No results, no message: an empty user message would be refused."""
    assert fmt("anthropic").result_messages([]) == []


def test_anthropic_read_response_returns_text_and_tool_use_blocks() -> None:
    """Text blocks make the visible text; tool_use blocks are the calls, as given; thinking is neither."""
    blocks = [
        {"type": "thinking", "thinking": "The user wants a look.", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_01A", "name": "inspect_location", "input": {"detail_level": "full"}},
        {"type": "text", "text": "And greet."},
        {"type": "tool_use", "id": "toolu_01B", "name": "say", "input": {"message": "hi"}},
    ]
    text, raw = fmt("anthropic").read_response({"role": "assistant", "content": blocks})
    assert text == "Let me look.\nAnd greet."
    assert raw == [blocks[2], blocks[4]]
    assert [(c.id, c.name, c.format) for c in parse_tool_calls(raw) if isinstance(c, ToolCall)] == [
        ("toolu_01A", "inspect_location", "anthropic"),
        ("toolu_01B", "say", "anthropic"),
    ]


def test_anthropic_read_response_reads_string_content() -> None:
    """A plain string content is the text, with no calls."""
    assert fmt("anthropic").read_response({"role": "assistant", "content": "Hi."}) == ("Hi.", [])


async def test_anthropic_exchange_is_a_valid_messages_request() -> None:
    """User, assistant tool_use, user tool_result, final answer: a whole request validates with the SDK's types."""
    history = fmt("anthropic")
    system = await history.system_prompt("You are a helpful game assistant.", TOOLS)
    assert system == "You are a helpful game assistant."
    user = history.user_message("What is around me?")
    assert user == {"role": "user", "content": "What is around me?"}
    messages = [
        user,
        history.assistant_message("Let me look.", CALLS),
        *history.result_messages(RESULTS[:2]),
        history.assistant_message("You are in the town square.", []),
    ]
    anthropic_request(system, messages, history.tool_definitions(TOOLS))


# -- fallback and text: plain messages any provider takes --------------------------------------------------------


@pytest.mark.parametrize("name", ["fallback", "text"])
async def test_prompted_formats_send_plain_messages_both_apis_accept(name: str) -> None:
    """Fallback and text send no tool definitions, and every message is a plain role/content message."""
    history = fmt(name)
    assert history.tool_definitions(TOOLS) == []
    system = await history.system_prompt("You are a helpful game assistant.", TOOLS)
    messages = [
        history.user_message("What is around me?"),
        history.assistant_message("Let me look.", CALLS),
        *history.result_messages(RESULTS),
        history.assistant_message("You are in the town square.", []),
    ]
    for message in messages:
        assert set(message) == {"role", "content"}
        assert isinstance(message["content"], str)
    openai_request(system, messages, [])
    anthropic_request(system, messages, [])


def test_fallback_results_are_user_messages_prefixed_with_the_tool_name() -> None:
    """Each result is a user message "[TOOL RESULT: name]" + newline + its JSON, one per call, in order (seed 000)."""
    messages = fmt("fallback").result_messages(RESULTS)
    assert [m["role"] for m in messages] == ["user"] * 3
    heads = [m["content"].split("\n", 1) for m in messages]
    assert [head for head, _ in heads] == [
        "[TOOL RESULT: inspect_location]",
        "[TOOL RESULT: say]",
        "[TOOL RESULT: ping]",
    ]
    assert [json.loads(body) for _, body in heads] == [r.result.to_dict() for r in RESULTS]


def test_text_results_are_one_user_message_of_tool_result_blocks() -> None:
    """All results of a turn are <tool_result name="..."> blocks of ONE user message, joined by newlines (seed 004)."""
    messages = fmt("text").result_messages(RESULTS)
    assert len(messages) == 1
    assert messages[0]["role"] == "user"
    lines = messages[0]["content"].split("\n")
    pattern = re.compile(r'^<tool_result name="([^"]*)">(.*)</tool_result>$')
    matches = [pattern.match(line) for line in lines]
    assert all(matches), lines
    assert [m[1] for m in matches if m] == ["inspect_location", "say", "ping"]
    assert [json.loads(m[2]) for m in matches if m] == [r.result.to_dict() for r in RESULTS]
    assert fmt("text").result_messages([]) == []


# -- every format ------------------------------------------------------------------------------------------------


def result_texts(name: str, messages: list[dict[str, Any]]) -> list[str]:
    """The result text of each call, out of the messages of format *name*."""
    if name == "openai":
        return [m["content"] for m in messages]
    if name == "anthropic":
        return [block["content"] for block in messages[0]["content"]]
    if name == "fallback":
        return [m["content"].split("\n", 1)[1] for m in messages]
    if name == "gemini":  # the result's JSON object, or {"output": text} for a result cut short
        responses = [part["functionResponse"]["response"] for part in messages[0]["parts"]]
        return [r["output"] if set(r) == {"output"} else json.dumps(r) for r in responses]
    return re.findall(r"<tool_result name=\"[^\"]*\">(.*?)</tool_result>", messages[0]["content"])


@pytest.mark.parametrize("name", HISTORY_FORMATS)
def test_results_are_cut_to_max_chars(name: str) -> None:
    """A long result is cut to max_chars with the visible truncation marker, in every format."""
    big = entry("call_1", "dump", ToolResult(success=True, data="x" * 5000))
    small = entry("call_2", "ping", ToolResult(success=True, data="pong"))
    texts = result_texts(name, fmt(name).result_messages([big, small], max_chars=200))
    assert len(texts) == 2
    assert len(texts[0]) <= 200
    assert re.search(r"\.\.\. \[truncated \d+ characters\]$", texts[0])
    assert json.loads(texts[1]) == {"success": True, "data": "pong"}


@pytest.mark.parametrize("name", HISTORY_FORMATS)
def test_failures_reach_the_model_with_their_error(name: str) -> None:
    """A failed call's result says success false and carries the error, in every format."""
    texts = result_texts(name, fmt(name).result_messages([RESULTS[1]]))
    assert json.loads(texts[0]) == {"success": False, "data": None, "error": FAILED.error}


@pytest.mark.parametrize("name", HISTORY_FORMATS)
def test_user_message_is_plain(name: str) -> None:
    """A user message is {"role": "user", "content": text} in every format but gemini's parts."""
    expected = {"role": "user", "parts": [{"text": "Hi."}]} if name == "gemini" else {"role": "user", "content": "Hi."}
    assert fmt(name).user_message("Hi.") == expected


@pytest.mark.parametrize("name", HISTORY_FORMATS)
def test_several_calls_round_trip_in_order(name: str) -> None:
    """Two calls and a text written by assistant_message are read back, in order, by every format."""
    text, calls = round_trip(fmt(name), "Let me look.", CALLS)
    assert text == "Let me look."
    assert [(c.name, dict(c.arguments)) for c in calls] == [(c.name, dict(c.arguments)) for c in CALLS]
    if name in {"openai", "anthropic", "gemini"}:
        assert [c.id for c in calls] == [c.id for c in CALLS]
    else:
        assert [c.id for c in calls] == ["call_0", "call_1"]


# -- round trip, property-based ----------------------------------------------------------------------------------

NAMES = st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True)
IDS = st.from_regex(r"[a-zA-Z0-9_-]{1,40}", fullmatch=True)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=5)
MARKERS = {
    "openai": (),
    "anthropic": (),
    "fallback": ("{", "[", "```", "~~~"),
    "text": ("<tool_call", "</tool_call", "```", "~~~"),
    "gemini": (),
}
"""What a format's visible text may not contain: the marks its calls are found by."""


@st.composite
def turns(draw: st.DrawFn, name: str) -> tuple[str, list[ToolCall]]:
    """A text without the format's markers and up to four calls with unique ids."""
    markers = MARKERS[name]
    text = draw(st.text(max_size=60).filter(lambda t: not any(m in t for m in markers)))
    ids = draw(st.lists(IDS, unique=True, max_size=4))
    calls = [
        ToolCall(
            id=call_id,
            name=draw(NAMES),
            arguments=draw(ARGUMENTS),
            reasoning=draw(st.text(max_size=20)) if name == "fallback" else "",
            format="direct",
        )
        for call_id in ids
    ]
    return text, calls


@pytest.mark.parametrize("name", HISTORY_FORMATS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_assistant_messages_round_trip(name: str, data: st.DataObject) -> None:
    """read_response(assistant_message(text, calls)) gives back the text and each call's name and arguments."""
    history = fmt(name)
    text, calls = data.draw(turns(name))
    message = history.assistant_message(text, calls)
    if name == "openai":
        openai_message(message)
    elif name == "anthropic":
        anthropic_message(message)
    elif name == "gemini":
        gemini_content(message)
    read_text, parsed = round_trip(history, text, calls)
    blank_dropped = text if text.strip() else ""
    expected = {"openai": text, "anthropic": blank_dropped, "gemini": blank_dropped}.get(name, text.strip())
    assert read_text == expected
    assert [(c.name, dict(c.arguments)) for c in parsed] == [(c.name, dict(c.arguments)) for c in calls]
    assert all(not c.warnings for c in parsed)
    if name in {"openai", "anthropic", "gemini"}:
        assert [c.id for c in parsed] == [c.id for c in calls]
    if name == "fallback":
        assert [c.reasoning for c in parsed] == [c.reasoning for c in calls]


@st.composite
def result_batches(draw: st.DrawFn) -> list[HistoryEntry]:
    """Up to five results with unique call ids, some failed, with arbitrary JSON data."""
    ids = draw(st.lists(IDS, unique=True, min_size=1, max_size=5))
    batch = []
    for call_id in ids:
        success = draw(st.booleans())
        data = draw(JSON_VALUES)
        result = ToolResult(success=True, data=data) if success else ToolResult.failure(draw(st.text(max_size=30)))
        batch.append(entry(call_id, draw(NAMES), result))
    return batch


@pytest.mark.parametrize("name", HISTORY_FORMATS)
@settings(max_examples=60, deadline=None)
@given(batch=result_batches())
def test_every_result_is_answered_once_in_call_order(name: str, batch: list[HistoryEntry]) -> None:
    """Whatever the results, each format answers every call exactly once, in order, with the result's JSON."""
    messages = fmt(name).result_messages(batch)
    texts = result_texts(name, messages)
    assert [json.loads(text) for text in texts] == [json.loads(json.dumps(e.result.to_dict())) for e in batch]
    if name == "openai":
        assert [m["tool_call_id"] for m in messages] == [e.call_id for e in batch]
        for message in messages:
            openai_message(message)
    elif name == "anthropic":
        (message,) = messages
        assert [b["tool_use_id"] for b in message["content"]] == [e.call_id for e in batch]
        assert [b.get("is_error", False) for b in message["content"]] == [not e.success for e in batch]
        anthropic_message(message)
    elif name == "gemini":
        (message,) = messages
        responses = [part["functionResponse"] for part in message["parts"]]
        assert [(r["id"], r["name"]) for r in responses] == [(e.call_id, e.tool_name) for e in batch]
        gemini_content(message)
    elif name == "fallback":
        assert [m["content"].split("\n", 1)[0] for m in messages] == [f"[TOOL RESULT: {e.tool_name}]" for e in batch]
    else:
        (message,) = messages
        assert re.findall(r'<tool_result name="([^"]*)">', message["content"]) == [e.tool_name for e in batch]
