"""Every request code the broker serves, sent as RocketMQ's clients send it (built from its typed header; the send
codes with the long and with the short V2 header), gets the answer it should, the same for either header form;
a missing or malformed header field is refused the same way for every code: SYSTEM_ERROR with a remark naming the
header and the field."""
from __future__ import annotations

import asyncio
import json
import time

from broker_testkit import records
from test_broker import _batch_body

from remoting import CommandHeader, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting import broker_headers as H
from remoting.command_header import _spec
from rmq_broker import Broker
from rmq_broker.processor.request_processor import read_header
from rmq_common import message_codec as codec

NOW = int(time.time() * 1000)


def _send_header(topic: str, queue_id: int, props: dict) -> H.SendMessageRequestHeader:
    return H.SendMessageRequestHeader("p", topic, "TBW102", 4, queue_id, 0, NOW, 0,
                                      codec.properties_to_string(props), 0, False, None, None)


def _request(code: int, header: CommandHeader | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, header.to_ext_fields() if header is not None else None, body=body)


def _heartbeat(client_id: str) -> bytes:
    return json.dumps({"clientID": client_id, "producerDataSet": [{"groupName": "p"}], "consumerDataSet": [{
        "groupName": "g", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "unitMode": False, "subscriptionDataSet": [
            {"topic": "H", "subString": "*", "expressionType": "TAG", "subVersion": 1}]}]}).encode()


def _lock(code: int) -> RemotingCommand:
    return _request(code, body=json.dumps({"consumerGroup": "g", "clientId": "c1", "onlyThisBroker": False,
                                           "mqSet": [{"topic": "H", "brokerName": "broker-a", "queueId": 0}]}).encode())


