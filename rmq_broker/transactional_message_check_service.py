"""RocketMQ's TransactionalMessageCheckService: the check-back of halves whose outcome never came
(CHECK_TRANSACTION_STATE 39 to a producer of the half's group, rollback after transactionCheckMax checks)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable

from remoting import RemotingCommand, RequestCode
from remoting.broker_headers import CheckTransactionStateRequestHeader

from .producer_manager import ProducerManager
from .transactional_message_service import TRANSACTION_ROLLBACK_TYPE, EndResult, TransactionalMessageService

log = logging.getLogger(__name__)


class TransactionalMessageCheckService:
    """Every check interval: each undecided half older than the timeout is checked back with a producer of its
    group (oneway CHECK_TRANSACTION_STATE, the half's stored bytes as body); a half checked transactionCheckMax
    times without an outcome is rolled back. A check with no producer connected counts as a check."""

    def __init__(self, service: TransactionalMessageService, producers: ProducerManager, timeout_ms: int,
                 check_max: int, interval_ms: int, end: Callable[..., Awaitable[EndResult]]):
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
            header = CheckTransactionStateRequestHeader(
                half.offset, half.commit_log_offset, half.unique_key or half.msg_id, half.transaction_id, half.msg_id,
                half.count if half.count > 1 else None)
            request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(),
                                              body=self.service.record_bytes(half.offset), oneway=True)
            # best effort, never waiting: a producer that does not read delays no other group's checks
            channel.send_oneway_best_effort(request)
