"""END_TRANSACTION 37 (EndTransactionProcessor), the producers that may be asked about their transactions
(ProducerManager), and the check-back of halves whose outcome never came (TransactionalMessageCheckService:
CHECK_TRANSACTION_STATE 39 to a producer of the half's group, rollback after transactionCheckMax checks)."""
from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Awaitable, Callable, Optional

from remoting import RemotingCommand, RequestCode, ResponseCode

from .request_fields import BadRequest, int_field
from .transactional_message_service import (
    MAX_HALVES_PER_END,
    STATE_NAMES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    EndOutcome,
    TransactionalMessageService,
)

log = logging.getLogger(__name__)


@dataclass
class _Producer:
    channel: object
    last_heartbeat: float


class ProducerManager:
    """Producer groups' live connections, from heartbeats' producerDataSet."""

    def __init__(self, expiry_s: float):
        self.expiry_s = expiry_s
        self.groups: dict[str, dict[str, _Producer]] = {}

    def heartbeat(self, group: str, client_id: str, channel) -> None:
        self.groups.setdefault(group, {})[client_id] = _Producer(channel, time.monotonic())

    def unregister(self, group: str, client_id: str) -> None:
        clients = self.groups.get(group)
        if clients is not None:
            clients.pop(client_id, None)
            if not clients:
                del self.groups[group]

    def channel_closed(self, channel) -> None:
        for group, clients in list(self.groups.items()):
            for cid in [cid for cid, p in clients.items() if p.channel is channel]:
                self.unregister(group, cid)

    def expire(self) -> None:
        now = time.monotonic()
        for group, clients in list(self.groups.items()):
            for cid in [cid for cid, p in clients.items() if now - p.last_heartbeat > self.expiry_s]:
                log.info("producer %s of group %s sent no heartbeat for %.0f s: removed", cid, group, self.expiry_s)
                self.unregister(group, cid)

    def available_channel(self, group: str):
        """The most recently heard producer of the group (getAvailableChannel), None when none is connected."""
        clients = self.groups.get(group)
        if not clients:
            return None
        return max(clients.values(), key=lambda p: p.last_heartbeat).channel


class EndTransactionProcessor:
    """Runs behind the broker's dispatch, which answers a BadRequest with its code and remark. Ends run in
    threads, one per CPU: a commit reads, checks and rewrites its halves in compiled code that lets the others
    run, and the ends of one microbatch arrive together while its producer waits."""

    def __init__(self, service: TransactionalMessageService, on_committed: Callable[[str, int], None]):
        self.service = service
        self.on_committed = on_committed
        self._threads = ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0)) if hasattr(
            os, "sched_getaffinity") else (os.cpu_count() or 1), thread_name_prefix="end-transaction")

    def close(self) -> None:
        """Wait for the ends under way (before the store closes)."""
        self._threads.shutdown(wait=True)

    async def end(self, group: str, offset: int, count: int, commit_log_offset: int, transaction_id: str,
                  state: int) -> EndOutcome:
        """TransactionalMessageService.end in one of the threads."""
        return await asyncio.get_running_loop().run_in_executor(
            self._threads, self.service.end, group, offset, count, commit_log_offset, transaction_id, state)

    async def process(self, cmd: RemotingCommand, channel) -> Optional[RemotingCommand]:
        ext = cmd.ext_fields
        state = int_field(ext, "commitOrRollback")
        from_check = str(ext.get("fromTransactionCheck", "false")).lower() == "true"
        if state == TRANSACTION_NOT_TYPE:
            # the producer does not know yet: nothing to do, and RocketMQ sends no response
            log.info("%s: transaction %s still unknown to producer group %s", channel.remote_address,
                     ext.get("transactionId"), ext.get("producerGroup"))
            return None
        if state not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise BadRequest(f"commitOrRollback {state}: give {TRANSACTION_COMMIT_TYPE} (commit), "
                             f"{TRANSACTION_ROLLBACK_TYPE} (rollback) or 0 (unknown)")
        if not ext.get("producerGroup"):
            raise BadRequest("the request has no producerGroup")
        offset, clog = int_field(ext, "tranStateTableOffset"), int_field(ext, "commitLogOffset")
        count = int_field(ext, "tranStateTableCount", 1)
        if not 1 <= count <= MAX_HALVES_PER_END:
            raise BadRequest(f"tranStateTableCount {count}: give 1..{MAX_HALVES_PER_END}")
        out = await self.end(ext["producerGroup"], offset, count, clog, ext.get("transactionId") or "", state)
        if from_check or out.code != ResponseCode.SUCCESS:
            log.info("%s transaction %s [%d, +%d) of %s from %s%s: %s %s", STATE_NAMES[state],
                     ext.get("transactionId"), offset, count, ext["producerGroup"], channel.remote_address,
                     " (answering a check)" if from_check else "", out.code, out.remark or "")
        for topic, queue_id in out.topics:
            self.on_committed(topic, queue_id)
        return cmd.response(out.code, out.remark)


class TransactionalMessageCheckService:
    """Every check interval: each undecided half older than the timeout is checked back with a producer of its
    group (oneway CHECK_TRANSACTION_STATE, the half's stored bytes as body); a half checked transactionCheckMax
    times without an outcome is rolled back. A check with no producer connected counts as a check."""

    def __init__(self, service: TransactionalMessageService, producers: ProducerManager, timeout_ms: int,
                 check_max: int, interval_ms: int, end: Callable[..., Awaitable[EndOutcome]]):
        self.service, self.producers, self.end = service, producers, end
        self.timeout_ms, self.check_max, self.interval_ms = timeout_ms, check_max, interval_ms

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_ms / 1000)
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad pass must not end the service
                log.exception("transaction check pass failed")

    async def check_once(self) -> None:
        for half in self.service.due(int(time.time() * 1000), self.timeout_ms):
            checks = self.service.checks.get(half.offset, 0)
            if checks >= self.check_max:
                out = await self.end(half.group, half.offset, half.count, half.commit_log_offset,
                                     half.transaction_id, TRANSACTION_ROLLBACK_TYPE)
                log.warning("transaction %s of producer group %s ([%d, +%d)): no outcome after %d checks, rolled "
                            "back (%s)", half.transaction_id, half.group, half.offset, half.count, checks, out.code)
                continue
            self.service.checks[half.offset] = checks + 1
            channel = self.producers.available_channel(half.group)
            if channel is None:
                log.info("transaction %s of producer group %s: no producer connected to check with (check %d of %d)",
                         half.transaction_id, half.group, checks + 1, self.check_max)
                continue
            fields = {"tranStateTableOffset": half.offset, "commitLogOffset": half.commit_log_offset,
                      "msgId": half.unique_key or half.msg_id, "transactionId": half.transaction_id,
                      "offsetMsgId": half.msg_id}
            if half.count > 1:
                fields["tranStateTableCount"] = half.count
            request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, fields,
                                              body=self.service.record_bytes(half.offset), oneway=True)
            # best effort, never waiting: a producer that does not read delays no other group's checks
            channel.send_oneway_best_effort(request)
