"""Secrets and addresses: what an ``http`` tool sends across redirects, and where it may connect.

Two real servers on 127.0.0.1 (different ports: different origins) stand for the API and for
wherever a redirect leads; a header or body from ``${VAR}`` must not follow a redirect to the
other one. Host names are resolved through trio's hostname-resolver hook where a test needs a
name to answer with chosen addresses (a fake DNS, not a fake of the code under test).
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import pytest
import trio

from toolflow import Registry, ToolResult

SECRET = "tf-http-s3cret-0123456789"


class Server(Protocol):
    """The ``server`` and ``other_server`` fixtures (see conftest.py)."""

    base: str
    requests: list[tuple[str, str, dict[str, str], bytes]]


Call = Callable[..., Awaitable[ToolResult]]
MakeRegistry = Callable[..., Registry]


def tool(http: Any, **extra: Any) -> dict[str, Any]:
    """A spec file with one ``http`` tool called ``fetch`` and no parameters."""
    body = {"description": "Fetch something.", "parameters": {"type": "object", "properties": {}}, "http": http}
    return {"tools": {"fetch": {**body, **extra}}}


async def run(make_registry: MakeRegistry, call: Call, spec: Mapping[str, Any]) -> ToolResult:
    with trio.fail_after(10):
        return await call(make_registry(spec), "fetch", {})


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """``TF_HTTP_SECRET`` set in the environment, for ``${TF_HTTP_SECRET}`` in specs."""
    monkeypatch.setenv("TF_HTTP_SECRET", SECRET)
    return SECRET


def _sent(server: Server) -> str:
    """Everything *server* received, as one text."""
    return repr(server.requests)


# --- redirects ---------------------------------------------------------------------------------


def _keyed(url: str, **extra: Any) -> dict[str, Any]:
    headers = {"Authorization": "Bearer ${TF_HTTP_SECRET}", "X-Api-Key": "${TF_HTTP_SECRET}", "X-Plain": "hello"}
    return {"url": url, "headers": headers, **extra}


async def test_cross_origin_redirect_drops_the_declared_headers(
    server: Server, other_server: Server, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """A redirect to another origin arrives without any header the spec declares (httpx keeps all but Authorization)."""
    url = f"{server.base}/goto/302?to={other_server.base}/echo/landed"
    result = await run(make_registry, call, tool(_keyed(url)))
    assert result.success, result.error
    assert result.data["path"] == "/echo/landed"
    received = result.data["headers"]
    assert "authorization" not in received
    assert "x-api-key" not in received
    assert "x-plain" not in received  # every declared header: the spec says which carry keys, not toolflow
    assert received["user-agent"].startswith("toolflow-http/")
    assert secret not in _sent(other_server)
    assert secret in _sent(server)  # the first request, to the configured origin, carried them


async def test_same_origin_redirect_keeps_the_declared_headers(
    server: Server, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """A redirect within the origin keeps the headers: the request goes where the spec said it would."""
    result = await run(make_registry, call, tool(_keyed(f"{server.base}/goto/302?to={server.base}/echo/same")))
    assert result.data["path"] == "/echo/same"
    assert result.data["headers"]["x-api-key"] == secret
    assert result.data["headers"]["authorization"] == f"Bearer {secret}"


async def test_a_port_is_part_of_the_origin(
    server: Server, other_server: Server, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """The same host on another port is another origin (scheme, host and port)."""
    assert server.base.rsplit(":", 1)[0] == other_server.base.rsplit(":", 1)[0]
    result = await run(make_registry, call, tool(_keyed(f"{server.base}/goto/301?to={other_server.base}/echo")))
    assert "x-api-key" not in result.data["headers"]
    assert secret not in _sent(other_server)


@pytest.mark.parametrize("status", [307, 308])
async def test_cross_origin_307_and_308_drop_the_body(
    status: int, server: Server, other_server: Server, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """A 307 or 308 to another origin keeps the method but not the body (httpx would send both)."""
    http = _keyed(f"{server.base}/goto/{status}?to={other_server.base}/echo/posted", method="POST")
    http["json"] = {"token": "${TF_HTTP_SECRET}", "n": 1}
    result = await run(make_registry, call, tool(http))
    assert result.data["method"] == "POST"
    assert result.data["body"] is None
    assert "content-type" not in result.data["headers"]
    assert secret not in _sent(other_server)


async def test_same_origin_307_keeps_the_body(
    server: Server, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """Within the origin a 307 repeats the request, body and all, as RFC 9110 says."""
    http = {"url": f"{server.base}/goto/307?to={server.base}/echo/again", "method": "POST", "json": {"n": 1}}
    result = await run(make_registry, call, tool(http))
    assert (result.data["method"], result.data["body"]) == ("POST", {"n": 1})


async def test_redirects_are_bounded(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """A redirect loop ends after 20 hops with a failure naming it."""
    result = await run(make_registry, call, tool(f"{server.base}/loop"))
    assert not result.success
    assert result.error == f"Error: TooManyRedirects: more than 20 redirects (GET {server.base}/loop)"
    assert len(server.requests) == 21


# --- addresses ---------------------------------------------------------------------------------

_REFUSED = [
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://[::ffff:169.254.169.254]/latest/meta-data/",  # IPv4-mapped
    "http://[::ffff:a9fe:a9fe]/",  # the same, in hex
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64
    "http://[2002:a9fe:a9fe::1]/",  # 6to4
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://[fd20:ce::254]/",
    "http://2852039166/",  # 169.254.169.254 as one decimal number
    "http://0xa9fea9fe/",
    "http://100.100.100.200/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.google.internal./",
    "http://metadata/computeMetadata/v1/",
    "http://instance-data/latest/",
]


@pytest.mark.parametrize("url", _REFUSED)
async def test_metadata_and_link_local_addresses_are_refused(url: str, make_registry: MakeRegistry, call: Call) -> None:
    """Link-local and cloud-metadata addresses, in any spelling, are refused before a connection is tried."""
    result = await run(make_registry, call, tool({"url": url, "timeout": "5s"}))
    assert not result.success
    assert (result.error or "").startswith("Error: address not allowed: "), result.error
    assert result.extra.get("retryable") is False


async def test_a_redirect_to_the_metadata_service_is_refused(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """Every hop is checked: an allowed server cannot redirect the tool to a metadata address."""
    url = f"{server.base}/goto/302?to=http://169.254.169.254/latest/meta-data/iam/"
    result = await run(make_registry, call, tool(url))
    assert (result.error or "").startswith("Error: address not allowed: '169.254.169.254' is not an address"), (
        result.error
    )
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("location", "error"),
    [
        ("file:///etc/passwd", "UnsupportedProtocol: Request URL has an unsupported protocol 'file://'."),
        ("ftp://127.0.0.1/pub", "UnsupportedProtocol: Request URL has an unsupported protocol 'ftp://'."),
        ("gopher://127.0.0.1:70/x", "UnsupportedProtocol: Request URL has an unsupported protocol 'gopher://'."),
        ("//169.254.169.254/latest/", "address not allowed: '169.254.169.254' is not an address"),
        ("http://[::ffff:169.254.169.254]/", "address not allowed: '::ffff:169.254.169.254' is not an address"),
        ("http://0xa9fea9fe/", "address not allowed: '0xa9fea9fe' is not an address"),
        ("https://metadata./computeMetadata/", "address not allowed: 'metadata.' is not an address"),
        ("http://user:pw@169.254.169.254/", "address not allowed: '169.254.169.254' is not an address"),
    ],
    ids=["file", "ftp", "gopher", "scheme-relative", "mapped", "hex", "metadata-name", "credentials"],
)
async def test_a_redirect_elsewhere_is_refused_whatever_its_spelling(
    location: str, error: str, server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A hop to another scheme, or to a metadata address however written, fails without leaving the first server."""
    query = urllib.parse.urlencode({"to": location})
    result = await run(make_registry, call, tool(f"{server.base}/goto/302?{query}"))
    assert (result.error or "").startswith(f"Error: {error}"), result.error
    assert result.extra.get("retryable") is False
    assert len(server.requests) == 1


