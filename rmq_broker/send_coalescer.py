"""The sends read in one turn of the event loop, appended together at its end (MessageStore.put_many for single
messages, put_message_batches for MessageBatch bodies): one write lock, one commitlog write, one index pass and
one committed end for all of them, where each send alone paid all of it (most of a send's cost). Each send gets
its queue offsets in the order it was read, and its answer once its records are appended, under SYNC_FLUSH once
the group commit covers them: nothing is acknowledged before it is stored. A producer with one send in flight
waits no longer than the turn it arrived in."""
from __future__ import annotations

import asyncio
from typing import Callable

from remoting import RemotingCommand
from store import PutBatchResult, PutResult


class SendCoalescer:
    def __init__(self, broker):
        self.broker = broker
        self.coalesced = 0  # sends appended together with others, since start
        self._pending: list[tuple[bool, object, asyncio.Future, Callable[[object], RemotingCommand]]] = []

    def put(self, args: dict, answer: Callable[[object], RemotingCommand]) -> asyncio.Future:
        """A single message (put's arguments); the future of the send's answer: answer(its PutResult, or the error
        that refused it)."""
        return self._add(False, args, answer)

    def put_batch(self, batch: tuple, answer: Callable[[object], RemotingCommand]) -> asyncio.Future:
        """A MessageBatch body (topic, body, queue id, born timestamp, born host); answer(its PutBatchResult, None
        when it is not the usual batch, or the error that refused it)."""
        return self._add(True, batch, answer)

    def _add(self, batch: bool, args, answer) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self.flush)
        done = loop.create_future()
        self._pending.append((batch, args, done, answer))
        return done

    def flush(self) -> None:
        """Append what is pending now (at the end of the turn; before any other write that must come after)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        group_commit = self.broker.group_commit
        store = self.broker.store
        results: list = []
        i = 0
        while i < len(pending):  # runs of the same kind, in the order read
            j = i
            while j < len(pending) and pending[j][0] == pending[i][0]:
                j += 1
            args = [p[1] for p in pending[i:j]]
            put = store.put_message_batches if pending[i][0] else store.put_many
            try:
                results.extend(put(args, defer_flush=group_commit is not None))
            except Exception as e:  # nothing of them acknowledged: each is answered with the error
                results.extend([e] * len(args))
            i = j
        if len(pending) > 1:
            self.coalesced += len(pending)
        answers = []
        end = 0
        for (_, _, done, answer), result in zip(pending, results):
            end = max(end, _end(result))
            try:
                answers.append((done, answer(result)))
            except Exception as e:
                done.set_exception(e)
        if group_commit is None or not end:
            _resolve(answers)
        else:
            asyncio.ensure_future(self._after_commit(group_commit, end, answers))

    @staticmethod
    async def _after_commit(group_commit, end: int, answers) -> None:
        try:
            await group_commit.wait(end)  # SEND_OK only once the records are on disk
        except Exception as e:
            for done, _ in answers:
                if not done.done():
                    done.set_exception(e)
            return
        _resolve(answers)


def _end(result) -> int:
    """Past the last record a put appended (0: none)."""
    if isinstance(result, PutResult):
        return result.commit_log_offset + 1
    if isinstance(result, PutBatchResult) and len(result.commit_log_offsets):
        return int(result.commit_log_offsets[-1]) + 1
    return 0


def _resolve(answers) -> None:
    for done, answer in answers:
        if not done.done():
            done.set_result(answer)
