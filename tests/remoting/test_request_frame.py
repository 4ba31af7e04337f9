"""The single send's compiled frame reader and SEND_OK writer (remoting.request_frame.py) against the general decoder
and encoder: whatever the reader takes, it reads exactly as RemotingCommand.decode and read_send_header do; what
it leaves (None) is what the general path reads or refuses; the usual sends of RocketMQ's clients are taken; and
SEND_OK's frame is byte for byte what the general encoder writes."""
from __future__ import annotations

import json
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from remoting import FrameError, HeaderFieldError, RemotingCommand, SerializeType, request_frame
from remoting.broker_headers import (
    V2_SEND_FIELDS,
    PullMessageRequestHeader,
    SendMessageResponseHeader,
    read_send_header,
)

pytestmark = pytest.mark.skipif(not request_frame.COMPILED, reason="remoting._frame is not built")

LONG_NAMES = list(V2_SEND_FIELDS.values())
SHORT_NAMES = list(V2_SEND_FIELDS)
PROPS = "UNIQ_KEY\x01AC11000100002A9F0000000000000007\x02TAGS\x01TagA\x02WAIT\x01true\x02"


def _java_v2(opaque: int = 5, **changes) -> dict:
    """The header the Java client (4.9.7) sends, `n` (the broker's name) among its fields."""
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000000", "h": "0",
           "i": PROPS, "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    ext.update(changes)
    return {"code": 310, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON", "version": 407}


def _json_frame(header: dict, body: bytes = b"x" * 100, ensure_ascii: bool = True) -> bytes:
    raw = json.dumps(header, ensure_ascii=ensure_ascii, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return struct.pack(">I", len(raw)) + raw + body


def _general(payload: bytes):
    """What the general path reads: (command, header), or the error it answers or closes with."""
    try:
        cmd = RemotingCommand.decode(payload)
        if cmd.code == 11:
            return cmd, PullMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        if cmd.code not in (10, 310, 320):
            raise ValueError(f"code {cmd.code}: not a request the compiled reader reads")
        return cmd, read_send_header(cmd.code, cmd.ext_fields)
    except (FrameError, HeaderFieldError, ValueError) as e:
        return e


def _same_as_general(payload: bytes) -> bool:
    """The compiled reader's result agrees with the general path's; True when it took the frame."""
    fast = request_frame.read_request(payload)
    if fast is None:
        return False
    general = _general(payload)
    assert not isinstance(general, Exception), f"taken by the compiled reader, refused by the general: {general}"
    cmd, header = fast
    ref, ref_header = general
    assert header == ref_header
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version, cmd.serialize_type, cmd.body) == \
        (ref.code, ref.opaque, ref.flag, ref.language, ref.version, ref.serialize_type, ref.body)
    assert ref.code in (10, 310, 320, 11) and not ref.is_oneway and not ref.is_response
    return True


def _java_pull(**changes) -> dict:
    """The header the Java client (4.9.7 and 5.x) pulls with, `bname` (the broker's name) among its fields."""
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": "64", "maxMsgNums": "32",
           "sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "1700000000000",
           "subscription": "TagA || TagB", "expressionType": "TAG", "bname": "broker-a"}
    ext.update(changes)
    return {"code": 11, "extFields": ext, "flag": 0, "language": "JAVA", "opaque": 3,
            "serializeTypeCurrentRPC": "JSON", "version": 407}


def test_the_usual_pulls_are_taken_and_a_pull_missing_a_field_is_not():
    assert _same_as_general(_json_frame(_java_pull(), b""))
    assert _same_as_general(_json_frame(_java_pull(subscription="a > 5 AND b = 'x\u00e9'", expressionType="SQL92"),
                                        b""))
    binary = RemotingCommand(11, 12, 0, None, _java_pull()["extFields"], b"", 0, 407, SerializeType.ROCKETMQ)
    assert _same_as_general(binary.encode()[4:])
    for missing in ("consumerGroup", "queueOffset", "subVersion"):
        ext = dict(_java_pull()["extFields"])
        del ext[missing]
        assert request_frame.read_request(_json_frame({**_java_pull(), "extFields": ext}, b"")) is None
    assert request_frame.read_request(_json_frame(_java_pull(maxMsgNums="2147483648"), b"")) is None
    assert request_frame.read_request(_json_frame(_java_pull(liteTopic="x"), b"")) is None  # 5.5's: left to the general


