"""RocketMQ's RebalanceLockManager: the queues an orderly consumer locks (LOCK_BATCH_MQ) so that no other member
of its group consumes them meanwhile; a lock not renewed for lock_expiry_s is free."""
from __future__ import annotations

import time

LOCK_EXPIRY_S = 60.0  # RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime


class RebalanceLockManager:
    def __init__(self, lock_expiry_s: float = LOCK_EXPIRY_S):
        self.lock_expiry_s = lock_expiry_s
        self._locks: dict[str, dict[tuple[str, int], tuple[str, float]]] = {}  # group -> queue -> (client, time)

    def try_lock_batch(self, group: str, client_id: str, queues: list[tuple[str, int]]) -> list[int]:
        """Lock (or renew) the queues for the client; the indexes of those it holds now. A queue locked by another
        live client stays with it until that lock expires."""
        locks = self._locks.setdefault(group, {})
        now = time.monotonic()
        locked = []
        for i, queue in enumerate(queues):
            holder = locks.get(queue)
            if holder is None or holder[0] == client_id or now - holder[1] > self.lock_expiry_s:
                locks[queue] = (client_id, now)
                locked.append(i)
        return locked

    def unlock_batch(self, group: str, client_id: str, queues: list[tuple[str, int]]) -> None:
        locks = self._locks.get(group, {})
        for queue in queues:
            if locks.get(queue, ("",))[0] == client_id:
                del locks[queue]
