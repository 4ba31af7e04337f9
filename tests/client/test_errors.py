"""The client's errors: a class per family of RocketMQ response codes, chosen from the code, saying whether the
request is worth sending again; raised as such by requests to real brokers."""
from __future__ import annotations

import pytest
from wire_cluster import WireCluster

from remoting import ResponseCode
from rmq_client import (
    BrokerBusyError,
    BrokerUnreachableError,
    MessageIllegalError,
    MessageQueue,
    MQClientError,
    NoPermissionError,
    NotANameServerError,
    NotStoredOKError,
    NotSupportedError,
    Producer,
    SubscriptionError,
    TopicError,
    TransactionError,
)


@pytest.mark.parametrize("code,family,retriable", [
    (ResponseCode.SYSTEM_BUSY, BrokerBusyError, True),
    (ResponseCode.SERVICE_NOT_AVAILABLE, BrokerBusyError, True),
    (ResponseCode.SLAVE_NOT_AVAILABLE, NotStoredOKError, True),
    (ResponseCode.FLUSH_SLAVE_TIMEOUT, NotStoredOKError, True),
    (ResponseCode.FLUSH_DISK_TIMEOUT, NotStoredOKError, True),
    (ResponseCode.NO_PERMISSION, NoPermissionError, False),
    (ResponseCode.TOPIC_NOT_EXIST, TopicError, False),
    (ResponseCode.MESSAGE_ILLEGAL, MessageIllegalError, False),
    (ResponseCode.SUBSCRIPTION_PARSE_FAILED, SubscriptionError, False),
    (ResponseCode.SUBSCRIPTION_NOT_LATEST, SubscriptionError, True),
    (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, NotSupportedError, False),
    (ResponseCode.TRANSACTION_FAILED, TransactionError, False),
    (ResponseCode.SYSTEM_ERROR, MQClientError, False),
    (12345, MQClientError, False),
])
def test_the_response_code_chooses_the_error_class_and_whether_to_retry(code, family, retriable):
    e = MQClientError(code, "remark", "127.0.0.1:10911", "a request")
    assert type(e) is family and isinstance(e, MQClientError)
    assert e.retriable is retriable and not e.unreachable
    assert e.not_stored_ok is (family is NotStoredOKError)
    assert str(e).startswith("a request at 127.0.0.1:10911: ") and f"({int(code)}): remark" in str(e)


def test_no_answer_is_unreachable_and_retriable_whatever_the_code():
    e = MQClientError(-1, "ConnectionRefusedError", "127.0.0.1:1", "connect", unreachable=True)
    assert type(e) is BrokerUnreachableError and e.unreachable and e.retriable


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with WireCluster(tmp_path_factory.mktemp("errors"), conf="maxMessageSize = 1024\n") as c:
        yield c


def test_real_refusals_arrive_as_their_family(cluster):
    with Producer(cluster.namesrv) as p:
        p.send("Errors", b"small")
        with pytest.raises(MessageIllegalError) as big:
            p.send("Errors", b"x" * 4096)
        assert not big.value.retriable and big.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(NotANameServerError) as broker:  # a broker's address where the name server's belongs
        with Producer(cluster.addresses["broker-a"]) as p:
            p.send("Errors", b"x")
    assert isinstance(broker.value, NotSupportedError) and not broker.value.retriable


def test_a_dead_broker_is_unreachable_and_retriable(tmp_path):
    with WireCluster(tmp_path) as c, Producer(c.namesrv) as p:
        mq = p.send("Gone", b"first").queue
        c.kill("broker-a")
        with pytest.raises(BrokerUnreachableError) as dead:
            p.send_batch("Gone", [b"second"], queue=MessageQueue("Gone", mq.broker_name, mq.queue_id))
        assert dead.value.retriable and dead.value.unreachable
