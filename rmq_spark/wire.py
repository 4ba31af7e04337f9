"""The brokers' request errors as the wire sink meets them (rmq_log.broker_wait, rmq_log.broker_calls), an ACL
refusal naming the source's and the sink's option to fix."""
from __future__ import annotations

from rmq_client import MQClientError
from rmq_log.broker_calls import refused_by_acl as _refused_by_acl
from rmq_log.broker_wait import BrokerUnavailableError, RetryLog

from .read_policy import POLICY

__all__ = ["BrokerUnavailableError", "RetryLog", "refused_by_acl"]


def refused_by_acl(e: MQClientError, what: str) -> Exception:
    """A broker's ACL refusal as the error of accessKey or secretKey, a broker given as a name server as
    namesrvAddr's; any other error as it is."""
    return _refused_by_acl(e, what, POLICY)
