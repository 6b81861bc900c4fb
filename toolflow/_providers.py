"""Model providers: what the agent loop asks a model, and what it gets back (issue 5, section 4).

A provider turns a :class:`ModelRequest` into a :class:`ModelResponse`. Requests and responses
are written in the shapes of one *history format* (``openai``, ``anthropic``, ``fallback`` or
``text``, see :mod:`toolflow._history`): the loop keeps the history in that format, and a
provider that speaks the format's API sends the messages as they are.

- ``openai``: ``messages`` are Chat Completions messages (``user``, ``assistant`` with
  ``tool_calls``, ``tool``); ``tools`` are Chat Completions tool definitions; the response
  ``message`` is an assistant message ``{"role": "assistant", "content": ..., "tool_calls": [...]}``.
- ``anthropic``: ``messages`` are Messages API messages with ``tool_use`` / ``tool_result``
  content blocks; ``tools`` are ``{"name", "description", "input_schema"}``; the response
  ``message`` is ``{"role": "assistant", "content": [blocks]}``.
- ``gemini``: ``messages`` are Gemini API contents (``{"role": "user"|"model", "parts": [...]}``
  with ``functionCall`` / ``functionResponse`` parts); ``tools`` is one Gemini ``Tool``
  (``{"functionDeclarations": [...]}``); the response ``message`` is the candidate's content,
  ``{"role": "model", "parts": [...]}``; the system prompt goes as ``systemInstruction``.
- ``fallback`` and ``text``: plain ``{"role", "content"}`` messages and no ``tools`` (the tools
  are described in the system prompt); the response ``message`` is
  ``{"role": "assistant", "content": "..."}``.

The system prompt travels apart from the messages (``request.system``): a Chat Completions
provider sends it as the first ``system`` message, an Anthropic one as the ``system`` field.

Providers are registered by plugins through ``toolflow_register_model_providers``:
``register(name, factory)``, where ``factory(target, **options)`` returns a provider; the CLI's
``--model NAME:TARGET`` calls the factory of ``NAME`` with ``TARGET``. The built-in ``scripted``,
``openai`` and ``anthropic`` providers are default plugins.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, overload, runtime_checkable

import attrs

from toolflow._errors import ToolflowError, UsageError, expect
from toolflow._plugins import Plugins
from toolflow._schemas import did_you_mean

__all__ = [
    "HISTORY_FORMATS",
    "HistoryView",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ProviderError",
    "Usage",
    "load_provider",
]

PROVIDERS_HOOK = "toolflow_register_model_providers"

HISTORY_FORMATS = ("openai", "anthropic", "fallback", "text", "gemini")
"""The history formats a request can be written in."""


def _tuple_of_dicts(value: Any) -> tuple[Mapping[str, Any], ...]:
    return value if isinstance(value, tuple) else tuple(value)


class HistoryView(Sequence[Mapping[str, Any]]):
    """The messages of an append-only history up to a point, and maybe a few after it; read-only.

    The agent loop's request of each turn shows the history as it was at that turn without
    copying it, so that a turn costs the same however long the run: the loop only ever appends
    to its history list, so the first messages, as many as the list held when the view was
    made, never change. *tail* holds messages that follow them in this view only (the last
    turn's request to answer without tools, a reflection's prompt).

    It compares equal to a tuple or a view of the same messages; slices are tuples.
    """

    __slots__ = ("_items", "_length", "_tail")

    def __init__(self, items: list[Mapping[str, Any]], tail: tuple[Mapping[str, Any], ...] = ()) -> None:
        self._items = items
        self._length = len(items)
        self._tail = tail

    def __len__(self) -> int:
        return self._length + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Mapping[str, Any], ...]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | tuple[Mapping[str, Any], ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(len(self))[index])
        position = index + len(self) if index < 0 else index
        if not 0 <= position < len(self):
            msg = "HistoryView index out of range"
            raise IndexError(msg)
        return self._items[position] if position < self._length else self._tail[position - self._length]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return itertools.chain(itertools.islice(self._items, self._length), self._tail)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, tuple | HistoryView):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment] # messages are dicts: a view is no more hashable than its tuple

    def __repr__(self) -> str:
        return f"HistoryView({tuple(self)!r})"


def _messages(value: Any) -> Sequence[Mapping[str, Any]]:
    # The view by its type: isinstance() of an ABC's subclass runs Python code, on every turn.
    return value if isinstance(value, tuple) or type(value) is HistoryView else tuple(value)


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage of one model response.

    Attributes:
        prompt_tokens: Tokens of the request (the context the model saw).
        completion_tokens: Tokens the model generated.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``: how full the context window is after the response."""
        return self.prompt_tokens + self.completion_tokens


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One model turn's request, in the shapes of :attr:`format` (see the module documentation).

    Attributes:
        format: The history format the messages, tools and expected response are written in.
        system: The system prompt (for ``fallback`` and ``text`` it includes the tool protocol).
        messages: The conversation so far, without the system prompt; a read-only sequence: a
            tuple (any other iterable given is made one), or the agent loop's
            :class:`HistoryView` of its history at this turn, which later turns do not change.
        tools: Tool definitions the model may call this turn; empty when it may call none (a
            ``fallback``/``text`` request, or the last turn before a hard stop).
        turn: The loop's iteration, from 1.
        model: The model name the provider was asked for, if any.
    """

    format: str
    system: str = ""
    messages: Sequence[Mapping[str, Any]] = attrs.field(default=(), converter=_messages)
    tools: tuple[Mapping[str, Any], ...] = attrs.field(default=(), converter=_tuple_of_dicts)
    turn: int = 1
    model: str = ""


@attrs.frozen(kw_only=True)
class ModelResponse:
    """What the model answered.

    Attributes:
        message: The assistant message, in the request format's shape.
        usage: Token usage, when the provider reports it.
        finish_reason: Why the model stopped (``stop``, ``tool_calls``, ``length``, ...), when known.
    """

    message: Mapping[str, Any]
    usage: Usage | None = None
    finish_reason: str | None = None


class ProviderError(ToolflowError):
    """A model provider failed to answer.

    Attributes:
        provider: The provider's name (``openai``, ``scripted``, ...).
        retryable: Whether asking again may succeed (rate limits, 5xx, dropped connections).
        retry_after: Seconds the server asked to wait before retrying, when it said.
        status: The HTTP status, when there was one.
    """

    exit_code = 1

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status


@runtime_checkable
class ModelProvider(Protocol):
    """A model the agent loop can ask; built by a factory a plugin registers.

    Attributes:
        name: The provider's registered name (``openai``, ``scripted``, ...).
        formats: The history formats it can speak.
    """

    name: str
    formats: tuple[str, ...]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer *request*.

        Raises:
            ProviderError: The model could not answer; ``retryable`` says whether to ask again.
        """
        ...

    async def aclose(self) -> None:
        """Release what the provider holds (HTTP connections, files)."""
        ...


