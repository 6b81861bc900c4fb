"""The ``scripted`` model provider: replays a YAML transcript of model turns (issue 5, section 4).

``toolflow run --model scripted:session.yaml`` answers each model request with the next turn
of the file, written in the format the loop asks for, so one transcript drives any history
format. It makes the quick start, the tests and the benchmarks deterministic::

    system: You are a helpful game assistant.   # optional: the default system prompt
    prompt: Look around and greet the player.   # optional: the user's message
    turns:
      - text: Let me look around first.          # what the model says beside its calls
        tool_calls:                              # in any format parse_tool_call reads
          - {name: inspect_location, arguments: {detail_level: brief}}
          - {tool: recall_memories, parameters: {query: sword}, reasoning: I met a smith}
        usage: {prompt_tokens: 1200, completion_tokens: 40}
      - message: {role: assistant, content: "<tool_call>{not json</tool_call>"}  # sent verbatim
      - error: {message: overloaded, status: 503}                                 # this request fails
      - text: Welcome, traveller!                # no calls: the final answer

A turn's ``tool_calls`` may be written as ``{name, arguments}``, an OpenAI tool call, an
Anthropic ``tool_use`` block, the fallback ``{tool, parameters}`` or the text protocol's
``{name, args}``; calls without an id get ``call_<turn>_<n>``. A turn with ``message`` is sent
as it is (to script malformed output in one format). A turn with ``error`` makes the request
fail with a :class:`ProviderError`, retryable when ``retryable`` says so or, by
default, for a ``status`` of 408, 409, 429 or 5xx. A request after the last turn fails
(not retryable).

Registering the provider imports nothing of it: the transcript reader and the history formats
(``_scripted``) are imported when a provider is created, so ``toolflow lint`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolflow import hookspecs

if TYPE_CHECKING:
    from toolflow.default_plugins._scripted import ScriptedProvider

__all__ = ["open_scripted", "toolflow_register_model_providers"]


def open_scripted(target: str, *, record_requests: bool = False) -> ScriptedProvider:
    """Load the transcript file *target* (see :func:`toolflow.default_plugins._scripted.open_scripted`).

    The one option, *record_requests*, keeps every request the provider answers in its
    ``requests`` list, for tests that check what the model was sent.

    Raises:
        UsageError: The file cannot be read, is not YAML, or is not a transcript.
        TypeError: An option other than *record_requests* was given.
    """
    from toolflow.default_plugins import _scripted  # noqa: PLC0415 - imported when a provider is created

    return _scripted.open_scripted(target, record_requests=record_requests)


@hookspecs.hookimpl
def toolflow_register_model_providers(register: Any) -> None:
    """Register ``scripted``."""
    register("scripted", open_scripted)
