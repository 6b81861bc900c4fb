r"""History formats: how a conversation with tool calls is written for each kind of model (issue 5, section 3).

The agent loop keeps its history as the messages of one format and asks a
:class:`HistoryFormat` to write each piece: the tool definitions and system prompt of a
request, the user's message, the results of a turn's calls; and to read the tool calls out of
the model's answer. ``get_format(name)`` returns one of the five:

``openai``
    Chat Completions native tool calling: the assistant message carries ``tool_calls``
    (``arguments`` a compact JSON string); each result is a ``{"role": "tool", "tool_call_id",
    "content"}`` message, one per call, in call order.
``anthropic``
    Messages API: the assistant message's ``content`` holds ``text`` and ``tool_use`` blocks;
    the results are ``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error: true`` on
    failures), all of one turn in a single ``user`` message.
``fallback``
    Seed 000's format for models without native tool calling: the system prompt describes the
    tools and asks for ``{"tool", "parameters", "reasoning"}`` JSON in the assistant's content
    (several calls: a JSON array); each result is a ``user`` message
    ``[TOOL RESULT: name]\n{json}``.
``gemini``
    Gemini API contents: the model's ``{"role": "model", "parts": [...]}`` holds ``text`` and
    ``functionCall`` parts; the results are ``functionResponse`` parts, all of one turn in a single
    ``user`` content (:mod:`toolflow._history_gemini`).
``text``
    Seed 004's text protocol: a ``## Tool-Use Protocol`` section, rendered from a Jinja2
    template (overridable), is added to the system prompt and lists each tool's schema; the model
    writes ``<tool_call>{"name": ..., "args": {...}}</tool_call>`` blocks (blocks inside fenced
    code blocks are ignored); the results go back in one ``user`` message of
    ``<tool_result name="...">...</tool_result>`` blocks.

Results are written with :meth:`toolflow.ToolResult.text_for_model`, so every format shows the
model the same JSON ``{"success", "data", "error"?, "warnings"?, ...}``.

Reading is lenient and never raises on what a model wrote: :meth:`HistoryFormat.read_response`
returns raw calls, and :func:`toolflow.parse_tool_calls` turns the bad ones into
:class:`~toolflow.MalformedCall` results the model can act on (invalid JSON, arguments that are
not an object, a missing name).

With no tools (the last turn before a hard stop), ``fallback`` and ``text`` add nothing to the
system prompt: the model is not told how to call tools it may not call.

How calls are found in a model's text (fenced code blocks, the text protocol's ``<tool_call>``
tags) and the text protocol's template live in :mod:`toolflow._history_text`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import trio

from toolflow._calls import ToolCall
from toolflow._errors import UsageError, expect
from toolflow._export import anthropic_tool, described_with_rules, input_schema, openai_tool
from toolflow._history_gemini import GeminiFormat
from toolflow._history_text import (
    DEFAULT_TEXT_PROTOCOL_TEMPLATE,
    TEXT_PROTOCOL_TIMEOUT,
    TEXT_PROTOCOL_VARIABLES,
    blank_spans,
    compile_protocol,
    default_protocol,
    fences,
    remove_spans,
    tool_call_blocks,
)
from toolflow._json import encoder, loads
from toolflow._model import ToolSpec
from toolflow._providers import HISTORY_FORMATS
from toolflow._rendering import render_template
from toolflow._results import DEFAULT_MAX_RESULT_CHARS, ResultMessage, truncate_text
from toolflow._schemas import did_you_mean
from toolflow._templates import CompiledTemplate, TemplateError

__all__ = [
    "DEFAULT_TEXT_PROTOCOL_TEMPLATE",
    "TEXT_PROTOCOL_TIMEOUT",
    "TEXT_PROTOCOL_VARIABLES",
    "AnthropicFormat",
    "FallbackFormat",
    "GeminiFormat",
    "HistoryFormat",
    "OpenAIFormat",
    "ResultMessage",
    "TextFormat",
    "get_format",
    "history_format",
]


class HistoryFormat(Protocol):
    """Writes and reads the messages of one history format."""

    @property
    def name(self) -> str:
        """``openai``, ``anthropic``, ``fallback``, ``text`` or ``gemini``."""
        ...

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """The ``tools`` of a request: the native definitions, or ``[]`` for fallback/text."""
        ...

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:
        """*base* plus what the format needs to tell the model (fallback/text: the tool protocol).

        A coroutine, because the text format renders a template (in a template worker).
        """
        ...

    def user_message(self, text: str) -> dict[str, Any]:
        """A user message with *text*."""
        ...

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """The assistant message a model of this format writes for *text* and *calls*.

        The scripted provider answers with it; :meth:`read_response` reads back the same text and calls.
        """
        ...

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """The visible text of an assistant *message* and its raw tool calls, for :func:`toolflow.parse_tool_calls`."""
        ...

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        """The messages that answer one turn's calls, in call order, every call answered once."""
        ...


