"""BadRequest: a request the broker refuses, answered with a RocketMQ response code and a remark naming the field
or value at fault (the broker's dispatch turns it into the response)."""
from __future__ import annotations

from remoting import HeaderFieldError, RemotingCommand, ResponseCode
from store import DiskFullError, StoreError


class BadRequest(Exception):
    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR):
        super().__init__(remark)
        self.code = code


# what refuses a request with an answer of its own (refusal), rather than as a failure of the broker
REFUSED = (BadRequest, HeaderFieldError, StoreError)


def refusal(cmd: RemotingCommand, e: Exception) -> RemotingCommand:
    """The answer to a request refused by one of REFUSED: BadRequest's code and remark, SYSTEM_ERROR naming the
    header field at fault, or SYSTEM_ERROR naming the store's error. A full disk is SERVICE_NOT_AVAILABLE, as a
    stock broker answers it (a producer sends again to another broker)."""
    if isinstance(e, DiskFullError):
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, f"the broker's disk is full: {e}")
    if isinstance(e, StoreError):
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
    return cmd.response(getattr(e, "code", ResponseCode.SYSTEM_ERROR), str(e))
