"""The single sends read in one turn of the event loop, appended together at its end (MessageStore.put_many): one
write lock, one commitlog write, one index pass and one committed end for all of them, where each send alone paid
all of it (most of a single send's cost). Each send gets its queue offset in the order it was read, and its answer
once its record is appended, under SYNC_FLUSH once the group commit covers it: nothing is acknowledged before it
is stored. A producer with one send in flight waits no longer than the turn it arrived in."""
from __future__ import annotations

import asyncio
from typing import Callable

from remoting import RemotingCommand


class SendCoalescer:
    def __init__(self, broker):
        self.broker = broker
        self.coalesced = 0  # sends appended together with others, since start
        self._pending: list[tuple[dict, asyncio.Future, Callable[[object], RemotingCommand]]] = []

    def put(self, args: dict, answer: Callable[[object], RemotingCommand]) -> asyncio.Future:
        """put's arguments; the future of the send's answer: answer(its PutResult, or the error that refused it)."""
        loop = asyncio.get_running_loop()
        if not self._pending:
            loop.call_soon(self.flush)
        done = loop.create_future()
        self._pending.append((args, done, answer))
        return done

    def flush(self) -> None:
        """Append what is pending now (at the end of the turn; before any other write that must come after)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        group_commit = self.broker.group_commit
        try:
            results = self.broker.store.put_many([args for args, _, _ in pending],
                                                 defer_flush=group_commit is not None)
        except Exception as e:  # nothing of them acknowledged: each is answered with the error
            results = [e] * len(pending)
        if len(pending) > 1:
            self.coalesced += len(pending)
        answers = []
        end = 0
        for (_, done, answer), result in zip(pending, results):
            if not isinstance(result, Exception):
                self.broker.arrived(result.topic, result.queue_id)
                end = max(end, result.commit_log_offset + 1)
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


def _resolve(answers) -> None:
    for done, answer in answers:
        if not done.done():
            done.set_result(answer)