# --------------------------------------------------------------------------- helpers


_compact_json = encoder(ensure_ascii=False)
_spaced_json = encoder(ensure_ascii=False, separators=(", ", ": "))  # json.dumps(value, ensure_ascii=False)


def _angle_safe(text: str) -> str:
    r"""Write ``<`` and ``>`` of JSON *text* as ``\u003c`` / ``\u003e``: the same JSON, and no tag can close early.

    Outside strings JSON has no ``<`` or ``>``, and inside them the escapes decode to the same characters.
    """
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


_SEQUENCES = (list, tuple)


def _plain_text(content: object) -> str:
    """The text of a message's ``content``: a string, ``None``, or a list of text parts or blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, _SEQUENCES):
        return "\n".join(part for part in (_text_of(block) for block in content) if part is not None)
    return str(content)


def _text_of(block: object) -> str | None:
    """The text of a ``{"type": "text", "text": ...}`` part or block (a mapping or an SDK object), else ``None``."""
    mapping = type(block) is dict or isinstance(block, Mapping)  # a dict first: the ABC check costs more
    kind = block.get("type") if mapping else getattr(block, "type", None)  # type: ignore[attr-defined]
    if kind != "text":
        return None
    text = block.get("text") if mapping else getattr(block, "text", None)  # type: ignore[attr-defined]
    return text if isinstance(text, str) else None


def _shown_name(name: str) -> str:
    """A tool name as it is written inside the fallback's ``[TOOL RESULT: name]`` line (no line breaks)."""
    return _compact_json(name)[1:-1]


def _tool_entries(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """What prompts say of each tool (the text protocol template's ``tools``)."""
    entries = []
    for spec in tools:
        parameters = input_schema(spec)
        entries.append(
            {
                "name": spec.name,
                "description": described_with_rules(spec),
                "parameters": parameters,
                "parameters_json": json.dumps(parameters, ensure_ascii=False),
                "category": spec.category,
            }
        )
    return entries


def _with_section(base: str, section: str) -> str:
    base = base.rstrip()
    section = section.strip("\n")
    if not section.strip():
        return base
    return f"{base}\n\n{section}" if base else section


# --------------------------------------------------------------------------- openai


@attrs.frozen(kw_only=True)
class OpenAIFormat:
    """Chat Completions native tool calling (seed 000 §7 "Native Tool Calling", seed 003)."""

    name: str = attrs.field(default="openai", init=False)

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """``{"type": "function", "function": {...}}`` per tool (:func:`toolflow._export.openai_tool`)."""
        return [openai_tool(spec) for spec in tools]

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:  # noqa: ARG002 - the protocol's signature
        """*base*: the tools travel as definitions."""
        return base

    def user_message(self, text: str) -> dict[str, Any]:
        """``{"role": "user", "content": text}``."""
        return {"role": "user", "content": text}

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """``{"role": "assistant", "content": text or None, "tool_calls": [...]}``.

        Without calls the message has no ``tool_calls`` key; ``arguments`` is compact JSON.
        """
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _compact_json(call.arguments)},
                }
                for call in calls
            ]
        return message

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """The ``content`` (a string, or the text of its parts) and the ``tool_calls`` as given.

        A legacy ``function_call`` counts as the one call when there are no ``tool_calls``.
        """
        content = message.get("content")
        text = content if type(content) is str else _plain_text(content)
        calls = message.get("tool_calls")
        if calls:
            return text, list(calls) if type(calls) is list else [calls] if isinstance(calls, Mapping) else list(calls)
        legacy = message.get("function_call")
        return text, [legacy] if legacy else []

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        """One ``{"role": "tool", "tool_call_id", "content"}`` message per result, in order."""
        return [
            {"role": "tool", "tool_call_id": entry.call_id, "content": entry.result.text_for_model(max_chars)}
            for entry in results
        ]


# --------------------------------------------------------------------------- anthropic


