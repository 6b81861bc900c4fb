"""Extracting tool calls from what a model sent: every format, every malformed variant, ids, the size guard."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolflow._calls import (
    CALL_FORMATS,
    DEFAULT_MAX_ARGUMENT_BYTES,
    MalformedCall,
    ToolCall,
    arguments_problem,
    parse_tool_call,
    parse_tool_calls,
)
from toolflow._results import ToolResult
from toolflow.testing import ToolflowProject

pytest_plugins = ["toolflow.testing"]

TOP_LEVEL = "parameters were sent at the top level of the call; accepted"


def call(raw: object, **kw: Any) -> ToolCall:
    parsed = parse_tool_call(raw, **kw)
    assert isinstance(parsed, ToolCall), parsed
    return parsed


def malformed(raw: object, **kw: Any) -> MalformedCall:
    parsed = parse_tool_call(raw, **kw)
    assert isinstance(parsed, MalformedCall), parsed
    return parsed


def openai(arguments: object, *, name: object = "say", call_id: object = "call_abc123") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- OpenAI ------------------------------------------------------------------------------------------------------


def test_openai_tool_call_with_json_string_arguments() -> None:
    """An OpenAI Chat Completions tool call keeps its id and decodes its JSON arguments."""
    raw = openai('{"detail_level": "full"}', name="inspect_location")
    parsed = call(raw)
    assert parsed == ToolCall(
        id="call_abc123", name="inspect_location", arguments={"detail_level": "full"}, format="openai"
    )
    assert parsed.raw is raw
    assert parsed.reasoning == ""
    assert parsed.warnings == ()


def test_openai_arguments_already_decoded_are_accepted() -> None:
    """Arguments sent as an object instead of JSON text are taken as they are."""
    assert call(openai({"message": "hi"})).arguments == {"message": "hi"}


@pytest.mark.parametrize("arguments", ["", "   ", None, "null", "{}"])
def test_openai_empty_arguments_mean_no_arguments(arguments: object) -> None:
    """An empty string, whitespace, null or {} as arguments means {}."""
    parsed = call(openai(arguments))
    assert parsed.arguments == {}
    assert parsed.warnings == ()


def test_openai_call_without_id_or_type_is_accepted() -> None:
    """A tool call from an OpenAI-compatible server without id and type gets a generated id."""
    parsed = call({"function": {"name": "say", "arguments": {"message": "hi"}}}, index=3)
    assert (parsed.id, parsed.name, parsed.format) == ("call_3", "say", "openai")


def test_openai_responses_api_function_call_uses_its_call_id() -> None:
    """A Responses API function_call item is answered by its call_id, not its item id."""
    raw = {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "say", "arguments": '{"message": "x"}'}
    parsed = call(raw)
    assert (parsed.id, parsed.name, parsed.arguments, parsed.format) == ("call_9", "say", {"message": "x"}, "openai")


def test_legacy_function_call_is_read_as_openai() -> None:
    """The legacy function_call shape {"name", "arguments"} is an OpenAI call."""
    parsed = call({"name": "say", "arguments": '{"message": "x"}'})
    assert (parsed.name, parsed.arguments, parsed.format) == ("say", {"message": "x"}, "openai")


def test_arguments_encoded_twice_are_decoded_with_a_warning() -> None:
    """A JSON string holding a JSON object is decoded once more, and the call says so."""
    parsed = call(openai(json.dumps(json.dumps({"message": "hi"}))))
    assert parsed.arguments == {"message": "hi"}
    assert parsed.warnings == ("the arguments were JSON-encoded twice; decoded them",)


def test_sdk_model_objects_are_read_through_model_dump() -> None:
    """An SDK object with model_dump() (pydantic models of the OpenAI and Anthropic SDKs) is read as its dump."""

    class Block:
        def model_dump(self) -> dict[str, Any]:
            return {"type": "tool_use", "id": "toolu_1", "name": "say", "input": {"message": "hi"}}

    block = Block()
    parsed = call(block)
    assert (parsed.id, parsed.arguments, parsed.format) == ("toolu_1", {"message": "hi"}, "anthropic")
    assert parsed.raw is block


# -- Anthropic ---------------------------------------------------------------------------------------------------


def test_anthropic_tool_use_block() -> None:
    """An Anthropic tool_use block gives its id, name and input."""
    raw = {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "say", "input": {"message": "hi"}}
    assert call(raw) == ToolCall(
        id="toolu_01A09q90qw90lq917835lq9", name="say", arguments={"message": "hi"}, format="anthropic"
    )


def test_anthropic_block_without_type_is_recognised_by_its_object_input() -> None:
    """A block with name and an object input but no type is read as Anthropic."""
    parsed = call({"id": "toolu_2", "name": "say", "input": {"message": "hi"}})
    assert (parsed.id, parsed.format, parsed.arguments) == ("toolu_2", "anthropic", {"message": "hi"})


def test_anthropic_input_that_is_not_an_object_is_malformed() -> None:
    """A tool_use input that is a list is a malformed call that keeps the block's id and name."""
    bad = malformed({"type": "tool_use", "id": "toolu_3", "name": "say", "input": [1]})
    assert bad == MalformedCall(
        id="toolu_3", name="say", error="Error: Arguments must be a JSON object, got list", format="anthropic"
    )


