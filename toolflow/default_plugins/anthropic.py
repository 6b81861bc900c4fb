"""The built-in ``anthropic`` model provider: Anthropic's Messages API (issue 18, section 2).

``toolflow run --model anthropic:MODEL`` asks ``POST {base_url}/v1/messages`` for each model
turn, streaming by default. It speaks the ``anthropic`` history format (``tool_use`` and
``tool_result`` content blocks, the system prompt in the ``system`` field), and also ``fallback``
and ``text``, whose plain string messages the API takes as they are.

Streaming (server-sent events) is assembled into the message a non-streaming call returns:
each content block opens with ``content_block_start`` at its ``index``, grows by its deltas
(``text_delta``; ``input_json_delta`` pieces of a ``tool_use`` block's JSON input, parsed when
the block is complete; ``thinking_delta`` and ``signature_delta``, kept so that a thinking model's
blocks go back to it unchanged) and closes with ``content_block_stop``; ``message_delta``
carries the ``stop_reason`` and the output token count, ``message_stop`` ends the answer.

Failures raise :class:`toolflow.ProviderError`; the provider never retries by itself, the agent
loop does, with backoff, when ``retryable`` is true: HTTP 408, 409, 429 and 5xx (``529
overloaded_error`` among them), connection failures, timeouts, a stream that breaks off, and an
``error`` event in a stream unless it says the request itself is wrong. ``retry_after`` carries
the server's ``retry-after``. A whole answer has ``response_timeout`` seconds (default
:data:`DEFAULT_RESPONSE_TIMEOUT`), however the server keeps the connection busy (``ping`` events
do not extend it).

Registering the provider imports nothing heavy: httpx is imported when a provider is created,
so ``toolflow lint`` and ``toolflow --help`` stay fast.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from toolflow._errors import UsageError
from toolflow.default_plugins.openai import DEFAULT_RESPONSE_TIMEOUT, _check_options, checked_base_url
from toolflow.hookspecs import hookimpl

if TYPE_CHECKING:
    from toolflow.default_plugins._anthropic_messages import AnthropicProvider

__all__ = [
    "API_VERSION",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_RESPONSE_TIMEOUT",
    "NAME",
    "create_provider",
    "toolflow_register_model_providers",
]

NAME = "anthropic"
"""The provider's registered name: ``--model anthropic:MODEL``."""

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""The base URL when neither the ``base_url`` option nor ``ANTHROPIC_BASE_URL`` gives one."""

API_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent unless the ``version`` option says otherwise."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when the option is not given: the Messages API requires the field."""


@hookimpl
def toolflow_register_model_providers(register: Callable[[str, Any], None]) -> None:
    """Register the ``anthropic`` provider."""
    register(NAME, create_provider)


def create_provider(
    target: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    stream: bool = True,
    timeout: float = 120,
    response_timeout: float = DEFAULT_RESPONSE_TIMEOUT,
    max_tokens: int | None = DEFAULT_MAX_TOKENS,
    temperature: float | None = None,
    version: str = API_VERSION,
    extra_body: Mapping[str, Any] | None = None,
) -> AnthropicProvider:
    """Create an ``anthropic`` provider for the model *target* (``anthropic:claude-sonnet-4-5``: ``claude-sonnet-4-5``).

    Args:
        target: The model name sent as ``model``.
        base_url: The API root, without ``/v1``; default: the environment variable
            ``ANTHROPIC_BASE_URL``, else :data:`DEFAULT_BASE_URL`.
        api_key: Sent as the ``x-api-key`` header; default: ``ANTHROPIC_API_KEY``. With no key
            (or an empty one) no ``x-api-key`` header is sent, which suits a local proxy that
            adds its own. The key goes to whatever server *base_url* names.
        stream: Stream the answer (server-sent events) rather than wait for the whole body.
        timeout: Seconds allowed to connect, and between two pieces of the answer.
        response_timeout: Seconds allowed for the whole answer, from sending the request to its
            last byte; the error it gives is retryable.
        max_tokens: Sent as ``max_tokens`` (the API requires it): the most tokens one answer
            may have; ``None`` means :data:`DEFAULT_MAX_TOKENS`.
        temperature: Sent as ``temperature`` when given.
        version: Sent as the ``anthropic-version`` header.
        extra_body: Merged into the request's JSON last, so it can add any field (``thinking``,
            ``tool_choice``, ``metadata``, ``top_k``) or replace one; a key whose value is
            ``None`` removes that field.

    Raises:
        TypeError: An option this provider does not know.
        toolflow.UsageError: An empty model name or version, a base URL that is not
            ``http://`` or ``https://``, or a timeout, response timeout, ``max_tokens``,
            temperature or ``extra_body`` that is out of range or of the wrong type.
    """
    model = target.strip()
    if not model:
        msg = "the anthropic provider needs a model name: --model anthropic:MODEL"
        raise UsageError(msg)
    url = checked_base_url("anthropic", base_url, "ANTHROPIC_BASE_URL", DEFAULT_BASE_URL)
    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    _check_options(timeout, response_timeout, max_tokens, temperature, extra_body)
    if not isinstance(version, str) or not version.strip():
        msg = f"version must be a non-empty string such as {API_VERSION!r}, got {version!r}"
        raise UsageError(msg)
    from toolflow.default_plugins._anthropic_messages import AnthropicProvider  # noqa: PLC0415 - httpx only when used

    key = os.environ.get("ANTHROPIC_API_KEY") if api_key is None else api_key
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        options["temperature"] = temperature
    return AnthropicProvider(
        model=model,
        base_url=url,
        api_key=key or None,
        version=version.strip(),
        stream=bool(stream),
        timeout=float(timeout),
        response_timeout=float(response_timeout),
        options={**options, **(extra_body or {})},
    )
