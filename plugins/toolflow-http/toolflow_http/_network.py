"""Where an ``http`` tool may connect: every connection's addresses checked after DNS resolution.

The checks run in the network backend of httpcore's connection pool, so they apply to the
first request and to every redirect hop alike (each new origin is a new connection):

1. a host name on :data:`METADATA_HOSTS` (cloud metadata services) is refused before it is
   resolved;
2. the host is resolved once (``getaddrinfo``), and the connection is refused when *any* of
   its addresses is denied (a name resolving to a public and a metadata address is refused);
3. the connection is made to an address that was checked, never to the name, so a second
   resolution (DNS rebinding) cannot take it elsewhere. TLS still verifies the certificate
   for the name (httpcore passes the URL's host as the server name).

An address is denied when it, or the IPv4 address an IPv6 address embeds (IPv4-mapped and
-translated, IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4, Teredo), lies in a denied network,
unless it lies in an allowed one. Denied by default: :data:`DENIED_BY_DEFAULT` (link-local
addresses and the metadata services' addresses). The ``deny_addresses`` key adds groups of
:data:`NETWORKS` or networks (``loopback``, ``private``, ``10.1.0.0/16``), and
``allow_addresses`` makes exceptions (``169.254.170.2``). Loopback and private addresses are
allowed unless denied: local APIs and tests use them.

Proxies from the environment (``HTTP_PROXY`` and the like) are not used: a proxy resolves
the name itself, where these checks cannot follow.
"""

from __future__ import annotations

import ipaddress
import math
import socket
import ssl
import typing
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx
import trio

__all__ = [
    "DENIED_BY_DEFAULT",
    "METADATA_HOSTS",
    "NETWORKS",
    "AddressNotAllowedError",
    "AddressRules",
    "CheckedTransport",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

NETWORKS: dict[str, tuple[str, ...]] = {
    "link-local": ("169.254.0.0/16", "fe80::/10"),
    "metadata": (
        "169.254.169.254/32",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean, Hetzner
        "169.254.170.2/32",  # AWS ECS task metadata
        "169.254.170.23/32",  # AWS EKS Pod Identity
        "fd00:ec2::254/128",  # AWS instance metadata over IPv6
        "fd00:ec2::23/128",  # AWS EKS Pod Identity over IPv6
        "fd20:ce::254/128",  # GCP metadata over IPv6
        "168.63.129.16/32",  # Azure WireServer
        "100.100.100.200/32",  # Alibaba Cloud
        "192.0.0.192/32",  # Oracle Cloud (classic)
        "169.254.42.42/32",  # Scaleway
        "fd00:42::42/128",  # Scaleway over IPv6
    ),
    # Connecting to the unspecified address (0.0.0.0, ::) reaches this host too.
    "loopback": ("127.0.0.0/8", "::1/128", "0.0.0.0/8", "::/128"),
    "private": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"),
}
"""Named groups of networks that ``deny_addresses`` and ``allow_addresses`` accept."""

DENIED_BY_DEFAULT = ("link-local", "metadata")
"""The groups every ``http`` tool is denied unless ``allow_addresses`` makes an exception."""

METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
    }
)
"""Host names of cloud metadata services, refused before they are resolved (whatever they resolve to)."""

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


class AddressNotAllowedError(Exception):
    """A connection the tool's address rules refuse; the message names the host, not its addresses."""


def _networks(entries: Iterable[str], key: str) -> tuple[Network, ...]:
    found: list[Network] = []
    for entry in entries:
        if entry in NETWORKS:
            found.extend(ipaddress.ip_network(n) for n in NETWORKS[entry])
            continue
        try:
            found.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            groups = ", ".join(repr(g) for g in NETWORKS)
            msg = f"{key}: {entry!r} is neither an IP network nor one of {groups}"
            raise ValueError(msg) from None
    return tuple(found)


def _forms(address: Address) -> tuple[Address, ...]:
    """*address*, and the IPv4 addresses an IPv6 address carries inside it."""
    if isinstance(address, ipaddress.IPv4Address):
        return (address,)
    inner: list[Address] = [address]
    if address.ipv4_mapped is not None:
        inner.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        inner.append(address.sixtofour)
    if address.teredo is not None:
        inner.extend(address.teredo)
    if address in _NAT64 or address in _TRANSLATED or (address in _COMPATIBLE and int(address) > 1):
        inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return tuple(inner)


@dataclass(frozen=True, kw_only=True)
class AddressRules:
    """Which addresses a tool may connect to: see the module docstring."""

    deny: tuple[Network, ...]
    allow: tuple[Network, ...] = ()

    @classmethod
    def from_config(cls, deny: Iterable[str] = (), allow: Iterable[str] = ()) -> AddressRules:
        """The rules of an ``http:`` value's ``deny_addresses`` and ``allow_addresses``, over the defaults.

        Raises:
            ValueError: An entry is neither a group of :data:`NETWORKS` nor an IP network.
        """
        denied = _networks((*DENIED_BY_DEFAULT, *deny), "deny_addresses")
        return cls(deny=denied, allow=_networks(allow, "allow_addresses"))

    def allows_host(self, host: str) -> bool:
        """False for the host name of a cloud metadata service."""
        return host.lower().rstrip(".") not in METADATA_HOSTS

    def allows(self, address: Address) -> bool:
        """Whether a connection to *address* is allowed."""
        forms = _forms(address)
        if not any(form in network for form in forms for network in self.deny if form.version == network.version):
            return True
        return any(form in network for form in forms for network in self.allow if form.version == network.version)


def _address(text: str) -> Address:
    return ipaddress.ip_address(text.partition("%")[0])  # an IPv6 scope ("%eth0") is not part of the address


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's trio backend, connecting only to addresses that :class:`AddressRules` allow (TCP only)."""

    def __init__(self, rules: AddressRules) -> None:
        self._rules = rules
        self._trio = httpcore.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        refused = f"{host!r} is not an address this tool may connect to"
        if not self._rules.allows_host(host):
            raise AddressNotAllowedError(refused)
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                found = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except trio.TooSlowError:
            msg = f"resolving {host!r} timed out"
            raise httpcore.ConnectTimeout(msg) from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if not all(self._rules.allows(_address(a)) for a in addresses):
            raise AddressNotAllowedError(refused)
        errors: list[Exception] = [httpcore.ConnectError(f"{host!r} has no address")]
        for address in addresses:  # in getaddrinfo's order of preference, as urllib3 and socket.create_connection
            try:
                return await self._trio.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                errors.append(exc)
        raise errors[-1]

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


class CheckedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose every connection :class:`AddressRules` checked."""

    def __init__(self, rules: AddressRules, *, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx's transport takes no network backend, its httpcore pool does (a public httpcore
        # API); the transport's own request and response mapping is kept as it is.
        self._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=_CheckedBackend(rules))
