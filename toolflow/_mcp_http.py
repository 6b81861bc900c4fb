"""The HTTP client of an MCP server over streamable HTTP, with a bound on each JSON answer.

The ``mcp`` SDK bounds each event of an SSE stream (1 MiB), but reads an ``application/json``
answer whole before parsing it: a server that answered a call with 200 MB of JSON cost toolflow
over a gigabyte of memory, and nothing stopped a larger one. Here the body of every answer that is
not an SSE stream stops at :data:`MAX_JSON_BYTES`; the SDK then fails that request as an answer
it could not parse, naming the limit. Imported only when a spec declares a server over HTTP (it
needs ``httpx2``, which comes with the ``mcp`` SDK).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import httpx2
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

__all__ = ["MAX_JSON_BYTES", "http_client"]

MAX_JSON_BYTES = 16 * 1024 * 1024
"""The largest JSON answer (not an SSE stream) read from a server over HTTP, in bytes; as for stdio."""


class _Capped(httpx2.AsyncByteStream):
    """The body of one answer, ending in ``httpx2.StreamError`` past *limit* bytes (the SDK fails the request)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            read += len(chunk)
            if read > self._limit:
                msg = f"the answer is longer than {self._limit:,} bytes"
                raise httpx2.StreamError(msg)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappingTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport, with the body of each answer that is not an SSE stream capped."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        # An SSE stream lives as long as the session; the SDK bounds each of its events.
        if not response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            response.stream = _Capped(response.stream, self._limit)  # type: ignore[arg-type]
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def http_client(headers: Mapping[str, str]) -> httpx2.AsyncClient:
    """An unentered client for an MCP server: the SDK's timeouts, *headers*, answers capped."""
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=_CappingTransport(MAX_JSON_BYTES),
    )
