"""The source's options: parsed and checked once, when the query starts (DataSource.__init__ runs at .load()).

Every error is an RmqOptionError (a ValueError) whose message starts with the option's name, so a user sees
what to fix before any task runs.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from rmq_log import place as place_options
from rmq_log import places
from rmq_log.place import ReadPlace
from rmq_log.queue_key import split_queue_name
from rmq_log.reads import Queue

from . import option_keys as K
from .errors import RmqOptionError, options_of_places

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
_GROUP_NAME = re.compile(r"[%|a-zA-Z0-9_-]{1,255}")
_DURATION = re.compile(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", re.IGNORECASE)
_DURATION_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


# RocketMQ's system topics (TopicValidator): never matched by a pattern, as Kafka's patterns skip internal
# topics; naming one in subscribe/assign still reads it. The sink's commit markers live in RMQ_SYS_SINK_COMMIT.
SYSTEM_TOPIC_PREFIX = "RMQ_SYS_"
SYSTEM_TOPICS = frozenset({"SCHEDULE_TOPIC_XXXX", "TBW102", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC",
                           "BenchmarkTest", "TRANS_CHECK_MAX_TIME_TOPIC"})


def is_system_topic(topic: str) -> bool:
    return topic.startswith(SYSTEM_TOPIC_PREFIX) or topic in SYSTEM_TOPICS




# -- subscriptions (Kafka's SubscribeStrategy, SubscribePatternStrategy, AssignStrategy) ----------------------

@dataclass(frozen=True)
class Subscribe:
    """Every queue of the named topics (options topic / subscribe)."""
    topics: tuple[str, ...]
    option: str = K.SUBSCRIBE  # the option it came from, for messages

    def queues(self, store) -> list[Queue]:
        return [(t, q) for t in self.topics for q in store.queues(t)]

    def describe(self) -> str:
        return "subscribe=" + ",".join(self.topics)


@dataclass(frozen=True)
class SubscribePattern:
    """Every queue of the topics whose whole name matches, system topics excepted (picks up new topics)."""
    pattern: str
    option: str = K.SUBSCRIBE_PATTERN

    def queues(self, store) -> list[Queue]:
        rx = re.compile(self.pattern)
        return [(t, q) for t in store.topics() if rx.fullmatch(t) and not is_system_topic(t)
                for q in store.queues(t)]

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None

    def describe(self) -> str:
        return "subscribePattern=" + self.pattern


@dataclass(frozen=True)
class Assign:
    """Exactly these queues: ((topic, (queue id, ...)), ...)."""
    assign: tuple[tuple[str, tuple[int, ...]], ...]
    option: str = K.ASSIGN

    def queues(self, store) -> list[Queue]:
        return [(t, q) for t, qs in self.assign for q in store.assigned(t, qs)]

    def describe(self) -> str:
        return "assign=" + json.dumps({t: list(q) for t, q in self.assign}, sort_keys=True)


Subscription = Union[Subscribe, SubscribePattern, Assign]


# -- offset specs (Kafka's EarliestOffsetRangeLimit, LatestOffsetRangeLimit, SpecificOffsetRangeLimit) --------

@dataclass(frozen=True)
class EarliestOffsets:
    """Each queue's min offset."""


@dataclass(frozen=True)
class LatestOffsets:
    """Each queue's max offset (where the next message goes)."""


@dataclass(frozen=True)
class GroupOffsets:
    """The consumer group's committed offset of each queue (its min offset where there is none)."""


@dataclass(frozen=True)
class SpecificOffsets:
    """{topic: {queue's name: offset}}, the names as given ("3" or "broker-a:3", for the place to parse);
    EARLIEST (-2) and LATEST (-1) as Kafka writes them."""
    offsets: dict = field(default_factory=dict)


StartingOffsets = Union[EarliestOffsets, LatestOffsets, GroupOffsets, SpecificOffsets]
EndingOffsets = Union[LatestOffsets, SpecificOffsets]


