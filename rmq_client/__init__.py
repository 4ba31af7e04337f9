"""A RocketMQ client over the remoting protocol (used by Spark over the wire, the CLI and users): PullConsumer and
Producer, blocking, with their asyncio forms (AsyncPullConsumer, AsyncProducer) on MQClientAPI. Imports store
(the record decoder), filters (the tag re-check) and remoting; nothing below imports it."""
from .mq_client_api import NAMESRV_HINT, MessageQueue, MQClientAPI, MQClientError, NotANameServerError, SendResult
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

__all__ = ["NAMESRV_HINT", "MessageQueue", "MQClientAPI", "MQClientError", "NotANameServerError", "SendResult",
           "AsyncProducer", "Producer",
           "AsyncPullConsumer", "PullConsumer", "PullResult", "PullStatus", "Subscription", "TAG", "SQL92",
           "AsyncTransactionProducer", "CheckRequest", "EndOutcome", "HalfBatch", "MessageHalves", "TransactionState"]
