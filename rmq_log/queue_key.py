"""QueueKey: which queue, in a store directory and on brokers alike (brokerName, queueId), and how the two places
name one in text ("3" in a directory, "broker-a:3" on brokers)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Union

# A store directory keeps no brokerName (a broker's is in its broker.conf, not in the store), so its queues' keys
# carry a fixed one: the name `rmq serve` gives the directory's broker unless told otherwise, the same whoever opens
# the directory. A store's queue is named by its queue id alone (offsets JSON, messages): this name never shows.
STORE_BROKER_NAME = "broker-a"


@dataclasses.dataclass(frozen=True, order=True)
class QueueKey:
    broker_name: str
    queue_id: int

    def name(self, names_broker: bool) -> Union[str, int]:
        """brokerName:queueId, or the queue id alone where there is one broker."""
        return f"{self.broker_name}:{self.queue_id}" if names_broker else self.queue_id

    def fields(self, names_broker: bool) -> dict:
        """The queue's JSON fields: broker_name (where there are brokers) and queue_id."""
        return ({"broker_name": self.broker_name} if names_broker else {}) | {"queue_id": self.queue_id}

    def __str__(self) -> str:
        return f"{self.broker_name}:{self.queue_id}"  # as offsets JSON names a broker's queue


def split_queue_name(name: str) -> tuple[Optional[str], int]:
    """(brokerName, queueId) of "broker-a:3", (None, queueId) of "3"; ValueError for anything else."""
    broker, sep, queue_id = str(name).rpartition(":")
    if sep and not broker:
        raise ValueError(f"{name!r} is neither a queue id nor brokerName:queueId")
    return (broker if sep else None), int(queue_id)
