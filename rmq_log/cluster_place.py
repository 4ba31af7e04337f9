"""The brokers of a cluster, found through its name servers, as a place (place.Place): the Spark option
`namesrvAddr` and the `rmq` flag --namesrv (with --access-key and --secret-key), the options only brokers take
(pullBatchSize, pullsInFlight, brokerTimeoutMs and the account for reads; producerGroup, deliveryGuarantee,
brokerTimeoutMs and the account for writes), and its ClusterLog."""
from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, Mapping, Optional

from rmq_acl import SessionCredentials

from .broker_wait import DEFAULT_BROKER_TIMEOUT_MS
from .place import CHECKPOINT_LOCATION, OptionError, Place, ReadPlace, SinkBasics, default_stream_sink_id, int_option
from .store_place import BATCH_ID, PATH, STORE_CONFIG

if TYPE_CHECKING:
    from .message_log import MessageLog
    from .writes import WriteOptions

NAMESRV_ADDR = "namesrvAddr"             # host:port;host2:port
PULL_BATCH_SIZE = "pullBatchSize"        # maxMsgNums of each pull (the broker may cap it)
PULLS_IN_FLIGHT = "pullsInFlight"        # pulls of one partition sent before the first answers
BROKER_TIMEOUT_MS = "brokerTimeoutMs"    # how long a query waits for a broker that does not answer
ACCESS_KEY = "accessKey"                 # brokers with aclEnable=true: the plain_acl.yml account (or RMQ_ACCESS_KEY)
SECRET_KEY = "secretKey"                 # its secret (or RMQ_SECRET_KEY, kept out of every pickle and log)
PRODUCER_GROUP = "producerGroup"          # the transactions' producer group (default: one per sink)
DELIVERY_GUARANTEE = "deliveryGuarantee"  # exactly_once (transactional messages, the default) or at_least_once

DEFAULT_PULL_BATCH_SIZE = 1024
DEFAULT_PULLS_IN_FLIGHT = 4
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly_once", "at_least_once"

_HOST = re.compile(r"[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]")  # a name, an IPv4 address or a bracketed IPv6 one


