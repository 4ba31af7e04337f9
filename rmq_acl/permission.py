"""Permission: the bits an account holds on a topic or group, how plain_acl.yml spells them, and the request codes
only an admin account may send."""
from __future__ import annotations

from typing import Iterable

from remoting.codes import RequestCode

from .acl_exception import AclException

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

# Permission.ADMIN_CODE
ADMIN_CODE = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
                        RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                        RequestCode.DELETE_SUBSCRIPTIONGROUP})

_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def need_admin_perm(code: int) -> bool:
    return code in ADMIN_CODE


def parse_perm_from_string(text, where: str) -> int:
    """DENY, PUB, SUB, PUB|SUB or SUB|PUB; a missing value is DENY, as in RocketMQ. Any other value is refused
    naming where it is (RocketMQ reads it as DENY without a word: a typo would lock an account out silently)."""
    if text is None:
        return DENY
    perm = _PERMS.get(str(text).strip())
    if perm is None:
        raise AclException(f"{where}: {text!r} is not a permission (DENY, PUB, SUB, PUB|SUB or SUB|PUB)")
    return perm


def perm_text(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    if perm & ANY:
        return "PUB or SUB"
    return "|".join(name for name, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit) or "none"


def parse_resource_perms(items: Iterable, where: str) -> dict[str, int]:
    """topicPerms / groupPerms entries `name=PERM` -> {name: perm}."""
    out: dict[str, int] = {}
    for item in items:
        parts = [p.strip() for p in str(item).split("=") if p.strip()]
        if len(parts) != 2:
            raise AclException(f"{where}: {item!r} is not name=PERM (for example topicA=SUB)")
        out[parts[0]] = parse_perm_from_string(parts[1], f"{where} {parts[0]}")
    return out
