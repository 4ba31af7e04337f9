"""EndTransactionProcessor: END_TRANSACTION 37, a producer's commit or rollback of its half messages."""
from __future__ import annotations

import logging
from typing import Callable, Optional

from remoting import RemotingCommand, RequestCode, ResponseCode
from remoting.broker_headers import EndTransactionRequestHeader

from ..bad_request import BadRequest
from ..transactional_message_service import (
    MAX_HALVES_PER_END,
    STATE_NAMES,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    EndResult,
    TransactionalMessageService,
)
from .request_processor import RequestProcessor, handles

log = logging.getLogger(__name__)


class EndTransactionProcessor(RequestProcessor):
    """Registered with an executor of one thread per CPU: a commit reads, checks and rewrites its halves in compiled
    code that lets the others run, and the ends of one microbatch arrive together while its producer waits."""

    def __init__(self, service: TransactionalMessageService, on_committed: Callable[[str, int], None]):
        super().__init__()
        self.service = service
        self.on_committed = on_committed

    async def end(self, group: str, offset: int, count: int, commit_log_offset: int, transaction_id: str,
                  state: int) -> EndResult:
        """TransactionalMessageService.end in the processor's executor (the check service's rollbacks too)."""
        return await self.blocking(self.service.end, group, offset, count, commit_log_offset, transaction_id, state)

    @handles(RequestCode.END_TRANSACTION, header=EndTransactionRequestHeader)
    async def end_transaction(self, h: EndTransactionRequestHeader, cmd: RemotingCommand,
                              channel) -> Optional[RemotingCommand]:
        state = h.commit_or_rollback
        if state == TRANSACTION_NOT_TYPE:
            # the producer does not know yet: nothing to do, and RocketMQ sends no response
            log.info("%s: transaction %s still unknown to producer group %s", channel.remote_address,
                     h.transaction_id, h.producer_group)
            return None
        if state not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise BadRequest(f"commitOrRollback {state}: give {TRANSACTION_COMMIT_TYPE} (commit), "
                             f"{TRANSACTION_ROLLBACK_TYPE} (rollback) or 0 (unknown)")
        group = h.required("producer_group")
        offset, clog = h.required("tran_state_table_offset"), h.required("commit_log_offset")
        count = 1 if h.tran_state_table_count is None else h.tran_state_table_count
        if not 1 <= count <= MAX_HALVES_PER_END:
            raise BadRequest(f"tranStateTableCount {count}: give 1..{MAX_HALVES_PER_END}")
        out = await self.end(group, offset, count, clog, h.transaction_id or "", state)
        if h.from_transaction_check or out.code != ResponseCode.SUCCESS:
            log.info("%s transaction %s [%d, +%d) of %s from %s%s: %s %s", STATE_NAMES[state], h.transaction_id,
                     offset, count, group, channel.remote_address,
                     " (answering a check)" if h.from_transaction_check else "", out.code, out.remark or "")
        for topic, queue_id in out.topics:
            self.on_committed(topic, queue_id)
        return cmd.response(out.code, out.remark)
