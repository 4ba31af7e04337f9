"""Every option the rmq source and sink take, spelled as users write them (Spark lower-cases option names on the
way in; options.canonical_options maps them back). The options only one place takes (a store directory's path,
readOnly, batchId...; the brokers' namesrvAddr, pullBatchSize, producerGroup...) are declared by that place in
rmq_log (place.Place: read_options, write_options) and joined here from rmq_log.places. Other new options go
here, in COMMON_SOURCE_OPTIONS or COMMON_SINK_OPTIONS, and in the option tables of docs/reading.md or
docs/writing.md (tests/test_docs.py checks both)."""
from __future__ import annotations

from rmq_log import places
from rmq_log.place import CHECKPOINT_LOCATION, SINK_ID, TOPIC
from rmq_log.store_place import MAX_BYTES_PER_TRIGGER as MAX_BYTES_PER_TRIGGER  # a rate limit the source applies

# What to read (exactly one)
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribePattern"
ASSIGN = "assign"

# Selectors pushed into the scan
TAGS = "tags"
SQL = "sql"
EXPRESSION_TYPE = "expressionType"
SUB_EXPRESSION = "subExpression"

# Where to start and end
STARTING_OFFSETS = "startingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
ENDING_OFFSETS = "endingOffsets"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"

# Rate limits (streams)
MAX_MESSAGES_PER_TRIGGER = "maxMessagesPerTrigger"
MIN_MESSAGES_PER_TRIGGER = "minMessagesPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"

# Groups, data loss, partitions, waiting
CONSUMER_GROUP = "consumerGroup"
COMMIT_OFFSETS = "commitOffsets"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MIN_PARTITIONS = "minPartitions"
MIN_OFFSETS_PER_PARTITION = "minOffsetsPerPartition"  # streams: small queue ranges packed into one partition
POLL_TIMEOUT_MS = "pollTimeoutMs"

# Defaults written once: the options' dataclasses and parsers read them from here
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
# a task costs Spark a round trip to a Python worker (~100-200 ms); reading 8,192 offsets takes a fraction of it
DEFAULT_MIN_OFFSETS_PER_PARTITION = 8192

# Columns
INCLUDE_PROPERTIES = "includeProperties"

# Finding messages (batch reads): answered from the store's index (RocketMQ's IndexFile) instead of a scan
KEY = "key"              # the messages whose KEYS hold this key (what array_contains(keys, k) keeps)
UNIQ_KEY = "uniqKey"     # the message whose UNIQ_KEY (the msgId a producer's SendResult shows) is this
USE_INDEX = "useIndex"   # false: answer key, uniqKey and msg_id filters by scanning (the same rows)

# The options every place takes
COMMON_SOURCE_OPTIONS = (
    TOPIC, SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN,
    TAGS, SQL, EXPRESSION_TYPE, SUB_EXPRESSION,
    STARTING_OFFSETS, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS, ENDING_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    MAX_MESSAGES_PER_TRIGGER, MIN_MESSAGES_PER_TRIGGER, MAX_TRIGGER_DELAY,
    CONSUMER_GROUP, COMMIT_OFFSETS, FAIL_ON_DATA_LOSS, MIN_PARTITIONS, MIN_OFFSETS_PER_PARTITION, POLL_TIMEOUT_MS,
    INCLUDE_PROPERTIES, KEY, UNIQ_KEY, USE_INDEX,
)

# The sink (its options only one place takes are that place's write_options)
QUERY_NAME = "queryName"
COMMON_SINK_OPTIONS = (TOPIC, SINK_ID, CHECKPOINT_LOCATION, QUERY_NAME)


def source_options() -> tuple[str, ...]:
    """Every option of the source, the places' own included."""
    return COMMON_SOURCE_OPTIONS + places.read_option_names()


SOURCE_OPTIONS = source_options()  # as documented in docs/reading.md
SINK_OPTIONS = COMMON_SINK_OPTIONS + places.write_option_names()  # as documented in docs/writing.md

# Spark's Kafka source options, as Kafka users write them. Those that mean the same here are read as the rmq
# option (with a log line saying its name); those with no counterpart are refused saying what to use instead.
KAFKA_ALIASES = {
    "maxOffsetsPerTrigger": MAX_MESSAGES_PER_TRIGGER,
    "minOffsetsPerTrigger": MIN_MESSAGES_PER_TRIGGER,
    "kafka.group.id": CONSUMER_GROUP,
    "kafkaConsumer.pollTimeoutMs": POLL_TIMEOUT_MS,
}
KAFKA_ONLY = {
    "kafka.bootstrap.servers": "give a store directory with .load(path), or RocketMQ name servers with "
                               "option('namesrvAddr', 'host:9876;host2:9876')",
    "includeHeaders": "message properties (Kafka's headers) are in the 'properties' column unless "
                      "includeProperties is false",
    "groupIdPrefix": "name the group with consumerGroup (committed offsets are reports; progress is in the "
                     "checkpoint)",
    "startingOffsetsByTimestampStrategy": "a timestamp past a queue's last message starts at its end",
    "fetchOffset.numRetries": "a store directory is read locally; through brokers, brokerTimeoutMs says how long "
                              "a broker that does not answer is retried",
    "fetchOffset.retryIntervalMs": "a store directory is read locally; through brokers, brokerTimeoutMs says how "
                                   "long a broker that does not answer is retried",
}