@attrs.frozen(kw_only=True)
class AnthropicFormat:
    """Anthropic Messages API ``tool_use`` / ``tool_result`` content blocks.

    The system prompt travels as the request's ``system`` field, so :meth:`system_prompt` adds nothing.
    """

    name: str = attrs.field(default="anthropic", init=False)

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """``{"name", "description", "input_schema"}`` per tool (:func:`toolflow._export.anthropic_tool`)."""
        return [anthropic_tool(spec) for spec in tools]

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:  # noqa: ARG002 - the protocol's signature
        """*base*: the tools travel as definitions."""
        return base

    def user_message(self, text: str) -> dict[str, Any]:
        """``{"role": "user", "content": text}`` (the API's plain-string form)."""
        return {"role": "user", "content": text}

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """A ``text`` block (when *text* is not empty) and then one ``tool_use`` block per call.

        The API refuses ``text`` blocks that are empty or only whitespace, so such a *text* writes
        none; a message with neither text nor calls has ``content: []``, which the API accepts
        only as the final message.
        """
        content: list[dict[str, Any]] = []
        if text.strip():
            content.append({"type": "text", "text": text})
        content.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)} for call in calls
        )
        return {"role": "assistant", "content": content}

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """The text of the ``text`` blocks (joined by newlines) and the ``tool_use`` blocks as given."""
        content = message.get("content")
        if not isinstance(content, _SEQUENCES):
            return _plain_text(content), []
        calls: list[object] = []
        for block in content:
            mapping = type(block) is dict or isinstance(block, Mapping)  # a dict first: the ABC check costs more
            kind = block.get("type") if mapping else getattr(block, "type", None)
            if kind == "tool_use":
                calls.append(block)
        return _plain_text(content), calls

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        """One ``user`` message of ``tool_result`` blocks, in call order (none for no results).

        A failed call's block has ``is_error: true``.
        """
        if not results:
            return []
        blocks: list[dict[str, Any]] = []
        for entry in results:
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": entry.call_id,
                "content": entry.result.text_for_model(max_chars),
            }
            if not entry.result.success:
                block["is_error"] = True
            blocks.append(block)
        return [{"role": "user", "content": blocks}]


# --------------------------------------------------------------------------- fallback

_FALLBACK_INTRO = """\
## Tools

You can call the tools listed below. To call one, answer with only a JSON object:

{"tool": "TOOL_NAME", "parameters": {"PARAMETER": "VALUE"}, "reasoning": "why you call it"}

To call several tools in one answer, write a JSON array of such objects; they run in order. \
Each result comes back in a user message that starts with [TOOL RESULT: TOOL_NAME], followed by \
its JSON. When you need no tool, answer in plain text, without JSON: that answer is final."""

_CALL_START = re.compile(r"\{\s*\"|\[\s*\{")
_TOOL_KEY = re.compile(r"\"tool\"\s*:")
_DECODER = json.JSONDecoder()


def _is_fallback_call(value: object) -> bool:
    """A ``{"tool": ...}`` object, or a list holding at least one (its other items become malformed calls)."""
    if isinstance(value, dict):
        return "tool" in value
    return isinstance(value, list) and any(isinstance(item, dict) and "tool" in item for item in value)


