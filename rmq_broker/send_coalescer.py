"""The sends read in one turn of the event loop, appended together at its end (MessageStore.put_many for single
messages, put_message_batches for MessageBatch bodies): one write lock, one commitlog write, one index pass and
one committed end for all of them, where each send alone paid all of it (most of a send's cost). Each send gets
its queue offsets in the order it was read. Under ASYNC_FLUSH its answer leaves as soon as the commitlog holds its
records, before their consume-queue units and index entries are written (RocketMQ answers there too, and
dispatches after), unless a pull is held on its queue: then the pull's answer, woken by the units, leaves in the
same write as the send's (a consumer waiting for the message gets it soonest). Under SYNC_FLUSH a send is answered
once the group commit covers it: nothing is acknowledged before it is stored. A producer with one send in flight
waits no longer than the turn it arrived in."""
from __future__ import annotations

import asyncio
from typing import Callable, Optional

from remoting.remoting_server import Answer as Encoded
from remoting.remoting_server import ResponseCallback
from store import PutBatchResult, PutResult
from store.put_one import OneRecord

Answer = Callable[[object], Encoded]


class _Send:
    __slots__ = ("batch", "args", "respond", "answer", "one")

    def __init__(self, batch: bool, args, respond: ResponseCallback, answer: Answer, one: Optional[OneRecord] = None):
        self.batch = batch
        self.args = args
        self.respond = respond
        self.answer = answer
        self.one = one


class SendCoalescer:
    def __init__(self, broker):
        self.broker = broker
        self.coalesced = 0  # sends appended together with others, since start
        self.answered_early = 0  # sends answered before their consume-queue units were written
        self._pending: list[_Send] = []

    def put(self, args: dict, respond: ResponseCallback, answer: Answer, one: Optional[OneRecord] = None) \
            -> ResponseCallback:
        """A single message (put's arguments; one: its record when built already), answered through respond with
        answer(its PutResult, or the error that refused it)."""
        return self._add(_Send(False, args, respond, answer, one))

    def put_batch(self, batch: tuple, respond: ResponseCallback, answer: Answer) -> ResponseCallback:
        """A MessageBatch body (topic, body, queue id, born timestamp, born host), answered through respond with
        answer(its PutBatchResult, None when it is not the usual batch, or the error that refused it)."""
        return self._add(_Send(True, batch, respond, answer))

    def _add(self, send: _Send) -> ResponseCallback:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(send)
        return send.respond

    def flush(self) -> None:
        """Append what is pending now (at the end of the turn; before any other write that must come after)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        group_commit = self.broker.group_commit
        store = self.broker.store
        hold = self.broker.hold
        early = group_commit is None and not any(hold.waiting(*_queue(s)) for s in pending)
        results: list = []
        for run in _runs(pending):
            written = (lambda r, run=run: self._early(run, r)) if early else None
            deferred = group_commit is not None
            try:
                if run[0].batch:
                    results.extend(store.put_message_batches([s.args for s in run], defer_flush=deferred,
                                                             on_written=written, defer_index=True))
                else:
                    results.extend(store.put_many([s.args for s in run], defer_flush=deferred, on_written=written,
                                                  defer_index=True, ones=[s.one for s in run]))
            except Exception as e:  # those not answered yet are answered with the error
                results.extend([e] * len(run))
        if len(pending) > 1:
            self.coalesced += len(pending)
        answers = []
        end = 0
        for send, result in zip(pending, results):
            if isinstance(result, PutResult):
                self.broker.arrived(result.topic, result.queue_id)  # its units are written: held pulls find it
            elif isinstance(result, PutBatchResult):
                self.broker.arrived(result.topics[0], int(result.queue_ids[0]), len(result))
            if send.respond.answered:
                continue
            end = max(end, _end(result))
            try:
                answers.append((send.respond, send.answer(result)))
            except Exception as e:
                send.respond.failed(e)
        self.broker.index_later()
        if group_commit is None or not end:
            _resolve(answers)
        else:
            asyncio.ensure_future(self._after_commit(group_commit, end, answers))

    @staticmethod
    async def _after_commit(group_commit, end: int, answers) -> None:
        try:
            await group_commit.wait(end)  # SEND_OK only once the records are on disk
        except Exception as e:
            for respond, _ in answers:
                respond.failed(e)
            return
        _resolve(answers)

    def _early(self, run: list[_Send], results: list) -> None:
        """The run's records are in the commitlog: their answers leave now, each connection's in one write."""
        self.answered_early += len(run)
        flushes = {}
        for send, result in zip(run, results):
            try:
                send.respond.callback(send.answer(result))
            except Exception as e:
                send.respond.failed(e)
            flushes[id(send.respond.channel)] = send.respond
        for respond in flushes.values():
            respond.flush()


def _runs(pending: list[_Send]) -> list[list[_Send]]:
    """The sends split in runs of the same kind (single messages, batches), in the order read."""
    runs: list[list[_Send]] = []
    for send in pending:
        if runs and runs[-1][0].batch == send.batch:
            runs[-1].append(send)
        else:
            runs.append([send])
    return runs


def _queue(send: _Send) -> tuple[str, Optional[int]]:
    """The send's topic and queue (None: round robin chooses)."""
    if send.batch:
        return send.args[0], send.args[2]
    return send.args["topic"], send.args.get("queue_id")


def _end(result) -> int:
    """Past the last record a put appended (0: none)."""
    if isinstance(result, PutResult):
        return result.commit_log_offset + 1
    if isinstance(result, PutBatchResult) and len(result.commit_log_offsets):
        return int(result.commit_log_offsets[-1]) + 1
    return 0


def _resolve(answers) -> None:
    for respond, answer in answers:
        respond.callback(answer)
