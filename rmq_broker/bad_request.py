"""BadRequest: a request the broker refuses, answered with a RocketMQ response code and a remark naming the field
or value at fault (the broker's dispatch turns it into the response)."""
from __future__ import annotations

from remoting import ResponseCode


class BadRequest(Exception):
    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR):
        super().__init__(remark)
        self.code = code
