"""The client's errors: one class per family of RocketMQ response codes, chosen from the code (as OSError picks
FileNotFoundError from errno: `MQClientError(code, ...)` gives the family's class), each saying whether the
request is worth sending again (`retriable`), as the Java client's retry lists do."""
from __future__ import annotations

from typing import Optional

from remoting import ResponseCode

# Where to point a client that reached no name server, or a broker in its place.
NAMESRV_HINT = ("name servers usually listen on 9876: Apache RocketMQ's `mqnamesrv`, `rmq namesrv`, or the one "
                "`rmq serve` starts and prints")


class MQClientError(Exception):
    """A request refused or not answered: the response code (-1: no answer), the broker's remark, the address.
    `unreachable`: no answer, or the broker is not in the route (down or restarting): worth asking again later.
    `retriable`: the same request may succeed later (the family's)."""

    retriable = False
    unreachable = False

    def __new__(cls, code: int, *args, unreachable: bool = False, **kwargs):
        if cls is MQClientError:
            cls = BrokerUnreachableError if unreachable else _FAMILIES.get(code, MQClientError)
        return super().__new__(cls)

    def __init__(self, code: int, remark: Optional[str], address: str, what: str, unreachable: bool = False):
        self.code, self.remark, self.address = code, remark, address
        self.unreachable = unreachable or type(self).unreachable
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = "NO_RESPONSE" if code == -1 else str(code)
        super().__init__(f"{what} at {address}: {name} ({code}){': ' + remark if remark else ''}")

    @property
    def not_stored_ok(self) -> bool:
        return isinstance(self, NotStoredOKError)


class BrokerUnreachableError(MQClientError):
    """No answer (no connection, a timeout), or the broker is not in the route: down or restarting."""
    retriable = True
    unreachable = True


class BrokerBusyError(MQClientError):
    """SYSTEM_BUSY, SERVICE_NOT_AVAILABLE: the broker's flow control or a store not writable now; nothing done."""
    retriable = True


class NotStoredOKError(MQClientError):
    """FLUSH_DISK_TIMEOUT, SLAVE_NOT_AVAILABLE, FLUSH_SLAVE_TIMEOUT: the master stored the send but could not
    flush or replicate it as its role asks; its answer carries the offset."""
    retriable = True


class NoPermissionError(MQClientError):
    """NO_PERMISSION: refused by the broker's ACL or the topic's or broker's permissions."""


class TopicError(MQClientError):
    """TOPIC_NOT_EXIST, TOPIC_EXIST_ALREADY."""


class MessageIllegalError(MQClientError):
    """MESSAGE_ILLEGAL: a message the broker will not store (its size, topic or properties)."""


class SubscriptionError(MQClientError):
    """SUBSCRIPTION_* and FILTER_DATA_*: a pull's subscription the broker cannot use; a subscription not yet the
    latest (the broker has not seen the group's newest heartbeat) is worth asking again."""

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.code in (ResponseCode.SUBSCRIPTION_NOT_LATEST, ResponseCode.FILTER_DATA_NOT_LATEST)


class NotSupportedError(MQClientError):
    """REQUEST_CODE_NOT_SUPPORTED, VERSION_NOT_SUPPORTED: a request this server does not serve."""


class TransactionError(MQClientError):
    """TRANSACTION_FAILED and TRANSACTION_*: an END_TRANSACTION or check the broker could not apply."""


class NotANameServerError(NotSupportedError):
    """An address given as a name server answers as a broker does: it refuses the name server's requests with
    REQUEST_CODE_NOT_SUPPORTED (a broker's port where the name server's belongs)."""

    def __init__(self, address: str, what: str, remark: Optional[str]):
        super().__init__(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                         f"{address} is a broker, not a name server ({NAMESRV_HINT}); it answered: {remark}",
                         address, what)
        self.answer = remark  # the broker's own remark
        Exception.__init__(self, f"{what}: {address} is a broker, not a name server ({NAMESRV_HINT}); it answered "
                                 f"REQUEST_CODE_NOT_SUPPORTED ({self.code}): {remark}")


_FAMILIES: dict[int, type[MQClientError]] = {
    ResponseCode.SYSTEM_BUSY: BrokerBusyError, ResponseCode.SERVICE_NOT_AVAILABLE: BrokerBusyError,
    ResponseCode.FLUSH_DISK_TIMEOUT: NotStoredOKError, ResponseCode.SLAVE_NOT_AVAILABLE: NotStoredOKError,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: NotStoredOKError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.TOPIC_NOT_EXIST: TopicError, ResponseCode.TOPIC_EXIST_ALREADY: TopicError,
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegalError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: SubscriptionError, ResponseCode.SUBSCRIPTION_NOT_EXIST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: SubscriptionError,
    ResponseCode.FILTER_DATA_NOT_EXIST: SubscriptionError, ResponseCode.FILTER_DATA_NOT_LATEST: SubscriptionError,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: NotSupportedError, ResponseCode.VERSION_NOT_SUPPORTED: NotSupportedError,
    ResponseCode.TRANSACTION_FAILED: TransactionError, ResponseCode.TRANSACTION_STATE_UNKNOW: TransactionError,
    ResponseCode.TRANSACTION_STATE_GROUP_WRONG: TransactionError,
}
# the codes of a send stored on the master only
NOT_STORED_OK = frozenset(c for c, f in _FAMILIES.items() if f is NotStoredOKError)
