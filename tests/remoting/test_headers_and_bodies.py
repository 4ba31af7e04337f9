"""Typed headers read what RocketMQ clients send (strings, 0/1 booleans, fields they add) and refuse a bad field
by name; bodies read and write fastjson's form (bare integer keys) and standard JSON, and name a bad field."""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting import BodyError, HeaderFieldError, RequestCode
from remoting import remoting_serializable as rs
from remoting.broker_headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    UnregisterClientRequestHeader,
    read_send_header,
)
from remoting.namesrv_bodies import ClusterInfo, RegisterBrokerBody, RegisteredTopicConfig, TopicList
from remoting.namesrv_headers import GetRouteInfoRequestHeader, RegisterBrokerRequestHeader
from remoting.route_data import BrokerData, QueueData, TopicRouteData

# What the C++ client (rocketmq 0.4.4) sends with a pull: every value a string, plus fields no header defines.
CPP_PULL = {"consumerGroup": "g", "topic": "T", "queueId": "3", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "6", "commitOffset": "-1", "suspendTimeoutMillis": "20000", "subscription": "TagA || TagB",
            "subVersion": "1700000000000", "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": ""}


def test_a_pull_header_as_the_cpp_client_sends_it():
    h = PullMessageRequestHeader.from_ext_fields(CPP_PULL)
    assert (h.queue_id, h.sys_flag, h.commit_offset, h.subscription, h.expression_type) == \
        (3, 6, -1, "TagA || TagB", None)
    assert h.to_ext_fields() == {k: v for k, v in CPP_PULL.items() if k not in ("AccessKey", "OnsChannel", "Signature")}


@pytest.mark.parametrize("field, value, message", [
    ("queueId", "x", "PullMessageRequestHeader: field queueId is 'x', not an integer (int)"),
    ("queueId", "2147483648", "field queueId is '2147483648', out of range of a 32-bit integer"),
    ("queueOffset", "1.5", "field queueOffset is '1.5', not an integer (long)"),
    ("queueOffset", "9223372036854775808", "out of range of a 64-bit integer"),
    ("maxMsgNums", " 32", "field maxMsgNums is ' 32', not an integer"),
    ("topic", None, "PullMessageRequestHeader: field topic is missing"),
])
def test_a_bad_field_is_named_with_its_value(field, value, message):
    ext = dict(CPP_PULL)
    if value is None:
        del ext[field]
    else:
        ext[field] = value
    with pytest.raises(HeaderFieldError, match=re.escape(message)) as e:
        PullMessageRequestHeader.from_ext_fields(ext)
    assert (e.value.field, e.value.value) == (field, value)


def test_booleans_as_words_or_digits_and_wire_names_that_are_not_camel_case():
    ext = {"topic": "T", "acceptStandardJsonOnly": "1"}
    assert GetRouteInfoRequestHeader.from_ext_fields(ext).accept_standard_json_only is True
    assert GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "FALSE"}) \
        .accept_standard_json_only is False
    with pytest.raises(HeaderFieldError, match="field acceptStandardJsonOnly is 'yes', not a boolean"):
        GetRouteInfoRequestHeader.from_ext_fields({"topic": "T", "acceptStandardJsonOnly": "yes"})
    assert UnregisterClientRequestHeader("127.0.0.1@1", consumer_group="g").to_ext_fields() == \
        {"clientID": "127.0.0.1@1", "consumerGroup": "g"}
    reg = RegisterBrokerRequestHeader("a", "h:1", "C", "h:2", 0)
    assert reg.to_ext_fields() == {"brokerName": "a", "brokerAddr": "h:1", "clusterName": "C", "haServerAddr": "h:2",
                                   "brokerId": "0", "compressed": "false", "bodyCrc32": "0"}


def test_send_message_v2_is_the_same_header_abbreviated():
    v1 = SendMessageRequestHeader("pg", "T", "TBW102", 4, -1, 0, 1700000000000, 0, "TAGS\x01A\x02", 0, False, True, 16)
    v2 = SendMessageRequestHeaderV2.from_v1(v1)
    assert v2.to_ext_fields() == {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "-1", "f": "0",
                                  "g": "1700000000000", "h": "0", "i": "TAGS\x01A\x02", "j": "0", "k": "false",
                                  "l": "16", "m": "true"}
    assert SendMessageRequestHeaderV2.from_ext_fields(v2.to_ext_fields()).to_v1() == v1
    with pytest.raises(HeaderFieldError, match="SendMessageRequestHeaderV2: field e is 'q'"):
        SendMessageRequestHeaderV2.from_ext_fields(dict(v2.to_ext_fields(), e="q"))
    # the broker reads the short form straight into the long header: the same values, the same errors
    assert read_send_header(RequestCode.SEND_MESSAGE_V2, v2.to_ext_fields()) == v1
    assert read_send_header(RequestCode.SEND_BATCH_MESSAGE, {"b": "T"}) == SendMessageRequestHeader(topic="T")
    with pytest.raises(HeaderFieldError, match="SendMessageRequestHeaderV2: field g is '1e3', not an integer"):
        read_send_header(RequestCode.SEND_MESSAGE_V2, dict(v2.to_ext_fields(), g="1e3"))


