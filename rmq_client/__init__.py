"""A RocketMQ client over the remoting protocol (used by Spark over the wire, the CLI and users): PullConsumer and
Producer, blocking, with their asyncio forms (AsyncPullConsumer, AsyncProducer) on MQClientAPI; errors of one class
per family of response codes (errors.py). Imports rmq_common (the record codec), filters (the tag re-check) and
remoting; nothing below imports it."""
from .errors import (
    NAMESRV_HINT,
    BrokerBusyError,
    BrokerUnreachableError,
    MessageIllegalError,
    MQClientError,
    NoPermissionError,
    NotANameServerError,
    NotStoredOKError,
    NotSupportedError,
    SubscriptionError,
    TopicError,
    TransactionError,
)
from .mq_client_api import MessageQueue, MQClientAPI, SendResult
from .producer import AsyncProducer, Producer
from .pull_consumer import SQL92, TAG, AsyncPullConsumer, PullConsumer, PullResult, PullStatus, Subscription
from .transaction_producer import (
    AsyncTransactionProducer,
    CheckRequest,
    EndOutcome,
    HalfBatch,
    MessageHalves,
    TransactionState,
)

__all__ = ["NAMESRV_HINT", "MessageQueue", "MQClientAPI", "SendResult",
           "MQClientError", "BrokerBusyError", "BrokerUnreachableError", "MessageIllegalError", "NoPermissionError",
           "NotANameServerError", "NotStoredOKError", "NotSupportedError", "SubscriptionError", "TopicError",
           "TransactionError",
           "AsyncProducer", "Producer",
           "AsyncPullConsumer", "PullConsumer", "PullResult", "PullStatus", "Subscription", "TAG", "SQL92",
           "AsyncTransactionProducer", "CheckRequest", "EndOutcome", "HalfBatch", "MessageHalves", "TransactionState"]
