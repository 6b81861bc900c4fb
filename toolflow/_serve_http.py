"""``toolflow serve --transport http``: the listening socket, who may call, and how many sessions.

The MCP SDK's streamable HTTP app does the protocol; this module decides what it is given:

- **Binding.** The socket is bound before anything is served (:func:`listen`), so that a port in
  use, an address that is not this machine's, or a binding without authentication is one usage
  error. A bind to anything but a loopback address needs bearer tokens, or an explicit
  ``--insecure-no-auth``.
- **Host and Origin.** Every request's ``Host`` must be one of the allowed hosts and its ``Origin``,
  when it has one, one of the allowed origins (the SDK's DNS-rebinding protection, turned on for
  every bind). The defaults come from the bind address: ``127.0.0.1``, ``localhost`` and
  ``[::1]`` on loopback, the address itself otherwise; a wildcard bind (``0.0.0.0``, ``::``)
  serves any name, so its names must be listed.
- **Authentication.** Static bearer tokens from a file or environment variables, each mapped to a
  :class:`Principal`; :class:`BearerTokens` is the SDK's ``TokenVerifier``, so the SDK's bearer
  middleware answers a missing or unknown token with 401 and ``WWW-Authenticate: Bearer``, and a
  session can only be used with the token that opened it. A token is compared in constant time
  with every configured token. :func:`principal_of` reads a request's principal.
- **Sessions.** At most ``max_sessions`` at once (then 503 with ``Retry-After``); a session without
  a request for ``session_idle_timeout`` is closed with its engine, and its id answers 404. With a
  shared state (a fleet), toolflow keeps the sessions in it instead, so that any replica serves
  any request of one (:mod:`toolflow._serve_fleet`); ``max_sessions`` does not apply to them.
- **Answers.** Two gaps of mcp 2.3 are closed around its app (:class:`_AnswerEachRequest`): a
  request its client cancelled gets no answer (the SDK sends ``-32800``), and a request the SDK
  takes for a notification or a response gets a 400 with a JSON-RPC error instead of a silent 202.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import math
import os
import re
import socket
import stat
import tomllib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import attrs
import trio
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.streamable_http import REQUEST_CANCELLED
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolflow._errors import ConfigError, UsageError
from toolflow._serve_fleet import FLEET_SESSION, FleetSessions
from toolflow._serve_stdio import misread_request
from toolflow._state import StateBackend

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_PORT",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "FLEET_SESSION",
    "MCP_PATH",
    "BearerTokens",
    "HTTPSettings",
    "Listener",
    "Principal",
    "listen",
    "principal_of",
    "serve_http",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MCP_PATH = "/mcp"
"""The path of the streamable HTTP endpoint."""

DEFAULT_MAX_SESSIONS = 100
"""Concurrent HTTP sessions (each holds an engine); the SDK's own default, 10,000, is for servers without one."""