def test_the_usual_sends_of_rocketmqs_clients_are_taken():
    java = _json_frame(_java_v2())  # fastjson escapes \x01 and \x02 as \u0001 and \u0002
    assert b"\\u0001" in java and _same_as_general(java)
    cpp = {"code": 10, "language": "CPP", "version": 63, "opaque": 9, "flag": 0, "remark": "",
           "extFields": {"producerGroup": "g", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
                         "queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
                         "properties": PROPS, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"},
           "serializeTypeCurrentRPC": "JSON"}
    assert _same_as_general(_json_frame(cpp, b"hello"))
    binary = RemotingCommand(310, 11, 0, None, _java_v2()["extFields"], b"body", 0, 407, SerializeType.ROCKETMQ)
    assert _same_as_general(binary.encode()[4:])
    assert _same_as_general(_json_frame({**_java_v2(), "code": 320}))  # the Java client's every batch
    unicode_props = _java_v2(i="UNIQ_KEY\x01X\x02TAGS\x01\u65e5\u672c \U0001F600\x02")
    assert _same_as_general(_json_frame(unicode_props, ensure_ascii=True))  # a surrogate pair escaped
    assert _same_as_general(_json_frame(unicode_props, ensure_ascii=False))  # UTF-8 as it is
    spaced = json.dumps(_java_v2(), indent=2).encode()
    assert _same_as_general(struct.pack(">I", len(spaced)) + spaced)
    assert request_frame.read_request(_json_frame(_java_v2(), b""))[0].body == b""
    # fields the broker does not read: V2's `n`, RpcRequestHeader's (5.x); any other unknown one is left
    assert _same_as_general(_json_frame(_java_v2(bname="broker-a", ns="", nsd="false", oway="false", lo="false")))
    assert _same_as_general(_json_frame({**_java_v2(), "extFields": {
        k: v for k, v in _java_v2()["extFields"].items() if k != "n"}}))
    assert request_frame.read_request(_json_frame(_java_v2(o="x"))) is None


@pytest.mark.parametrize("header", [
    _java_v2(e="+2"), _java_v2(e=" 2"), _java_v2(e="2.0"), _java_v2(e="99999999999"), _java_v2(k="TRUE"),
    _java_v2(AccessKey="rocketmq2"), {**_java_v2(), "flag": 2}, {**_java_v2(), "flag": 1}, {**_java_v2(), "code": 321},
    {**_java_v2(), "code": 11}, _java_v2(b=""), {**_java_v2(), "extFields": {"b": "T", "e": 2}},
    {**_java_v2(), "opaque": 2**40}, {**_java_v2(), "remark": {"nested": 1}}, {**_java_v2(), "code": "310"},
    {**_java_v2(), "extFields": {**_java_v2()["extFields"], "topic": "Other"}},
])
def test_what_the_compiled_reader_leaves_is_the_general_paths(header):
    """An unusual field, a oneway or response frame, another code, a field of the ACL, a nested value: left to the
    general path, which reads or refuses it."""
    assert request_frame.read_request(_json_frame(header)) is None


@pytest.mark.parametrize("raw", [
    b'{"code":0310,"extFields":{"b":"T"},"flag":0}', b'{"code":310,"extFields":{"b":"T"},"flag":0} x',
    b'{"code":310,"extFields":{"b":"T\xff"},"flag":0}', b'{"code":310,"remark":"\xed\xa0\x80","extFields":{"b":"T"}}',
    b'{"code":310,"extFields":{"b":"\\ud800"},"flag":0}', b'{"code":310,"extFields":{"b":"T\x01"},"flag":0}',
    b'{"code":310,"extFields":{"b":"T"},"flag":0', b'[310]', b'', b'{"code":310,"extFields":{"b":"T"},"flag":NaN}',
])
def test_a_header_json_refuses_is_never_taken(raw):
    payload = struct.pack(">I", len(raw)) + raw
    assert request_frame.read_request(payload) is None
    assert request_frame.read_request(payload[:3]) is None
    assert request_frame.read_request(struct.pack(">I", len(raw) + 9) + raw) is None  # a header length past the frame


ints = st.one_of(st.integers(-2**63, 2**63 - 1).map(str), st.sampled_from(["", "-", "+1", "01", " 1", "1 ", "0x1"]))
texts = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=["Cs"]),
                max_size=12)


