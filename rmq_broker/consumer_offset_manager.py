"""RocketMQ's ConsumerOffsetManager: each consumer group's committed offsets, kept where `rmq stat` and the Spark
source read them (the store's per-group offset files, RocketMQ's consumerOffset.json layout)."""
from __future__ import annotations

import logging

from store import MessageStore, OffsetStore
from store.errors import DiskFullError
from store.offset_store import committed_groups

from .bad_request import BadRequest

log = logging.getLogger(__name__)


class ConsumerOffsetManager:
    def __init__(self, store: MessageStore):
        self.store = store
        self._groups: dict[str, OffsetStore] = {}

    def offsets(self, group: str) -> OffsetStore:
        """The group's offsets, loaded on first use; BadRequest for a group name the store refuses."""
        offsets = self._groups.get(group)
        if offsets is None:
            try:
                offsets = self._groups[group] = OffsetStore(self.store.path, group)
            except ValueError as e:
                raise BadRequest(str(e)) from None
            offsets.load()
        return offsets

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, persist: bool = False) -> None:
        offsets = self.offsets(group)
        offsets.update_offset((topic, queue_id), offset)
        if persist:
            offsets.persist_all()

    def groups_of_topic(self, topic: str) -> list[str]:
        """The groups with committed offsets of the topic (whichGroupByTopic)."""
        cached = {g for g, o in self._groups.items() if topic in o.topics()}
        return sorted(cached | {g for g, topics in committed_groups(self.store.path).items() if topic in topics})

    def remove_topic(self, topic: str) -> None:
        """Every group's offsets of a deleted topic (cleanOffsetByTopic), persisted now."""
        for group in self.groups_of_topic(topic):
            offsets = self.offsets(group)
            if offsets.remove_topic(topic):
                offsets.persist_all()

    def remove_group(self, group: str) -> None:
        """Every offset of a group (DELETE_SUBSCRIPTIONGROUP with removeOffset), persisted now."""
        offsets = self.offsets(group)
        for topic in offsets.topics():
            offsets.remove_topic(topic)
        offsets.persist_all()

    def persist_all(self) -> None:
        for offsets in self._groups.values():
            try:
                offsets.persist_all()
            except DiskFullError as e:  # at stop: the store is still closed cleanly
                log.error("%s: offsets committed since the disk filled are lost", e)