@dataclass(frozen=True)
class SourceOptions:
    place: ReadPlace  # where the messages are read, as the place the options name parsed its own options
    subscription: Subscription
    tags: Optional[str] = None
    sql: Optional[str] = None
    starting_offsets: Optional[StartingOffsets] = None  # None: the mode's default (earliest for batch reads)
    starting_timestamp: Optional[int] = None
    starting_offsets_by_timestamp: Optional[dict] = None
    ending_offsets: EndingOffsets = LatestOffsets()
    ending_timestamp: Optional[int] = None
    ending_offsets_by_timestamp: Optional[dict] = None
    max_messages_per_trigger: Optional[int] = None
    max_bytes_per_trigger: Optional[int] = None
    min_messages_per_trigger: Optional[int] = None
    max_trigger_delay_ms: int = K.DEFAULT_MAX_TRIGGER_DELAY_MS
    consumer_group: str = ""
    commit_offsets: bool = True
    fail_on_data_loss: bool = True
    min_partitions: Optional[int] = None
    min_offsets_per_partition: int = K.DEFAULT_MIN_OFFSETS_PER_PARTITION
    poll_timeout_ms: int = 0
    include_properties: bool = True
    key: Optional[str] = None       # rows whose keys hold it (batch reads; found through the index)
    uniq_key: Optional[str] = None  # the row whose UNIQ_KEY property is it
    use_index: bool = True
    raw: dict = field(default_factory=dict, compare=False)  # the options as given, the places' secrets left out
    # names the reader (one query run, or one batch read) in what is logged once per query
    query_key: str = field(default_factory=lambda: os.urandom(8).hex(), compare=False)


