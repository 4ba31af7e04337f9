"""A request's fields as the processors read them: BadRequest, answered with its code and a remark naming the
field at fault (the broker's dispatch turns it into the response), and integer fields."""
from __future__ import annotations

from typing import Optional

from remoting import ResponseCode


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
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"{name} is {value!r}, not an integer") from None
