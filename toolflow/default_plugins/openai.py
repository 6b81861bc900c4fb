"""The built-in ``openai`` model provider: any OpenAI-compatible Chat Completions server.

``toolflow run --model openai:MODEL`` asks ``POST {base_url}/chat/completions`` for each model
turn, streaming by default. It speaks the ``openai``, ``fallback`` and ``text`` history formats
(the Chat Completions API has no ``tool_use`` blocks, so ``anthropic`` is refused). The same
provider serves OpenAI itself and local servers that copy its API (vLLM, llama.cpp's
``llama-server``, Ollama, LM Studio): point ``base_url`` (or ``OPENAI_BASE_URL``) at them.

Streaming (server-sent events) is assembled into the message a non-streaming call returns:
text deltas are joined, tool-call deltas are gathered by their ``index`` (``id``, ``type`` and
``function.name`` arrive with a call's first delta, ``function.arguments`` in pieces; a new
``id`` starts a new call even at a taken index, as Ollama and LiteLLM send parallel calls all at
``index: 0``), and the usage comes from the last chunk (asked for with
``stream_options.include_usage``).

Failures raise :class:`toolflow.ProviderError`; the provider never retries by itself, the agent
loop does, with backoff, when ``retryable`` is true: HTTP 408, 409, 429 and 5xx, connection
failures, timeouts, and a stream that breaks off or reports an error. ``retry_after`` carries the
server's ``retry-after-ms`` or ``Retry-After``. A whole answer has ``response_timeout`` seconds
(default :data:`DEFAULT_RESPONSE_TIMEOUT`), however the server keeps the connection busy; a
``200`` answer that is an HTML page (a wrong base URL, a proxy's or a captive portal's page)
says so.

Registering the provider imports nothing heavy: httpx is imported when a provider is created,
so ``toolflow lint`` and ``toolflow --help`` stay fast.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolflow._errors import UsageError
from toolflow.hookspecs import hookimpl

if TYPE_CHECKING:
    from toolflow.default_plugins._openai_chat import OpenAIProvider

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_RESPONSE_TIMEOUT",
    "NAME",
    "create_provider",
    "toolflow_register_model_providers",
]

NAME = "openai"
"""The provider's registered name: ``--model openai:MODEL``."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The base URL when neither the ``base_url`` option nor ``OPENAI_BASE_URL`` gives one."""

DEFAULT_RESPONSE_TIMEOUT = 600.0
"""Seconds allowed for a whole answer when ``response_timeout`` is not given: ten minutes, for
reasoning models that think for minutes before they answer."""


@hookimpl
def toolflow_register_model_providers(register: Callable[[str, Any], None]) -> None:
    """Register the ``openai`` provider."""
    register(NAME, create_provider)


def create_provider(
    target: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    stream: bool = True,
    timeout: float = 120,
    response_timeout: float = DEFAULT_RESPONSE_TIMEOUT,
    max_tokens: int | None = None,
    temperature: float | None = None,
    extra_body: Mapping[str, Any] | None = None,
) -> OpenAIProvider:
    """Create an ``openai`` provider for the model *target* (``openai:gpt-4o-mini`` gives ``gpt-4o-mini``).

    Args:
        target: The model name sent as ``model``.
        base_url: The API root, up to and including ``/v1``; default: the environment variable
            ``OPENAI_BASE_URL``, else :data:`DEFAULT_BASE_URL`.
        api_key: Sent as ``Authorization: Bearer KEY``; default: ``OPENAI_API_KEY``. With no
            key (or an empty one) no ``Authorization`` header is sent, which suits local servers.
            The key goes to whatever server *base_url* names.
        stream: Stream the answer (server-sent events) rather than wait for the whole body.
        timeout: Seconds allowed to connect, and between two pieces of the answer.
        response_timeout: Seconds allowed for the whole answer, from sending the request to its
            last byte. Keep-alive comments and slow pieces do not extend it; the error it gives
            is retryable.
        max_tokens: Sent as ``max_tokens`` when given.
        temperature: Sent as ``temperature`` when given.
        extra_body: Merged into the request's JSON last, so it can add any field (``top_p``,
            ``max_completion_tokens``, ``seed``, a server's own options) or replace one; a key
            whose value is ``None`` removes that field (``{"stream_options": None}`` for a
            server that refuses it).

    Raises:
        TypeError: An option this provider does not know.
        toolflow.UsageError: An empty model name, a base URL that is not ``http://`` or
            ``https://``, or a timeout, response timeout, ``max_tokens``, temperature or
            ``extra_body`` that is out of range or of the wrong type.
    """
    model = target.strip()
    if not model:
        msg = "the openai provider needs a model name: --model openai:MODEL"
        raise UsageError(msg)
    url = checked_base_url("openai", base_url, "OPENAI_BASE_URL", DEFAULT_BASE_URL)
    _check_options(timeout, response_timeout, max_tokens, temperature, extra_body)
    from toolflow.default_plugins._openai_chat import OpenAIProvider  # noqa: PLC0415 - httpx only when used

    key = os.environ.get("OPENAI_API_KEY") if api_key is None else api_key
    options = {
        name: value for name, value in (("max_tokens", max_tokens), ("temperature", temperature)) if value is not None
    }
    return OpenAIProvider(
        model=model,
        base_url=url,
        api_key=key or None,
        stream=bool(stream),
        timeout=float(timeout),
        response_timeout=float(response_timeout),
        options={**options, **(extra_body or {})},
    )


def checked_base_url(provider: str, base_url: str | None, variable: str, default: str) -> str:
    """*base_url*, ``$variable`` or *default*, without a trailing slash: an HTTP(S) URL with a host.

    Raises:
        toolflow.UsageError: Not ``http://`` or ``https://``, or not a URL (no host, a port that
            is not a number, a broken IPv6 address); the message shows no credentials or query.
    """
    url = (base_url or os.environ.get(variable) or default).strip().rstrip("/")
    problem = None
    if not url.lower().startswith(("http://", "https://")):
        problem = "must start with http:// or https://"
    else:
        try:
            parts = urlsplit(url)
            _ = parts.port  # reading it checks it
            if not parts.hostname:
                problem = "is not a URL: it names no host"
        except ValueError as exc:  # the port or an IPv6 address
            problem = f"is not a URL: {exc}"
    if problem is not None:
        from toolflow.default_plugins._http_provider import without_credentials  # noqa: PLC0415 - httpx's

        msg = f"the {provider} base URL {problem}, got {without_credentials(url)!r}"
        raise UsageError(msg)
    return url


def _check_options(
    timeout: object, response_timeout: object, max_tokens: object, temperature: object, extra_body: object
) -> None:
    """Raise :class:`~toolflow.UsageError` for an option out of range or of the wrong type."""
    for option, seconds in (("timeout", timeout), ("response_timeout", response_timeout)):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < math.inf:
            msg = f"{option} must be a positive number of seconds, got {seconds!r}"
            raise UsageError(msg)
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        msg = f"max_tokens must be a positive integer, got {max_tokens!r}"
        raise UsageError(msg)
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, int | float) or not 0 <= temperature < math.inf
    ):
        msg = f"temperature must be a number from 0, got {temperature!r}"
        raise UsageError(msg)
    if extra_body is not None and not isinstance(extra_body, Mapping):
        msg = f"extra_body must be a mapping, got {type(extra_body).__name__}"
        raise UsageError(msg)