# -- Fallback (seed 000) -----------------------------------------------------------------------------------------


def test_fallback_call_with_parameters_and_reasoning() -> None:
    """Seed 000's fallback {"tool", "parameters", "reasoning"} keeps the reasoning and gets a generated id."""
    raw = {"tool": "inspect_location", "parameters": {"detail_level": "full"}, "reasoning": "look around first"}
    assert call(raw) == ToolCall(
        id="call_0",
        name="inspect_location",
        arguments={"detail_level": "full"},
        reasoning="look around first",
        format="fallback",
    )


def test_fallback_call_given_as_json_text() -> None:
    """The fallback JSON as the assistant message content (text) is decoded first."""
    text = '{"tool": "say", "parameters": {"message": "hi"}, "reasoning": "greet"}'
    parsed = call(text)
    assert (parsed.name, parsed.arguments, parsed.reasoning, parsed.format) == (
        "say",
        {"message": "hi"},
        "greet",
        "fallback",
    )
    assert parsed.raw == text


@pytest.mark.parametrize("parameters", [None, {}, "", "{}"])
def test_fallback_top_level_parameters_are_accepted_with_a_warning(parameters: object) -> None:
    """With parameters missing or empty, the other top-level keys are the arguments (seed 000's defensive parsing)."""
    raw: dict[str, Any] = {"tool": "say", "message": "hi", "loud": True, "reasoning": "greet"}
    if parameters is not None:
        raw["parameters"] = parameters
    parsed = call(raw)
    assert parsed.arguments == {"message": "hi", "loud": True}
    assert parsed.reasoning == "greet"
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith(TOP_LEVEL)
    assert "'message', 'loud'" in parsed.warnings[0]


def test_fallback_keys_beside_parameters_are_ignored_with_a_warning() -> None:
    """Top-level keys beside non-empty parameters are not arguments; the call says they were ignored."""
    parsed = call({"tool": "say", "parameters": {"message": "hi"}, "confidence": 0.9})
    assert parsed.arguments == {"message": "hi"}
    assert parsed.warnings == ("keys outside 'parameters' were ignored: 'confidence'",)


def test_fallback_parameters_as_json_text_are_decoded() -> None:
    """Parameters sent as JSON text are decoded like OpenAI arguments."""
    assert call({"tool": "say", "parameters": '{"message": "hi"}'}).arguments == {"message": "hi"}


def test_fallback_without_parameters_or_other_keys_has_no_arguments() -> None:
    """A fallback call naming only the tool has empty arguments and no warning."""
    parsed = call({"tool": "look"})
    assert (parsed.arguments, parsed.warnings) == ({}, ())


def test_non_string_reasoning_is_kept_as_text() -> None:
    """Reasoning that is not a string is turned into one rather than dropped."""
    assert call({"tool": "look", "reasoning": 42}).reasoning == "42"


# -- Text protocol (seed 004) ------------------------------------------------------------------------------------


def test_text_protocol_call() -> None:
    """Seed 004's {"name", "args"} gives a text-format call with a generated id."""
    assert call({"name": "write_file", "args": {"path": "a.txt"}}, index=1) == ToolCall(
        id="call_1", name="write_file", arguments={"path": "a.txt"}, format="text"
    )


