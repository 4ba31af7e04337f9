"""Requests to brokers as a reader makes them: retried while the broker cannot be reached (up to a timeout, then
BrokerUnavailableError naming what was asked), retries logged compactly, and a broker's ACL refusal, or a broker
given as a name server, as the error of the setting to fix (the caller's ReadPolicy words it); the waiting itself
(BrokerUnavailableError, RetryLog) in broker_wait.py."""
from __future__ import annotations

import logging
import time
from typing import Callable, Optional, TypeVar

from rmq_acl import SessionCredentials
from rmq_client import NAMESRV_HINT, MQClientError, NoPermissionError, NotANameServerError, PullConsumer

from .broker_wait import BrokerUnavailableError, RetryLog
from .reads import ReadPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_PAUSE_S = 0.5


# the remarks of a broker's ACL refusal (PlainPermissionManager's words), and the setting to fix for each
_ACL_REFUSALS = (("Check signature failed", "secret_key"), ("No acl config for", "access_key"),
                 ("No accessKey is configured", "access_key"), ("No permission for", "access_key"),
                 ("Need admin permission", "access_key"))


def refused_by_acl(e: MQClientError, what: str, policy: ReadPolicy) -> Exception:
    """A broker's ACL refusal as the error of the setting to fix (the secret key for a signature that does not
    check), and a broker's address given as a name server as the name servers' error; any other error as it is."""
    if isinstance(e, NotANameServerError):
        return policy.setting_error("namesrv", f"{e.address} is a broker, not a name server ({NAMESRV_HINT}); "
                                              f"asked for the {what}, it answered REQUEST_CODE_NOT_SUPPORTED "
                                              f"({e.code}): {e.answer}")
    if not isinstance(e, NoPermissionError):
        return e
    option = next((o for words, o in _ACL_REFUSALS if (e.remark or "").startswith(words)), None)
    if option is None:
        return e
    return policy.setting_error(option, f"{what}: the broker at {e.address} refused it (NO_PERMISSION, "
                                        f"aclEnable=true): {e.remark}")


def with_retry(call: Callable[[], T], timeout_ms: int, what: str, policy: ReadPolicy,
               refused_at_once: Optional[Callable[[MQClientError], Optional[Exception]]] = None) -> T:
    """call() again while its broker cannot be reached (down, restarting, not yet registered), up to timeout_ms;
    then BrokerUnavailableError naming what was asked. A broker's refusal (a response code) is not retried; an
    ACL refusal names the option to fix. refused_at_once: the error to raise at once for a failure not worth
    waiting for, if any."""
    deadline = time.monotonic() + timeout_ms / 1000
    retries = RetryLog(what)
    while True:
        try:
            return call()
        except MQClientError as e:
            if not e.unreachable:
                raise refused_by_acl(e, what, policy) from None
            at_once = refused_at_once(e) if refused_at_once is not None else None
            if at_once is not None:
                raise at_once from None
            if time.monotonic() >= deadline:
                raise BrokerUnavailableError(f"{what}: no answer within brokerTimeoutMs={timeout_ms} ({e}); the "
                                             f"query can be restarted from its checkpoint once the broker is back "
                                             f"(nothing is lost or read twice)") from None
            retries.failed(e)
            time.sleep(RETRY_PAUSE_S)


_CONSUMERS: dict[tuple[str, str, Optional[SessionCredentials]], PullConsumer] = {}


def consumer_for(namesrv: str, group: str, credentials: Optional[SessionCredentials] = None) -> PullConsumer:
    """One client per name server list, group and account per process (Python workers are reused across tasks)."""
    c = _CONSUMERS.get((namesrv, group, credentials))
    if c is None:
        c = _CONSUMERS[(namesrv, group, credentials)] = PullConsumer(namesrv, group, credentials=credentials)
    return c


