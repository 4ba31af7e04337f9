"""The broker's compiled lane (sends and pulls read by remoting.request_frame, the usual send's record built by
put_one.build_plain and its SEND_OK written in compiled code) against the general path, over a real socket: the
same record stored (but for where it went and when), the same answers to sends and pulls; a send that is not the
usual one (a delay, no UNIQ_KEY, a queue the topic lacks, a new topic, a oneway send) answered as the general path
answers it; with the ACL on the lane is not used."""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import pytest
from broker_testkit import pull, records, send, send_v2

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode, SerializeType, request_frame
from rmq_broker import Broker
from rmq_broker.broker_config import BrokerConfig
from rmq_common import message_codec as codec

pytestmark = pytest.mark.skipif(not request_frame.COMPILED, reason="remoting._frame is not built")


def _usual(queue_id: int, uniq: str, serialize_type=SerializeType.JSON, **props) -> RemotingCommand:
    """A send as RocketMQ's Java client writes it: the V2 header, UNIQ_KEY first among the properties."""
    cmd = send_v2(send("T", b"body of " + uniq.encode(), tags="TagA", queue_id=queue_id, UNIQ_KEY=uniq, **props))
    cmd.serialize_type = serialize_type
    return cmd


def _record_without_place(store, offset: int) -> bytes:
    """The stored record with QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP zeroed."""
    msg = store.look_message_by_offset(offset)
    raw = bytearray(msg[1])
    raw[codec.POS_QUEUEOFFSET:codec.POS_QUEUEOFFSET + 16] = bytes(16)
    born_len, _ = codec.host_lengths(msg[0].sys_flag)
    at = codec.POS_BORNHOST + born_len
    raw[at:at + 8] = bytes(8)
    return bytes(raw)


def _spy(broker) -> list:
    """What the lane answers, per frame it is shown (None: left to the general path)."""
    lane, seen = broker.server.lane, []
    assert lane is not None

    def spy(payload):
        read = lane(payload)
        seen.append(read is not None)
        return read
    broker.server.lane = spy
    return seen


@contextlib.asynccontextmanager
async def _broker(tmp_path, config=None):
    """A broker with topic T of 4 queues, a list of what its lane takes (_spy), and a client."""
    async with Broker(tmp_path / "s", "127.0.0.1:0", broker_config=config) as b:
        b.store.create_topic("T", 4)
        seen = _spy(b)
        async with RemotingClient(b.address) as client:
            yield b, seen, client


def test_the_lane_stores_and_answers_a_single_send_as_the_general_path_does(tmp_path):
    async def main():
        async with _broker(tmp_path) as (b, seen, client):
            spy = b.server.lane
            for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
                answers, offsets = [], []
                request = _usual(2, "U-" + serialize_type.name, serialize_type)
                for i, lane in enumerate((spy, None)):  # the same send through the lane, then the general path
                    b.server.lane = lane
                    answer = await client.invoke(dataclasses.replace(request, opaque=request.opaque + 1000 * i))
                    assert answer.code == ResponseCode.SUCCESS, answer.remark
                    assert answer.serialize_type == serialize_type
                    answers.append(answer)
                    offsets.append(int(answer.ext_fields["msgId"][-16:], 16))
                assert [a.ext_fields.keys() for a in answers] == [answers[1].ext_fields.keys()] * 2
                assert [a.ext_fields["queueId"] for a in answers] == ["2", "2"]
                assert int(answers[0].ext_fields["queueOffset"]) + 1 == int(answers[1].ext_fields["queueOffset"])
                assert _record_without_place(b.store, offsets[0]) == _record_without_place(b.store, offsets[1])
                msg = b.store.look_message_by_offset(offsets[0])[0]
                assert (msg.topic, msg.queue_id, msg.tags, msg.properties["UNIQ_KEY"], msg.body) == \
                    ("T", 2, "TagA", "U-" + serialize_type.name, b"body of U-" + serialize_type.name.encode())
                assert b.store.query_message_by_unique_key("T", "U-" + serialize_type.name) is not None
            assert seen == [True, True]  # the lane took the first of each pair
    asyncio.run(main())


def test_the_java_clients_send_is_read_and_built_in_compiled_code(tmp_path, monkeypatch):
    """The Java client (4.9.7) sends its header with `n` and its properties without the last pair's separator: the
    compiled reader and record take them (the general decode and put cost a cold broker about 80 us more a send),
    and the text is stored ended, as the general put stores it."""
    from rmq_broker.processor import send_message

    built = []

    def spy(*args):
        one = plain(*args)
        built.append(one is not None)
        return one
    plain = send_message.build_plain
    monkeypatch.setattr(send_message, "build_plain", spy)

    async def main():
        async with _broker(tmp_path) as (b, seen, client):
            text = "UNIQ_KEY\x01J49\x02WAIT\x01true\x02TAGS\x01TagA"  # MessageDecoder.messageProperties2String
            request = _usual(1, "J49")
            request.ext_fields.update(i=text, n="broker-a")  # `n`: the broker's name, which 4.9.7 sends too
            answer = await client.invoke(request)
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            assert built == [True] and seen == [True]
            offset = int(answer.ext_fields["msgId"][-16:], 16)
            msg, raw = b.store.look_message_by_offset(offset)
            assert bytes(raw).endswith(text.encode() + b"\x02")  # as the general put stores it (test_put_one)
            assert (msg.tags, msg.properties["UNIQ_KEY"], msg.properties["WAIT"], msg.body) == \
                ("TagA", "J49", "true", b"body of J49")
            assert b.store.query_message_by_unique_key("T", "J49") is not None
    asyncio.run(main())