@st.composite
def request_frames(draw) -> bytes:
    short = draw(st.booleans())
    names = SHORT_NAMES if short else LONG_NAMES
    ext = {}
    for name in draw(st.lists(st.sampled_from(names + ["AccessKey", "x"]), max_size=16)):
        ext[name] = draw(st.one_of(ints, texts, st.sampled_from(["true", "false", "True"])))
    if draw(st.booleans()):
        ext["b" if short else "topic"] = draw(st.sampled_from(["T", "%RETRY%g", ""]))
    if draw(st.booleans()):  # a pull's fields
        ext = {name: draw(st.one_of(ints, texts, st.just(value)))
               for name, value in _java_pull()["extFields"].items() if draw(st.integers(0, 9))}
    header = {"code": draw(st.sampled_from([10, 310, 310, 320, 11, 12])), "extFields": ext,
              "flag": draw(st.sampled_from([0, 0, 0, 1, 2])), "language": draw(st.sampled_from(["JAVA", "CPP", 3])),
              "opaque": draw(st.integers(-2**31, 2**31 - 1)), "version": draw(st.integers(0, 500))}
    if draw(st.booleans()):
        header["remark"] = draw(st.one_of(st.none(), texts))
    items = draw(st.permutations(list(header.items())))
    body = draw(st.binary(max_size=40))
    if draw(st.booleans()):
        cmd = RemotingCommand(header["code"], header["opaque"], header["flag"], None, ext, body,
                              header["language"] if isinstance(header["language"], int) else 0, header["version"],
                              SerializeType.ROCKETMQ)
        return cmd.encode()[4:]
    return _json_frame(dict(items), body, ensure_ascii=draw(st.booleans()))


@settings(max_examples=400, deadline=None)
@given(request_frames())
def test_every_frame_the_compiled_reader_takes_reads_as_the_general_path_reads_it(payload):
    _same_as_general(payload)


def test_frames_damaged_anywhere_are_read_as_the_general_path_reads_them_or_left_to_it():
    rnd = random.Random(36)
    frames = [_json_frame(_java_v2(opaque=i)) for i in range(4)] + [_json_frame(_java_pull(), b"")] + \
        [RemotingCommand(310, 1, 0, None, _java_v2()["extFields"], b"b", 0, 407, SerializeType.ROCKETMQ).encode()[4:]]
    taken = 0
    for _ in range(6000):
        payload = bytearray(rnd.choice(frames))
        for _ in range(rnd.randint(1, 3)):
            at = rnd.randrange(len(payload))
            payload[at] = rnd.choice([rnd.randrange(256), ord('"'), ord("\\"), ord("}"), ord("0"), ord("-")])
        if rnd.random() < 0.2:
            del payload[rnd.randrange(len(payload)):]
        taken += _same_as_general(bytes(payload))
    assert taken > 1000  # most damage falls in a value the reader takes as it is (a topic, a body)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]), st.integers(-2**31, 2**31 - 1),
       st.text(alphabet="0123456789ABCDEF,", min_size=1, max_size=200), st.integers(-2**31, 2**31 - 1),
       st.one_of(st.integers(-2**63, 2**63 - 1), st.just(2**64)))
def test_send_ok_is_the_frame_the_general_encoder_writes(serialize_type, opaque, msg_id, queue_id, queue_offset):
    cmd = RemotingCommand(310, opaque, 0, None, {}, b"", 0, 407, serialize_type)
    ref = cmd.response(0, ext_fields={**SendMessageResponseHeader(msg_id, queue_id, queue_offset).to_ext_fields(),
                                      "MSG_REGION": "DefaultRegion", "TRACE_ON": "false"}).encode()
    assert request_frame.send_ok(cmd, msg_id, queue_id, queue_offset) in (ref, None if queue_offset >= 2**63 else ref)


def test_send_ok_leaves_a_message_id_that_needs_escaping_to_the_general_encoder():
    cmd = RemotingCommand(310, 1, 0, None, {}, b"")
    assert request_frame.send_ok(cmd, 'A"B', 0, 0) is None
    assert request_frame.send_ok(cmd, "\u00e9", 0, 0) is None


any_text = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]), st.integers(-2**16, 2**16),
       st.one_of(st.integers(-200, 200), st.sampled_from(list(range(14)))),
       st.one_of(st.integers(-2**16, 2**16), st.sampled_from([2**63, -2**63 - 1, 2**70])),
       st.integers(-2**40, 2**40), st.integers(-3, 3), st.one_of(st.none(), any_text),
       st.dictionaries(any_text, any_text, max_size=5), st.binary(max_size=8))
def test_the_compiled_head_is_the_general_encoders(serialize_type, code, language, version, opaque, flag, remark, ext,
                                                    body):
    """RemotingCommand.encode_head through remoting/_frame.c writes what its Python encoder writes, and raises what
    it raises (a field out of its range, a header that does not encode)."""
    import remoting.remoting_command as rc

    cmd = RemotingCommand(code, opaque, flag, remark, ext, body, language, version, serialize_type)

    def head():
        try:
            return cmd.encode_head()
        except Exception as e:
            return type(e)
    compiled = head()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(rc, "_frame", None)
        assert head() == compiled
