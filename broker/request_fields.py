"""A request's fields as the processors read them: BadRequest, answered with its code and a remark naming the
field at fault (the broker's dispatch turns it into the response), and integer fields."""
from __future__ import annotations

import re
from typing import Optional

from remoting import ResponseCode

_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class BadRequest(Exception):
    """A request field missing or malformed: answered with the code and a remark naming the field."""

    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR):
        super().__init__(remark)
        self.code = code


def int_field(ext: dict, name: str, default: Optional[int] = None) -> int:
    value = ext.get(name)
    if value is None or value == "":
        if default is None:
            raise BadRequest(f"the request has no {name}")
        return default
    text = str(value)
    # Long.parseLong's numbers only: Python's int() would take "1_0" and " 3" too
    if not _INTEGER.fullmatch(text) or not _LONG_MIN <= int(text) <= _LONG_MAX:
        raise BadRequest(f"{name} is {text[:40]!r}, not an integer")
    return int(text)
