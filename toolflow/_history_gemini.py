"""The ``gemini`` history format: Gemini API ``Content`` with ``functionCall`` / ``functionResponse`` parts.

The shapes are the Gemini API's REST JSON (https://ai.google.dev/api/caching#Content and
https://ai.google.dev/gemini-api/docs/function-calling):

- a user message is ``{"role": "user", "parts": [{"text": ...}]}``;
- the model's message is ``{"role": "model", "parts": [...]}``: a ``text`` part, then one
  ``{"functionCall": {"id", "name", "args"}}`` part per call;
- the results of one turn are one ``user``-role content (the role the current function-calling
  guide uses for them) of ``{"functionResponse": {"id", "name", "response"}}`` parts, one per
  call, in call order. ``response`` is the result's JSON object (the same ``{"success",
  "data", "error"?, ...}`` the other formats show as text, Gemini's documented ``error`` key
  included); a result cut to ``max_chars`` is no longer JSON and goes as ``{"output": text}``;
- the tools are one Gemini ``Tool``, ``[{"functionDeclarations": [...]}]``
  (:func:`toolflow._export.gemini_tool`); the system prompt travels as the request's
  ``systemInstruction``, so :meth:`GeminiFormat.system_prompt` adds nothing.

The model's message is kept as the model sent it (its ``thoughtSignature`` parts included, which
Gemini 3 models require back), except that a call without an ``id`` (older API versions) gets the
id its result answers, written inside its ``functionCall``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from toolflow._calls import ToolCall, gemini_call_parts
from toolflow._export import gemini_tool
from toolflow._json import loads
from toolflow._model import ToolSpec
from toolflow._results import DEFAULT_MAX_RESULT_CHARS, ResultMessage

__all__ = ["GeminiFormat"]

_SEQUENCES = (list, tuple)


@attrs.frozen(kw_only=True)
class GeminiFormat:
    """Gemini API contents: ``functionCall`` parts from the model, ``functionResponse`` parts back."""

    name: str = attrs.field(default="gemini", init=False)

    def tool_definitions(self, tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
        """One ``Tool`` holding a ``FunctionDeclaration`` per tool; ``[]`` for no tools."""
        if not tools:
            return []
        return [{"functionDeclarations": [gemini_tool(spec) for spec in tools]}]

    async def system_prompt(self, base: str, tools: Sequence[ToolSpec]) -> str:  # noqa: ARG002 - the protocol's signature
        """*base*: the tools travel as declarations, the prompt as ``systemInstruction``."""
        return base

    def user_message(self, text: str) -> dict[str, Any]:
        """``{"role": "user", "parts": [{"text": text}]}``."""
        return {"role": "user", "parts": [{"text": text}]}

    def assistant_message(self, text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
        """A ``text`` part (when *text* is not blank) and one ``functionCall`` part per call.

        The API refuses empty text parts, so a blank *text* writes none.
        """
        parts: list[dict[str, Any]] = [{"text": text}] if text.strip() else []
        parts.extend(
            {"functionCall": {"id": call.id, "name": call.name, "args": dict(call.arguments)}} for call in calls
        )
        return {"role": "model", "parts": parts}

    def read_response(self, message: Mapping[str, Any]) -> tuple[str, list[object]]:
        """The text of the ``text`` parts and the ``functionCall`` parts, as given.

        Texts are joined by newlines; thought summaries (``thought: true``) are left out.
        """
        parts = message.get("parts")
        if not isinstance(parts, _SEQUENCES):
            return "", []
        texts = [
            part["text"]
            for part in parts
            if isinstance(part, Mapping) and isinstance(part.get("text"), str) and not part.get("thought")
        ]
        return "\n".join(texts), list(gemini_call_parts(message) or ())

    def result_messages(
        self, results: Sequence[ResultMessage], *, max_chars: int = DEFAULT_MAX_RESULT_CHARS
    ) -> list[dict[str, Any]]:
        """One ``user`` content of ``functionResponse`` parts, in call order (none for no results)."""
        if not results:
            return []
        parts = [
            {
                "functionResponse": {
                    "id": entry.call_id,
                    "name": entry.tool_name,
                    "response": _response(entry.result.text_for_model(max_chars)),
                }
            }
            for entry in results
        ]
        return [{"role": "user", "parts": parts}]


def _response(text: str) -> dict[str, Any]:
    """The ``response`` object of a result whose JSON is *text*: that object, or ``{"output": text}`` when cut."""
    try:
        value = loads(text)
    except ValueError:  # cut to max_chars: no longer JSON
        return {"output": text}
    return value if isinstance(value, dict) else {"output": text}
