"""The Java client matrix: one program (tests/peers/java/matrix/JavaClientMatrix.java) runs every case of
Apache RocketMQ 4.9.7's DefaultMQProducer, TransactionMQProducer, DefaultMQPushConsumer, DefaultLitePullConsumer
and AclClientRPCHook in one JVM, once against a stock 4.9.7 cluster and once against `rmq serve`, and the results
are compared case by case: messages received, order where promised, offsets, statuses, refusal codes. Where ours
differs on purpose the case is in DIFFERS (and docs/compatibility.md) and today's answer is asserted."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest
from stock_peers import JAVA_SOURCES, STOCK_4, StockClients, StockCluster, _logback_home, compiled, write_atomically
from wire_cluster import PULL_LIMITS, WireCluster

MATRIX_SOURCES = os.path.join(JAVA_SOURCES, "matrix")
# short transaction checks on both sides: first check 1 s after the half, then every 1 s, dropped after 2 checks;
# every delay level 1 s (a retry the client sends itself when its send-back times out uses level 3 + times)
BROKER_CONF = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000", "transactionCheckMax": "2",
               "messageDelayLevel": " ".join(["1s"] * 18)}
PLAIN_ACL = """globalWhiteRemoteAddresses: []
accounts:
- accessKey: RocketMQ
  secretKey: "12345678"
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: PUB|SUB
"""
ACL_CONF = {"aclEnable": "true", "brokerClusterName": "AclCluster", "enablePropertyFilter": "false"}

# What the stock broker answers, case by case (the reference; ours must answer the same). Cases whose answer
# depends on timing leave those fields out (see _comparable).
EXPECTED_STOCK = {
    "create_topic": {"routed": True, "queues": {"broker-a": 2, "broker-b": 2}},
    "send_sync": {"statuses": ["SEND_OK"] * 8, "offsets": [0, 0, 0, 0, 1, 1, 1, 1]},
    "send_async": {"statuses": ["SEND_OK"] * 8, "offsets_contiguous": True, "errors": []},
    "send_oneway": {"stored": 8},
    "send_batch": {"status": "SEND_OK", "ids": 10, "distinct": 10, "queueOffset": 0, "received": list(range(10))},
    "view_message": {"by_offset_msg_id": {"topic": "MxSync", "keys": "key-MxSync-3 common-MxSync", "tags": "TagA",
                                          "body": "body 3", "i": "3"},
                     "by_uniq_key": {"topic": "MxSync", "keys": "key-MxSync-3 common-MxSync", "tags": "TagA",
                                     "body": "body 3", "i": "3"},
                     "by_missing_offset": None},
    "send_to_missing_queue": None,
    "query_message_by_key": {"one_key": [5], "common_key": list(range(8))},
    "orderly_selector": {"received": list(range(24)), "in_order": True, "one_queue_per_order": True, "per_order": 3},
    "delay_level_1": {"received": [0, 1, 2], "delayed_1s": True, "topic": "MxDelay"},
    "push_tag_selector": {"received": [0, 2, 3, 5, 6, 8, 9, 11]},
    "push_sql92_selector": {"received": [4, 6, 8, 10]},
    "push_sql92_bad_expression": {"started": False, "code": 23},
    "push_clustering_join_leave": {"delivered": 60, "missing": 0, "second_member_received": True,
                                   "delivered_while_both_members": 40},
    "push_broadcasting": {"received": [list(range(10))] * 2, "offset_store": ["LocalFileOffsetStore"] * 2,
                          "local_offsets": [10, 10]},
    "push_reconsume_later_dlq": {"reconsume_times": {"0": [0, 1, 2], "1": [0, 1, 2]}, "dlq_messages": 2},
    "push_consume_from_timestamp": None,  # filled in below from the stock run: see the test
    "push_consume_from_last_offset": None,
    "lite_pull_subscribe": {"received": list(range(10)), "committed": None},
    "lite_pull_assign_seek": {"received": 6, "min_queue_offset": 1, "committed_before": None, "committed": None},
    "transactions": {"send": ["SEND_OK/COMMIT_MESSAGE", "SEND_OK/ROLLBACK_MESSAGE", "SEND_OK/UNKNOW"],
                     "gone_send": "SEND_OK/UNKNOW", "received": [0, 2], "unknow_checked": True,
                     "committed_or_rolled_back_checked": False, "gone_checks_after_return": 0},
    "acl": {"sent": ["SEND_OK"] * 3, "received": [0, 1, 2],
            "wrong_secret": {"exception": "MQClientException", "code": 1},
            "sql92_without_property_filter": {"started": False, "code": 1}},
}
# fields that depend on timing (reported, not compared)
TIMING = {"millis", "duplicates", "phase_millis"}
# where ours answers differently on purpose: case -> (field, our answer, why); docs/compatibility.md lists them
DIFFERS: dict[str, tuple[str, object, str]] = {
    "acl": ("wrong_secret", {"exception": "MQClientException", "code": 16},
            "a refused signature is NO_PERMISSION (16) with the reason; RocketMQ 4.9's ACL hook throws and the "
            "remoting layer answers SYSTEM_ERROR (1) with the same text"),
}


def _comparable(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMING}


def _write_plain_acl(path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path) or open(path).read() != PLAIN_ACL:
        write_atomically(path, PLAIN_ACL)


def _wire_conf(extra: dict) -> str:
    return PULL_LIMITS + "".join(f"{k} = {v}\n" for k, v in extra.items())


def _run_matrix(clients: StockClients, namesrv: str, acl_namesrv: str, out: dict, key: str) -> None:
    try:
        out[key] = clients.run("JavaClientMatrix", namesrv, acl_namesrv, timeout=300)
    except BaseException as e:  # reported by the test
        out[key] = e


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Both sides' results, {"stock": {case: result}, "ours": {case: result}}, with the wall time of each run."""
    root = tmp_path_factory.mktemp("java-matrix")
    _, home = _logback_home(STOCK_4, "broker")
    _write_plain_acl(os.path.join(home, "conf", "plain_acl.yml"))  # 4.9 reads $ROCKETMQ_HOME/conf/plain_acl.yml
    stock = StockCluster(STOCK_4, root / "stock", conf=BROKER_CONF)
    stock_acl = StockCluster(STOCK_4, root / "stock-acl", brokers=("broker-acl",), conf={**BROKER_CONF, **ACL_CONF})
    ours = WireCluster(root / "ours", brokers=("broker-a", "broker-b"), conf=_wire_conf(BROKER_CONF))
    _write_plain_acl(str(root / "ours-acl" / "plain_acl.yml"))  # beside the broker.conf, where `rmq serve` reads it
    ours_acl = WireCluster(root / "ours-acl", brokers=("broker-acl",), conf=_wire_conf(ACL_CONF))
    classes = compiled(STOCK_4, MATRIX_SOURCES)
    failures: list[BaseException] = []

    def boot(cluster: StockCluster) -> None:
        try:
            cluster.__enter__()
        except BaseException as e:  # raised below, with the broker's log tail
            failures.append(e)
    booting = [threading.Thread(target=boot, args=(c,)) for c in (stock, stock_acl)]
    t0 = time.monotonic()
    try:
        for t in booting:
            t.start()
        for c in (ours, ours_acl):
            c.__enter__()
        for t in booting:
            t.join()
        if failures:
            raise failures[0]
        booted = time.monotonic() - t0
        results: dict = {}
        runs = []
        for key, cluster, acl in (("stock", stock, stock_acl), ("ours", ours, ours_acl)):
            clients = StockClients(STOCK_4, cluster.namesrv, root / key)
            clients.classes = classes
            runs.append(threading.Thread(target=_run_matrix, args=(clients, cluster.namesrv, acl.namesrv, results,
                                                                   key)))
        for t in runs:
            t.start()
        for t in runs:
            t.join()
        out = {"boot_s": booted, "run_s": time.monotonic() - t0 - booted}
        for key in ("stock", "ours"):
            if isinstance(results.get(key), BaseException):
                raise AssertionError(f"the matrix against {key} failed: {results[key]}")
            lines = results[key]
            assert lines and lines[-1].get("done"), f"the matrix against {key} ended early: {lines[-3:]}"
            out[key] = {line["case"]: line for line in lines[:-1]}
            with open(os.path.join(root, f"{key}.jsonl"), "w") as f:
                f.writelines(f"{json.dumps(line)}\n" for line in lines)
        print(f"\njava client matrix: clusters up in {out['boot_s']:.1f} s, both runs {out['run_s']:.1f} s; "
              f"case millis stock/ours: " + ", ".join(
                  f"{c} {out['stock'][c]['millis']}/{out['ours'].get(c, {}).get('millis')}" for c in out["stock"])
              + "; clustering duplicates stock/ours: " + "/".join(
                  str(out[k].get("push_clustering_join_leave", {}).get("duplicates")) for k in ("stock", "ours")))
        yield out
    finally:
        for t in booting:  # a stock cluster still booting is stopped once it is up (or has failed)
            if t.is_alive():
                t.join()
        for c in (stock, stock_acl, ours, ours_acl):
            c.__exit__(None, None, None)


@pytest.mark.parametrize("case", list(EXPECTED_STOCK))
def test_java_client_case_answers_as_the_stock_broker(matrix, case):
    stock, ours = matrix["stock"].get(case), matrix["ours"].get(case)
    assert stock is not None and ours is not None, f"{case} did not run: {stock} / {ours}"
    assert "error" not in stock, f"{case} failed against the stock broker: {stock}"
    expected = EXPECTED_STOCK[case]
    if expected is not None:  # the reference is what RocketMQ promises: a broken stock run is no reference
        for field, value in expected.items():
            if value is not None:
                assert stock[field] == value, f"stock {case}.{field}: {stock[field]!r} (expected {value!r})"
    want = _comparable(stock)
    if case in DIFFERS:
        field, answer, _why = DIFFERS[case]
        assert ours.get(field) == answer, f"ours {case}.{field}: {ours.get(field)!r}, today's answer {answer!r}"
        want[field] = answer
    assert _comparable(ours) == want, f"{case}: ours {ours} vs stock {stock}"
