"""RocketMQ's TopicValidator for sends: the broker's own topics, which no client may send to (a forged half,
op or delayed message would commit, erase or poison what the broker keeps there), and the queue a send names."""
from __future__ import annotations

from remoting import ResponseCode

from .bad_request import BadRequest

# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET (RocketMQ 4.9): written by the broker alone
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})


def refuse_not_allowed_send_topic(topic: str) -> None:
    """NO_PERMISSION with RocketMQ's remark for a send to one of the broker's own topics."""
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise BadRequest(f"Sending message to topic[{topic}] is forbidden.", ResponseCode.NO_PERMISSION)


def refuse_illegal_queue(topic: str, queue_id: int, queues: int) -> None:
    """A send naming a queue the topic does not have (msgCheck: SYSTEM_ERROR), refused before anything is stored,
    including a delayed message that would be delivered there only later."""
    if queue_id >= queues:
        raise BadRequest(f"request queueId[{queue_id}] is illegal: topic[{topic}] has queues 0..{queues - 1}",
                         ResponseCode.SYSTEM_ERROR)


# TopicValidator.SYSTEM_TOPIC_SET (RocketMQ 4.9) and its rmq_sys_ prefix: topics an admin may not delete
SYSTEM_TOPICS = NOT_ALLOWED_SEND_TOPICS | {"TBW102", "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC"}


def refuse_system_topic(topic: str) -> None:
    if topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_"):
        raise BadRequest(f"The topic[{topic}] is conflict with system topic.", ResponseCode.SYSTEM_ERROR)
