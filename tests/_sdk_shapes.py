"""Checks that messages and requests match the official SDKs' published request shapes (``openai``, ``anthropic``, ``gemini``).

Each value is validated by pydantic in strict mode against the SDK's own request type, with every
lazily validated ``Iterable`` drained, and the keys of each TypedDict checked by hand (pydantic
ignores unknown keys of a TypedDict). Gemini's shapes are checked with google-genai's pydantic
models, which forbid unknown fields; since they accept snake_case names too, the keys are also
checked to be the REST API's camelCase.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import typing_extensions as te
from anthropic.types import MessageParam, TextBlockParam, ToolResultBlockParam, ToolUseBlockParam
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming as AnthropicRequest
from google.genai import types as genai
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessageParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call_param import (
    ChatCompletionMessageFunctionToolCallParam,
    Function,
)
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as OpenAIRequest
from pydantic import TypeAdapter

__all__ = [
    "anthropic_message",
    "anthropic_request",
    "conforms",
    "gemini_content",
    "gemini_request",
    "gemini_tool_definition",
    "keys_of",
    "openai_message",
    "openai_request",
]


@functools.cache
def _adapter(param_type: Any) -> TypeAdapter[Any]:
    return TypeAdapter(param_type)


def _drain(value: object) -> object:
    """Consume pydantic's lazy ``Iterable`` validators, so every item is validated (and errors raise)."""
    if isinstance(value, Mapping):
        return {key: _drain(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator):
        return [_drain(item) for item in value]
    return value


def conforms(param_type: Any, value: object) -> None:
    """Validate *value* as the SDK type *param_type*, strictly (no coercion of ``"yes"`` to ``True``)."""
    _drain(_adapter(param_type).validate_python(value, strict=True))


def keys_of(typed_dict: Any, value: Mapping[str, Any]) -> None:
    """The keys of *value* are keys of *typed_dict*, and every key it requires is there."""
    hints = te.get_type_hints(typed_dict, include_extras=True)
    origins: dict[str, object] = {key: te.get_origin(hint) for key, hint in hints.items()}
    required = {key for key, origin in origins.items() if origin is te.Required}
    assert set(value) <= set(hints), f"unknown keys {sorted(set(value) - set(hints))} for {typed_dict.__name__}"
    assert required <= set(value), f"missing keys {sorted(required - set(value))} for {typed_dict.__name__}"


def openai_message(message: Mapping[str, Any]) -> None:
    """*message* is a Chat Completions request message, every nested object with known keys only."""
    conforms(ChatCompletionMessageParam, message)
    role = message["role"]
    if role == "assistant":
        keys_of(ChatCompletionAssistantMessageParam, message)
        for call in message.get("tool_calls", []):
            keys_of(ChatCompletionMessageFunctionToolCallParam, call)
            keys_of(Function, call["function"])
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
    elif role == "tool":
        keys_of(ChatCompletionToolMessageParam, message)
    else:
        assert role == "user"
        keys_of(ChatCompletionUserMessageParam, message)


_ANTHROPIC_BLOCKS = {"text": TextBlockParam, "tool_use": ToolUseBlockParam, "tool_result": ToolResultBlockParam}


def anthropic_message(message: Mapping[str, Any]) -> None:
    """*message* is a Messages API request message; its blocks are text, tool_use or tool_result blocks."""
    conforms(MessageParam, message)
    assert set(message) == {"role", "content"}
    assert message["role"] in {"user", "assistant"}
    if isinstance(message["content"], str):
        return
    for block in message["content"]:
        block_type = _ANTHROPIC_BLOCKS[block["type"]]
        keys_of(block_type, block)
        conforms(block_type, block)


def openai_request(system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> None:
    """A whole Chat Completions request, as a provider sends it: the system prompt first."""
    request: dict[str, Any] = {"model": "gpt-4o", "messages": [{"role": "system", "content": system}, *messages]}
    if tools:
        request["tools"] = list(tools)
    conforms(OpenAIRequest, request)
    for message in messages:
        openai_message(message)


def anthropic_request(system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> None:
    """A whole Messages API request: the system prompt as its own field."""
    request: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system}
    request["messages"] = list(messages)
    if tools:
        request["tools"] = list(tools)
    conforms(AnthropicRequest, request)
    for message in messages:
        anthropic_message(message)


def _camel_case_keys(value: object) -> None:
    """Every key the API defines in *value* is camelCase, as the REST API writes it.

    ``args`` and ``response`` hold the caller's data, and the keys of ``properties`` are parameter names.
    """
    if isinstance(value, Mapping):
        for key, item in value.items():
            assert "_" not in key, f"{key!r} is not the REST API's camelCase"
            if key in ("args", "response"):
                continue
            if key == "properties" and isinstance(item, Mapping):
                for schema in item.values():
                    _camel_case_keys(schema)
            else:
                _camel_case_keys(item)
    elif isinstance(value, list):
        for item in value:
            _camel_case_keys(item)


def gemini_content(message: Mapping[str, Any]) -> None:
    """*message* is a Gemini ``Content``: role ``user`` or ``model``, parts of known fields only."""
    genai.Content.model_validate(message, strict=True)
    assert set(message) == {"role", "parts"}
    assert message["role"] in {"user", "model"}
    _camel_case_keys(message)


def gemini_tool_definition(tool: Mapping[str, Any]) -> None:
    """*tool* is a Gemini ``Tool``; lax about ``type``, whose lowercase names the REST API and its examples use."""
    genai.Tool.model_validate(tool)
    _camel_case_keys(tool)


def gemini_request(system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> None:
    """A whole ``generateContent`` request body: the system prompt as ``systemInstruction``."""
    request: dict[str, Any] = {"contents": list(messages), "systemInstruction": {"parts": [{"text": system}]}}
    if tools:
        request["tools"] = list(tools)
        for tool in tools:
            gemini_tool_definition(tool)
    _camel_case_keys(request)
    for message in messages:
        gemini_content(message)