async def test_the_error_does_not_say_where_a_name_leads(make_registry: MakeRegistry, call: Call) -> None:
    """A refusal names the host as the spec or the redirect wrote it, never the addresses it resolved to."""
    result = await run(make_registry, call, tool({"url": "http://localhost:9/", "deny_addresses": ["loopback"]}))
    assert (
        result.error
        == "Error: address not allowed: 'localhost' is not an address this tool may connect to (GET http://localhost:9/)"
    )


async def test_loopback_is_allowed_unless_denied(server: Server, make_registry: MakeRegistry, call: Call) -> None:
    """Local APIs work by default; ``deny_addresses`` refuses them, ``allow_addresses`` makes exceptions."""
    assert (await run(make_registry, call, tool(f"{server.base}/echo"))).success
    denied = await run(make_registry, call, tool({"url": f"{server.base}/echo", "deny_addresses": ["loopback"]}))
    assert (denied.error or "").startswith("Error: address not allowed: ")
    by_network = await run(make_registry, call, tool({"url": f"{server.base}/echo", "deny_addresses": ["127.0.0.0/8"]}))
    assert not by_network.success
    excepted = {"url": f"{server.base}/echo", "deny_addresses": ["loopback"], "allow_addresses": ["127.0.0.1"]}
    assert (await run(make_registry, call, tool(excepted))).success
    assert len(server.requests) == 2


async def test_a_link_local_exception_can_be_made(make_registry: MakeRegistry, call: Call) -> None:
    """``allow_addresses`` lifts the default refusal for one address (the connection then simply fails here)."""
    http = {"url": "http://169.254.170.2:9/", "allow_addresses": ["169.254.170.2"], "timeout": "200ms"}
    result = await run(make_registry, call, tool(http))
    assert not (result.error or "").startswith("Error: address not allowed"), result.error


