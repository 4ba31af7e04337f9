"""RemoteAddressStrategyFactory: the white-list forms of plain_acl.yml and whether a client's address matches one.

Forms (IPv4; IPv6 alike with ':' and hex groups): blank (matches nothing), `*` / `*.*.*.*` (everything), one
address `192.168.0.1`, a list `192.168.0.1,192.168.0.2`, a set of last parts `192.168.1.{1,2,3}`, and a range in
the first part that is not fixed: `192.168.0.*`, `192.168.1-10.*`, `192.168.0.1-200`."""
from __future__ import annotations

import ipaddress
import re
from typing import Callable, Optional

from .acl_exception import AclException

Strategy = Callable[[str], bool]


def _v4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
        return True
    except ValueError:
        return False


def _v6(text: str) -> Optional[str]:
    """The address with its 8 groups written out (upper case), None if it is not IPv6."""
    try:
        return ipaddress.IPv6Address(text).exploded.upper()
    except ValueError:
        return None


def _one(text: str, form: str) -> str:
    text = text.strip()
    if _v4(text):
        return text
    expanded = _v6(text)
    if expanded is None:
        raise AclException(f"white address {form!r}: {text!r} is not an IP address")
    return expanded


def _normal(host: str) -> str:
    expanded = _v6(host)
    return expanded if expanded is not None else host


def _multiple(addresses: list[str], form: str) -> Strategy:
    wanted = frozenset(_one(a, form) for a in addresses if a.strip())
    return lambda host: _normal(host) in wanted


def _range_v4(form: str) -> Strategy:
    parts = [p.strip() for p in form.split(".")]
    if len(parts) != 4:
        raise AclException(f"white address {form!r}: an IPv4 range has 4 parts")
    for index in (1, 2, 3):
        low_high = _bounds(parts[index], 255, 10, form)
        if low_high is not None:
            break
    else:
        raise AclException(f"white address {form!r}: no '*' or 'a-b' part after the first")
    for p in parts[:index]:
        if not p.isdigit() or int(p) > 255:
            raise AclException(f"white address {form!r}: {p!r} is not 0..255")
    if any(p != "*" for p in parts[index + 1:]):
        raise AclException(f"white address {form!r}: only '*' may follow a range")
    head, (low, high) = parts[:index], low_high

    def match(host: str) -> bool:
        got = host.split(".")
        if not _v4(host) or got[:index] != head:
            return False
        return low <= int(got[index]) <= high
    return match


def _range_v6(form: str) -> Strategy:
    tokens = form.split(":")
    first = next((i for i, t in enumerate(tokens) if "*" in t or "-" in t), None)
    if first is None or first == 0 or any(t.strip() != "*" for t in tokens[first + 1:]):
        raise AclException(f"white address {form!r}: an IPv6 range is a prefix, one '*' or 'a-b' group, then '*'s")
    bounds = _bounds(tokens[first].strip(), 0xFFFF, 16, form)
    assert bounds is not None
    index = 8 - (len(tokens) - first)  # the fixed groups before the range
    prefix = ":".join(tokens[:first]) + ":"  # "2001:db8::*" -> "2001:db8::", "1:2:3:4:5:6:7:*" -> "1:...:7"
    prefix = prefix if prefix.endswith("::") else prefix[:-1]
    if "::" in prefix:  # written out to `index` groups, as AclUtils.expandIP does
        left, _, right = prefix.partition("::")
        lg, rg = left.split(":") if left else [], right.split(":") if right else []
        groups = lg + ["0"] * (index - len(lg) - len(rg)) + rg
    else:
        groups = prefix.split(":")
    if len(groups) != index or not all(re.fullmatch("[0-9a-fA-F]{1,4}", g) for g in groups):
        raise AclException(f"white address {form!r}: {prefix!r} is not the start of an IPv6 address")
    head = [g.upper().rjust(4, "0") for g in groups]
    low, high = bounds

    def match(host: str) -> bool:
        expanded = _v6(host)
        if expanded is None:
            return False
        groups = expanded.split(":")
        return groups[:index] == head and low <= int(groups[index], 16) <= high
    return match


def _bounds(part: str, top: int, base: int, form: str) -> Optional[tuple[int, int]]:
    if part == "*":
        return 0, top
    if "-" not in part:
        return None
    low_text, _, high_text = part.partition("-")
    try:
        low, high = int(low_text, base), int(high_text, base)
    except ValueError:
        raise AclException(f"white address {form!r}: {part!r} is not a range a-b") from None
    if not 0 <= low <= high <= top:
        shown = f"{top:x}" if base == 16 else str(top)
        raise AclException(f"white address {form!r}: range {part!r} is not within 0..{shown}")
    return low, high


def remote_address_strategy(form: Optional[str]) -> Strategy:
    """The matcher of one white-list form (a client's host, without its port); AclException naming the form."""
    if form is None or not str(form).strip():
        return lambda host: False
    form = str(form).strip()
    if form in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda host: True
    if form.endswith("}"):
        head, brace, rest = form.partition("{")
        if not brace or "}" in head or (":" not in form and len(form.split(".")) < 4):
            raise AclException(f"white address {form!r}: a set is written like 192.168.1.{{1,2,3}}")
        return _multiple([head + item.strip() for item in rest[:-1].split(",") if item.strip()], form)
    if "," in form:
        return _multiple(form.split(","), form)
    if "*" in form or "-" in form:
        return _range_v6(form) if ":" in form else _range_v4(form)
    one = _one(form, form)
    return lambda host: _normal(host) == one
