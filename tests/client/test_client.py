"""The Python RocketMQ client against real brokers (`rmq serve` processes) through a name server."""
from __future__ import annotations

import pytest
from wire_cluster import WireCluster

from rmq_client import (
    MessageQueue,
    MQClientError,
    NotANameServerError,
    Producer,
    PullConsumer,
    PullStatus,
    Subscription,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with WireCluster(tmp_path_factory.mktemp("wire"), brokers=("broker-a", "broker-b")) as c:
        yield c


def test_send_then_pull_across_two_brokers(cluster):
    with Producer(cluster.namesrv) as producer, PullConsumer(cluster.namesrv, "g1") as consumer:
        assert producer.create_topic("Orders", 4) == ["broker-a", "broker-b"]
        sent = [producer.send("Orders", f"m{i}".encode(), tags="TagA" if i % 2 else "TagB", keys=[f"k{i}"],
                              properties={"n": str(i)}) for i in range(40)]
        assert {r.queue.broker_name for r in sent} == {"broker-a", "broker-b"}
        queues = consumer.queues("Orders")
        assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
        got = {}
        for q in queues:
            r = consumer.pull(q, 0, max_nums=100)
            if r.status is PullStatus.FOUND:
                for row in r.messages.to_pylist():
                    got[row["body"]] = row
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(40))
        m3 = got[b"m3"]
        assert m3["tags"] == "TagA" and m3["keys"] == ["k3"] and dict(m3["properties"])["n"] == "3"
        assert {(r.queue, r.queue_offset) for r in sent} == {
            (q, row["queue_offset"]) for q in queues
            for row in consumer.pull(q, 0, max_nums=100).messages.to_pylist()}


def test_tag_and_sql92_filters_run_on_the_broker_and_tags_are_rechecked(cluster):
    with Producer(cluster.namesrv) as producer, PullConsumer(cluster.namesrv, "g2") as consumer:
        mq = MessageQueue("Filtered", "broker-a", 0)
        producer.send_batch("Filtered", [f"b{i}".encode() for i in range(60)],
                            tags=["x" if i % 3 == 0 else "y" for i in range(60)],
                            properties=[{"n": str(i)} for i in range(60)], queue=mq)
        tagged = list(consumer.read_range(mq, 0, 60, Subscription("x"), max_nums=7, in_flight=3))
        rows = [r for b in tagged for r in b.to_pylist()]
        assert [r["body"] for r in rows] == [f"b{i}".encode() for i in range(0, 60, 3)]
        sql = list(consumer.read_range(mq, 0, 60, Subscription("n BETWEEN 10 AND 19", "SQL92"), max_nums=4))
        assert [r["body"] for b in sql for r in b.to_pylist()] == [f"b{i}".encode() for i in range(10, 20)]
        # a range ends where it says, even inside a pull
        part = [r["queue_offset"] for b in consumer.read_range(mq, 5, 23, max_nums=10) for r in b.to_pylist()]
        assert part == list(range(5, 23))
        # a chunk's pulls (four of max_nums) are decoded together: one batch per chunk, not one per pull
        chunks = list(consumer.read_range(mq, 0, 60, max_nums=10, in_flight=1))
        assert [b.num_rows for b in chunks] == [40, 20]
        assert [r["queue_offset"] for b in chunks for r in b.to_pylist()] == list(range(60))


def test_offsets_and_bounds(cluster):
    with Producer(cluster.namesrv) as producer, PullConsumer(cluster.namesrv, "g3") as consumer:
        mq = MessageQueue("Offsets", "broker-b", 1)
        producer.send_batch("Offsets", [b"a", b"b", b"c"], queue=mq)
        assert consumer.max_offset(mq) == 3 and consumer.min_offset(mq) == 0
        bounds = consumer.queue_bounds("Offsets")
        assert bounds[mq] == (0, 3)
        consumer.commit_offset(mq, 2)
        assert consumer.query_offset(mq) == 2
        r = consumer.pull(mq, 10)
        assert r.status is PullStatus.OFFSET_ILLEGAL and r.max_offset == 3


def test_errors_name_the_broker_and_the_code(cluster):
    with PullConsumer(cluster.namesrv, "g4") as consumer:
        with pytest.raises(MQClientError, match="broker-z"):
            consumer.pull(MessageQueue("Orders", "broker-z", 0), 0)
    with pytest.raises(ValueError, match="namesrvAddr"):
        PullConsumer("nohostport", "g")


def test_a_brokers_address_given_as_the_name_server_is_named_a_broker(cluster):
    """A broker's port where the name server's belongs: the route lookup says it is a broker and where name servers
    listen (Apache RocketMQ's mqnamesrv named), keeping the broker's own answer, instead of its
    REQUEST_CODE_NOT_SUPPORTED alone."""
    broker = cluster.addresses["broker-a"]
    says = (f"route of topic 'Orders': {broker} is a broker, not a name server (name servers usually listen on 9876: "
            "Apache RocketMQ's `mqnamesrv`, `rmq namesrv`, or the one `rmq serve` starts and prints); it answered "
            "REQUEST_CODE_NOT_SUPPORTED (3): ")
    with PullConsumer(broker, "g-not-ns") as consumer:
        with pytest.raises(NotANameServerError) as e:
            consumer.queues("Orders")
    assert str(e.value).startswith(says) and "GET_ROUTEINFO_BY_TOPIC" in str(e.value), str(e.value)
    assert e.value.address == broker
    with Producer(broker) as producer, pytest.raises(NotANameServerError, match="is a broker, not a name server"):
        producer.send("Orders", b"x")