@pytest.mark.parametrize(
    ("args", "kind"), [([1, 2], "list"), ("oops", "string"), (7, "integer"), (True, "boolean"), (1.5, "number")]
)
def test_text_protocol_args_that_are_not_an_object_are_malformed(args: object, kind: str) -> None:
    """Non-object args give a structured error naming what was sent, not a crash on **kwargs."""
    bad = malformed({"name": "write_file", "args": args})
    assert bad.name == "write_file"
    assert bad.format == "text"
    if isinstance(args, str):
        assert bad.error.startswith("Error: Invalid JSON arguments - ")
    else:
        assert bad.error == f"Error: Arguments must be a JSON object, got {kind}"


def test_text_protocol_top_level_arguments_are_accepted_with_a_warning() -> None:
    """A text call with its arguments beside the name is read like the fallback's top-level parameters."""
    parsed = call({"name": "say", "message": "hi"})
    assert parsed.arguments == {"message": "hi"}
    assert parsed.warnings[0].startswith(TOP_LEVEL)


def test_text_protocol_call_without_args_has_no_arguments() -> None:
    """A text call that names only the tool has empty arguments."""
    assert call({"name": "look"}).arguments == {}


# -- Malformed calls ---------------------------------------------------------------------------------------------


def test_invalid_json_arguments_give_seed_003s_message() -> None:
    """Arguments that are not JSON give `Error: Invalid JSON arguments - ...` (seed 003) and keep id and name."""
    bad = malformed(openai("not json"))
    assert bad == MalformedCall(
        id="call_abc123",
        name="say",
        error="Error: Invalid JSON arguments - Expecting value: line 1 column 1 (char 0)",
        format="openai",
    )


def test_arguments_that_are_a_json_list_give_seed_003s_message() -> None:
    """Arguments decoding to a list give `Error: Arguments must be a JSON object, got list`."""
    assert malformed(openai("[1, 2]")).error == "Error: Arguments must be a JSON object, got list"


@pytest.mark.parametrize(
    "raw",
    [
        {"id": "call_1", "type": "function", "function": {"arguments": "{}"}},
        {"id": "call_1", "type": "function", "function": {"name": "", "arguments": "{}"}},
        {"id": "call_1", "type": "function", "function": {"name": "  ", "arguments": "{}"}},
        {"type": "tool_use", "id": "toolu_1", "input": {}},
        {"tool": None, "parameters": {}},
        {"tool": "", "parameters": {}},
        {"name": None, "args": {}},
    ],
)
def test_missing_tool_name(raw: object) -> None:
    """A call without a tool name, in any format, gives `Error: Missing tool name`."""
    bad = malformed(raw)
    assert bad.error == "Error: Missing tool name"
    assert bad.name is None


def test_tool_name_that_is_not_a_string() -> None:
    """A tool name that is not a string is malformed and says what it was."""
    assert malformed({"tool": ["say"]}).error == "Error: Tool name must be a string, got list"


def test_tool_name_is_stripped() -> None:
    """Whitespace around a tool name is dropped."""
    assert call({"tool": " say\n"}).name == "say"


def test_unsupported_openai_tool_type() -> None:
    """A tool call of a type other than function is malformed, keeping its id."""
    bad = malformed({"id": "call_7", "type": "custom", "function": {"name": "say", "arguments": "{}"}})
    assert bad.id == "call_7"
    assert bad.error == "Error: Unsupported tool call type 'custom' - only 'function' tool calls can be run"


def test_openai_function_that_is_not_an_object() -> None:
    """A `function` member that is not an object is malformed."""
    bad = malformed({"id": "call_7", "type": "function", "function": "say"})
    assert bad.error == "Error: 'function' must be an object with 'name' and 'arguments', got string"


@pytest.mark.parametrize(
    ("raw", "got"),
    [
        ({"foo": 1, "bar": 2}, "got an object with keys 'foo', 'bar'"),
        ({}, "got an empty object"),
        ([1, 2], "got a list"),
        (42, "got an integer"),
        (None, "got null"),
        ("[1]", "got a list"),
    ],
)
def test_unrecognised_shapes_say_what_was_expected(raw: object, got: str) -> None:
    """Anything that is not one of the four formats names the formats and what was sent instead."""
    bad = malformed(raw)
    assert bad.format == "unknown"
    assert bad.error.startswith("Error: Unrecognised tool call - expected an OpenAI tool call")
    assert '{"tool": NAME, "parameters": {...}}' in bad.error
    assert '{"name": NAME, "args": {...}}' in bad.error
    assert bad.error.endswith(got)


