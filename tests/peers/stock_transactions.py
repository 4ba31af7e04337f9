"""What a stock broker holds of transactions, read from its system queues as its check service reads them: the half
queue (RMQ_SYS_TRANS_HALF_TOPIC, every half and every copy the checks made of one) and the op queue
(RMQ_SYS_TRANS_OP_HALF_TOPIC, whose bodies list the half offsets ended, by the producer or by a check's answer).
Pulled from the broker's address: a stock broker registers the op topic with the name server only at its next
periodic registration."""
from __future__ import annotations

from remoting.blocking_client import BlockingRemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.remoting_command import RemotingCommand
from store import message_codec as codec

HALF_TOPIC, OP_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def _messages(address: str, topic: str) -> list[codec.MessageExt]:
    out: list[codec.MessageExt] = []
    offset = 0
    with BlockingRemotingClient(address, connect_timeout=5) as client:
        while True:
            answer = client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": "test-transactions", "topic": topic, "queueId": 0, "queueOffset": offset,
                "maxMsgNums": 32, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*",
                "subVersion": 0, "expressionType": "TAG"}), 10)
            if answer.code != ResponseCode.SUCCESS:
                return out  # PULL_NOT_FOUND at the end; PULL_OFFSET_MOVED / TOPIC_NOT_EXIST: none yet
            pos, body = 0, answer.body
            while pos < len(body):
                m = codec.decode_record(body, pos)
                pos += m.store_size
                out.append(m)
            offset = int(answer.ext_fields["nextBeginOffset"])


def undecided_halves(address: str) -> dict[str, int]:
    """The half messages of the broker at `address` that nothing ended: {UNIQ_KEY: how many copies the broker's
    checks made of it}. A half counts as ended when an op message lists it or any copy of it (a check's answer ends
    the copy it asked about; the producer ends the half it sent)."""
    ended: set[int] = set()
    for op in _messages(address, OP_TOPIC):
        ended.update(int(x) for x in op.body.decode().split(",") if x.strip())
    copies: dict[str, int] = {}
    done: set[str] = set()
    for half in _messages(address, HALF_TOPIC):
        key = half.properties.get(codec.PROPERTY_UNIQ_KEY, "")
        copies[key] = copies.get(key, 0) + 1
        if half.queue_offset in ended:
            done.add(key)
    return {k: n - 1 for k, n in copies.items() if k not in done}