def test_sends_the_lane_leaves_are_answered_by_the_general_path(tmp_path):
    async def main():
        async with _broker(tmp_path) as (b, seen, client):
            delayed = await client.invoke(_usual(0, "D1", DELAY="1"))
            assert delayed.code == ResponseCode.SUCCESS
            assert b.store.max_offset("T", 0) == 0  # waits its level out in the schedule topic
            no_uniq = await client.invoke(send_v2(send("T", b"x", queue_id=1)))
            assert no_uniq.code == ResponseCode.SUCCESS and b.store.max_offset("T", 1) == 1
            assert b.store.get_message("g", "T", 1, 0).messages[0].properties.get("UNIQ_KEY")  # given here
            bad_queue = await client.invoke(_usual(9, "Q9"))
            assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId[9]" in bad_queue.remark
            new_topic = send_v2(send("Fresh", b"y", queue_id=0, UNIQ_KEY="F1"))
            assert (await client.invoke(new_topic)).code == ResponseCode.SUCCESS
            assert b.store.max_offset("Fresh", 0) == 1  # created first, as the general path does
            oneway = _usual(3, "O1")
            oneway.flag = 2
            await client.invoke_oneway(oneway)
            for _ in range(100):
                if b.store.max_offset("T", 3):
                    break
                await asyncio.sleep(0.02)
            assert b.store.max_offset("T", 3) == 1
            assert seen == [True] * 4 + [False]  # read by the compiled reader but the oneway one
    asyncio.run(main())


def test_pulls_read_by_the_lane_are_answered_as_by_the_general_path(tmp_path):
    async def main():
        async with _broker(tmp_path) as (b, seen, client):
            spy = b.server.lane
            for i in range(5):
                assert (await client.invoke(_usual(1, f"P{i}", TAGS="A" if i % 2 else "B"))).code == 0
            for request in (pull("T", 0, queue_id=1), pull("T", 0, "A", queue_id=1), pull("T", 9, queue_id=1),
                            pull("T", 0, queue_id=0), pull("T", 0, "a > 1", "SQL92", queue_id=1)):
                answers = []
                for i, lane in enumerate((spy, None)):
                    b.server.lane = lane
                    answer = await client.invoke(dataclasses.replace(request, opaque=request.opaque + 1000 * i))
                    answers.append((answer.code, answer.remark, answer.ext_fields, bytes(answer.body)))
                assert answers[0] == answers[1]
            assert records((await client.invoke(pull("T", 0, queue_id=1))).body)
            assert seen[5:] == [True] * 5
    asyncio.run(main())


def test_with_the_acl_on_no_send_takes_the_lane(tmp_path):
    """The ACL's hook reads every request decoded: a signed send goes the general path, and an unsigned one is
    refused there."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n- accessKey: rocketmq2\n  secretKey: sk12345678\n  admin: true\n")
    config = BrokerConfig(aclEnable=True, aclFilePath=str(acl))

    async def main():
        async with _broker(tmp_path, config) as (b, seen, client):
            refused = await client.invoke(_usual(0, "A1"))
            assert refused.code != ResponseCode.SUCCESS
            assert seen == [] and b.store.max_offset("T", 0) == 0
    asyncio.run(main())


def test_a_processor_failing_on_a_request_the_lane_read_answers_system_error_and_keeps_the_connection(tmp_path):
    async def main():
        async with _broker(tmp_path) as (b, seen, client):
            processor = b.processors[RequestCode.PULL_MESSAGE]
            handler, reader = processor._handlers[RequestCode.PULL_MESSAGE]

            def failing(h, cmd, channel):
                raise RuntimeError("a bug in the pull")
            processor._handlers[RequestCode.PULL_MESSAGE] = (failing, reader)
            answer = await client.invoke(pull("T", 0, queue_id=1))
            assert answer.code == ResponseCode.SYSTEM_ERROR and "a bug in the pull" in answer.remark
            processor._handlers[RequestCode.PULL_MESSAGE] = (handler, reader)
            assert (await client.invoke(_usual(1, "after"))).code == ResponseCode.SUCCESS  # the same connection
            assert seen == [True, True]
    asyncio.run(main())