def test_call_text_that_is_not_json() -> None:
    """A call given as text that is not JSON is malformed with the decoder's message."""
    bad = malformed("say hi")
    assert bad.error == "Error: Invalid JSON tool call - Expecting value: line 1 column 1 (char 0)"
    assert bad.raw == "say hi"


def test_argument_names_must_be_strings() -> None:
    """Decoded arguments with a key that is not a string are malformed (they could not be passed as keywords)."""
    assert malformed(openai({1: "x"})).error == "Error: Argument names must be strings, got 1"


def test_deeply_nested_json_arguments_are_malformed_not_a_crash() -> None:
    """Arguments nested past the decoder's recursion limit give a malformed call."""
    assert malformed(openai("[" * 100_000)).error == "Error: Invalid JSON arguments - nested too deeply"


def test_number_with_too_many_digits_is_malformed_without_python_advice() -> None:
    """Python's limit on integer digits gives a malformed call whose message does not talk about sys."""
    error = malformed(openai('{"n": ' + "1" * 5000 + "}")).error
    assert error.startswith("Error: Invalid JSON arguments - Exceeds the limit (4300 digits)")
    assert "sys." not in error


def test_mapping_whose_items_fail_is_malformed() -> None:
    """A mapping that raises while being read gives a malformed call, never an exception."""

    class Broken(Mapping[str, Any]):
        def __getitem__(self, key: str) -> Any:
            raise KeyError(key)

        def __iter__(self) -> Iterator[str]:
            msg = "cannot iterate"
            raise RuntimeError(msg)

        def __len__(self) -> int:
            return 1

    bad = malformed({"tool": "say", "parameters": Broken()})
    assert bad.error == "Error: Could not read the tool call - RuntimeError: cannot iterate"


def test_malformed_call_becomes_a_failure_result() -> None:
    """to_result() is a failure carrying the model-readable error and nothing else."""
    result = malformed(openai("[1]")).to_result()
    assert result == ToolResult(success=False, error="Error: Arguments must be a JSON object, got list")
    assert result.to_dict() == {
        "success": False,
        "data": None,
        "error": "Error: Arguments must be a JSON object, got list",
    }


# -- Size guard --------------------------------------------------------------------------------------------------


def test_arguments_over_the_limit_are_malformed() -> None:
    """JSON arguments larger than max_argument_bytes give a malformed call that names the limit."""
    text = json.dumps({"event": "x" * 2048})
    bad = malformed(openai(text), max_argument_bytes=2048)
    assert bad.error == "Error: Arguments are too large - more than 2048 bytes of JSON; send smaller arguments"
    assert call(openai(text), max_argument_bytes=len(text)).arguments == {"event": "x" * 2048}


def test_size_limit_counts_utf8_bytes() -> None:
    """The limit counts UTF-8 bytes, so 100 three-byte characters pass 200 bytes although they are 100 characters."""
    text = json.dumps({"m": "\u20ac" * 100}, ensure_ascii=False)
    assert len(text) < 200 < len(text.encode())
    assert isinstance(parse_tool_call(openai(text), max_argument_bytes=200), MalformedCall)
    assert isinstance(parse_tool_call(openai(text), max_argument_bytes=400), ToolCall)


@pytest.mark.parametrize("fmt", ["anthropic", "fallback", "text"])
def test_decoded_arguments_over_the_limit_are_malformed(fmt: str) -> None:
    """Arguments that arrive decoded are measured too, nested values included."""
    arguments = {"items": [{"text": "y" * 600}] * 5}
    raw = {
        "anthropic": {"type": "tool_use", "id": "toolu_1", "name": "say", "input": arguments},
        "fallback": {"tool": "say", "parameters": arguments},
        "text": {"name": "say", "args": arguments},
    }[fmt]
    assert malformed(raw, max_argument_bytes=2048).error.startswith("Error: Arguments are too large")
    assert call(raw, max_argument_bytes=4096).arguments == arguments


def test_cyclic_arguments_are_too_large_not_a_hang() -> None:
    """Arguments that contain themselves can only be rejected: the size estimate grows past the limit."""
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert malformed({"tool": "say", "parameters": cyclic}, max_argument_bytes=1024).error.startswith(
        "Error: Arguments are too large"
    )


