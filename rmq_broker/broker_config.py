"""The broker's own broker.conf keys, named as RocketMQ names them; the store's keys stay in StoreConfig. One file
holds both, as a RocketMQ broker.conf does."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, fields
from typing import Optional

from remoting.server_limits import ServerLimits
from store.delay_levels import DEFAULT_DELAY_LEVELS, parse_delay_levels
from store.store_config import StoreConfig, read_conf_file


@dataclass
class BrokerConfig:
    brokerName: str = "broker-a"
    brokerClusterName: str = "DefaultCluster"
    brokerId: int = 0
    namesrvAddr: str = ""
    autoCreateTopicEnable: bool = True
    autoCreateSubscriptionGroup: bool = True
    longPollingEnable: bool = True
    # RocketMQ's default is false (SQL92 subscriptions refused); SQL92 filtering is half of what this project is for
    enablePropertyFilter: bool = True
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    # a group's retry limit when the client's send-back does not say (RocketMQ: SubscriptionGroupConfig.retryMaxTimes)
    maxReconsumeTimes: int = 16
    # queues of a topic created by a send, unless the producer asks for fewer (RocketMQ's producer asks for 4)
    defaultTopicQueueNums: int = 8
    # held pulls without long polling wait this long (RocketMQ's shortPollingTimeMills)
    shortPollingTimeMills: int = 1000
    # RocketMQ's plain ACL: every request checked against the accounts of plain_acl.yml
    aclEnable: bool = False
    # ours (RocketMQ reads $ROCKETMQ_HOME/conf/plain_acl.yml): the accounts file; relative to the broker.conf's
    # directory; empty: plain_acl.yml beside the broker.conf, else $ROCKETMQ_HOME/conf/plain_acl.yml
    aclFilePath: str = ""
    # transactional messages (RocketMQ's names and defaults): a half message is first checked back with its producer
    # group transactionTimeOut ms after it was stored, then every transactionCheckInterval ms; after
    # transactionCheckMax checks without an answer it is rolled back
    transactionTimeOut: int = 6000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 60000
    # the name server registration is repeated every registerNameServerPeriod ms (RocketMQ: 30000, held to 10000..
    # 60000; any value >= 100 here, so that tests can see a broker dropped and re-added in seconds)
    registerNameServerPeriod: int = 30000
    # sent with each registration as heartbeatTimeoutMillis (the name server drops the broker after this much
    # silence; RocketMQ 5 sends it only with enableSlaveActingMaster); 0: not sent, the name server's 120 s hold
    brokerNotActiveTimeoutMillis: int = 0
    # what one client may cost (docs/reliability.md): a connection that completes no request and reads none of
    # its answers for this long is closed (RocketMQ's name and default; 0: never)
    serverChannelMaxIdleTimeSeconds: int = 120
    # answers unread by one client: past the high mark its requests are not read until it has read them down to
    # the low mark (RocketMQ's names; its default is Netty's 64 KiB / 32 KiB)
    writeBufferHighWaterMark: int = 4 << 20
    writeBufferLowWaterMark: int = 1 << 20
    # largest request frame (RocketMQ: -Dcom.rocketmq.remoting.frameMaxLength); a longer one closes the connection
    frameMaxLength: int = 16 << 20
    # ours: bytes of unfinished request frames across connections; past it, connections wait unread
    serverUnfinishedFramesMaxBytes: int = 64 << 20
    # ours: requests of one connection processed at once (held pulls not counted); past it the connection waits
    # unread
    serverChannelMaxBusyRequests: int = 16
    # ours: requests processed at once across connections; past it a request is answered SYSTEM_BUSY (RocketMQ:
    # its processors' queue capacities, e.g. sendThreadPoolQueueCapacity 10000)
    serverMaxBusyRequests: int = 10000

    def __post_init__(self) -> None:
        if self.brokerId != 0:
            raise ValueError(f"brokerId {self.brokerId}: only a master (brokerId=0) is served; there is no "
                             "replication to slaves")
        if not 0 < self.maxReconsumeTimes <= 1000:
            raise ValueError(f"maxReconsumeTimes must be 1..1000, got {self.maxReconsumeTimes}")
        if self.registerNameServerPeriod < 100:
            raise ValueError(f"registerNameServerPeriod must be >= 100 (ms), got {self.registerNameServerPeriod}")
        if self.brokerNotActiveTimeoutMillis < 0:
            raise ValueError(f"brokerNotActiveTimeoutMillis must be >= 0, got {self.brokerNotActiveTimeoutMillis}")
        for key in ("transactionTimeOut", "transactionCheckMax", "transactionCheckInterval"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be > 0, got {getattr(self, key)}")
        if not 1 <= self.defaultTopicQueueNums <= 1024:
            raise ValueError(f"defaultTopicQueueNums must be 1..1024, got {self.defaultTopicQueueNums}")
        self.server_limits()  # refuses bad connection limits, naming the key
        try:
            parse_delay_levels(self.messageDelayLevel)
        except ValueError as e:
            raise ValueError(f"messageDelayLevel: {e}") from None

    @classmethod
    def keys(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "BrokerConfig":
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key in known:
                kwargs[key] = _convert(source, key, value, str(known[key].type))
        return cls(**kwargs)

    def replace(self, **changes) -> "BrokerConfig":
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def server_limits(self) -> ServerLimits:
        return ServerLimits(max_frame=self.frameMaxLength,
                            max_unfinished_frame_bytes=self.serverUnfinishedFramesMaxBytes,
                            write_high_water=self.writeBufferHighWaterMark,
                            write_low_water=self.writeBufferLowWaterMark,
                            max_channel_busy=self.serverChannelMaxBusyRequests, max_busy=self.serverMaxBusyRequests,
                            idle_timeout_s=float(self.serverChannelMaxIdleTimeSeconds))

    def acl_file(self) -> str:
        """The plain_acl.yml in force when aclEnable; ValueError naming aclFilePath when there is none."""
        path = self.aclFilePath
        if not path and os.environ.get("ROCKETMQ_HOME"):
            path = os.path.join(os.environ["ROCKETMQ_HOME"], "conf", "plain_acl.yml")
        if not path:
            raise ValueError("aclEnable=true but no accounts file: set aclFilePath, put plain_acl.yml beside the "
                             "broker.conf given with --config, or set ROCKETMQ_HOME (conf/plain_acl.yml)")
        if not os.path.isfile(path):
            raise ValueError(f"aclEnable=true: aclFilePath {path} does not exist (the accounts in RocketMQ's "
                             "plain_acl.yml format)")
        return path


# What `rmq serve` ships where broker.conf is silent: pulls large enough for Spark (RocketMQ's defaults, 32 messages
# and 256 KiB, cap a Spark read at about a fifth of the speed). The cost: a pull's answer is built in memory, up to
# 8 MiB per pull in flight (a Spark partition keeps pullsInFlight=4 of them).
SERVE_PULL_LIMITS = {"maxTransferCountOnMessageInMemory": 4096, "maxTransferBytesOnMessageInMemory": 8 << 20}


def load_broker_conf(path: Optional[str | os.PathLike]) -> tuple[BrokerConfig, StoreConfig]:
    """A broker.conf as RocketMQ's BrokerStartup reads it: the broker's keys here, the store's in StoreConfig,
    every other key RocketMQ defines logged once as ignored, and any other key refused by name. The pull limits
    default to SERVE_PULL_LIMITS."""
    if path is None:
        return BrokerConfig(), StoreConfig().replace(**SERVE_PULL_LIMITS)
    values = {**SERVE_PULL_LIMITS, **read_conf_file(path)}
    store_config = StoreConfig.from_dict(values, source=str(path), other_keys=BrokerConfig.keys())
    # defaultTopicQueueNums is the store's key too (the queues of topics it creates): one value for both
    broker_config = BrokerConfig.from_dict(values, source=str(path))
    if broker_config.aclEnable:
        # aclFilePath relative to the file's directory (an absolute one stays as it is); without it, plain_acl.yml
        # beside the file if there is one
        acl = os.path.join(os.path.dirname(os.path.abspath(path)), broker_config.aclFilePath or "plain_acl.yml")
        if broker_config.aclFilePath or os.path.isfile(acl):
            broker_config = broker_config.replace(aclFilePath=acl)
        broker_config.acl_file()  # no accounts file: refused now, before anything is created
    return broker_config, store_config


def _convert(source: str, key: str, value, type_name: str):
    if not isinstance(value, str):
        return value
    if type_name == "int":
        try:
            return int(value.replace("_", ""))
        except ValueError:
            raise ValueError(f"{source}: {key} must be an integer, got {value!r}") from None
    if type_name == "bool":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"{source}: {key} must be true or false, got {value!r}")
        return value.lower() == "true"
    return value
