"""Where the messages live: one interface (MessageLog) for what the `rmq` commands and Spark ask of them, with two
implementations, a store directory (StoreLog) and a cluster of brokers (ClusterLog). Each place is declared once
(place.Place, listed in places.PLACES) and opened by open_log. Between the store and the clients below and the
command line and Spark above."""
from .errors import Failure, PartialFlush, Refused, UsageError
from .message_log import (
           EARLIEST,
           FOREVER,
           LATEST,
           Consume,
           LineWriter,
           MessageLog,
           QueueKey,
           QueueStat,
           Sent,
           Start,
           TopicChange,
)
from .names import check_group
from .open_log import open_log
from .selector import message_filter

__all__ = ["EARLIEST", "FOREVER", "LATEST", "Consume", "Failure", "LineWriter", "MessageLog", "PartialFlush",
           "QueueKey", "QueueStat", "Refused", "Sent", "Start", "TopicChange", "UsageError", "check_group",
           "message_filter", "open_log"]