def test_call_text_far_over_the_limit_is_not_decoded() -> None:
    """A whole call given as text is refused before decoding when it passes the limit plus an allowance."""
    text = json.dumps({"tool": "say", "parameters": {"m": "z" * 200_000}})
    bad = malformed(text, max_argument_bytes=1024)
    assert bad.error.startswith("Error: Tool call is too large - more than ")


def test_default_limit_is_one_mebibyte() -> None:
    """The default argument limit is 1 MiB: just under it passes, just over it does not."""
    assert DEFAULT_MAX_ARGUMENT_BYTES == 1024 * 1024
    body = '{"m": "' + "a" * (DEFAULT_MAX_ARGUMENT_BYTES - 9) + '"}'
    assert len(body) == DEFAULT_MAX_ARGUMENT_BYTES
    assert isinstance(parse_tool_call(openai(body)), ToolCall)
    assert isinstance(parse_tool_call(openai(body[:-2] + 'a"}')), MalformedCall)


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_must_be_positive(limit: int) -> None:
    """A limit that is not positive is a programming error."""
    with pytest.raises(ValueError, match="max_argument_bytes must be positive"):
        parse_tool_call({}, max_argument_bytes=limit)


# -- Ids ---------------------------------------------------------------------------------------------------------


def test_batch_keeps_order_and_generates_ids_by_position() -> None:
    """Calls come back in order; those without ids get call_<position>."""
    parsed = parse_tool_calls(
        [
            {"tool": "look"},
            openai("{}", name="say", call_id="call_x"),
            {"name": "write_file", "args": "[]"},
            {"type": "tool_use", "id": "toolu_1", "name": "say", "input": {}},
        ]
    )
    assert [(p.id, p.name, type(p).__name__) for p in parsed] == [
        ("call_0", "look", "ToolCall"),
        ("call_x", "say", "ToolCall"),
        ("call_2", "write_file", "MalformedCall"),
        ("toolu_1", "say", "ToolCall"),
    ]


def test_duplicate_ids_are_renamed_with_a_warning() -> None:
    """A later call repeating an earlier id gets a generated one; the first keeps it."""
    first, second = parse_tool_calls([openai("{}", call_id="call_a"), openai("{}", call_id="call_a")])
    assert first.id == "call_a"
    assert isinstance(first, ToolCall)
    assert first.warnings == ()
    assert second.id == "call_1"
    assert isinstance(second, ToolCall)
    assert second.warnings == (
        "call id 'call_a' was already used by an earlier call of this turn; renamed to 'call_1'",
    )


def test_generated_ids_never_take_a_provider_id() -> None:
    """A generated id that a provider id of the batch already uses gets a suffix."""
    parsed = parse_tool_calls([{"tool": "look"}, openai("{}", call_id="call_0"), malformed_raw()])
    assert [p.id for p in parsed] == ["call_0_2", "call_0", "call_2"]


def malformed_raw() -> dict[str, Any]:
    return {"tool": "say", "parameters": "[1]"}


def test_duplicate_id_of_a_malformed_call_is_renamed() -> None:
    """Malformed calls take part in id uniqueness too."""
    parsed = parse_tool_calls([openai("{}", call_id="c"), openai("nope", call_id="c")])
    assert [p.id for p in parsed] == ["c", "call_1"]
    assert isinstance(parsed[1], MalformedCall)


def test_ids_are_deterministic() -> None:
    """Parsing the same batch twice gives the same ids."""
    batch = [{"tool": "a"}, openai("{}", call_id="call_1"), {"tool": "b"}, openai("{}", call_id="call_1")]
    assert [p.id for p in parse_tool_calls(batch)] == [p.id for p in parse_tool_calls(batch)]
    assert len({p.id for p in parse_tool_calls(batch)}) == 4


def test_id_prefix() -> None:
    """id_prefix replaces call_ in generated ids, so a loop can keep ids unique across turns."""
    assert [p.id for p in parse_tool_calls([{"tool": "a"}, {"tool": "b"}], id_prefix="turn3_")] == [
        "turn3_0",
        "turn3_1",
    ]


def test_id_that_is_not_a_string_is_replaced_with_a_warning() -> None:
    """An id that is not a non-empty string is replaced by a generated one, and the call says so."""
    parsed = call(openai("{}", call_id=17))
    assert parsed.id == "call_0"
    assert parsed.warnings == ("call id 17 is not a non-empty string; using 'call_0'",)