def test_sql92_pulls_find_sparse_and_dense_matches_in_order(cluster):
    with Producer(cluster.namesrv) as producer, PullConsumer(cluster.namesrv, "g5") as consumer:
        mq = MessageQueue("Sparse", "broker-b", 0)
        for lo in range(0, 3000, 500):
            producer.send_batch("Sparse", [f"s{i}".encode() for i in range(lo, lo + 500)],
                                properties=[{"n": str(i)} for i in range(lo, lo + 500)], queue=mq)
        for expression, want in (("n >= 2990 OR n = 5", [5] + list(range(2990, 3000))),
                                 ("n < 2000", list(range(2000))),
                                 ("n BETWEEN 700 AND 1500 AND n <> 1000", [i for i in range(700, 1501) if i != 1000])):
            for max_nums in (7, 1024):
                got = [int(r["body"][1:]) for b in consumer.read_range(mq, 0, 3000, Subscription(expression, "SQL92"),
                                                                       max_nums=max_nums, in_flight=2)
                       for r in b.to_pylist()]
                assert got == want, (expression, max_nums)


def test_query_message_by_key_unique_key_and_offset_msg_id_over_the_wire(cluster, capsys):
    """QUERY_MESSAGE 12 to every broker of the route (MQAdminImpl.queryMessage) and VIEW_MESSAGE_BY_ID 33."""
    from rmq_client.event_loop import run_blocking
    with Producer(cluster.namesrv) as producer:
        producer.create_topic("Keyed", 4)
        sent = [producer.send("Keyed", b"q%d" % i, keys=[f"order-{i % 3}", "all"]) for i in range(9)]
        assert len({r.queue.broker_name for r in sent}) == 2
        api = producer.aio.api
        assert sorted(m.body for m in run_blocking(api.query_message, "Keyed", "order-1")) == [b"q1", b"q4", b"q7"]
        assert len(run_blocking(api.query_message, "Keyed", "all", 4)) == 4
        assert run_blocking(api.query_message, "Keyed", "order-1", 32, int(2e12)) == []  # QUERY_NOT_FOUND
        four = run_blocking(api.view_message, sent[4].msg_id)
        assert four.body == b"q4" and four.keys == ["order-1", "all"]
        uniq = four.properties["UNIQ_KEY"]
        assert [m.body for m in run_blocking(api.query_message, "Keyed", uniq, 32, 0, 2**63 - 1, True)] == [b"q4"]
        assert run_blocking(api.query_message, "Keyed", uniq) == []  # not among its KEYS
        with pytest.raises(MQClientError, match="no route"):
            run_blocking(api.query_message, "Nope", "k")
    from rmq_cli.cli import main  # rmq query --namesrv: the same three lookups
    ns = ["query", "--namesrv", cluster.namesrv]
    assert main(ns + ["-t", "Keyed", "-k", "order-2"]) == 0
    assert sorted(line.rsplit("| ", 1)[1] for line in capsys.readouterr().out.splitlines()) == ["q2", "q5", "q8"]
    assert main(ns + ["-t", "Keyed", "-i", uniq]) == 0 and capsys.readouterr().out.endswith("| q4\n")
    assert main(ns + ["--offset-msg-id", sent[3].msg_id]) == 0 and capsys.readouterr().out.endswith("| q3\n")
    assert main(ns + ["-t", "Keyed", "-i", "00" * 16]) == 1 and "no message" in capsys.readouterr().err


def test_a_send_that_finds_its_master_gone_makes_the_next_one_ask_the_route_again(tmp_path):
    """A master killed and back at another address (as a controller promotes another node of the group): the
    send that finds the old address dead drops the cached routes that list it, so the next send goes to the new
    address at once, not after the route's 30 s in the cache."""
    from rmq_client.event_loop import run_blocking

    mq = MessageQueue("Moving", "broker-a", 0)
    header = {"producerGroup": "p-moving", "topic": mq.topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 1,
              "queueId": 0, "sysFlag": 0, "bornTimestamp": 0, "flag": 0, "reconsumeTimes": 0, "unitMode": False,
              "properties": ""}
    with WireCluster(tmp_path, brokers=("broker-a",)) as cluster, Producer(cluster.namesrv) as producer:
        producer.create_topic(mq.topic, 1)
        api = producer.aio.api
        assert run_blocking(api.send, mq, header, b"first", False).queue_offset == 0  # the route is cached
        old = cluster.addresses.pop("broker-a")
        cluster.kill("broker-a")
        new = cluster.start("broker-a")  # the same store, another port
        assert new != old
        with pytest.raises(MQClientError) as e:
            run_blocking(api.send, mq, header, b"lost", False)
        assert e.value.unreachable and e.value.address == old
        assert run_blocking(api.send, mq, header, b"second", False).queue_offset == 1
        assert run_blocking(api.broker_addr, mq.topic, "broker-a") == new