def test_every_served_code_answers_as_rocketmq_clients_send_it_in_either_header_form(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as c:
                answers: dict[int, list[RemotingCommand]] = {}

                async def ask(cmd: RemotingCommand) -> RemotingCommand:
                    r = await c.invoke(cmd, timeout=60)  # the first send allocates the commitlog: slow on a busy disk
                    answers.setdefault(cmd.code, []).append(r)
                    return r

                # the sends: each code with the long header and with the short one (V2), the same answers
                one = _send_header("H", 1, {"TAGS": "A"})
                for code, header in [(RequestCode.SEND_MESSAGE, one),
                                     (RequestCode.SEND_MESSAGE_V2, H.SendMessageRequestHeaderV2.from_v1(one)),
                                     (RequestCode.SEND_MESSAGE_V2, one)]:
                    r = await ask(_request(code, header, b"one"))
                    assert (r.code, r.ext_fields["queueId"]) == (ResponseCode.SUCCESS, "1"), r.remark
                batch = _batch_body([(b"b%d" % i, {"TAGS": "B"}) for i in range(3)])
                long_batch = _send_header("H", 0, {})
                long_batch.batch = True
                for header in (long_batch, H.SendMessageRequestHeaderV2.from_v1(long_batch)):
                    r = await ask(_request(RequestCode.SEND_BATCH_MESSAGE, header, batch))
                    assert (r.code, r.ext_fields["queueId"]) == (ResponseCode.SUCCESS, "0"), r.remark
                assert [int(r.ext_fields["queueOffset"]) for r in answers[RequestCode.SEND_MESSAGE]
                        + answers[RequestCode.SEND_MESSAGE_V2]] == [0, 1, 2]
                assert [int(r.ext_fields["queueOffset"]) for r in answers[RequestCode.SEND_BATCH_MESSAGE]] == [0, 3]
                half = await ask(_request(RequestCode.SEND_MESSAGE, _send_header("H", 1, {
                    "TRAN_MSG": "true", "PGROUP": "p"}), b"half"))
                assert half.code == ResponseCode.SUCCESS
                end = H.EndTransactionRequestHeader(
                    0x8, "p", int(half.ext_fields["queueOffset"]), codec.decode_message_id(half.ext_fields["msgId"])[2],
                    False, half.ext_fields["msgId"], half.ext_fields["transactionId"])
                assert (await ask(_request(RequestCode.END_TRANSACTION, end))).code == ResponseCode.SUCCESS

                pulled = await ask(_request(RequestCode.PULL_MESSAGE, H.PullMessageRequestHeader(
                    "g", "H", 1, 0, 32, 0x4, 0, 0, 0, "*", "TAG")))
                got = records(pulled.body)
                assert pulled.code == ResponseCode.SUCCESS and [m.body for m in got] == [b"one"] * 3 + [b"half"]

                assert (await ask(_request(RequestCode.HEART_BEAT, body=_heartbeat("c1")))).code == ResponseCode.SUCCESS
                check = {"clientId": "c1", "group": "g", "subscriptionData": {"topic": "H", "subString": "a > 1",
                                                                              "expressionType": "SQL92"}}
                check_cmd = _request(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(check).encode())
                assert (await ask(check_cmd)).code == ResponseCode.SUCCESS
                ids = await ask(_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, H.ConsumerGroupRequestHeader("g")))
                assert json.loads(ids.body) == {"consumerIdList": ["c1"]}
                update = H.UpdateConsumerOffsetRequestHeader("g", "H", 1, 2)
                assert (await ask(_request(RequestCode.UPDATE_CONSUMER_OFFSET, update))).code == ResponseCode.SUCCESS
                query = H.QueryConsumerOffsetRequestHeader("g", "H", 1)
                q = await ask(_request(RequestCode.QUERY_CONSUMER_OFFSET, query))
                assert (q.code, q.ext_fields["offset"]) == (ResponseCode.SUCCESS, "2")
                queue = H.QueueRequestHeader("H", 1)
                for code, want in [(RequestCode.GET_MAX_OFFSET, "4"), (RequestCode.GET_MIN_OFFSET, "0")]:
                    r = await ask(_request(code, queue))
                    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, want)
                r = await ask(_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, H.SearchOffsetRequestHeader("H", 1, 0)))
                assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
                r = await ask(_request(RequestCode.GET_EARLIEST_MSG_STORETIME, queue))
                assert (r.code, int(r.ext_fields["timestamp"])) == (ResponseCode.SUCCESS, got[0].store_timestamp)
                view = H.ViewMessageRequestHeader(got[0].commit_log_offset)
                r = await ask(_request(RequestCode.VIEW_MESSAGE_BY_ID, view))
                assert records(r.body)[0].body == b"one"
                found = H.QueryMessageRequestHeader("H", got[0].properties["UNIQ_KEY"], 32, 0, 2**63 - 1)
                r = await ask(_request(RequestCode.QUERY_MESSAGE, found))
                assert r.code == ResponseCode.SUCCESS and records(r.body)[0].body == b"one"
                assert int(r.ext_fields["indexLastUpdatePhyoffset"]) >= got[0].commit_log_offset
                back = H.ConsumerSendMsgBackRequestHeader(got[0].commit_log_offset, "g", 0, got[0].msg_id)
                assert (await ask(_request(RequestCode.CONSUMER_SEND_MSG_BACK, back))).code == ResponseCode.SUCCESS
                locked = await ask(_lock(RequestCode.LOCK_BATCH_MQ))
                assert [m["queueId"] for m in json.loads(locked.body)["lockOKMQSet"]] == [0]
                assert (await ask(_lock(RequestCode.UNLOCK_BATCH_MQ))).code == ResponseCode.SUCCESS
                r = await ask(_request(RequestCode.GET_TOPIC_STATS_INFO, H.GetTopicStatsInfoRequestHeader("H")))
                assert r.code == ResponseCode.SUCCESS and b'"maxOffset":4' in r.body
                r = await ask(_request(RequestCode.GET_CONSUME_STATS, H.GetConsumeStatsRequestHeader("g", "H")))
                assert r.code == ResponseCode.SUCCESS and b'"consumerOffset":2' in r.body
                create = H.CreateTopicRequestHeader("Made", "TBW102", 2, 2, 6, "SINGLE_TAG", 0, False)
                assert (await ask(_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create))).code == ResponseCode.SUCCESS
                assert b.store.queues("Made") == [0, 1]
                # the admin codes (tests/broker/test_admin_codes.py and the mqadmin matrix go further)
                for code in (RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_BROKER_CONFIG,
                             RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_ALL_CONSUMER_OFFSET,
                             RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG):
                    assert (await ask(_request(code))).code == ResponseCode.SUCCESS, code
                group = json.dumps({"groupName": "sg", "retryMaxTimes": 2}).encode()
                r = await ask(_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group))
                assert r.code == ResponseCode.SUCCESS
                r = await ask(_request(RequestCode.DELETE_SUBSCRIPTIONGROUP,
                                       H.DeleteSubscriptionGroupRequestHeader("sg")))
                assert r.code == ResponseCode.SUCCESS
                conn = await ask(_request(RequestCode.GET_CONSUMER_CONNECTION_LIST, H.ConsumerGroupRequestHeader("g")))
                assert conn.code == ResponseCode.SUCCESS and b'"clientId":"c1"' in conn.body
                r = await ask(_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                       H.GetProducerConnectionListRequestHeader("p")))
                assert r.code == ResponseCode.SUCCESS and b'"clientId":"c1"' in r.body
                r = await ask(_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                       H.QueryTopicConsumeByWhoRequestHeader("H")))
                assert json.loads(r.body) == {"groupList": ["g"]}
                r = await ask(_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                       H.ResetOffsetRequestHeader("H", "g", 0, True)))
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <g> not exist")
                r = await ask(_request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                       H.GetConsumerRunningInfoRequestHeader("g", "c9")))
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <g> <c9> not online")
                await b.topics.create_topic("Doomed", 1, 1, None)
                r = await ask(_request(RequestCode.DELETE_TOPIC_IN_BROKER, H.DeleteTopicRequestHeader("Doomed")))
                assert r.code == ResponseCode.SUCCESS and not b.store.has_topic("Doomed")
                unregister = H.UnregisterClientRequestHeader("c1", producer_group="p", consumer_group="g")
                assert (await ask(_request(RequestCode.UNREGISTER_CLIENT, unregister))).code == ResponseCode.SUCCESS
                assert (await c.invoke(_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                H.ConsumerGroupRequestHeader("g")))).code == ResponseCode.SYSTEM_ERROR
                return sorted(answers), sorted(b.processors)
    asked, served = asyncio.run(main())
    assert asked == served  # a code served without a case here fails: add it above