@pytest.mark.parametrize(("raw", "count"), [(None, 0), ({"tool": "look"}, 1), ('{"tool": "look"}', 1), (5, 1), ((), 0)])
def test_batch_accepts_none_or_a_single_call(raw: Any, count: int) -> None:
    """None is no calls; a mapping, JSON text or any non-iterable is one call."""
    assert len(parse_tool_calls(raw)) == count


# -- The records -------------------------------------------------------------------------------------------------


def test_tool_call_copies_its_arguments() -> None:
    """A call keeps its own plain-dict copy of the arguments, so later changes to the input do not leak in."""
    arguments = {"message": "hi"}
    parsed = call({"type": "tool_use", "id": "t", "name": "say", "input": arguments})
    arguments["message"] = "changed"
    assert parsed.arguments == {"message": "hi"}
    assert type(parsed.arguments) is dict


def test_raw_is_neither_compared_nor_shown() -> None:
    """Two calls that differ only in raw are equal, and repr leaves raw out."""
    a = call({"tool": "say", "parameters": {"m": 1}})
    b = call('{"tool": "say", "parameters": {"m": 1}}')
    assert a == b
    assert "raw" not in repr(a)
    assert attrs.evolve(a, raw=None) == a


# -- The property ------------------------------------------------------------------------------------------------

KEYS = st.sampled_from(
    ["id", "type", "function", "name", "arguments", "tool", "parameters", "reasoning", "input", "args", "call_id"]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.sampled_from(["function", "tool_use", "function_call", "", "{}", "[]", '{"a": 1}', '"{\\"a\\": 1}"'])
)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS | st.text(max_size=5), children, max_size=5),
    max_leaves=25,
)
ODD = st.recursive(
    SCALARS | st.binary(max_size=8) | st.builds(object) | st.complex_numbers(),
    lambda children: (
        st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(KEYS | st.integers() | st.none(), children, max_size=5)
        | st.frozensets(st.integers(), max_size=3)
    ),
    max_leaves=20,
)
"""JSON-like values with what JSON cannot hold: bytes, tuples, non-string keys, arbitrary objects."""


@settings(max_examples=400, deadline=None)
@given(
    raw=JSON_LIKE | JSON_LIKE.map(json.dumps) | ODD,
    limit=st.sampled_from([1, 64, DEFAULT_MAX_ARGUMENT_BYTES]),
)
def test_parse_never_raises(raw: object, limit: int) -> None:
    """For any JSON-like input, parse_tool_call returns a ToolCall or a MalformedCall and never raises."""
    parsed = parse_tool_call(raw, max_argument_bytes=limit)
    assert isinstance(parsed, ToolCall | MalformedCall)
    assert parsed.format in {*CALL_FORMATS, "unknown"}
    assert parsed.id
    if isinstance(parsed, ToolCall):
        assert parsed.name
        assert all(isinstance(key, str) for key in parsed.arguments)
    else:
        assert parsed.error.startswith("Error: ")


def _reference_size(value: object) -> int:
    """The size estimate of arguments_problem for plain values, said the long way."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, bool | float) or value is None:
        return 6
    assert isinstance(value, int)
    return value.bit_length() // 3 + 1


@settings(max_examples=300, deadline=None)
@given(
    arguments=st.dictionaries(KEYS | st.text(max_size=5), SCALARS, max_size=8),
    limit=st.integers(min_value=1, max_value=200),
)
def test_flat_arguments_are_sized_by_their_estimate(arguments: dict[str, Any], limit: int) -> None:
    """Arguments of plain values are refused exactly when their estimated JSON passes the limit."""
    too_large = arguments_problem(arguments, limit) is not None
    estimate = 2 + sum(len(key) + 4 + _reference_size(member) for key, member in arguments.items())
    assert too_large == (estimate > limit)


@settings(max_examples=100, deadline=None)
@given(raws=st.lists(JSON_LIKE, max_size=6))
def test_batch_ids_are_unique(raws: list[object]) -> None:
    """Whatever the batch, parse_tool_calls returns one result per call with unique ids."""
    parsed = parse_tool_calls(raws)
    assert len(parsed) == len(raws)
    assert len({p.id for p in parsed}) == len(parsed)


@settings(max_examples=200, deadline=None)
@given(raw=JSON_LIKE | JSON_LIKE.map(json.dumps))
def test_parsed_call_fields_are_in_their_final_form(raw: object) -> None:
    """A parsed call's arguments are its own dict, its warnings a tuple, its reasoning a string."""
    parsed = parse_tool_call(raw)
    if isinstance(parsed, ToolCall):
        assert type(parsed.arguments) is dict
        assert type(parsed.warnings) is tuple
        assert isinstance(parsed.reasoning, str)
        assert parsed.raw is raw


