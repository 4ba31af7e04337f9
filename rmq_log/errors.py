"""How a MessageLog's refusals reach the user: a wrong request (exit 2), a failure of the command (exit 1), a
broker's refusal or silence (exit 1, with its code and remark), and a batch of messages that was written in
part."""
from __future__ import annotations


class UsageError(Exception):
    """Bad options, values or input: exit code 2."""


class Failure(Exception):
    """The command ran and failed (corruption found, a store error): exit code 1."""


class Refused(Exception):
    """A broker refused a request or did not answer (rmq_client's MQClientError, as its text): exit code 1."""


class PartialFlush(Exception):
    """A flush that failed after some of its messages were written: `sent` of them (`detail` says which), then
    `cause`."""

    def __init__(self, cause: Exception, sent: int, detail: str):
        super().__init__(str(cause))
        self.cause, self.sent, self.detail = cause, sent, detail


class RowError(ValueError):
    """A bad value in one row given to the sink: names the row's position in the task's input and the reason."""
