"""The address rules of ``toolflow_http._network``: groups, defaults, IPv6 forms of IPv4 addresses, host names."""

from __future__ import annotations

import ipaddress

import pytest
from toolflow_http._network import METADATA_HOSTS, NETWORKS, AddressRules
from toolflow_http._schema import ADDRESS_GROUPS


def test_the_schema_and_the_rules_name_the_same_groups() -> None:
    """``deny_addresses`` accepts exactly the groups the rules define."""
    assert set(ADDRESS_GROUPS) == set(NETWORKS)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("10.1.2.3", True),
        ("fd12::1", True),
        ("169.254.169.254", False),
        ("169.254.0.1", False),
        ("fe80::a9fe:a9fe", False),
        ("::ffff:169.254.169.254", False),
        ("::ffff:0:169.254.169.254", False),
        ("::169.254.169.254", False),
        ("64:ff9b::169.254.169.254", False),
        ("2002:a9fe:a9fe::", False),
        ("fd00:ec2::254", False),
        ("100.100.100.200", False),
        ("168.63.129.16", False),
    ],
)
def test_default_rules(address: str, allowed: bool) -> None:
    """Only link-local and metadata addresses (and IPv6 forms carrying them) are refused by default."""
    assert AddressRules.from_config().allows(ipaddress.ip_address(address)) is allowed


def test_denied_groups() -> None:
    """``loopback`` and ``private`` cover the unspecified address, CGNAT and unique-local addresses too."""
    rules = AddressRules.from_config(deny=["loopback", "private"])
    for address in ("127.0.0.1", "::1", "0.0.0.0", "::", "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1"):
        assert not rules.allows(ipaddress.ip_address(address)), address
    assert not rules.allows(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert rules.allows(ipaddress.ip_address("93.184.216.34"))


def test_metadata_host_names() -> None:
    """Names are compared without case or a trailing dot."""
    rules = AddressRules.from_config()
    assert "metadata.google.internal" in METADATA_HOSTS
    assert not rules.allows_host("Metadata.Google.Internal.")
    assert rules.allows_host("api.example.com")