DEFAULT_SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds a session may go without a request in flight before it is closed (the SDK's default)."""

MIN_TOKEN_LENGTH = 16
"""Characters a bearer token must have at least: shorter ones can be guessed."""

_TOKEN_SYNTAX = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 6750's ``b64token``: what a client can send after ``Bearer``."""

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

_GRACEFUL_CLOSE = 5.0
"""Seconds Hypercorn lets open connections finish once the server stops (the answers of the last calls)."""


def _read_only(claims: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(claims))


@attrs.frozen(kw_only=True)
class Principal:
    """Who a bearer token stands for.

    Attributes:
        id: The principal's name: its key in a TOML token file, the variable's name for a token
            from the environment, or ``token-<12 hex digits of its SHA-256>`` for a line of a
            plain token file.
        claims: The configured claims (a TOML file's ``claims`` table), for features that bind
            tool parameters to the caller.
    """

    id: str
    claims: Mapping[str, Any] = attrs.field(factory=dict, converter=_read_only)


class BearerTokens:
    """Static bearer tokens, each mapped to a :class:`Principal`; the SDK's ``TokenVerifier``.

    Only SHA-256 digests of the tokens are kept. :meth:`verify_token` compares the digest of the
    token presented with every configured digest (``hmac.compare_digest``), so the time it takes
    depends neither on how much of a token matched nor on which token it is.
    """

    def __init__(self, tokens: Iterable[tuple[str, Principal]]) -> None:
        self._digests: list[tuple[bytes, Principal]] = []
        seen: dict[bytes, str] = {}
        for token, principal in tokens:
            if len(token) < MIN_TOKEN_LENGTH or not _TOKEN_SYNTAX.fullmatch(token):
                msg = (
                    f"the token of principal {principal.id!r} must be at least {MIN_TOKEN_LENGTH} characters of"
                    " A-Z a-z 0-9 - . _ ~ + / (then = padding): make one with"
                    " python -c 'import secrets; print(secrets.token_urlsafe(32))'"
                )
                raise ConfigError(msg)
            digest = hashlib.sha256(token.encode()).digest()
            if digest in seen:
                msg = f"principals {seen[digest]!r} and {principal.id!r} have the same token"
                raise ConfigError(msg)
            seen[digest] = principal.id
            self._digests.append((digest, principal))

    def __len__(self) -> int:
        return len(self._digests)

    @property
    def principals(self) -> tuple[Principal, ...]:
        """The principals, in the order they were configured."""
        return tuple(principal for _, principal in self._digests)

    def lookup(self, token: str) -> Principal | None:
        """The principal of *token*, or None; compared with every configured token in constant time."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found = None
        for stored, principal in self._digests:  # no early exit: the time does not say which token matched
            if hmac.compare_digest(digest, stored):
                found = principal
        return found

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier``: the access of a known token (client id and subject: the principal's id)."""
        principal = self.lookup(token)
        if principal is None:
            return None
        return AccessToken(
            token=token, client_id=principal.id, subject=principal.id, scopes=[], claims=dict(principal.claims)
        )

    @classmethod
    def load(
        cls, *, path: str | None = None, env: Iterable[str] = (), environ: Mapping[str, str] | None = None
    ) -> tuple[BearerTokens, tuple[str, ...]]:
        """The tokens of the file *path* and of the environment variables *env*, and warnings about them.

        A file whose name ends in ``.toml`` maps principals to tokens and claims::

            [principals.ci-bot]
            token = "..."
            claims = {team = "platform"}

        Any other file holds one token per line (blank lines and ``#`` comments are skipped). Each
        variable of *env* holds one token; its principal is the variable's name. A file other
        users can read gives a warning.

        Raises:
            ConfigError: The file cannot be read or is malformed, a variable is not set, a token is
                too short or not a bearer token, or two principals share a token.
        """
        environ = os.environ if environ is None else environ
        tokens: list[tuple[str, Principal]] = []
        warnings: list[str] = []
        if path is not None:
            tokens.extend(_read_token_file(path))
            try:
                mode = os.stat(path).st_mode
            except OSError:
                mode = 0
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                warnings.append(f"{path}: other users can read the bearer tokens (chmod 600 it)")
        for name in env:
            value = environ.get(name, "").strip()
            if not value:
                msg = f"the bearer-token variable {name} is not set"
                raise ConfigError(msg)
            tokens.append((value, Principal(id=name)))
        return cls(tokens), tuple(warnings)


def _read_token_file(path: str) -> list[tuple[str, Principal]]:
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        msg = f"cannot read the bearer-token file: {exc.strerror or exc}"
        raise ConfigError(msg, path=path) from None
    if not path.endswith(".toml"):
        lines = (line.strip() for line in data.decode("utf-8", "replace").splitlines())
        tokens = [line for line in lines if line and not line.startswith("#")]
        return [(token, Principal(id=f"token-{hashlib.sha256(token.encode()).hexdigest()[:12]}")) for token in tokens]
    return _toml_principals(data, path)


def _toml_principals(data: bytes, path: str) -> list[tuple[str, Principal]]:
    """The ``[principals.<id>]`` tables of a TOML token file, each a token and its principal."""
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        msg = f"invalid TOML: {exc}"
        raise ConfigError(msg, path=path) from None
    principals = document.get("principals")
    unknown = sorted(set(document) - {"principals"})
    if not isinstance(principals, dict) or unknown:
        msg = "a TOML token file has one table, [principals.<id>] with token = ... and claims = {...}"
        raise ConfigError(msg, path=path)
    entries = []
    for name, entry in principals.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str) or set(entry) - {"token", "claims"}:
            msg = f"[principals.{name}] must have a string token and may have a claims table, nothing else"
            raise ConfigError(msg, path=path)
        claims = entry.get("claims", {})
        if not isinstance(claims, dict):
            msg = f"[principals.{name}] claims must be a table"
            raise ConfigError(msg, path=path)
        entries.append((entry["token"], Principal(id=name, claims=claims)))
    return entries


def principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
    """The principal whose bearer token authenticated the HTTP request of *ctx*.

    None over stdio and over HTTP without tokens (loopback, or ``--insecure-no-auth``). Read it in
    a request handler: the SDK keeps the authenticated user on the request's ASGI scope.
    """
    scope = getattr(ctx.request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    if not isinstance(user, AuthenticatedUser):
        return None
    access = user.access_token
    return Principal(id=access.client_id, claims=access.claims or {})


@attrs.frozen(kw_only=True)
class HTTPSettings:
    """How ``toolflow serve --transport http`` listens and whom it serves.

    Attributes:
        host: The address to bind (a name is resolved).
        port: The port (0: any free one).
        allowed_hosts: ``Host`` values accepted besides the bind address's own (``name``, ``name:port``).
        allowed_origins: ``Origin`` values accepted besides the allowed hosts' (``https://app.example``).
        tokens: The bearer tokens that may call; None: no authentication (loopback only, unless
            *insecure_no_auth*).
        insecure_no_auth: Serve a non-loopback address without authentication.
        max_sessions: Concurrent sessions; the next one gets 503 with ``Retry-After``.
        session_idle_timeout: Seconds a session may go without a request in flight.
        stateless: Keep no protocol session: no ``Mcp-Session-Id`` is issued and every request
            stands alone, with an engine of its own (no session cache, ``depends_on`` history or
            rules' counts carry from one request to the next), so that any replica behind a load
            balancer can answer any request.
        state: The state the engines share. A shared one (Redis) without *stateless* makes a
            fleet: its 2025-11-25 sessions are kept in the state (:class:`FleetSessions`) over the
            SDK's stateless transport, and any replica serves any request of one.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    tokens: BearerTokens | None = None
    insecure_no_auth: bool = False
    max_sessions: int = DEFAULT_MAX_SESSIONS
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    stateless: bool = False
    state: StateBackend | None = None

    @property
    def fleet(self) -> bool:
        """Whether the 2025-11-25 sessions are kept in the shared state (see *state*)."""
        return self.state is not None and self.state.shared and not self.stateless


@attrs.define(kw_only=True)
class Listener:
    """A bound socket and what serving it needs (made by :func:`listen`).

    Attributes:
        settings: The settings it was made from.
        fd: The listening socket's file descriptor (Hypercorn takes it over).
        address: The bound IP address and port.
        security: The Host and Origin checks.
        loopback: Whether the address is a loopback address.
    """

    settings: HTTPSettings
    fd: int
    address: tuple[str, int]
    security: TransportSecuritySettings
    loopback: bool
    _taken: bool = attrs.field(default=False, init=False)

    @property
    def url(self) -> str:
        """``http://HOST:PORT/mcp``, with the port actually bound."""
        host = f"[{self.address[0]}]" if ":" in self.address[0] else self.address[0]
        return f"http://{host}:{self.address[1]}{MCP_PATH}"

    def take(self) -> int:
        """The socket's descriptor, for a server that will close it."""
        self._taken = True
        return self.fd

    def close(self) -> None:
        """Close the socket, unless a server took it."""
        if not self._taken:
            self._taken = True
            os.close(self.fd)


def listen(settings: HTTPSettings) -> Listener:
    """Bind *settings*' address and work out the Host and Origin checks; nothing is served yet.

    Raises:
        UsageError: The address cannot be bound (in use, not an address of this machine, ...); it
            is not a loopback address and neither tokens nor ``insecure_no_auth`` are given; it is
            a wildcard address and no allowed host is given.
    """
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((settings.host, settings.port))
        address: tuple[str, int] = sock.getsockname()[:2]
    except (OSError, OverflowError) as exc:  # OverflowError: a port outside 0-65535
        sock.close()
        msg = f"cannot listen on {settings.host}:{settings.port}: {getattr(exc, 'strerror', None) or exc}"
        raise UsageError(msg) from None
    ip = ipaddress.ip_address(address[0].partition("%")[0])
    try:
        security = _security(settings, ip)
    except UsageError:
        sock.close()
        raise
    return Listener(settings=settings, fd=sock.detach(), address=address, security=security, loopback=ip.is_loopback)


def _security(settings: HTTPSettings, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> TransportSecuritySettings:
    """The Host and Origin checks: the bind address's names, then the configured ones.

    Raises:
        UsageError: Not a loopback address, and neither tokens nor ``insecure_no_auth``; a wildcard
            bind without allowed hosts (it would answer any name); an allowed host or origin that
            no request could carry (a URL given as a host, a path or no scheme in an origin).
    """
    _check_names(settings.allowed_hosts, settings.allowed_origins)
    if not ip.is_loopback and settings.tokens is None and not settings.insecure_no_auth:
        msg = (
            f"serve: {settings.host} is not a loopback address, so HTTP clients must authenticate:"
            " give bearer tokens with --auth-tokens FILE or --auth-token-env VAR"
            " (or [tool.toolflow.serve]), or serve without authentication with --insecure-no-auth"
        )
        raise UsageError(msg)
    if ip.is_unspecified and not settings.allowed_hosts:
        msg = (
            f"serve: --host {settings.host} accepts connections for any host name: list the names clients use"
            " with --allow-host NAME (or [tool.toolflow.serve] allowed-hosts), so that requests for other"
            " names (DNS rebinding) are refused"
        )
        raise UsageError(msg)
    if ip.is_loopback or ip.is_unspecified:
        names = list(_LOOPBACK_NAMES)
    else:
        names = [_bracketed(str(ip))]
        if settings.host != str(ip):
            names.append(_bracketed(settings.host))  # the name it was given, such as a host name
    names.extend(_bracketed(host) for host in settings.allowed_hosts)
    hosts, origins = _hosts_and_origins(names)
    origins.extend(origin.lower().rstrip("/") for origin in settings.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=list(dict.fromkeys(origins))
    )


def _check_names(hosts: Iterable[str], origins: Iterable[str]) -> None:
    """Refuse an allowed host or origin written so that no ``Host`` or ``Origin`` header could match it.

    Raises:
        UsageError: Naming the value and the form it takes.
    """
    for host in hosts:
        if not host or "/" in host or "@" in host or any(c.isspace() for c in host):
            msg = (
                f"serve: the allowed host {host!r} (--allow-host, [tool.toolflow.serve] allowed-hosts) is not a host"
                " name: give the name clients connect to, with a port if they give one (mcp.example, mcp.example:8443)"
            )
            raise UsageError(msg)
    for origin in origins:
        parts = urlsplit(origin)
        try:
            parts.port  # noqa: B018 - reading it checks it
        except ValueError:
            parts = parts._replace(netloc="")
        if not (parts.scheme and parts.netloc) or parts.path not in ("", "/") or parts.query or parts.fragment:
            msg = (
                f"serve: the allowed origin {origin!r} (--allow-origin, [tool.toolflow.serve] allowed-origins) is not"
                " an origin: give it as browsers send it, scheme://host[:port] (https://app.example)"
            )
            raise UsageError(msg)


def _hosts_and_origins(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The Host values and browser Origins of the host *names*: any port unless a name has its own."""
    hosts: list[str] = []
    origins: list[str] = []
    for name in dict.fromkeys(name.lower() for name in names):
        if _has_port(name):
            hosts.append(name)
            origins.extend((f"http://{name}", f"https://{name}"))
        else:
            hosts.extend((name, f"{name}:*"))
            origins.extend(f"{scheme}://{name}{port}" for scheme in ("http", "https") for port in ("", ":*"))
    return hosts, origins


def _bracketed(host: str) -> str:
    """An IPv6 literal in brackets, as it appears in a ``Host`` header; anything else as it is."""
    try:
        return f"[{host}]" if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address) else host
    except ValueError:
        return host


def _has_port(host: str) -> bool:
    return host.rpartition("]")[2].count(":") == 1 if host.startswith("[") else ":" in host


class _RetryAfter:
    """Adds ``Retry-After`` to a 503 (the SDK refuses a session over the limit with a bare 503)."""

    def __init__(self, app: ASGIApp, seconds: int) -> None:
        self.app = app
        self.header = (b"retry-after", str(seconds).encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_retry_after(message: Message) -> None:
            headers = message.get("headers", ())
            if (
                message["type"] == "http.response.start"
                and message["status"] == 503
                and not any(name.lower() == b"retry-after" for name, _ in headers)
            ):
                message = {**message, "headers": [*headers, self.header]}
            await send(message)

        await self.app(scope, receive, send_with_retry_after)


class _AnswerEachRequest:
    """Closes two gaps of mcp 2.3's streamable HTTP app, so that each request gets one answer, or none once cancelled.

    - A request whose client cancelled it (``notifications/cancelled``) is ended with a
      ``-32800 Request cancelled`` error (``mcp/server/streamable_http.py``,
      ``_terminate_unanswered_request``); MCP says a cancelled request gets no response, so that
      event is dropped and the stream ends without it.
    - A body the SDK reads as a notification or a response, although it has a ``method`` and an
      ``id`` (one that is no string or integer, or a ``result`` beside the ``method``), is
      accepted with 202 and never answered (``_handle_post_request``); it gets a 400 with the
      JSON-RPC error instead. Only bodies accepted with 202 are read again: a request is still
      parsed once.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        replacement: bytes | None = None

        async def receive_and_keep() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def send_answers(message: Message) -> None:
            nonlocal replacement
            if message["type"] == "http.response.start" and message["status"] == 202:
                refusal = misread_request(body.decode("utf-8", "replace"))
                if refusal is not None:
                    replacement = refusal.model_dump_json(by_alias=True, exclude_unset=True).encode()
                    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(replacement))]
                    message = {"type": "http.response.start", "status": 400, "headers": headers}
            elif message["type"] == "http.response.body" and (
                replacement is not None or _answers_a_cancelled_request(message.get("body", b""))
            ):
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": replacement or b""}
            await send(message)

        await self.app(scope, receive_and_keep, send_answers)


def _answers_a_cancelled_request(body: bytes) -> bool:
    """Whether *body* is one server-sent event carrying a ``-32800`` error."""
    if str(REQUEST_CANCELLED).encode() not in body:
        return False
    data = b"\n".join(line.removeprefix(b"data:").strip() for line in body.splitlines() if line.startswith(b"data:"))
    try:
        message = json.loads(data)
    except ValueError:
        return False
    error = message.get("error") if isinstance(message, dict) else None
    return isinstance(error, dict) and error.get("code") == REQUEST_CANCELLED


def build_app(server: Server[Any], listener: Listener) -> ASGIApp:
    """The ASGI app serving *server* at :data:`MCP_PATH` with *listener*'s checks, tokens and session limits."""
    settings = listener.settings
    auth = None
    if settings.tokens is not None:
        # A resource server without an authorization server of its own: the issuer is required by the
        # SDK's settings but used only to publish OAuth metadata, which needs resource_server_url (unset).
        auth = AuthSettings(issuer_url=AnyHttpUrl(listener.url), resource_server_url=None)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=listener.security,
        max_sessions=settings.max_sessions,
        session_idle_timeout=settings.session_idle_timeout,
        stateless_http=settings.stateless or settings.fleet,
        auth=auth,
        token_verifier=settings.tokens,
    )
    if settings.fleet and settings.state is not None:
        # Innermost of the app's middleware: after the bearer authentication (the request's user is
        # known), before the route that refuses an unauthenticated request and the transport.
        app.user_middleware.append(
            Middleware(
                FleetSessions,
                settings.state,
                path=MCP_PATH,
                idle_timeout=settings.session_idle_timeout,
                security=listener.security,
            )
        )
    retry = max(1, min(60, math.ceil(settings.session_idle_timeout)))
    return _RetryAfter(_AnswerEachRequest(app), retry)


async def serve_http(
    server: Server[Any],
    listener: Listener,
    *,
    closing: Callable[[], Awaitable[None]],
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve *server* on *listener* with Hypercorn's trio worker until *closing* returns.

    Reports the endpoint's URL once it accepts connections. When *closing* returns, the socket
    stops accepting, open connections get a few seconds to finish (the answers of the last
    calls are written), and the sessions are closed with their engines.
    """
    from hypercorn.config import Config  # noqa: PLC0415 - only the HTTP transport needs it
    from hypercorn.trio import serve as hypercorn_serve  # noqa: PLC0415

    config = Config()
    config.bind = [f"fd://{listener.take()}"]
    config.accesslog = None
    config.loglevel = "WARNING"
    config.graceful_timeout = _GRACEFUL_CLOSE
    async with trio.open_nursery() as nursery:
        app: Any = build_app(server, listener)  # Starlette's ASGI types and Hypercorn's do not name each other
        await nursery.start(functools.partial(hypercorn_serve, app, config, shutdown_trigger=closing))
        task_status.started(listener.url)