def canonical_options(options: Mapping[str, str], names, what: str) -> dict:
    """Spark lower-cases option names: map them back to ours, refusing an unknown one with a "did you mean".
    Kafka's names of the same options are read as ours; Kafka options with no counterpart are refused naming
    what to use."""
    by_lower = {n.lower(): n for n in names}
    aliases = {k.lower(): (k, v) for k, v in K.KAFKA_ALIASES.items() if v in names}
    kafka_only = {k.lower(): (k, v) for k, v in K.KAFKA_ONLY.items()}
    opts = {}
    for key, value in dict(options).items():
        name = by_lower.get(key.lower())
        if name is None and key.lower() in aliases:
            kafka_name, name = aliases[key.lower()]
            if any(k.lower() == name.lower() for k in options):
                raise RmqOptionError(kafka_name, f"Kafka's name for '{name}', which is given too: give one")
            log.info("option '%s' (Kafka's name) is read as '%s'", kafka_name, name)
        if name is None and key.lower() in kafka_only:
            kafka_name, instead = kafka_only[key.lower()]
            raise RmqOptionError(kafka_name, f"a Kafka source option with no rmq counterpart: {instead}")
        if name is None:
            close = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=0.6)
            hint = f"; did you mean '{by_lower[close[0]]}'?" if close else ""
            raise RmqOptionError(key, f"unknown option for {what}{hint} Known options: {', '.join(names)}")
        opts[name] = value
    return opts


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Static checks (names, syntax, numbers). Checks against the store are in check_against_store. The place
    the options name (rmq_log.places) reads its address and the options only it takes."""
    opts = canonical_options(options, K.source_options(), 'format("rmq")')
    with options_of_places():
        place = places.for_reads(opts).reads(opts)
    subscription = _subscription(opts)
    tags, sql = _selectors(opts)
    ts, ts_by_queue = _timestamps(opts, K.STARTING_TIMESTAMP, K.STARTING_OFFSETS_BY_TIMESTAMP)
    end_ts, end_ts_by_queue = _timestamps(opts, K.ENDING_TIMESTAMP, K.ENDING_OFFSETS_BY_TIMESTAMP)
    max_msgs, min_msgs, delay_ms = _trigger_limits(opts)
    group = opts.get(K.CONSUMER_GROUP)
    if group is None:
        group = default_consumer_group(place.identity, subscription, tags, sql)
    elif not _GROUP_NAME.fullmatch(group):
        raise RmqOptionError(K.CONSUMER_GROUP, f"{group!r} must match ^[%|a-zA-Z0-9_-]+$ (at most 255 characters)")
    return SourceOptions(
        place=place, subscription=subscription, tags=tags, sql=sql,
        starting_offsets=_starting_offsets(opts.get(K.STARTING_OFFSETS)), starting_timestamp=ts,
        starting_offsets_by_timestamp=ts_by_queue, ending_offsets=_ending_offsets(opts),
        ending_timestamp=end_ts, ending_offsets_by_timestamp=end_ts_by_queue,
        max_messages_per_trigger=max_msgs,
        max_bytes_per_trigger=int_option(opts, K.MAX_BYTES_PER_TRIGGER, None, minimum=1),
        min_messages_per_trigger=min_msgs, max_trigger_delay_ms=delay_ms,
        consumer_group=group,
        commit_offsets=_bool(opts, K.COMMIT_OFFSETS, not place.read_only),
        fail_on_data_loss=_bool(opts, K.FAIL_ON_DATA_LOSS, True),
        min_partitions=int_option(opts, K.MIN_PARTITIONS, None, minimum=1),
        min_offsets_per_partition=int_option(opts, K.MIN_OFFSETS_PER_PARTITION, K.DEFAULT_MIN_OFFSETS_PER_PARTITION,
                                             minimum=0),
        poll_timeout_ms=int_option(opts, K.POLL_TIMEOUT_MS, 0, minimum=0),
        include_properties=_bool(opts, K.INCLUDE_PROPERTIES, True),
        key=_non_empty(opts, K.KEY), uniq_key=_non_empty(opts, K.UNIQ_KEY), use_index=_bool(opts, K.USE_INDEX, True),
        raw={k: v for k, v in opts.items() if k not in places.secret_options()},
    )


def _non_empty(opts: dict, name: str) -> Optional[str]:
    value = opts.get(name)
    if value is not None and (not value or " " in value):
        raise RmqOptionError(name, f"{value!r}: a key is a non-empty text without spaces (KEYS separates keys by "
                                   f"spaces)")
    return value


def _timestamps(opts: dict, one: str, per_queue: str) -> tuple[Optional[int], Optional[dict]]:
    """(one timestamp for every queue, or {topic: {queue: timestamp}}) from a pair of options, at most one given.
    starting*: each queue starts at its first message stored at or after the time. ending* (batch reads): each
    queue ends before that message, as in Kafka (at the queue's end when there is none), and they take precedence
    over endingOffsets."""
    ts = int_option(opts, one, None, minimum=0)
    ts_by_queue = None
    if per_queue in opts:
        ts_by_queue = _offset_json(per_queue, opts[per_queue], minimum=0)
    if ts is not None and ts_by_queue is not None:
        raise RmqOptionError(one, f"give {one} or {per_queue}, not both")
    return ts, ts_by_queue


def _ending_offsets(opts: dict) -> EndingOffsets:
    text = opts.get(K.ENDING_OFFSETS, "latest")
    if text.strip().lower() == "latest":
        return LatestOffsets()
    return SpecificOffsets(_offset_json(K.ENDING_OFFSETS, text, minimum=LATEST))


def _trigger_limits(opts: dict) -> tuple[Optional[int], Optional[int], int]:
    """(maxMessagesPerTrigger, minMessagesPerTrigger, maxTriggerDelay in ms)."""
    delay = opts.get(K.MAX_TRIGGER_DELAY)
    delay_ms = K.DEFAULT_MAX_TRIGGER_DELAY_MS
    if delay is not None:
        m = _DURATION.fullmatch(delay)
        if not m:
            raise RmqOptionError(K.MAX_TRIGGER_DELAY, f"{delay!r} is not a duration such as '500ms', '30s' or '15m'")
        delay_ms = int(m.group(1)) * _DURATION_MS[m.group(2).lower() if m.group(2) else None]
    if K.MAX_TRIGGER_DELAY in opts and K.MIN_MESSAGES_PER_TRIGGER not in opts:
        raise RmqOptionError(K.MAX_TRIGGER_DELAY, "only means something with minMessagesPerTrigger")
    max_msgs = int_option(opts, K.MAX_MESSAGES_PER_TRIGGER, None, minimum=1)
    min_msgs = int_option(opts, K.MIN_MESSAGES_PER_TRIGGER, None, minimum=1)
    if max_msgs is not None and min_msgs is not None and min_msgs > max_msgs:
        raise RmqOptionError(K.MIN_MESSAGES_PER_TRIGGER, f"{min_msgs} exceeds maxMessagesPerTrigger {max_msgs}")
    return max_msgs, min_msgs, delay_ms


def default_consumer_group(place: str, subscription: Subscription, tags: Optional[str], sql: Optional[str]) -> str:
    """`rmq-spark-<sha1 of the place (a store's path, rocketmq://name servers), subscription and selectors, 12 hex
    digits>`: the same query against the same place shares progress; a different subscription or selector never
    overwrites it."""
    text = json.dumps([place, subscription.describe(), tags or "", sql or ""])
    return "rmq-spark-" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def _subscription(opts: dict) -> Subscription:
    given = [n for n in (K.TOPIC, K.SUBSCRIBE, K.SUBSCRIBE_PATTERN, K.ASSIGN) if n in opts]
    if not given:
        raise RmqOptionError(K.SUBSCRIBE, "say which queues to read: one of 'topic' / 'subscribe' (comma-separated "
                                          "topics), 'subscribePattern' (a regex) or 'assign' (JSON)")
    if len(given) > 1:
        raise RmqOptionError(given[1], f"give exactly one of topic / subscribe / subscribePattern / assign, "
                                       f"not {' and '.join(given)}")
    name = given[0]
    value = opts[name]
    if name in (K.TOPIC, K.SUBSCRIBE):
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise RmqOptionError(name, "no topic given")
        return Subscribe(topics, option=name)
    if name == K.SUBSCRIBE_PATTERN:
        try:
            re.compile(value)
        except re.error as e:
            raise RmqOptionError(name, f"{value!r} is not a valid regular expression: {e}") from None
        return SubscribePattern(value)
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise RmqOptionError(name, f"malformed JSON ({e}); expected {{\"TopicA\": [0, 1]}}") from None
    if not isinstance(data, dict) or not data or not all(
            isinstance(q, list) and q and all(isinstance(i, int) and not isinstance(i, bool) for i in q)
            for q in data.values()):
        raise RmqOptionError(name, f"expected a JSON object of topic -> list of queue ids such as "
                                   f"{{\"TopicA\": [0, 1]}}, got {value!r}")
    return Assign(tuple((t, tuple(sorted(set(q)))) for t, q in sorted(data.items())))


def _selectors(opts: dict) -> tuple[Optional[str], Optional[str]]:
    tags, sql = opts.get(K.TAGS), opts.get(K.SQL)
    etype = opts.get(K.EXPRESSION_TYPE)
    sub = opts.get(K.SUB_EXPRESSION)
    if etype is not None or sub is not None:
        kind = (etype or "TAG").strip().upper()  # as RocketMQ's subscribe(topic, subExpression): a tag expression
        if kind not in ("TAG", "SQL92"):
            raise RmqOptionError(K.EXPRESSION_TYPE, f"{etype!r} must be TAG or SQL92")
        if sub is None:
            raise RmqOptionError(K.SUB_EXPRESSION, f"expressionType={kind} needs a subExpression")
        target = K.TAGS if kind == "TAG" else K.SQL
        if opts.get(target) is not None:
            raise RmqOptionError(K.SUB_EXPRESSION, f"expressionType={kind} with subExpression is the same as "
                                                  f"'{target}'; give one of them")
        if kind == "TAG":
            tags = sub
        else:
            sql = sub
    if tags is None and sql is None:
        return None, None
    from filters import FilterParseError, MessageFilter  # the parsers, only for a query with a selector

    for name, value, build in ((K.TAGS, tags, MessageFilter.by_tags), (K.SQL, sql, MessageFilter.by_sql)):
        if value is None:
            continue
        try:
            build(value)
        except FilterParseError as e:
            source = name if name in opts else K.SUB_EXPRESSION
            raise RmqOptionError(source, str(e)) from None
    return tags, sql


_STARTING_WORDS: dict[str, StartingOffsets] = {
    "earliest": EarliestOffsets(), "latest": LatestOffsets(), "group": GroupOffsets(),
}


def _starting_offsets(value: Optional[str]) -> Optional[StartingOffsets]:
    if value is None:
        return None
    word = _STARTING_WORDS.get(value.strip().lower())
    if word is not None:
        return word
    return SpecificOffsets(_offset_json(K.STARTING_OFFSETS, value, minimum=EARLIEST,
                                        words="earliest | latest | group | "))


def _offset_json(name: str, value: str, minimum: int, words: str = "") -> dict:
    example = '{"TopicA": {"0": 23, "1": -2}}'
    try:
        data = json.loads(value)
    except json.JSONDecodeError as e:
        raise RmqOptionError(name, f"{value!r} is not {words}JSON such as {example}: {e}") from None
    if not isinstance(data, dict):
        raise RmqOptionError(name, f"expected {words}a JSON object such as {example}, got {value!r}")
    out = {}
    for topic, queues in data.items():
        if not isinstance(queues, dict):
            raise RmqOptionError(name, f"topic {topic!r} must map queue ids to offsets, e.g. {example}")
        parsed: dict = {}
        for qid, off in queues.items():
            # kept as text: which of the two names is right depends on the place (offsets._in_place_queues)
            try:
                broker, queue_id = split_queue_name(qid)
            except ValueError:
                raise RmqOptionError(name, f"{topic!r}: queue {qid!r} is neither a queue id nor "
                                           f"brokerName:queueId") from None
            q = str(queue_id) if broker is None else f"{broker}:{queue_id}"
            if not isinstance(off, int) or isinstance(off, bool) or off < minimum:
                raise RmqOptionError(name, f"{topic!r} queue {q}: {off!r} is not an integer >= {minimum}")
            parsed[q] = off
        out[topic] = parsed
    return out


def int_option(opts: dict, name: str, default, minimum: int):
    with options_of_places():
        return place_options.int_option(opts, name, default, minimum)


def _bool(opts: dict, name: str, default: bool) -> bool:
    with options_of_places():
        return place_options.bool_option(opts, name, default)
