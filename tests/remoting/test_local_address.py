"""Which address a server bound to a wildcard hands to others (remoting.local_address), and the refusals of
`rmq serve --advertise`. The choice on real interfaces is tested on separate hosts in tests/hosts/."""
from __future__ import annotations

import ipaddress
import subprocess
import sys

import pytest

from remoting.local_address import advertised_host, interface_addresses, join_address, local_address, split_address


def test_a_configured_address_wins_and_a_wildcard_one_is_refused_naming_what_to_give():
    assert advertised_host("0.0.0.0", "10.1.0.6") == ("10.1.0.6", "configured", None)
    assert advertised_host("127.0.0.1", None) == ("127.0.0.1", None, None)  # bound to one address: that one
    for wild in ("0.0.0.0", "::", "[::]"):
        with pytest.raises(ValueError, match="wildcard, not an address a client can connect to"):
            advertised_host("0.0.0.0", wild)


def test_loopback_advertised_while_listening_wider_is_warned_about():
    host, why, warning = advertised_host("0.0.0.0", "127.0.0.1")
    assert host == "127.0.0.1" and warning is not None and "clients on other hosts" in warning


def test_a_wildcard_listener_advertises_this_hosts_first_non_loopback_address_and_says_why():
    host, why, warning = advertised_host("0.0.0.0", None)
    assert (host, why) == local_address()
    own = [a for _, a in interface_addresses() if not ipaddress.ip_address(a).is_loopback]
    if own:  # a host with a network: one of its own addresses, never loopback
        assert host in own and warning is None and "interface" in why


def test_ipv6_addresses_are_written_in_brackets_and_read_either_way():
    assert join_address("fd00::6", 10911) == "[fd00::6]:10911"
    assert split_address("[fd00::6]:10911") == split_address("fd00::6:10911") == ("fd00::6", 10911)
    assert split_address("10.1.0.6:9876") == ("10.1.0.6", 9876)


def test_rmq_serve_refuses_a_wildcard_advertise_before_binding(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rmq_cli", "-s", str(tmp_path / "s"), "serve", "--listen",
                        "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--advertise", "0.0.0.0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--advertise 0.0.0.0: a wildcard" in r.stderr, r.stderr