def _fallback_calls(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else [value]


def _decode(text: str) -> tuple[bool, object]:
    try:
        return True, loads(text)
    except (ValueError, RecursionError):
        return False, None


def _looks_like_call(text: str) -> bool:
    """JSON that does not parse but was meant as a call: parsing it gives the model the JSON error."""
    return text[:1] in ("{", "[") and text[-1:] in ("}", "]") and _TOOL_KEY.search(text) is not None


@attrs.frozen(kw_only=True)
class FallbackFormat:
    """Seed 000's fallback: tool calls as JSON in the assistant's content, results as ``user`` messages."""

    name: str = attrs.field(default="fallback", init=False)

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:  # noqa: ARG002 - the protocol's signature
        """``[]``: the tools are described in the system prompt."""
        return []

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:
        """*base* and a ``## Tools`` section: the answer shape, then each tool's name, description and schema."""
        if not tools:
            return base
        return _with_section(base, _fallback_section(tools))

    def user_message(self, text: str) -> dict[str, Any]:
        """``{"role": "user", "content": text}``."""
        return {"role": "user", "content": text}

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """*text*, then the calls: one JSON object, or a JSON array for several."""
        if not calls:
            return {"role": "assistant", "content": text}
        objects = []
        for call in calls:
            item: dict[str, Any] = {"tool": call.name, "parameters": dict(call.arguments)}
            if call.reasoning:
                item["reasoning"] = call.reasoning
            objects.append(item)
        payload = _spaced_json(objects[0] if len(objects) == 1 else objects)
        return {"role": "assistant", "content": f"{text.strip()}\n{payload}" if text.strip() else payload}

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """Find the JSON call(s) in the content; everything else is the visible text.

        In order: the whole content as JSON; else the ```` ```json ```` (or unlabelled) fenced
        blocks that hold calls; else every top-level ``{...}`` or ``[...]`` outside fenced
        blocks that parses and is a call. A call is an object with a ``tool`` key, or an array
        holding one (its other items become malformed calls). Content, or a fenced block, meant
        as a call (it starts with ``{`` or ``[``, ends with ``}`` or ``]`` and has a ``"tool":``
        key) but not valid JSON is returned as the raw text, so that parsing it tells the model
        what is wrong. Anything else is the final answer.
        """
        content = _plain_text(message.get("content"))
        stripped = content.strip()
        ok, value = _decode(stripped)
        if ok:
            return ("", _fallback_calls(value)) if _is_fallback_call(value) else (stripped, [])
        if _looks_like_call(stripped):
            return "", [stripped]
        calls: list[object] = []
        spans: list[tuple[int, int]] = []
        found = list(fences(content))
        for fence in found:
            if fence.info.lower() not in ("", "json"):
                continue
            body = fence.body.strip()
            ok, value = _decode(body)
            if ok and _is_fallback_call(value):
                calls.extend(_fallback_calls(value))
            elif not ok and _looks_like_call(body):
                calls.append(body)
            else:
                continue
            spans.append((fence.start, fence.end))
        if not calls:
            # Code in other fences (```python ...) is an example, not a call.
            calls, spans = _bare_calls(blank_spans(content, [(fence.start, fence.end) for fence in found]))
        return remove_spans(content, spans), calls

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        r"""One ``{"role": "user", "content": "[TOOL RESULT: name]\n{json}"}`` per result, in order.

        A malformed call that named no tool is answered with a bare ``[TOOL RESULT]`` line.
        """
        return [
            {
                "role": "user",
                "content": (f"[TOOL RESULT: {_shown_name(entry.tool_name)}]" if entry.tool_name else "[TOOL RESULT]")
                + "\n"
                + entry.result.text_for_model(max_chars),
            }
            for entry in results
        ]


def _fallback_section(tools: Sequence[ToolSpec]) -> str:
    lines = [_FALLBACK_INTRO]
    for tool in _tool_entries(tools):
        lines.append(f"\n### {tool['name']}\n")
        if tool["description"]:
            lines.append(f"{tool['description']}\n")
        lines.append(f"Parameters (JSON Schema): {tool['parameters_json']}")
    return "\n".join(lines)


def _bare_calls(content: str) -> tuple[list[object], list[tuple[int, int]]]:
    """Every top-level JSON call in *content* and where each is.

    Only a ``{"`` or ``[{`` can start a call, so other brackets in prose cost a regex step, not a parse.
    """
    calls: list[object] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    while (start := _CALL_START.search(content, pos)) is not None:
        try:
            value, end = _DECODER.raw_decode(content, start.start())
        except (ValueError, RecursionError):
            pos = start.start() + 1
            continue
        if _is_fallback_call(value):
            calls.extend(_fallback_calls(value))
            spans.append((start.start(), end))
        pos = end  # a top-level value that is not a call is skipped whole: calls nested in it are data
    return calls, spans


# --------------------------------------------------------------------------- text

_UNLIMITED = 1 << 62


@attrs.frozen(kw_only=True)
class TextFormat:
    """Seed 004's text protocol: ``<tool_call>`` blocks in the assistant's text, ``<tool_result>`` blocks back.

    Attributes:
        template: The compiled ``## Tool-Use Protocol`` template.
        template_source: Its source (:data:`DEFAULT_TEXT_PROTOCOL_TEMPLATE` unless overridden).
    """

    name: str = attrs.field(default="text", init=False)
    template: CompiledTemplate = attrs.field(eq=False, repr=False)
    template_source: str = DEFAULT_TEXT_PROTOCOL_TEMPLATE

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:  # noqa: ARG002 - the protocol's signature
        """``[]``: the tools are described in the system prompt."""
        return []

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:
        """*base* and the rendered ``## Tool-Use Protocol`` section (nothing when there are no tools).

        Raises:
            UsageError: The template failed to render (an undefined attribute, an error raised
                inside it, more than the per-render budget or :data:`TEXT_PROTOCOL_TIMEOUT`).
        """
        if not tools:
            return base
        return _with_section(base, await self._render(tools))

    async def _render(self, tools: Sequence[ToolSpec]) -> str:
        with trio.move_on_after(TEXT_PROTOCOL_TIMEOUT):
            try:
                return await render_template(self.template, {"tools": _tool_entries(tools)})
            except TemplateError as exc:
                msg = f"text protocol template failed: {exc}"
                raise UsageError(msg) from None
        msg = f"text protocol template failed: it did not render within {TEXT_PROTOCOL_TIMEOUT:g}s"
        raise UsageError(msg)

    def user_message(self, text: str) -> dict[str, Any]:
        """``{"role": "user", "content": text}``."""
        return {"role": "user", "content": text}

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        r"""*text*, then one ``<tool_call>{"name", "args"}</tool_call>`` line per call.

        ``<`` and ``>`` inside the JSON are written as ``\u003c`` / ``\u003e``, so an argument
        holding ``</tool_call>`` cannot end its block.
        """
        blocks = []
        for call in calls:
            item: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
            if call.reasoning:
                item["reasoning"] = call.reasoning
            blocks.append(f"<tool_call>{_angle_safe(_compact_json(item))}</tool_call>")
        content = "\n".join([text.strip(), *blocks] if text.strip() else blocks) if blocks else text
        return {"role": "assistant", "content": content}

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """The text outside the ``<tool_call>`` blocks (stripped) and each block's JSON text, unparsed.

        Fenced code blocks (```` ``` ```` and ``~~~``, at any indentation; an unclosed one runs
        to the end) are examples: blocks inside them are not calls and stay in the text. A
        ``<tool_call>`` closed before the next one is a call, whatever its body (a body that is
        not a call's JSON is answered with the error). One never closed is a call only when a
        JSON object follows it (after blanks): the call is that object when it parses, up to
        the next ``<tool_call>`` or the end when it does not (a model stopped by a stop sequence
        at ``</tool_call>``, or cut off mid-call, still makes its call). Any other unclosed tag
        is prose that mentions the tag (``I will use <tool_call> blocks``) and stays in the text.
        """
        content = _plain_text(message.get("content"))
        if "<tool_call" not in content:
            return content.strip(), []
        searchable = (
            blank_spans(content, [(fence.start, fence.end) for fence in fences(content)])
            if "```" in content or "~~~" in content
            else content  # no fence, nothing to blank
        )
        calls: list[object] = []
        spans: list[tuple[int, int]] = []
        for start, end, body in tool_call_blocks(content, searchable):
            calls.append(body)
            spans.append((start, end))
        return remove_spans(content, spans), calls

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        r"""One ``user`` message: a ``<tool_result name="...">{json}</tool_result>`` line per result, in order.

        The result's JSON has ``<`` and ``>`` written as ``\u003c`` / ``\u003e`` (the same
        JSON, and no ``</tool_result>`` inside it) and is then cut to *max_chars*; the name is
        a JSON string, escaped the same way.
        """
        if not results:
            return []
        blocks = []
        for entry in results:
            text = truncate_text(_angle_safe(entry.result.text_for_model(_UNLIMITED)), max_chars)
            name = _angle_safe(_compact_json(entry.tool_name))
            blocks.append(f"<tool_result name={name}>{text}</tool_result>")
        return [{"role": "user", "content": "\n".join(blocks)}]


# --------------------------------------------------------------------------- get_format

_SIMPLE_FORMATS: Mapping[str, Callable[[], HistoryFormat]] = {
    "openai": OpenAIFormat,
    "anthropic": AnthropicFormat,
    "fallback": FallbackFormat,
    "gemini": GeminiFormat,
}


def get_format(name: str, *, text_protocol_template: str | None = None) -> HistoryFormat:
    """The history format called *name*.

    Args:
        name: One of :data:`toolflow._providers.HISTORY_FORMATS`.
        text_protocol_template: For ``text``: a Jinja2 template replacing the built-in
            ``## Tool-Use Protocol`` section, heading included (see
            :data:`TEXT_PROTOCOL_VARIABLES` for what it sees). It is rendered in toolflow's
            sandboxed environment. Other formats ignore it.

    Raises:
        TypeError: *name* or *text_protocol_template* is not a string.
        UsageError: Unknown *name*; a template that does not compile, or that reads a
            variable other than ``tools`` (and Jinja's globals).
    """
    expect(name, str, "history_format: name", f"a string, one of {', '.join(HISTORY_FORMATS)}")
    expect(text_protocol_template, (str, type(None)), "history_format: text_protocol_template", "a string or None")
    simple = _SIMPLE_FORMATS.get(name)
    if simple is not None:
        return simple()
    if name != "text":
        msg = f"unknown history format {name!r}: use one of {', '.join(HISTORY_FORMATS)}"
        raise UsageError(msg + did_you_mean(name, HISTORY_FORMATS))
    if text_protocol_template is None:
        return TextFormat(template=default_protocol())
    return TextFormat(template=compile_protocol(text_protocol_template), template_source=text_protocol_template)


history_format = get_format
"""The public name of :func:`get_format` (``toolflow.history_format``)."""