def _bad_fields(reader) -> list[tuple[str, dict, str]]:
    """(what, ext fields, remark part) for each required field left out and each integer field malformed, from a
    complete header of the reader's class."""
    out = []
    classes = [H.SendMessageRequestHeader, H.SendMessageRequestHeaderV2] if reader is H.read_send_header else [reader]
    for cls in classes:
        full = {f.wire: ("1" if f.kind in (32, 64) else "true" if f.kind is bool else "T") for f in _spec(cls)}
        if cls is H.SendMessageRequestHeaderV2:
            full["b"] = "T"
        for f in _spec(cls):
            if f.required:
                out.append((f"{cls.__name__} without {f.wire}", {k: v for k, v in full.items() if k != f.wire},
                            f"{cls.__name__}: field {f.wire} is missing"))
            if f.kind in (32, 64):
                kind = "int" if f.kind == 32 else "long"
                out.append((f"{cls.__name__} with {f.wire}=x", dict(full, **{f.wire: "x"}),
                            f"{cls.__name__}: field {f.wire} is 'x', not an integer ({kind})"))
    return out


def test_a_missing_or_malformed_field_is_refused_the_same_way_for_every_code(tmp_path):
    async def main():
        async with Broker(tmp_path / "s", "127.0.0.1:0") as b:
            async with RemotingClient(b.address) as c:
                tried = 0
                for code, processor in sorted(b.processors.items()):
                    reader = processor.header_of(code)
                    if reader is None:  # a body only (HEART_BEAT, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ)
                        continue
                    for what, ext, remark in _bad_fields(reader):
                        cmd = RemotingCommand.request(code, ext, body=b"x")
                        try:
                            read_header(reader, cmd)
                        except ValueError:
                            pass
                        else:
                            continue  # the other send form's field: not read for this code
                        r = await c.invoke(cmd, timeout=60)
                        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, remark), (code, what, r.remark)
                        tried += 1
                return tried
    assert asyncio.run(main()) > 40
