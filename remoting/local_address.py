"""This host's own addresses, and the one a server listening on every interface hands to others.

`local_address()` picks as RocketMQ's NetworkUtil.getLocalInetAddress does (the default of a broker's brokerIP1):
the addresses of the interfaces that are up, neither bridges nor point-to-point; loopback left out; IPv4 first:
the first that is not private (10/8, 172.16/12, 192.168/16), else the last private one; then IPv6: the first that
is neither link- nor site-local, else the first; with none, the host name's address. It returns the reason too,
for the log line that says which address was chosen and why.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
import socket
from typing import Optional

_IFF_UP, _IFF_LOOPBACK, _IFF_POINTOPOINT = 0x1, 0x8, 0x10


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 26)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [("next", ctypes.POINTER(_Ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                     ("addr", ctypes.POINTER(_Sockaddr)), ("netmask", ctypes.POINTER(_Sockaddr)),
                     ("ifu", ctypes.c_void_p), ("data", ctypes.c_void_p)]


def interface_addresses() -> list[tuple[str, str]]:
    """(interface, address) of every interface that is up, loopback included, in the kernel's order (Linux's
    getifaddrs; elsewhere empty)."""
    if not os.path.isdir("/sys/class/net"):
        return []
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        return []
    out = []
    try:
        node = head
        while node:
            ifa = node.contents
            node = ifa.next
            if not ifa.addr or not ifa.flags & _IFF_UP or ifa.flags & _IFF_POINTOPOINT:
                continue
            name = ifa.name.decode(errors="replace")
            if os.path.exists(f"/sys/class/net/{name}/bridge"):
                continue
            sa = ifa.addr.contents
            raw = bytes(sa.data)
            if sa.family == socket.AF_INET:  # sockaddr_in: port (2), address (4)
                out.append((name, socket.inet_ntop(socket.AF_INET, raw[2:6])))
            elif sa.family == socket.AF_INET6:  # sockaddr_in6: port (2), flowinfo (4), address (16)
                out.append((name, socket.inet_ntop(socket.AF_INET6, raw[6:22])))
    finally:
        libc.freeifaddrs(head)
    return out


def _private_v4(ip: ipaddress.IPv4Address) -> bool:
    return any(ip in ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))


def local_address() -> tuple[str, str]:
    """(address, why): the address a server on every interface advertises, chosen as RocketMQ chooses it."""
    v4: list[tuple[str, ipaddress.IPv4Address]] = []
    v6: list[tuple[str, ipaddress.IPv6Address]] = []
    for name, text in interface_addresses():
        a = ipaddress.ip_address(text)
        if a.is_loopback:
            continue
        if isinstance(a, ipaddress.IPv4Address):
            v4.append((name, a))
        else:
            v6.append((name, a))
    for n, a4 in v4:
        if not _private_v4(a4):
            return str(a4), f"the first non-loopback, non-private IPv4 address (interface {n})"
    if v4:
        n, a4 = v4[-1]
        return str(a4), f"the host has only private IPv4 addresses besides loopback: the last one (interface {n})"
    for n, a6 in v6:
        if not (a6.is_link_local or a6.is_site_local):
            return str(a6), f"no IPv4 address but loopback: the first global IPv6 address (interface {n})"
    if v6:
        n, a6 = v6[0]
        return str(a6), f"no IPv4 address but loopback: the first IPv6 address (interface {n})"
    try:
        return socket.gethostbyname(socket.gethostname()), "no interface address but loopback: the host name's"
    except OSError:
        return "127.0.0.1", "no interface address but loopback and no resolvable host name"


def is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::", "[::]", "*")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def split_address(address: str) -> tuple[str, int]:
    """'host:port', '[v6]:port' or 'v6:port' (RocketMQ splits at the last ':') -> (host without brackets, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


def join_address(host: str, port: int) -> str:
    """host:port, an IPv6 host in brackets (as RocketMQ's NetworkUtil.normalizeHostAddress writes it)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def advertised_host(listen_host: str, configured: Optional[str]) -> tuple[str, Optional[str], Optional[str]]:
    """(host to advertise, why, warning) for a server bound to listen_host. configured (brokerIP1, --advertise)
    wins; a wildcard there is refused (ValueError). Listening on a wildcard with nothing configured advertises
    local_address(); loopback advertised while listening wider is allowed with a warning."""
    if configured:
        if is_wildcard(configured):
            raise ValueError(f"{configured!r} is a wildcard, not an address a client can connect to: advertise "
                             "one of this host's addresses (or leave it unset to advertise the first "
                             "non-loopback one)")
        host, why = configured.strip("[]"), "configured"
    elif is_wildcard(listen_host):
        host, why = local_address()
    else:
        return listen_host.strip("[]"), None, None
    warning = None
    if is_loopback(host) and not is_loopback(listen_host):
        warning = (f"advertising {host} while listening on {listen_host or '*'}: clients on other hosts will be "
                   "handed an address that is their own")
    return host, why, warning