class ClusterPlace(Place):
    name = "cluster"
    setting = "namesrv"
    address_option = NAMESRV_ADDR
    cli_flag = "--namesrv"
    what = "name servers"
    read_options = (PULL_BATCH_SIZE, PULLS_IN_FLIGHT, BROKER_TIMEOUT_MS, ACCESS_KEY, SECRET_KEY)
    write_options = (NAMESRV_ADDR, PRODUCER_GROUP, DELIVERY_GUARANTEE, BROKER_TIMEOUT_MS, ACCESS_KEY, SECRET_KEY)
    write_refuses = (PATH, BATCH_ID, STORE_CONFIG)  # a store directory's: named in their refusal
    secret_options = (SECRET_KEY,)
    writes_how = " through brokers"
    cli_refuses = {"follow": "--follow is not supported with --namesrv yet"}
    option_of = {"namesrv": NAMESRV_ADDR, "namesrv_addr": NAMESRV_ADDR, "access_key": ACCESS_KEY,
                 "secret_key": SECRET_KEY}

    def foreign_read_option(self, name: str, chosen: Place) -> str:
        return "only for reads through brokers (with namesrvAddr)"

    def reads(self, opts: Mapping[str, str]) -> ReadPlace:
        namesrv = namesrv_addresses(opts)
        settings = {self.setting: namesrv, "account": credentials(opts),
                    "timeout_ms": int_option(opts, BROKER_TIMEOUT_MS, DEFAULT_BROKER_TIMEOUT_MS, minimum=0)}
        tuning = {"pull_batch_size": int_option(opts, PULL_BATCH_SIZE, DEFAULT_PULL_BATCH_SIZE, minimum=1),
                  "pulls_in_flight": int_option(opts, PULLS_IN_FLIGHT, DEFAULT_PULLS_IN_FLIGHT, minimum=1)}
        return ReadPlace(log_settings=settings, tuning=tuning, identity=f"rocketmq://{namesrv}")

    def writes(self, opts: Mapping[str, str], basics: SinkBasics) -> WriteOptions:
        """deliveryGuarantee picks transactional halves or plain sends, and an exactly-once stream keeps its
        decisions in its (local) checkpoint."""
        from .writes import WriteOptions, local_checkpoint

        for name in self.write_refuses:
            if opts.get(name) not in (None, ""):
                raise OptionError(name, f"not with {NAMESRV_ADDR} (the sink writes through brokers, not into a "
                                        f"store directory); give one of path and {NAMESRV_ADDR}")
        namesrv = namesrv_addresses(opts)
        guarantee = (opts.get(DELIVERY_GUARANTEE) or EXACTLY_ONCE).strip().lower().replace("-", "_")
        if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
            raise OptionError(DELIVERY_GUARANTEE, f"{opts[DELIVERY_GUARANTEE]!r}: give {EXACTLY_ONCE} "
                                                  f"(transactional messages) or {AT_LEAST_ONCE} (plain sends)")
        checkpoint = basics.checkpoint
        if basics.stream and guarantee == EXACTLY_ONCE:
            if not checkpoint:
                raise OptionError(CHECKPOINT_LOCATION, "the wire sink keeps its commit decisions in the query's "
                                                       "checkpoint: set option(\"checkpointLocation\", ...) on the "
                                                       "query (or deliveryGuarantee=at_least_once)")
            try:
                local_checkpoint(checkpoint)
            except ValueError as e:
                raise OptionError(CHECKPOINT_LOCATION, str(e)) from None
        sink_id = basics.sink_id
        if sink_id is None:
            sink_id = default_stream_sink_id(checkpoint) if checkpoint else "write"
        group = opts.get(PRODUCER_GROUP) or "rmq-sink-" + hashlib.sha1(sink_id.encode()).hexdigest()[:12]
        return WriteOptions(path="", topic=basics.topic, sink_id=sink_id, batch_id=None, checkpoint=checkpoint,
                            namesrv_addr=namesrv, producer_group=group, exactly_once=guarantee == EXACTLY_ONCE,
                            broker_timeout_ms=int_option(opts, BROKER_TIMEOUT_MS, DEFAULT_BROKER_TIMEOUT_MS,
                                                         minimum=0),
                            credentials=credentials(opts), stream=basics.stream,
                            log_settings={self.setting: namesrv})

    def open(self, settings: Mapping[str, Any]) -> MessageLog:
        """settings: namesrv; access_key and secret_key (a command's), or account (resolved by the caller: a
        Spark query resolves its own, so that a secret from $RMQ_SECRET_KEY never travels to its executors);
        timeout_ms, how long a read waits for a broker that cannot be reached."""
        from .cluster_log import ClusterLog
        return ClusterLog(settings[self.setting], settings.get("access_key"), settings.get("secret_key"),
                          settings.get("account"), settings.get("timeout_ms", DEFAULT_BROKER_TIMEOUT_MS))

    def add_command_arguments(self, parser: Any) -> None:
        parser.add_argument(self.cli_flag, metavar="HOST:PORT",
                            help="work through RocketMQ brokers found through this name server (host:port;host2:port) "
                                 "instead of a store directory")
        parser.add_argument("--access-key", metavar="KEY",
                            help="with --namesrv: sign every request as this account of the brokers' plain_acl.yml "
                                 "(default: $RMQ_ACCESS_KEY)")
        parser.add_argument("--secret-key", metavar="SECRET",
                            help="with --namesrv: the account's secret key (default: $RMQ_SECRET_KEY, which other "
                                 "users cannot see in the process list: prefer it)")


def namesrv_addresses(opts: Mapping[str, str]) -> str:
    """namesrvAddr (host:port, ';'- or ','-separated) checked, as host:port;host2:port."""
    text = opts.get(NAMESRV_ADDR) or ""
    addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
    if not addrs:
        raise OptionError(NAMESRV_ADDR, "no name server given; expected host:port;host2:port")
    for a in addrs:
        host, sep, port = a.rpartition(":")
        if "://" in a:
            raise OptionError(NAMESRV_ADDR, f"{a!r} is not host:port: name servers take no scheme (write "
                                            f"{a.split('://', 1)[1]!r})")
        if not sep or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536:
            raise OptionError(NAMESRV_ADDR, f"{a!r} is not host:port (e.g. 127.0.0.1:9876;host2:9876)")
    return ";".join(addrs)


def credentials(opts: Mapping[str, str]) -> Optional[SessionCredentials]:
    """accessKey and secretKey, else RMQ_ACCESS_KEY / RMQ_SECRET_KEY of the driver's environment (a secret from
    the environment is read there again on the executors: spark.executorEnv.RMQ_SECRET_KEY)."""
    try:
        return SessionCredentials.resolve(opts.get(ACCESS_KEY), opts.get(SECRET_KEY), names=(ACCESS_KEY, SECRET_KEY))
    except ValueError as e:
        raise OptionError(SECRET_KEY if str(e).startswith(SECRET_KEY) else ACCESS_KEY, str(e)) from None


CLUSTER = ClusterPlace()
