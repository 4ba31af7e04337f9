"""Turning put/put_batch arguments into validated arrays (before the lock), and the result of an append."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple, Optional, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmq_common import message_codec as codec
from rmq_common.message_properties import PropertiesText
from rmq_common.properties_column import closed_texts, map_lookup, properties_to_strings

from .append import Placement
from .errors import InvalidMessageError
from .get_message_result import PutResult
from .record_encoder import (
    assign_offsets,
    first_separator,
    java_hash_codes,
    new_encoder,
    part,
    properties_lengths,
    record_sizes,
)

# The put_batch argument each named properties piece comes from, for errors.
_PART_ARGUMENT = {codec.PROPERTY_TAGS: "tags", codec.PROPERTY_KEYS: "keys"}
_ZERO_I32 = np.zeros(1, np.int32)  # one value for every message (EncodedBatch)
_ZERO_I64 = np.zeros(1, np.int64)
# Transaction types whose messages go to a consume queue (prepared and rolled-back ones stay in the commitlog).
_DISPATCHED_TYPES = (codec.TRANSACTION_NOT_TYPE, codec.TRANSACTION_COMMIT_TYPE)


def _is_seq(v) -> bool:
    return isinstance(v, (list, tuple, np.ndarray, pa.Array, pa.ChunkedArray))


def _as_array(v) -> pa.Array:
    if isinstance(v, pa.ChunkedArray):
        return v.combine_chunks()
    return v


def _per_message(value, n: int, name: str, typ: pa.DataType) -> Optional[pa.Array]:
    """None (absent), a scalar for every message, or one value per message -> Arrow array of n or None."""
    if value is None:
        return None
    if _is_seq(value):
        if len(value) != n:
            raise InvalidMessageError(f"{name}: got {len(value)} values for {n} messages")
        if isinstance(value, (pa.Array, pa.ChunkedArray)):
            arr = _as_array(value)
            return arr if arr.type == typ else arr.cast(typ)
        try:
            return pa.array(value, type=typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise InvalidMessageError(f"{name}: expected {typ} values: {e}") from None
    try:
        return pa.array([value], type=typ).take(pa.array(np.zeros(n, dtype=np.int32)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        raise InvalidMessageError(f"{name}: expected a {typ} value, got {value!r}") from None


def _first_true(mask) -> int:
    return int(np.flatnonzero(np.asarray(mask))[0])


def _check_no_separators(arr: Optional[pa.Array], name: str) -> None:
    """Refuse \x01/\x02 in any value (one pass over the array's bytes)."""
    if arr is None or len(arr) == 0:
        return
    if not (pa.types.is_string(arr.type) or pa.types.is_binary(arr.type)):
        arr = arr.cast(pa.string())
    i = first_separator(arr)
    if i >= 0:
        raise InvalidMessageError(
            f"message {i}: {name} {arr[i].as_py()!r} contains a reserved separator (\\x01 or \\x02)")


class Assignment(NamedTuple):
    """Where a batch goes (AppendPlan.assign)."""
    queue_ids: np.ndarray
    queue_offsets: np.ndarray
    positions: np.ndarray  # commitlog offset of each record
    units: np.ndarray      # the dispatched messages' consume-queue units, grouped by queue
    runs: list             # (topic, queue_id, first queue offset, start, stop) per queue written: units[start:stop]
    end: Optional[int]     # the log end after the batch, when positions were computed from write_pos


@dataclass
class AppendPlan:
    topics: list
    topic_index: np.ndarray
    queue_ids: Optional[np.ndarray]      # explicit ids, -1 where unset
    sharding_hash: Optional[np.ndarray]  # |hashCode| of the sharding key, -1 where unset
    dispatched: Optional[np.ndarray]  # per message; None when all_dispatched
    tags: Optional[pa.Array]  # each message's tag (None: no tags), hashed into the consume-queue units
    n: int
    uniq_keys: pa.Array
    atomic: bool = False
    all_dispatched: bool = True

    def _groups(self, appender) -> tuple:
        """Each message's consume queue as a group for assign_offsets: (keys, round-robin start, stride, queue
        ids). The usual batch (one topic, every queue chosen round robin, all dispatched) is left to
        assign_offsets' round robin from the topic's next queue (keys and queue ids None); otherwise each message
        gets its group key, topic * stride + queue (-1 when not dispatched)."""
        n = self.n
        if len(self.topics) == 1 and self.queue_ids is None and self.sharding_hash is None and self.all_dispatched:
            topic = self.topics[0]
            nq = appender.store.topic_config.table[topic].writeQueueNums
            return None, appender.take_round_robin(topic, nq, n), nq, None
        chosen = self.resolve_queue_ids(appender)
        stride = int(chosen.max()) + 1 if n else 1
        if len(self.topics) == 1:
            keys = chosen.copy()
        else:
            keys = self.topic_index.astype(np.int32) * np.int32(stride) + chosen
        if self.dispatched is not None:
            keys[~self.dispatched] = -1
        return keys, 0, stride, chosen

    def resolve_queue_ids(self, appender) -> np.ndarray:
        """Each message's queue id: given, by sharding key, or round robin over its topic's write queues."""
        n = self.n
        out = np.zeros(n, dtype=np.int32)
        for t_idx, topic in enumerate(self.topics):
            nq = appender.store.topic_config.table[topic].writeQueueNums
            members = slice(None) if len(self.topics) == 1 else np.flatnonzero(self.topic_index == t_idx)
            count = n if isinstance(members, slice) else len(members)
            chosen = np.full(count, -1, dtype=np.int64)
            if self.queue_ids is not None:
                explicit = self.queue_ids[members]
                bad = (explicit >= nq) | (explicit < -1)
                if bad.any():
                    i = int(np.arange(n)[members][np.flatnonzero(bad)[0]])
                    raise InvalidMessageError(
                        f"message {i}: queue_id {int(self.queue_ids[i])} is outside topic {topic!r}'s "
                        f"write queues 0..{nq - 1}")
                chosen = explicit.astype(np.int64)
            if self.sharding_hash is not None:
                sh = self.sharding_hash[members]
                use = (chosen < 0) & (sh >= 0)
                chosen[use] = sh[use] % nq
            rest = np.flatnonzero(chosen < 0)
            if len(rest):
                chosen[rest] = (appender.take_round_robin(topic, nq, len(rest)) + np.arange(len(rest))) % nq
            out[members] = chosen
        return out

    def assign(self, appender, sizes: np.ndarray, write_pos: int, positions: Optional[np.ndarray]) -> Assignment:
        """Each message's consume queue, then where the batch goes (Assignment). Positions come from write_pos
        (positions None: the batch fits in the current file; end is its end) or are given (end None)."""
        keys, start, stride, chosen = self._groups(appender)
        n, groups = len(sizes), len(self.topics) * stride
        if keys is None:
            hit = range(groups) if n >= groups else sorted({(start + i) % groups for i in range(n)})
        else:
            hit = np.flatnonzero(np.bincount(keys[keys >= 0], minlength=groups)).tolist()
        ends = np.zeros(groups, dtype=np.int64)
        for g in hit:
            ends[g] = appender.queue_end(self.topics[g // stride], g % stride)
        dispatched = n if self.dispatched is None else int(np.count_nonzero(self.dispatched))
        placed = assign_offsets(sizes, keys, start, ends, write_pos, positions, self.tags, dispatched)
        runs, at = [], 0
        for g, count in enumerate(placed.counts.tolist()):
            if count:
                runs.append((self.topics[g // stride], g % stride, int(ends[g]), at, at + count))
                at += count
        return Assignment(chosen if placed.queue_ids is None else placed.queue_ids, placed.queue_offsets,
                          placed.positions, placed.units, runs, placed.end)


class PlannedBatch:
    """put_batch's messages, validated and sized, for Appender.append: placed in one pass over their columns and
    encoded while written, rolling commitlog files as they fill."""

    noun = "batch"
    units_full = "consume-queue units; the batch was not acknowledged (its records are dispatched by the next writer)"
    lone = None
    __slots__ = ("batch", "plan")

    def __init__(self, batch: codec.EncodedBatch, plan: AppendPlan):
        self.batch, self.plan = batch, plan

    def place(self, appender, write_pos: int, store_ts: int) -> Placement:
        store, batch, plan = appender.store, self.batch, self.plan
        for t in batch.topics:  # topics first
            appender.topic_for_write(t)
        layout = store.commit_log.plan(write_pos, batch.sizes, batch.size_total)
        sizes = batch.sizes
        assert sizes is not None  # set by build_batch
        placed = plan.assign(appender, sizes, write_pos, layout.positions)
        batch.queue_ids = placed.queue_ids
        runs = [(topic, qid, start, a, b - a) for topic, qid, start, a, b in placed.runs]
        result = PutBatchResult(batch.topics, batch.topic_index, placed.queue_ids, placed.queue_offsets,
                                placed.positions, store.store_host, plan.uniq_keys)
        return Placement(layout.end, placed.positions, runs, placed.units, result, None,
                         new_encoder(batch, placed.queue_offsets, placed.positions, store_ts), layout.segments)


def _topics(topic, n: int):
    if isinstance(topic, str):
        codec.check_topic(topic)
        return [topic], _ZERO_I32  # one index for every message
    arr = _per_message(topic, n, "topic", pa.string())
    assert arr is not None  # topic is not None
    if arr.null_count:
        raise InvalidMessageError(f"message {_first_true(arr.is_null().to_numpy(zero_copy_only=False))}: topic is null")
    enc = pc.dictionary_encode(arr)
    topics = enc.dictionary.to_pylist()
    idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    for i, t in enumerate(topics):
        try:
            codec.check_topic(t)
        except ValueError as e:
            raise InvalidMessageError(f"message {_first_true(idx == i)}: {e}") from None
    return topics, idx


def _bodies(bodies) -> pa.Array:
    if isinstance(bodies, (pa.Array, pa.ChunkedArray)):
        arr = _as_array(bodies)
        if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.binary())
        elif pa.types.is_string(arr.type):
            arr = arr.view(pa.binary())
        elif not pa.types.is_binary(arr.type):
            raise InvalidMessageError(f"body: expected binary or string values, got {arr.type}")
    else:
        items = list(bodies)
        try:
            arr = pa.array([b.encode("utf-8") if isinstance(b, str) else b for b in items], type=pa.binary())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise InvalidMessageError(f"body: expected bytes or str per message: {e}") from None
    if arr.null_count:
        raise InvalidMessageError(f"message {_first_true(arr.is_null().to_numpy(zero_copy_only=False))}: body is null")
    return arr


def _user_properties(properties, n: int):
    """User properties as RocketMQ text per message plus the map (for TAGS/KEYS/UNIQ_KEY given there)."""
    if properties is None:
        return None, None
    if isinstance(properties, dict):
        properties = [properties] * n
    if isinstance(properties, (pa.Array, pa.ChunkedArray)):
        arr = _as_array(properties)
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            if len(arr) != n:
                raise InvalidMessageError(f"properties: got {len(arr)} values for {n} messages")
            return _properties_text(arr)
        if not pa.types.is_map(arr.type):
            raise InvalidMessageError(f"properties: expected map<string,string> or RocketMQ properties text, "
                                      f"got {arr.type}")
        if len(arr) != n:
            raise InvalidMessageError(f"properties: got {len(arr)} values for {n} messages")
        _check_no_separators(arr.keys, "property key")
        _check_no_separators(arr.items, "property value")
        return properties_to_strings(arr), arr
    if len(properties) != n:
        raise InvalidMessageError(f"properties: got {len(properties)} values for {n} messages")
    texts = []
    for i, props in enumerate(properties):
        if not props:
            texts.append("")
            continue
        for k, v in props.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InvalidMessageError(f"message {i}: property {k!r}={v!r}: keys and values must be strings")
            if not k or not v:
                raise InvalidMessageError(f"message {i}: property {k!r}={v!r}: empty keys or values are not stored")
            try:
                codec.check_property(k, v)
            except ValueError as e:
                raise InvalidMessageError(f"message {i}: {e}") from None
        texts.append(codec.properties_to_string(props))
    arr = pa.array(texts, pa.string())
    from rmq_common.properties_column import parse_properties
    return arr, parse_properties(arr)


def _properties_text(arr: pa.Array):
    """Properties given as RocketMQ text (`key\x01value\x02...`, as a client sends or a record stores them) are
    written as they are, a null as no properties; only a last pair without its \x02 gets one, so that the
    properties the store adds (TAGS, KEYS, UNIQ_KEY) stay pairs of their own. Lookups read the text."""
    arr = closed_texts(arr)
    return arr, PropertiesText(arr)


def incomplete_atomic_start(records) -> Optional[int]:
    """The offset of the first record of an atomic batch among walked records whose last record (the one
    with ATOMIC_BATCH_END_FLAG) was never written: the batch runs to the end of the walk."""
    start = None
    for rec in records:
        if rec.sys_flag & codec.ATOMIC_BATCH_FLAG:
            if start is None:
                start = rec.offset
            if rec.sys_flag & codec.ATOMIC_BATCH_END_FLAG:
                start = None
        else:
            start = None
    return start


def build_batch(store, topic, bodies, *, tags, keys, properties, queue_id, sharding_key, flag, born_timestamp,
                sys_flag, born_host, atomic=False, reconsume_times=0):
    """The batch to encode and the plan to place it, everything checked before anything is written."""
    bodies = _bodies(bodies)
    n = len(bodies)
    if n == 0:
        raise InvalidMessageError("no messages to put")
    topics, topic_index = _topics(topic, n)
    explicit_tags = _per_message(tags, n, "tags", pa.string())
    tags_arr = explicit_tags
    keys_arr = _keys_column(keys, n)
    user_text, user_map = _user_properties(properties, n)
    given_uniq = None
    if isinstance(user_map, PropertiesText):
        user_map.prefetch([codec.PROPERTY_TAGS, codec.PROPERTY_UNIQ_KEY])
    if user_map is not None:
        given_tags = _lookup(user_map, codec.PROPERTY_TAGS)
        tags_arr = given_tags if tags_arr is None else pc.coalesce(tags_arr, given_tags)
        given_uniq = _lookup(user_map, codec.PROPERTY_UNIQ_KEY)
    uniq_col, new_uniq = _uniq_keys(given_uniq, n, store.store_host[0])
    parts = [p for p in (part(None, user_text), part(codec.PROPERTY_TAGS, explicit_tags),
                         part(codec.PROPERTY_KEYS, keys_arr), part(codec.PROPERTY_UNIQ_KEY, new_uniq))
             if p is not None]
    born_host_parsed = store.store_host if born_host is None else codec.parse_host(born_host)
    sys_flags = _sys_flags(sys_flag, n, atomic, born_host_parsed, store.store_host)
    now = int(time.time() * 1000)
    if isinstance(born_timestamp, (pa.Array, pa.ChunkedArray)) and \
            pa.types.is_timestamp(_as_array(born_timestamp).type):
        born_timestamp = _as_array(born_timestamp).cast(pa.timestamp("ms")).cast(pa.int64()).fill_null(now)
    batch = codec.EncodedBatch(
        topics=topics, topic_index=topic_index, bodies=bodies, property_parts=parts,
        queue_ids=_ZERO_I32, flags=_int_column(flag, "flag", n, np.int32, 0), sys_flags=sys_flags,
        born_timestamps=_int_column(born_timestamp, "born_timestamp", n, np.int64, now),
        born_host=born_host_parsed, store_host=store.store_host,
        reconsume_times=_int_column(reconsume_times, "reconsume_times", n, np.int32, 0, lo=0),
        prepared_offsets=_ZERO_I64)
    _size_batch(batch, store.config.maxMessageSize)
    dispatched, all_dispatched = _dispatched(sys_flags, n)
    plan = AppendPlan(topics=topics, topic_index=topic_index, queue_ids=None, sharding_hash=None,
                      dispatched=dispatched, tags=tags_arr, n=n, uniq_keys=uniq_col,
                      atomic=atomic, all_dispatched=all_dispatched)
    if queue_id is not None:
        plan.queue_ids = _queue_ids(queue_id, n)
    if sharding_key is not None:
        sk = _per_message(sharding_key, n, "sharding_key", pa.string())
        assert sk is not None
        plan.sharding_hash = np.abs(java_hash_codes(sk, n)).astype(np.int64)
        plan.sharding_hash[sk.is_null().to_numpy(zero_copy_only=False)] = -1
    return batch, plan


def _lookup(props, key: str) -> pa.Array:
    return props.column(key) if isinstance(props, PropertiesText) else map_lookup(props, key)


def _keys_column(keys, n: int) -> Optional[pa.Array]:
    """KEYS per message: one entry per message (a string or a list of keys), or one value for all."""
    if keys is not None and not isinstance(keys, str) and _is_seq(keys) and len(keys) == n and not (
            isinstance(keys, pa.Array) and pa.types.is_string(keys.type)):
        if isinstance(keys, (pa.Array, pa.ChunkedArray)):
            karr = _as_array(keys)
            return pc.binary_join(karr, " ") if pa.types.is_list(karr.type) else karr.cast(pa.string())
        return pa.array([" ".join(k) if isinstance(k, (list, tuple)) else k for k in keys], pa.string())
    return _per_message(" ".join(keys) if isinstance(keys, (list, tuple)) and len(keys) != n else keys,
                        n, "keys", pa.string())


def _uniq_keys(given: Optional[pa.Array], n: int, host: bytes):
    """(each message's UNIQ_KEY, the ones to add to the properties): ids the encoder writes itself when none
    are given, new ones where some are missing, the given ones else."""
    need = n if given is None else given.null_count
    if given is None or need == n:
        ids = codec.reserve_uniq_keys(n, host)  # built as a column only if asked for
        return ids, ids
    if not need:
        return given, None
    fresh = codec.new_uniq_keys(need, host)
    missing = given.is_null().to_numpy(zero_copy_only=False)
    pos = np.cumsum(missing) - 1
    generated = fresh.take(pa.array(np.where(missing, pos, 0)))
    return (pc.if_else(pa.array(missing), generated, given),
            pc.if_else(pa.array(missing), generated, pa.scalar(None, pa.string())))


def _sys_flags(sys_flag, n: int, atomic: bool, born_host, store_host) -> np.ndarray:
    """SYSFLAG per message (or one for all): the caller's, refused if it sets the store's reserved bits, plus
    the atomic-batch bits and the IPv6 host bits."""
    sys_flags = _int_column(sys_flag, "sys_flag", n, np.int32, 0)
    reserved = sys_flags & codec.RESERVED_SYS_FLAGS
    if reserved.any():
        i = int(np.flatnonzero(reserved)[0])
        raise InvalidMessageError(f"message {i if len(sys_flags) > 1 else 0}: sys_flag 0x{int(sys_flags[i]):x} sets "
                                  f"bits the store reserves for its own recovery "
                                  f"(0x{codec.RESERVED_SYS_FLAGS:x}); use put_batch(atomic=True) instead")
    if atomic:
        sys_flags = np.broadcast_to(sys_flags, n) | np.int32(codec.ATOMIC_BATCH_FLAG)
        sys_flags[-1] |= codec.ATOMIC_BATCH_END_FLAG
    if len(born_host[0]) == 16:
        sys_flags |= codec.BORNHOST_V6_FLAG
    if len(store_host[0]) == 16:
        sys_flags |= codec.STOREHOSTADDRESS_V6_FLAG
    return sys_flags


def _size_batch(batch: codec.EncodedBatch, max_size: int) -> None:
    """The records' sizes into the batch; InvalidMessageError naming the first message too big, with a reserved
    separator in its tags or keys, or with properties too long."""
    sized = record_sizes(batch, max_size)
    batch.sizes, batch.size_total = sized.sizes, sized.total
    parts = batch.property_parts
    if sized.separator is not None:  # in tags or keys (the user's properties were checked above)
        i, piece = sized.separator
        p = parts[piece]
        value = p.values if isinstance(p.values, str) else p.values[i].as_py()
        raise InvalidMessageError(f"message {i}: {_PART_ARGUMENT.get(p.name, p.name)} {value!r} contains a reserved "
                                  f"separator (\\x01 or \\x02)")
    if sized.too_big >= 0:
        length = len(batch.bodies[sized.too_big].as_buffer())
        raise InvalidMessageError(f"message {sized.too_big}: body is {length} bytes, more than maxMessageSize "
                                  f"({max_size})")
    if sized.too_long >= 0:
        length = int(properties_lengths(parts, len(batch))[sized.too_long])
        raise InvalidMessageError(f"message {sized.too_long}: properties are {length} bytes, more than "
                                  f"{codec.MAX_PROPERTIES_LENGTH}")


def _dispatched(sys_flags: np.ndarray, n: int) -> tuple[Optional[np.ndarray], bool]:
    """(which messages get consume-queue units, None when all do; whether all do): not prepared or rolled-back
    transaction halves."""
    if len(sys_flags) == 1:  # one for all (plain Python: numpy's calls cost more than the test)
        all_dispatched = (int(sys_flags[0]) & codec.TRANSACTION_TYPE_MASK) in _DISPATCHED_TYPES
        return (None if all_dispatched else np.zeros(n, dtype=bool)), all_dispatched
    tx = sys_flags & codec.TRANSACTION_TYPE_MASK
    dispatched = (tx == codec.TRANSACTION_NOT_TYPE) | (tx == codec.TRANSACTION_COMMIT_TYPE)
    return dispatched, bool(dispatched.all())


def _queue_ids(queue_id, n: int) -> np.ndarray:
    """Explicit queue ids, -1 where a None in a list (a null in an array) leaves the choice to the store."""
    chosen = None
    if isinstance(queue_id, (list, tuple)):
        chosen = np.array([q is None for q in queue_id], dtype=bool)
        queue_id = [0 if q is None else q for q in queue_id]
    elif isinstance(queue_id, (pa.Array, pa.ChunkedArray)) and queue_id.null_count:
        chosen = queue_id.is_null().to_numpy(zero_copy_only=False)
        queue_id = queue_id.fill_null(0)
    ids = _int_column(queue_id, "queue_id", n, np.int64, -1, lo=0)
    if chosen is not None and chosen.any():
        ids[chosen] = -1
    return ids


def _int_column(value, name: str, n: int, dtype, default: int, lo=None) -> np.ndarray:
    """An integer argument as an array of n values or of one for all, refused with its name, the message and
    the allowed range when a value is not an integer (bools and fractions included) or does not fit."""
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    if value is None:
        return np.array([default], dtype=dtype)
    if _is_seq(value):
        arr = np.asarray(value.to_numpy(zero_copy_only=False) if isinstance(value, (pa.Array, pa.ChunkedArray))
                         else value)
        if len(arr) != n:
            raise InvalidMessageError(f"{name}: got {len(arr)} values for {n} messages")
        where = lambda i: f"message {i}: "  # noqa: E731
    else:
        arr = np.array([value], dtype=object)
        where = lambda i: ""  # noqa: E731
    if arr.dtype.kind not in "iu":
        values = arr.tolist()
        wrong = [i for i, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, int)]
        if wrong:  # the first fraction, bool or other if there is one, else the first integral float
            i = next((i for i in wrong if not (isinstance(values[i], float) and values[i].is_integer())), wrong[0])
            raise InvalidMessageError(f"{where(i)}{name} must be an integer, got {values[i]!r}")
        arr = np.array(values, dtype=object)
    bad = (arr < lo) | (arr > info.max)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        if name == "queue_id":
            raise InvalidMessageError(f"{where(i)}queue_id {arr[i]} is negative: queue ids start at 0 (None "
                                      f"chooses a queue)")
        raise InvalidMessageError(f"{where(i)}{name} {arr[i]} is outside {lo}..{info.max}")
    return arr.astype(dtype)


class PutBatchResult(Sequence):
    """The outcome of put_batch: arrays per message, and PutResult objects on demand."""

    def __init__(self, topics, topic_index, queue_ids, queue_offsets, commit_log_offsets, store_host, uniq_keys):
        self.topics = topics
        self.topic_index = topic_index
        self.queue_ids = queue_ids
        self.queue_offsets = queue_offsets
        self.commit_log_offsets = commit_log_offsets
        self.store_host = store_host
        self._uniq_keys = uniq_keys

    @property
    def uniq_keys(self) -> Optional[pa.Array]:
        """Each message's UNIQ_KEY (built on first use when the store generated them all)."""
        if isinstance(self._uniq_keys, codec.GeneratedIds):
            self._uniq_keys = self._uniq_keys.column()
        return self._uniq_keys

    def __len__(self):
        return len(self.queue_ids)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        off = int(self.commit_log_offsets[i])
        return PutResult(
            msg_id=codec.create_message_id(self.store_host[0], self.store_host[1], off),
            topic=self.topics[int(self.topic_index[i]) if len(self.topics) > 1 else 0],
            queue_id=int(self.queue_ids[i]),
            queue_offset=int(self.queue_offsets[i]), commit_log_offset=off,
            uniq_key=self.uniq_keys[i].as_py() if self.uniq_keys is not None else "")