def test_a_bad_address_entry_fails_the_build(make_registry: MakeRegistry) -> None:
    """An entry shaped like a network but not one is reported when the tool is built."""
    registry = make_registry(tool({"url": "http://example.invalid/", "deny_addresses": ["10.0.0.300/8"]}))
    with pytest.raises(Exception, match=r"deny_addresses: '10.0.0.300/8' is neither an IP network nor one of"):
        registry.get("fetch").resolve()


class _Resolver(trio.abc.HostnameResolver):
    """A DNS of our own: each name answers with the next list of addresses in *answers*."""

    def __init__(self, answers: Mapping[str, list[list[str]]]) -> None:
        self.answers = {name: list(lists) for name, lists in answers.items()}
        self.asked: list[str] = []

    async def getaddrinfo(
        self,
        host: bytes | None,
        port: bytes | str | int | None,
        family: int = 0,
        type: int = 0,  # noqa: A002 - trio's signature
        proto: int = 0,
        flags: int = 0,
    ) -> list[tuple[Any, ...]]:
        name = (host or b"").decode()
        self.asked.append(name)
        lists = self.answers.get(name)
        if not lists:
            raise socket.gaierror(socket.EAI_NONAME, "no such name")
        addresses = lists.pop(0) if len(lists) > 1 else lists[0]
        found = []
        for address in addresses:
            ip = ipaddress.ip_address(address)
            family_ = socket.AF_INET if ip.version == 4 else socket.AF_INET6
            sockaddr = (address, int(port or 0)) if ip.version == 4 else (address, int(port or 0), 0, 0)
            found.append((family_, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
        return found

    async def getnameinfo(self, sockaddr: tuple[Any, ...], flags: int) -> tuple[str, str]:
        # trio's resolver interface asks for reverse look-ups too; nothing here makes one, and a
        # resolver that cannot answer says so with the error the real one raises.
        raise socket.gaierror(socket.EAI_NONAME, "reverse look-ups are not answered here")


async def test_the_checked_address_is_the_one_connected_to(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """The name is resolved once: a DNS that answers differently the second time (rebinding) is never asked again."""
    resolver = _Resolver({"api.rebind.test": [["127.0.0.1"], ["169.254.169.254"]]})
    trio.socket.set_custom_hostname_resolver(resolver)
    port = server.base.rsplit(":", 1)[1]
    result = await run(make_registry, call, tool(f"http://api.rebind.test:{port}/echo"))
    assert result.success, result.error
    assert result.data["headers"]["host"] == f"api.rebind.test:{port}"
    assert resolver.asked == ["api.rebind.test"]


async def test_a_name_with_any_denied_address_is_refused(
    server: Server, make_registry: MakeRegistry, call: Call
) -> None:
    """A name that resolves to an allowed and a metadata address is refused as a whole."""
    resolver = _Resolver({"mixed.test": [["127.0.0.1", "169.254.169.254"]]})
    trio.socket.set_custom_hostname_resolver(resolver)
    port = server.base.rsplit(":", 1)[1]
    result = await run(make_registry, call, tool(f"http://mixed.test:{port}/echo"))
    assert (result.error or "").startswith("Error: address not allowed: 'mixed.test'"), result.error
    assert server.requests == []


async def test_metadata_names_are_refused_before_they_are_resolved(make_registry: MakeRegistry, call: Call) -> None:
    """``metadata.google.internal`` never reaches the resolver, whatever it would answer."""
    resolver = _Resolver({"metadata.google.internal": [["127.0.0.1"]]})
    trio.socket.set_custom_hostname_resolver(resolver)
    result = await run(make_registry, call, tool("http://metadata.google.internal/computeMetadata/v1/"))
    assert (result.error or "").startswith("Error: address not allowed: ")
    assert resolver.asked == []


async def test_proxies_from_the_environment_are_not_used(
    server: Server, other_server: Server, make_registry: MakeRegistry, call: Call, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTP_PROXY`` would resolve names where the checks cannot follow: requests go direct, checked."""
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, other_server.base)
    direct = await run(make_registry, call, tool(f"{server.base}/echo/direct"))
    assert direct.data["path"] == "/echo/direct"
    refused = await run(make_registry, call, tool("http://169.254.169.254/latest/meta-data/"))
    assert (refused.error or "").startswith("Error: address not allowed: ")
    assert other_server.requests == []


# --- failure messages --------------------------------------------------------------------------


async def test_a_failure_never_echoes_a_value_from_the_environment(
    refused_url: str, secret: str, make_registry: MakeRegistry, call: Call
) -> None:
    """A URL with a key in its path fails to connect; the error shows ``${TF_HTTP_SECRET}``, not the key."""
    result = await run(make_registry, call, tool(f"{refused_url}/bot${{TF_HTTP_SECRET}}/send"))
    assert not result.success
    assert secret not in (result.error or "")
    assert "/bot${TF_HTTP_SECRET}/send" in (result.error or ""), result.error
