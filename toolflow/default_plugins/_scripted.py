"""The ``scripted`` provider's implementation, imported when a provider is created (see ``scripted``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from toolflow._calls import MalformedCall, ToolCall, parse_tool_call
from toolflow._errors import UsageError
from toolflow._history import HistoryFormat, get_format
from toolflow._providers import ModelRequest, ModelResponse, ProviderError, Usage
from toolflow._yaml import DocumentError, load_data

__all__ = ["ScriptedProvider", "open_scripted"]

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def _fail(path: str, where: str, message: str) -> UsageError:
    return UsageError(f"{path}: {where}: {message}")


def _usage(path: str, where: str, value: object) -> Usage | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(
        isinstance(value.get(key, 0), int) and not isinstance(value.get(key, 0), bool)
        for key in ("prompt_tokens", "completion_tokens")
    ):
        raise _fail(path, where, "'usage' must be a mapping of integer 'prompt_tokens' and 'completion_tokens'")
    return Usage(
        prompt_tokens=int(value.get("prompt_tokens", 0)), completion_tokens=int(value.get("completion_tokens", 0))
    )


def _calls(path: str, number: int, raw_calls: object) -> list[ToolCall]:
    """The tool calls of turn *number*, each parsed once, as the transcript writes them."""
    if not isinstance(raw_calls, list):
        raise _fail(path, f"turn {number}", "'tool_calls' must be a list")
    calls: list[ToolCall] = []
    for index, item in enumerate(raw_calls):
        if isinstance(item, Mapping) and "name" in item and "arguments" in item and "function" not in item:
            item = {"name": item["name"], "args": item["arguments"]}  # noqa: PLW2901 - the short form
        call = parse_tool_call(item, index=index, id_prefix=f"call_{number}_")
        if isinstance(call, MalformedCall):
            raise _fail(
                path,
                f"turn {number}, call {index + 1}",
                f"{call.error}; to script a malformed call, write the turn's 'message' verbatim",
            )
        calls.append(call)
    return calls


class _Turn:
    __slots__ = ("calls", "error", "message", "text", "usage")

    def __init__(self, path: str, number: int, raw: object) -> None:
        where = f"turn {number}"
        if not isinstance(raw, Mapping):
            raise _fail(path, where, f"expected a mapping, got {type(raw).__name__}")
        unknown = sorted(set(raw) - {"text", "tool_calls", "usage", "message", "error"})
        if unknown:
            raise _fail(path, where, f"unknown keys {unknown!r}; expected text, tool_calls, usage, message, error")
        self.text = raw.get("text") or ""
        if not isinstance(self.text, str):
            raise _fail(path, where, "'text' must be a string")
        self.usage = _usage(path, where, raw.get("usage"))
        self.message = raw.get("message")
        if self.message is not None and not isinstance(self.message, Mapping):
            raise _fail(path, where, "'message' must be a mapping (the assistant message, sent as it is)")
        self.error = raw.get("error")
        if self.error is not None and not isinstance(self.error, Mapping | str):
            raise _fail(path, where, "'error' must be a message or a mapping with 'message', 'status', 'retryable'")
        self.calls = _calls(path, number, raw.get("tool_calls") or [])

    def response(self, request: ModelRequest, formats: dict[str, HistoryFormat]) -> ModelResponse:
        if self.error is not None:
            error: Mapping[str, Any] = {"message": self.error} if isinstance(self.error, str) else self.error
            status = error.get("status")
            retryable = error.get("retryable")
            if retryable is None:
                retryable = isinstance(status, int) and (status in _RETRYABLE_STATUS or status >= 500)
            raise ProviderError(
                str(error.get("message", "scripted error")),
                provider="scripted",
                retryable=bool(retryable),
                retry_after=error.get("retry_after"),
                status=status if isinstance(status, int) else None,
            )
        if self.message is not None:
            message: Mapping[str, Any] = dict(self.message)
        else:
            writer = formats.get(request.format)
            if writer is None:  # made once per format, not once per turn
                writer = formats[request.format] = get_format(request.format)
            message = writer.assistant_message(self.text, self.calls)
        return ModelResponse(message=message, usage=self.usage, finish_reason="tool_calls" if self.calls else "stop")


class ScriptedProvider:
    """Answers model requests with the turns of a transcript, one per request.

    Attributes:
        name: ``scripted``.
        formats: Every history format.
        path: The transcript file.
        system: The transcript's system prompt (``""`` when it has none).
        prompt: The transcript's user message (``""`` when it has none).
        requests: Every request received, in order, when made with ``record_requests=True``
            (for tests); else empty. Each request's messages show the history as it was at its
            turn (a view of the loop's history, not a copy).
    """

    name = "scripted"
    formats: tuple[str, ...] = ("openai", "anthropic", "fallback", "text", "gemini")

    def __init__(self, path: str, document: Mapping[str, Any], *, record_requests: bool = False) -> None:
        self.path = path
        system = document.get("system", "")
        prompt = document.get("prompt", "")
        if not isinstance(system, str) or not isinstance(prompt, str):
            raise _fail(path, "top level", "'system' and 'prompt' must be strings")
        self.system = system
        self.prompt = prompt
        turns = document.get("turns")
        if not isinstance(turns, list) or not turns:
            raise _fail(path, "top level", "'turns' must be a non-empty list of model turns")
        unknown = sorted(set(document) - {"system", "prompt", "turns"})
        if unknown:
            raise _fail(path, "top level", f"unknown keys {unknown!r}; expected system, prompt, turns")
        self._turns = [_Turn(path, number, raw) for number, raw in enumerate(turns, start=1)]
        self._next = 0
        self._formats: dict[str, HistoryFormat] = {}
        self.requests: list[ModelRequest] = []
        self._record = record_requests

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next turn, written in *request*'s format; other tasks run first (a checkpoint)."""
        # An async function always checkpoints (trio's rule), as a real provider's I/O does: a
        # session of quick tools would otherwise never let Ctrl-C (the CLI's signal task), a stop
        # or a kill in before its end.
        import trio  # noqa: PLC0415 - imported when a model is asked, never when plugins load (toolflow lint)

        await trio.lowlevel.checkpoint()
        if self._record:
            self.requests.append(request)
        if self._next >= len(self._turns):
            message = f"the transcript {self.path} has no turn {self._next + 1} (it has {len(self._turns)})"
            raise ProviderError(message, provider="scripted")
        turn = self._turns[self._next]
        self._next += 1
        return turn.response(request, self._formats)

    async def aclose(self) -> None:
        """Nothing to release."""


def open_scripted(target: str, *, record_requests: bool = False) -> ScriptedProvider:
    """Load the transcript file *target*; with *record_requests*, keep every request in ``requests``.

    Raises:
        UsageError: The file cannot be read, is not YAML, or is not a transcript
            (the message names the file, and the line and column of a YAML error).
    """
    path = os.fspath(target)
    if not path:
        msg = "scripted: give the transcript file, as in --model scripted:session.yaml"
        raise UsageError(msg)
    try:
        with open(path, encoding="utf-8") as file:
            document = load_data(file.read())
    except OSError as exc:
        msg = f"{path}: cannot read the transcript: {exc.strerror or exc}"
        raise UsageError(msg) from None
    except UnicodeDecodeError as exc:
        msg = f"{path}: the transcript is not UTF-8 text ({exc.reason})"
        raise UsageError(msg) from None
    except DocumentError as exc:
        msg = f"{path}:{exc.line}:{exc.column}: {exc.message}"
        raise UsageError(msg) from None
    if not isinstance(document, Mapping):
        msg = f"{path}: a transcript is a mapping with 'turns' (and optionally 'system' and 'prompt')"
        raise UsageError(msg)
    return ScriptedProvider(path, document, record_requests=record_requests)
