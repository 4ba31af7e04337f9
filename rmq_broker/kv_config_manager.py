"""The name server's KVConfigManager: namespaced key-value settings (PUT_KV_CONFIG, GET_KV_CONFIG,
DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE), kept in kvConfig.json in RocketMQ's layout
({"configTable": {namespace: {key: value}}}) when the name server is given a file, in memory otherwise. The
ORDER_TOPIC_CONFIG namespace is what `mqadmin updateTopic -o true` writes: a topic's order config, handed to
clients in its route (orderTopicConf) and to brokers in their registration answer."""
from __future__ import annotations

import logging
import os
from typing import Optional

from store.json_file import load_rocketmq_json, persist_config_json

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


class KVConfigManager:
    def __init__(self, path: Optional[str] = None):
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        if path is not None:
            data = load_rocketmq_json(path) or {}
            for namespace, kv in (data.get("configTable") or {}).items():
                if isinstance(kv, dict):
                    self.table[str(namespace)] = {str(k): str(v) for k, v in kv.items()}

    def put(self, namespace: str, key: str, value: str) -> None:
        old = self.table.setdefault(namespace, {}).get(key)
        self.table[namespace][key] = value
        log.info("KV config %s: %s %s -> %s", namespace, key, "new" if old is None else repr(old), value)
        self._persist()

    def get(self, namespace: str, key: str) -> Optional[str]:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        kv = self.table.get(namespace)
        if kv is not None and kv.pop(key, None) is not None:
            if not kv:
                del self.table[namespace]
            self._persist()

    def namespace(self, namespace: str) -> Optional[dict[str, str]]:
        """The namespace's keys and values (KVTable's table), None when it has none."""
        kv = self.table.get(namespace)
        return dict(sorted(kv.items())) if kv else None

    def _persist(self) -> None:
        if self.path is not None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            persist_config_json(self.path, {"configTable": self.table})