def load_provider(model: str, *, plugins: Plugins, **options: Any) -> ModelProvider:
    """Open the model provider *model* (``PROVIDER:TARGET``, as ``toolflow run --model`` takes it).

    Calls the factory that a plugin registered for ``PROVIDER`` with ``TARGET`` and *options*.

    Raises:
        UsageError: *model* is not ``PROVIDER:TARGET``; no plugin (or more than one) registers
            ``PROVIDER``; the provider does not take *options*; the factory returned something
            that is not a :class:`ModelProvider`. A factory's own :class:`~toolflow.ToolflowError`
            (a transcript that cannot be read, say) passes through.
        TypeError: *model* is not a string or *plugins* not a :class:`~toolflow.Plugins`.
    """
    expect(model, str, "load_provider: model", "a string such as 'openai:gpt-4o-mini'")
    expect(plugins, Plugins, "load_provider: plugins", "a toolflow.Plugins (from toolflow.load_plugins())")
    name, sep, target = model.partition(":")
    if not sep or not name:
        msg = f"--model must be PROVIDER:TARGET (e.g. scripted:session.yaml or openai:gpt-4o-mini), got {model!r}"
        raise UsageError(msg)
    found = plugins.registered(PROVIDERS_HOOK)
    if name not in found:
        known = sorted(found)
        msg = f"no model provider {name!r}; installed: {', '.join(known) or 'none'}{did_you_mean(name, known)}"
        raise UsageError(msg)
    if len(found[name]) > 1:
        owners = " and ".join(repr(plugin) for plugin, _ in found[name])
        msg = f"model provider {name!r} is registered by {owners}; disable one of them"
        raise UsageError(msg)
    factory = found[name][0][1]
    try:
        provider = factory(target, **options)
    except TypeError as exc:
        msg = f"model provider {name!r} does not take these options ({', '.join(sorted(options))}): {exc}"
        raise UsageError(msg) from None
    if not isinstance(provider, ModelProvider):
        msg = f"model provider {name!r} returned {type(provider).__name__}, which is not a toolflow.ModelProvider"
        raise UsageError(msg)
    return provider