def test_parse_tool_calls_passes_parsed_calls_through() -> None:
    """Calls parsed already are handed back as they are (the engine does not parse the loop's calls again)."""
    first = call({"id": "call_a", "type": "function", "function": {"name": "add", "arguments": "{}"}})
    second = malformed({"tool": 7})
    again = parse_tool_calls([first, second])
    assert again[0] is first
    assert again[1] is second


def test_a_call_of_the_provider_shape_keeps_its_own_arguments() -> None:
    """A call as OpenAI-compatible servers and the Messages API write it; its arguments are its own copy."""
    raw = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    assert call(raw) == ToolCall(id="call_1", name="add", arguments={"a": 1, "b": 2}, format="openai")
    block = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}
    parsed = call(block)
    assert parsed == ToolCall(id="toolu_1", name="add", arguments={"a": 1}, format="anthropic")
    assert parsed.arguments is not block["input"]


# -- toolflow call --raw -----------------------------------------------------------------------------------------

SAY = """\
toolflow: 1
tools:
  say:
    description: Say something to the room
    category: terminal
    parameters:
      type: object
      properties:
        message:
          type: string
          description: What to say
      required: [message]
    template: "You say: {{ message }}"
"""


@pytest.fixture
def project(toolflow_project: ToolflowProject) -> ToolflowProject:
    toolflow_project.write_spec("say.yaml", SAY)
    return toolflow_project


def test_cli_raw_fallback_call_with_top_level_parameters(project: ToolflowProject) -> None:
    """`toolflow call --raw` runs a whole model call and prints the defensive-parsing warning in the result."""
    result = project.run("call", "--raw", '{"tool": "say", "message": "hi"}')
    assert (result.exit_code, result.stderr) == (0, "")
    out = json.loads(result.stdout)
    assert out["success"] is True
    assert out["data"] == "You say: hi"
    assert out["warnings"][0].startswith(TOP_LEVEL)


def test_cli_raw_openai_call_with_matching_name(project: ToolflowProject) -> None:
    """NAME before the raw call is accepted when it is the call's tool."""
    raw = json.dumps(openai('{"message": "hello"}'))
    result = project.run("call", "--raw", "say", raw)
    assert (result.exit_code, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"success": True, "data": "You say: hello"}


def test_cli_raw_call_with_another_name_is_a_usage_error(project: ToolflowProject) -> None:
    """NAME that is not the call's tool stops with exit code 2."""
    result = project.run("call", "--raw", "shout", '{"tool": "say", "parameters": {"message": "x"}}')
    assert result.exit_code == 2
    assert result.stderr == "toolflow: error: NAME 'shout' is not the tool of the call, 'say'\n"


def test_cli_raw_malformed_call_prints_the_model_error(project: ToolflowProject) -> None:
    """A malformed raw call prints the failure result the model would get, with exit code 1."""
    raw = json.dumps(openai("not json"))
    result = project.run("call", "--raw", raw)
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "success": False,
        "data": None,
        "error": "Error: Invalid JSON arguments - Expecting value: line 1 column 1 (char 0)",
    }


def test_cli_raw_call_that_is_not_json_is_a_usage_error(project: ToolflowProject) -> None:
    """Raw call text that is not JSON stops with exit code 2 and a clear message."""
    result = project.run("call", "--raw", "{tool: say}")
    assert result.exit_code == 2
    assert result.stderr.startswith("toolflow: error: the tool call is not valid JSON: ")


def test_cli_call_without_name_or_raw_is_a_usage_error(project: ToolflowProject) -> None:
    """`toolflow call` with nothing to call stops with exit code 2."""
    result = project.run("call")
    assert result.exit_code == 2
    assert result.stderr == "toolflow: error: call: NAME is required (or give a whole tool call with --raw)\n"


def test_cli_plain_call_still_works(project: ToolflowProject) -> None:
    """Without --raw, NAME and ARGS_JSON are read as before."""
    result = project.run("call", "say", '{"message": "hi"}')
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"success": True, "data": "You say: hi"})
