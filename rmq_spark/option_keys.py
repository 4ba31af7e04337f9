"""Every option the rmq source and sink take, spelled as users write them (Spark lower-cases option names on the
way in; options.canonical_options maps them back). New options go here, and in README's option tables."""
from __future__ import annotations

PATH = "path"

# What to read (exactly one)
TOPIC = "topic"
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

# Rate limits (streams)
MAX_MESSAGES_PER_TRIGGER = "maxMessagesPerTrigger"
MAX_BYTES_PER_TRIGGER = "maxBytesPerTrigger"
MIN_MESSAGES_PER_TRIGGER = "minMessagesPerTrigger"
MAX_TRIGGER_DELAY = "maxTriggerDelay"

# Groups, data loss, partitions, waiting
CONSUMER_GROUP = "consumerGroup"
COMMIT_OFFSETS = "commitOffsets"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
MIN_PARTITIONS = "minPartitions"
POLL_TIMEOUT_MS = "pollTimeoutMs"
READ_ONLY = "readOnly"
METRICS_PATH = "metricsPath"

SOURCE_OPTIONS = (
    PATH, TOPIC, SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN,
    TAGS, SQL, EXPRESSION_TYPE, SUB_EXPRESSION,
    STARTING_OFFSETS, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS,
    MAX_MESSAGES_PER_TRIGGER, MAX_BYTES_PER_TRIGGER, MIN_MESSAGES_PER_TRIGGER, MAX_TRIGGER_DELAY,
    CONSUMER_GROUP, COMMIT_OFFSETS, FAIL_ON_DATA_LOSS, MIN_PARTITIONS, POLL_TIMEOUT_MS, READ_ONLY,
    METRICS_PATH,
)

# The sink
SINK_ID = "sinkId"
BATCH_ID = "batchId"
STORE_CONFIG = "storeConfig"
CHECKPOINT_LOCATION = "checkpointLocation"
QUERY_NAME = "queryName"

SINK_OPTIONS = (PATH, TOPIC, SINK_ID, BATCH_ID, STORE_CONFIG, CHECKPOINT_LOCATION, QUERY_NAME)
