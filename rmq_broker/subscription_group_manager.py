"""RocketMQ's SubscriptionGroupManager: the consumer groups this broker serves, kept in
config/subscriptionGroup.json in RocketMQ's layout. With autoCreateSubscriptionGroup a group is created on first
use; without it, a group must be listed in that file (an operator adds it there, as with mqadmin
updateSubGroup), and a pull, heartbeat or send-back of any other group is refused."""
from __future__ import annotations

import os
import time
from typing import Optional

from remoting import ResponseCode
from store.json_file import load_rocketmq_json, persist_config_json
from store.offset_store import check_group

from .bad_request import BadRequest


class SubscriptionGroupManager:
    def __init__(self, store_path: str, auto_create: bool, retry_max_times: int = 16):
        self.path = os.path.join(str(store_path), "config", "subscriptionGroup.json")
        self.auto_create = auto_create
        self.retry_max_times = retry_max_times
        data = load_rocketmq_json(self.path) or {}
        self.table: dict[str, dict] = dict(data.get("subscriptionGroupTable") or {})
        self.data_version: dict = data.get("dataVersion") or {"timestamp": 0, "counter": 0}

    def find(self, group: str) -> Optional[dict]:
        """The group's config; created (and persisted) when auto-creation is on; None when it is unknown."""
        config = self.table.get(group)
        if config is None and self.auto_create:
            config = self.table[group] = {
                "groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": self.retry_max_times,
                "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}
            self.persist()
        return config

    def consumable(self, group: str) -> dict:
        """The group's config, checked as the pull and send-back processors check it: a valid name, a group this
        broker serves (SUBSCRIPTION_GROUP_NOT_EXIST), consumeEnable (NO_PERMISSION)."""
        try:
            check_group(group)
        except ValueError as e:
            raise BadRequest(str(e)) from None
        config = self.find(group)
        if config is None:
            raise BadRequest(f"subscription group [{group}] does not exist (autoCreateSubscriptionGroup is false; "
                             "add it to config/subscriptionGroup.json)", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
        if not config.get("consumeEnable", True):
            raise BadRequest(f"subscription group [{group}] no permission to consume (consumeEnable is false)",
                             ResponseCode.NO_PERMISSION)
        return config

    def persist(self) -> None:
        self.data_version = {"timestamp": int(time.time() * 1000),
                             "counter": int(self.data_version.get("counter", 0)) + 1}
        persist_config_json(self.path, {"subscriptionGroupTable": self.table, "dataVersion": self.data_version})

    def update(self, config: dict) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the group's config as the request gives it (BadRequest naming a
        group name RocketMQ would not take)."""
        group = config.get("groupName")
        try:
            check_group(group)
        except ValueError as e:
            raise BadRequest(f"SubscriptionGroupConfig.groupName: {e}") from None
        self.table[str(group)] = {**self.table.get(str(group), {}), **config}
        self.persist()

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self.persist()
        return True

    def wrapper(self) -> dict:
        """SubscriptionGroupWrapper: every group's config and the table's data version."""
        return {"dataVersion": self.data_version, "subscriptionGroupTable": dict(sorted(self.table.items()))}
