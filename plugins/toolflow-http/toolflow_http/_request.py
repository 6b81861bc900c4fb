"""Compile a tool's ``http:`` configuration once, then send one request per call.

Templating and escaping (also in the README):

- Every string of the configuration is a template in toolflow's sandboxed
  Jinja2 environment with ``StrictUndefined``; the variables are the call's
  arguments, plus ``env.NAME`` for the names the configuration lists under
  ``env`` (read when the call is made). A request's templates render in one
  job of a toolflow template worker (``toolflow.run_in_template_worker``),
  under the tool's timeout and toolflow's per-render memory budget. ``${VAR}`` in the spec file is
  replaced by the loader before any of this, and is not escaped.
- ``url``: the output of each ``{{ expression }}`` is percent-encoded, leaving
  only letters, digits and ``-._~``; a value of ``.`` or ``..`` is refused. An
  argument therefore fills exactly one path segment, query value or host label
  and cannot add ``/``, ``?``, ``#``, ``&``, ``@`` or ``:``. ``{{ x | safe }}``
  inserts ``x`` unescaped, for spec authors who mean it. The rendered URL must
  be absolute ``http`` or ``https``.
- ``query``: values are sent as query parameters, URL-encoded by httpx; they
  are never spliced into the URL text.
- ``headers``: a value may not contain a line break or a NUL (no header injection).
- A string that is exactly one ``{{ expression }}`` (in ``json``, ``query`` and
  ``headers``) takes the expression's value with its type: ``"{{ limit }}"`` is
  the integer, ``"{{ tags }}"`` the list (a list in ``query`` repeats the
  parameter). When the string is ``{{ name }}`` and the call did not give the
  argument ``name``, the key is left out; so is a null in ``query`` and
  ``headers``. Any other string is rendered as text, and an undefined variable
  in it is an error.

Sending: redirects are followed (``follow_redirects``, at most the client's
``max_redirects``) hop by hop from httpx's ``Response.next_request``; a hop to another
origin drops the configuration's headers and the body. Every connection goes through
``toolflow_http._network.CheckedTransport``, which refuses denied addresses after DNS
resolution (the failure ``address not allowed: ...``).

The response becomes the result: ``data`` (parsed JSON, text, or ``None`` for an
empty body; read, decoded and parsed by ``toolflow_http._body`` within ``max_bytes``),
``status`` and a few ``headers``. A status outside ``ok_status`` is a failure
``"HTTP 404 Not Found"``; 429 and 503 (``retry_status``) are also flagged ``retryable``
and carry ``retry_after`` in seconds when the server sent a ``Retry-After`` that
``toolflow.retry_after_seconds`` reads (at most a day). Transport problems are failures
naming the httpx error class; timeouts and network errors are flagged retryable.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jinja2
import jinja2.nodes
import trio
from markupsafe import Markup

from toolflow import (
    TemplateError,
    ToolSpec,
    parse_duration,
    retry_after_seconds,
    run_in_template_worker,
    trace_context,
)
from toolflow import template_environment as environment
from toolflow_http import __version__
from toolflow_http._body import (
    ACCEPT_ENCODING,
    BodyError,
    BodyTooLargeError,
    NotJSONError,
    body_json,
    body_text,
    read_body,
)
from toolflow_http._network import AddressNotAllowedError, AddressRules, CheckedTransport
from toolflow_http._schema import DEFAULT_MAX_BYTES, DEFAULT_RETRY_STATUS

__all__ = ["HttpRequest", "RenderError", "Rendered", "build"]

USER_AGENT = f"toolflow-http/{__version__} python-httpx/{httpx.__version__}"
"""The default ``User-Agent``; a ``headers:`` entry replaces it."""

KEPT_HEADERS = ("content-type", "etag", "last-modified", "location", "retry-after", "link")
"""Response headers copied into the result (plus every ``x-ratelimit-*`` header)."""

_WHOLE = re.compile(r"\{\{-?(?P<expression>.*?)-?\}\}", re.DOTALL)
_MISSING: Any = object()
_FORBIDDEN_IN_HEADER = re.compile(r"[\r\n\x00]")


class RenderError(Exception):
    """A template of the configuration cannot be rendered for these arguments."""


# --- templates ------------------------------------------------------------------------------


def _scalar_text(value: Any, where: str) -> str:
    if isinstance(value, jinja2.Undefined):
        str(value)  # raises UndefinedError, naming the variable
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        if isinstance(value, float) and not math.isfinite(value):
            msg = f"{where}: {value!r} is not a finite number"
            raise RenderError(msg)
        return str(value)
    msg = f"{where}: a {type(value).__name__} value cannot be used here"
    raise RenderError(msg)


def _url_finalize(value: Any) -> str:
    """Percent-encode each expression's output in a URL template (``| safe`` opts out)."""
    if isinstance(value, Markup):
        return str(value)
    text = _scalar_text(value, "url")
    if text in {".", ".."}:
        msg = f"url: the value {text!r} would change the path"
        raise RenderError(msg)
    return urllib.parse.quote(text, safe="")


