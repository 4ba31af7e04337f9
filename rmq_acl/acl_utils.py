"""AclUtils: the content a request's signature covers, and the signature (AclSigner: base64 of HMAC-SHA1)."""
from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Iterable, Mapping

from .session_credentials import SIGNATURE


def _java_order(key: str) -> bytes:
    # Java's TreeMap orders Strings by UTF-16 code units; Python's str order is by code points
    return key.encode("utf-16-be", "surrogatepass")


def combine_request_content(ext_fields: Mapping[str, str], excluded: Iterable[str] = (SIGNATURE,)) -> bytes:
    """The extFields' values in key order, Signature (and any other excluded key) left out, as UTF-8; the body
    follows it in the signed content."""
    skip = set(excluded)
    values = (ext_fields[k] for k in sorted(ext_fields, key=_java_order) if k not in skip)
    # a lone surrogate becomes "?", as Java's String.getBytes(UTF_8) does
    return "".join(values).encode("utf-8", "replace")


def cal_signature(head: bytes, body, secret_key: str) -> str:
    """base64(HMAC-SHA1(secretKey, head + body)); body may be any bytes-like object (not copied)."""
    mac = hmac.new(secret_key.encode("utf-8", "replace"), head, hashlib.sha1)
    if body:
        mac.update(body)
    return base64.b64encode(mac.digest()).decode("ascii")