def _route() -> TopicRouteData:
    return TopicRouteData([QueueData("broker-a", 4, 4), QueueData("broker-b", 8, 8, perm=4)],
                          [BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
                           BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.3:10911"})])


def test_a_route_in_fastjsons_form_and_in_standard_json():
    route = _route()
    fast = route.encode()
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in fast
    assert b"orderTopicConf" not in fast  # fastjson leaves null fields out
    with pytest.raises(json.JSONDecodeError):
        json.loads(fast)
    standard = route.encode(standard=True)
    assert json.loads(standard)["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
    assert TopicRouteData.decode(fast) == TopicRouteData.decode(standard) == route


def test_non_ascii_is_raw_in_fastjsons_form_and_escaped_in_standard_json():
    body = TopicList(["主题", 'a"b'])
    assert body.encode() == '{"topicList":["主题","a\\"b"]}'.encode()
    assert body.encode(standard=True) == b'{"topicList":["\\u4e3b\\u9898","a\\"b"]}'
    assert TopicList.decode(body.encode()) == TopicList.decode(body.encode(standard=True)) == body


def test_bare_keys_are_read_only_outside_strings():
    assert rs.decode(b'{"k":"{1:x,2:y}",7:{-1:2, 3 :4},"s":[{0:"a"}]}') == \
        {"k": "{1:x,2:y}", "7": {"-1": 2, "3": 4}, "s": [{"0": "a"}]}


def test_cluster_info_and_registration_bodies_round_trip():
    info = ClusterInfo({"broker-a": _route().broker_datas[0]}, {"DefaultCluster": ["broker-a"]})
    assert b'{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in info.encode()
    assert ClusterInfo.decode(info.encode()) == info
    body = RegisterBrokerBody()
    body.topic_config_serialize_wrapper.topic_config_table["T"] = RegisteredTopicConfig("T", 4, 4, order=True)
    assert RegisterBrokerBody.decode(body.encode()) == body


@pytest.mark.parametrize("body, message", [
    (b"[1]", "registerBrokerBody is [1], not an object"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":4}}}}',
     "topicConfigTable.T.topicName is missing"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","perm":true}}}}',
     "topicConfigTable.T.perm is True, not an int"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","topicFilterType":"X"}}}}',
     "topicFilterType is 'X', not one of SINGLE_TAG, MULTI_TAG"),
    (b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}', "topicConfigTable is [], not an object"),
    (b'{"filterServerList":{}}', "filterServerList is {}, not an array"),
    (b'{"a":', "the body is not JSON"),
    (b"\xff", "the body is not UTF-8"),
    (b"[" * 100000, "nests too deeply"),
])
def test_a_bad_registration_body_names_what_is_wrong(body, message):
    with pytest.raises(BodyError, match=re.escape(message)):
        RegisterBrokerBody.decode(body)


def test_a_route_with_a_broker_id_that_is_not_a_number():
    with pytest.raises(BodyError, match=r"brokerDatas\[0\].brokerAddrs has key 'x', not an integer"):
        TopicRouteData.decode(b'{"brokerDatas":[{"cluster":"C","brokerName":"a","brokerAddrs":{"x":"h:1"}}]}')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.integers(-1000, 1000) | st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


def _keys_as_text(value):
    if isinstance(value, dict):
        return {str(k): _keys_as_text(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_keys_as_text(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_any_value_survives_both_forms(value):
    """Whatever the keys and strings hold (braces, colons, quotes, digits), both forms decode to the same value,
    integer keys as their text; null map values are left out as fastjson does."""
    expected = _keys_as_text(value)
    if isinstance(value, dict) and any(isinstance(k, int) for k in value) and \
            len({str(k) for k in value}) < len(value):
        return  # 1 and "1" as keys of one map: fastjson would write both, no reader can keep both
    assert rs.decode(rs.encode(value)) == expected
    assert rs.decode(rs.encode(value, standard=True)) == expected