@functools.cache
def _url_environment() -> jinja2.Environment:
    overlay: jinja2.Environment = environment().overlay(finalize=_url_finalize)
    return overlay


class _Text:
    """A templated string of the configuration, compiled once per process (sent to template workers as its source)."""

    def __init__(self, source: str, where: str, *, url: bool = False) -> None:
        self.source, self.where, self.url = source, where, url
        env = _url_environment() if url else environment()
        self.constant = "{" not in source
        self.template = None if self.constant else env.from_string(source)
        self.expression: Any = None
        self.name: str | None = None
        whole = _WHOLE.fullmatch(source)
        node = _single_output(env.parse(source)) if whole and not self.constant else None
        if whole and node is not None:
            self.expression = env.compile_expression(whole["expression"], undefined_to_none=False)
            self.name = node.name if isinstance(node, jinja2.nodes.Name) else None

    def __reduce__(self) -> tuple[Any, ...]:
        return (_compiled_text, (self.source, self.where, self.url))

    def text(self, context: Mapping[str, Any]) -> str:
        """The rendering as text."""
        if self.template is None:
            return self.source
        return self.template.render(context)

    def value(self, context: Mapping[str, Any]) -> Any:
        """The value, typed when the string is one expression; ``_MISSING`` for ``{{ name }}`` of an unset argument.

        Raises:
            jinja2.TemplateError: The template fails (an undefined variable or attribute, a sandbox violation).
        """
        if self.expression is None:
            return self.text(context)
        if self.name is not None and self.name not in context:
            return _MISSING
        result = self.expression(**context)
        if isinstance(result, jinja2.Undefined):
            str(result)  # raises: StrictUndefined names what is undefined, the sandbox what is unsafe
        return result


@functools.lru_cache(maxsize=512)
def _compiled_text(source: str, where: str, url: bool) -> _Text:
    """A :class:`_Text` received by a template worker, compiled there once."""
    return _Text(source, where, url=url)


def _single_output(tree: jinja2.nodes.Template) -> jinja2.nodes.Node | None:
    """The expression node of a template that is exactly one ``{{ expression }}``, else ``None``."""
    body = tree.body
    if len(body) == 1 and isinstance(body[0], jinja2.nodes.Output) and len(body[0].nodes) == 1:
        node = body[0].nodes[0]
        return None if isinstance(node, jinja2.nodes.TemplateData) else node
    return None


