"""open_log: the one place that chooses where the messages are, from a command's or a Spark query's options: a
store directory, or the brokers of a cluster through its name servers (with the account that signs its requests).
What each kind of log refuses of a command's options is said here too."""
from __future__ import annotations

from typing import Mapping, Optional

from rmq_acl import SessionCredentials

from .broker_wait import DEFAULT_BROKER_TIMEOUT_MS
from .errors import UsageError
from .message_log import MessageLog

# Options a kind of log cannot honour: option (its attribute name) -> the usage error when it is given.
REFUSED = {
    "store": {"cluster": "--cluster is for --namesrv; a store is one broker's"},
    "cluster": {"follow": "--follow is not supported with --namesrv yet"},
}


def open_log(store: Optional[str] = None, namesrv: Optional[str] = None, config: Optional[str] = None,
             access_key: Optional[str] = None, secret_key: Optional[str] = None,
             options: Optional[Mapping[str, object]] = None, account: Optional[SessionCredentials] = None,
             timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS) -> MessageLog:
    """The brokers found through `namesrv` when it is given, else the store directory `store` (with its
    broker.conf-style `config`); UsageError for an option in `options` (name -> value) that this log refuses.
    Brokers' requests are signed with `account` when given (a Spark query resolves its own, so that a secret
    from $RMQ_SECRET_KEY never travels to its executors), else with access_key/secret_key or the environment's;
    a broker that cannot be reached is waited for up to timeout_ms where a read waits.
    Nothing is opened yet: each request opens what it needs, and a missing store is reported by the first."""
    kind = "cluster" if namesrv else "store"
    for name, value in (options or {}).items():
        if value and name in REFUSED[kind]:
            raise UsageError(REFUSED[kind][name])
    if namesrv:
        from .cluster_log import ClusterLog
        return ClusterLog(namesrv, access_key, secret_key, account, timeout_ms)
    from .store_log import StoreLog
    return StoreLog(store, config)