def _compile_json(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return _Text(value, where)
    if isinstance(value, Mapping):
        return {key: _compile_json(item, f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_compile_json(item, f"{where}[{index}]") for index, item in enumerate(value)]
    return value


def _iter_texts(value: Any) -> Iterator[_Text]:
    if isinstance(value, _Text):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _iter_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _iter_texts(item)


def _render_json(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, _Text):
        return value.value(context)
    if isinstance(value, dict):
        rendered = ((key, _render_json(item, context)) for key, item in value.items())
        return {key: item for key, item in rendered if item is not _MISSING}
    if isinstance(value, list):
        return [item for item in (_render_json(entry, context) for entry in value) if item is not _MISSING]
    return value


# --- the request --------------------------------------------------------------------------


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying SSL context for every client: making one costs tens of milliseconds."""
    return httpx.create_ssl_context()


@dataclass(frozen=True, kw_only=True)
class Rendered:
    """A request's parts, rendered for one call."""

    method: str
    url: httpx.URL
    headers: dict[bytes, bytes]
    content: bytes | None


@dataclass(frozen=True, kw_only=True)
class HttpRequest:
    """A compiled ``http:`` configuration: :meth:`send` makes one request from the arguments."""

    method: str
    url: _Text
    headers: Mapping[str, _Text]
    query: Mapping[str, _Text | list[_Text]]
    body: Any
    has_body: bool
    env: tuple[str, ...]
    timeout: float
    ok_status: frozenset[int] | None
    retry_status: frozenset[int]
    response: str
    follow_redirects: bool
    max_bytes: int
    addresses: AddressRules

    @classmethod
    def from_config(cls, config: Any, *, default_timeout: float = 30.0) -> HttpRequest:
        """Compile *config* (the ``http:`` value: a URL or a mapping).

        Raises:
            ValueError: The configuration is not valid (a template does not compile, a bad duration).
        """
        settings: Mapping[str, Any] = {"url": config} if isinstance(config, str) else config
        try:
            headers = {name: _Text(value, f"headers.{name}") for name, value in (settings.get("headers") or {}).items()}
            query: dict[str, _Text | list[_Text]] = {}
            for name, value in (settings.get("query") or {}).items():
                if isinstance(value, list):
                    query[name] = [_Text(_plain(v), f"query.{name}") for v in value]
                else:
                    query[name] = _Text(_plain(value), f"query.{name}")
            return cls(
                method=str(settings.get("method", "GET")).upper(),
                url=_Text(settings["url"], "url", url=True),
                headers=headers,
                query=query,
                body=_compile_json(settings.get("json"), "json"),
                has_body="json" in settings,
                env=tuple(settings.get("env") or ()),
                timeout=parse_duration(settings["timeout"]) if "timeout" in settings else default_timeout,
                ok_status=frozenset(settings["ok_status"]) if "ok_status" in settings else None,
                retry_status=frozenset(settings.get("retry_status", DEFAULT_RETRY_STATUS)),
                response=settings.get("response", "auto"),
                follow_redirects=bool(settings.get("follow_redirects", True)),
                max_bytes=int(settings.get("max_bytes", DEFAULT_MAX_BYTES)),
                addresses=AddressRules.from_config(
                    settings.get("deny_addresses") or (), settings.get("allow_addresses") or ()
                ),
            )
        except jinja2.TemplateSyntaxError as exc:
            msg = f"template syntax error: {exc.message} (line {exc.lineno})"
            raise ValueError(msg) from None
        except (RecursionError, SyntaxError):
            msg = "a template nests too deeply"
            raise ValueError(msg) from None

    # -- rendering --------------------------------------------------------------------------

    def context(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The template variables: the arguments, and ``env`` when the configuration lists names."""
        if not self.env:
            return dict(arguments)
        missing = [name for name in self.env if name not in os.environ]
        if missing:
            msg = f"environment variable {missing[0]!r} is not set"
            raise RenderError(msg)
        return {**arguments, "env": {name: os.environ[name] for name in self.env}}

    def render(self, context: Mapping[str, Any]) -> Rendered:
        """The request's parts for the template variables *context* (see :meth:`context`).

        It renders templates, so it runs in a template worker (:meth:`send` sees to it).

        Raises:
            RenderError: A template fails for these variables, or the result is not a valid request.
        """
        where = "url"
        try:
            url = httpx.URL(self.url.text(context))
            where = "query"
            params: list[tuple[str, str | int | float | bool | None]] = list(self._params(context))
            where = "headers"
            headers = dict(self._headers(context))
            where = "json"
            content = None
            body = _render_json(self.body, context) if self.has_body else _MISSING
            if body is not _MISSING:  # `json: "{{ payload }}"` without a payload sends no body
                content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
                headers.setdefault(b"content-type", b"application/json")
        except RenderError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever an expression raises is this call's failure
            msg = f"{where}: {_describe(exc)}"
            raise RenderError(msg) from None
        if url.scheme not in {"http", "https"}:
            msg = f"url: expected an absolute http or https URL, got scheme {url.scheme!r}"
            raise RenderError(msg)
        if not url.host:
            msg = f"url: {_redacted(url)!r} has no host"
            raise RenderError(msg)
        return Rendered(method=self.method, url=url.copy_merge_params(params), headers=headers, content=content)

    def _params(self, context: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        for name, templates in self.query.items():
            for template in templates if isinstance(templates, list) else (templates,):
                value = template.value(context)
                if value is _MISSING or value is None:
                    continue
                items = value if isinstance(value, list | tuple) else (value,)
                for item in items:
                    if item is not None:
                        yield name, _scalar_text(item, f"query.{name}")

    def _headers(self, context: Mapping[str, Any]) -> Iterator[tuple[bytes, bytes]]:
        for name, template in self.headers.items():
            value = template.value(context)
            if value is _MISSING or value is None:
                continue
            text = _scalar_text(value, f"headers.{name}")
            if _FORBIDDEN_IN_HEADER.search(text):
                msg = f"headers.{name}: the value contains a line break or NUL"
                raise RenderError(msg)
            yield name.lower().encode("ascii"), text.encode("utf-8")

    async def _render_in_worker(self, context: Mapping[str, Any]) -> Rendered:
        """:meth:`render` in a template worker, under the per-render budget; here when nothing is templated."""
        if all(text.constant for text in self._texts()):
            return self.render(context)
        with trio.move_on_after(self.timeout):
            return await run_in_template_worker(self.render, context)
        msg = f"the templates did not render within {self.timeout:g}s"
        raise RenderError(msg)

    def _texts(self) -> Iterator[_Text]:
        yield self.url
        yield from self.headers.values()
        for value in self.query.values():
            yield from value if isinstance(value, list) else (value,)
        yield from _iter_texts(self.body)

    # -- sending ----------------------------------------------------------------------------

    async def send(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Make the request for *arguments* and return the result dictionary (never raises but for cancellation)."""
        try:
            parts = await self._render_in_worker(self.context(arguments))
        except (RenderError, TemplateError) as exc:
            return {"success": False, "error": f"cannot build the HTTP request: {exc}"}
        target = f"{parts.method} {_redacted(parts.url)}"
        try:
            with trio.fail_after(self.timeout):
                async with httpx.AsyncClient(
                    timeout=self.timeout,
                    headers={"user-agent": USER_AGENT, "accept-encoding": ACCEPT_ENCODING},
                    transport=CheckedTransport(self.addresses, ssl_context=_ssl_context()),
                    trust_env=False,
                ) as client:
                    # The call's trace context, when it is traced; a header the spec sets wins.
                    traced = {key.encode("ascii"): value.encode("ascii") for key, value in trace_context().items()}
                    headers = {**traced, **parts.headers} if traced else parts.headers
                    request = client.build_request(parts.method, parts.url, headers=headers, content=parts.content)
                    response = await self._send_following_redirects(client, request)
                    try:
                        body = await read_body(response, self.max_bytes)
                    finally:
                        await response.aclose()
        except trio.TooSlowError:
            return _transport_failure(
                "Timeout", f"no complete response within {self.timeout:g}s", target, retryable=True
            )
        except BodyTooLargeError:
            return {
                "success": False,
                "error": f"the response of {target} is larger than {self.max_bytes} bytes",
                "status": response.status_code,
            }
        except BodyError as exc:
            return {"success": False, "error": f"{exc} ({target})", "status": response.status_code}
        except AddressNotAllowedError as exc:
            return {"success": False, "error": f"address not allowed: {exc} ({target})", "retryable": False}
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError, httpx.InvalidURL) as exc:
            return _transport_failure(type(exc).__name__, str(exc), target, retryable=False)
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
            return _transport_failure(type(exc).__name__, str(exc), target, retryable=True)
        except httpx.HTTPError as exc:
            return _transport_failure(type(exc).__name__, str(exc), target, retryable=False)
        return self._result(response, body)

    async def _send_following_redirects(self, client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
        """Send *request*, and follow redirects (when the configuration does) up to the client's ``max_redirects``.

        httpx works out each hop (``Response.next_request``: the method, the URL, its cookies);
        across origins (scheme, host or port) it keeps every header but ``Authorization`` and the
        body of a 307 or 308. A hop to another origin here drops every header the configuration
        declares (they carry keys) and any body, for the rest of the chain. Each new origin is a
        new connection, whose addresses :class:`CheckedTransport` checks.

        Raises:
            httpx.TooManyRedirects: More than ``client.max_redirects`` hops.
        """
        hops = 0
        while True:
            response = await client.send(request, stream=True)
            following = response.next_request if self.follow_redirects else None
            if following is None:
                return response
            await response.aclose()
            hops += 1
            if hops > client.max_redirects:
                msg = f"more than {client.max_redirects} redirects"
                raise httpx.TooManyRedirects(msg, request=following)
            if _origin(following.url) != _origin(request.url):
                following = self._without_secrets(following)
            request = following

    def _without_secrets(self, request: httpx.Request) -> httpx.Request:
        """*request* without the configuration's headers and without a body, for another origin."""
        dropped = {name.lower().encode("ascii") for name in self.headers} | _BODY_HEADERS
        headers = [(name, value) for name, value in request.headers.raw if name.lower() not in dropped]
        if not any(name.lower() == b"user-agent" for name, _ in headers):
            headers.append((b"user-agent", USER_AGENT.encode("ascii")))
        return httpx.Request(request.method, request.url, headers=headers, extensions=request.extensions)

    def _result(self, response: httpx.Response, body: bytes) -> dict[str, Any]:
        status = response.status_code
        result: dict[str, Any] = {"success": True, "data": None}
        warnings: list[str] = []
        if body and self.method != "HEAD":
            try:
                result["data"] = self._decode(response, body, warnings)
            except NotJSONError as exc:
                return {"success": False, "error": f"the response is not JSON: {exc}", "status": status}
        result["status"] = status
        result["headers"] = _kept_headers(response.headers)
        if warnings:
            result["warnings"] = warnings
        ok = status in self.ok_status if self.ok_status is not None else 200 <= status < 300
        if ok:
            return result
        reason = response.reason_phrase or ""
        result["success"] = False
        result["error"] = f"HTTP {status} {reason}".rstrip()
        if status in self.retry_status:
            result["retryable"] = True
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
            if retry_after is not None:
                result["retry_after"] = retry_after
        return result

    def _decode(self, response: httpx.Response, body: bytes, warnings: list[str]) -> Any:
        charset = response.charset_encoding
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        wants_json = self.response == "json" or (
            self.response == "auto" and (content_type == "application/json" or content_type.endswith("+json"))
        )
        if not wants_json:
            return body_text(body, charset, warnings)
        try:
            return body_json(body, charset, warnings)
        except NotJSONError as exc:
            if self.response == "json":
                raise
            warnings.append(f"the response says {content_type!r} but is not valid JSON ({exc}); kept as text")
            return body_text(body, charset, [])  # a warning about the charset is already there


def _plain(value: Any) -> str:
    """A query value written in YAML as a number or boolean, as template text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_BODY_HEADERS = frozenset({b"content-length", b"content-type", b"transfer-encoding", b"content-encoding"})
"""Headers that describe a request's body, dropped with it."""


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port (the default port of the scheme when the URL names none)."""
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host, url.port or default


def _kept_headers(headers: httpx.Headers) -> dict[str, str]:
    kept = {name: headers[name] for name in KEPT_HEADERS if name in headers}
    kept.update((name, value) for name, value in headers.items() if name.startswith("x-ratelimit-"))
    return kept


def _redacted(url: httpx.URL) -> str:
    """The URL without its query and credentials: query strings often carry keys."""
    changes: dict[str, Any] = {}
    if url.query:
        changes["query"] = None
    if url.fragment:
        changes["fragment"] = None
    if url.userinfo:
        changes.update(username=None, password=None)
    return str(url.copy_with(**changes)) if changes else str(url)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, jinja2.TemplateError):
        return exc.message or type(exc).__name__
    if isinstance(exc, RecursionError):
        return "recursion too deep"
    return f"{type(exc).__name__}: {exc}"


def _transport_failure(kind: str, detail: str, target: str, *, retryable: bool) -> dict[str, Any]:
    detail = detail or ("timed out" if "Timeout" in kind else "no details")
    return {"success": False, "error": f"{kind}: {detail} ({target})", "retryable": retryable}


def build(spec: ToolSpec) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The async callable that runs *spec*'s ``http:`` implementation (compiled now, once).

    Raises:
        ValueError: The configuration cannot be compiled.
    """
    configs = [i.config for i in spec.implementations if i.kind == "http"]
    if len(configs) != 1:
        msg = f"tool {spec.name!r} has no 'http' implementation"
        raise ValueError(msg)
    request = HttpRequest.from_config(configs[0], default_timeout=spec.timeout)

    async def run(**arguments: Any) -> dict[str, Any]:
        return await request.send(arguments)

    run.__name__ = run.__qualname__ = f"http[{spec.name}]"
    run.__doc__ = f"Run tool {spec.name!r}: {request.method} {request.url.source}"
    return run
