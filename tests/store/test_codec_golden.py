"""Byte-exact records, computed by hand from RocketMQ's CommitLog layout table (not from our encoder)."""
import struct
import zlib

import pytest

from rmq_common import message_codec as codec
from store import record_encoder

BORN_TS = 1_700_000_000_123
STORE_TS = 1_700_000_000_456


def crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF


def hand_record(*, topic: bytes, body: bytes, props: bytes, queue_id=3, flag=7, queue_offset=42, physical=4096,
                sys_flag=0, born=(bytes([10, 0, 0, 1]), 5555), store=(bytes([10, 0, 0, 2]), 10911), reconsume=1,
                prepared=0, magic=0xDAA320A7) -> bytes:
    v2 = magic == 0xDAA320AB
    topic_field = (struct.pack(">h", len(topic)) if v2 else struct.pack(">b", len(topic))) + topic
    rest = (struct.pack(">I", magic) + struct.pack(">i", crc(body)) + struct.pack(">i", queue_id)
            + struct.pack(">i", flag) + struct.pack(">q", queue_offset) + struct.pack(">q", physical)
            + struct.pack(">i", sys_flag) + struct.pack(">q", BORN_TS) + born[0] + struct.pack(">i", born[1])
            + struct.pack(">q", STORE_TS) + store[0] + struct.pack(">i", store[1]) + struct.pack(">i", reconsume)
            + struct.pack(">q", prepared) + struct.pack(">i", len(body)) + body + topic_field
            + struct.pack(">h", len(props)) + props)
    return struct.pack(">i", 4 + len(rest)) + rest


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def encoder(request, monkeypatch):
    """Every golden record from both encoders: rmq_common/_encode.c and the numpy/Arrow fallback."""
    if request.param == "numpy":
        monkeypatch.setattr(record_encoder, "KERNELS", record_encoder.NumpyKernels())
    elif not record_encoder.available():
        pytest.skip("rmq_common._encode is not built here")


def encode(**kw):
    defaults = dict(queue_id=3, flag=7, queue_offset=42, physical_offset=4096, born_timestamp=BORN_TS,
                    born_host="10.0.0.1:5555", store_timestamp=STORE_TS, store_host="10.0.0.2:10911",
                    reconsume_times=1)
    defaults.update(kw)
    return record_encoder.encode_record(**defaults)


def test_version1_record_is_byte_exact():
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
    got = encode(topic="TopicTest", body=b"Hello RocketMQ", properties=props)
    want = hand_record(topic=b"TopicTest", body=b"Hello RocketMQ", props=props.encode())
    assert got == want
    assert len(got) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 14 + 1 + 9 + 2 + len(props)
    m = codec.decode_record(got)
    assert (m.topic, m.queue_id, m.flag, m.queue_offset, m.commit_log_offset) == ("TopicTest", 3, 7, 42, 4096)
    assert (m.tags, m.keys, m.body) == ("TagA", ["k1", "k2"], b"Hello RocketMQ")
    assert (m.born_host, m.store_host, m.reconsume_times) == ("10.0.0.1:5555", "10.0.0.2:10911", 1)
    assert (m.born_timestamp, m.store_timestamp) == (BORN_TS, STORE_TS)


def test_version2_record_for_long_topic_names():
    topic = "T" * 200  # longer than 127 bytes: int16 topic length and magic 0xdaa320ab
    got = encode(topic=topic, body=b"x", properties="")
    want = hand_record(topic=topic.encode(), body=b"x", props=b"", magic=0xDAA320AB)
    assert got == want
    assert codec.decode_record(got).topic == topic


def test_version1_reader_accepts_127_byte_topic():
    topic = "a" * 127
    got = encode(topic=topic, body=b"", properties="")
    assert got[4:8] == bytes.fromhex("daa320a7")
    assert codec.decode_record(got).topic == topic


def test_ipv6_hosts_set_sysflag_bits_and_use_16_bytes():
    born6 = bytes.fromhex("20010db8000000000000000000000001")
    store6 = bytes.fromhex("fe800000000000000000000000000002")
    got = encode(topic="T", body=b"b", properties="", born_host="[2001:db8::1]:1234",
                 store_host="[fe80::2]:10911")
    want = hand_record(topic=b"T", body=b"b", props=b"", sys_flag=0x30, born=(born6, 1234), store=(store6, 10911))
    assert got == want
    m = codec.decode_record(got)
    assert m.born_host == "[2001:db8::1]:1234" and m.store_host == "[fe80::2]:10911"
    assert m.msg_id == (store6 + struct.pack(">iq", 10911, 4096)).hex().upper()


def test_only_born_host_ipv6():
    born6 = bytes.fromhex("20010db8000000000000000000000001")
    got = encode(topic="T", body=b"b", properties="", born_host="[2001:db8::1]:1")
    assert got == hand_record(topic=b"T", body=b"b", props=b"", sys_flag=0x10, born=(born6, 1))


@pytest.mark.parametrize("kind,packer", [
    (codec.COMPRESSION_ZLIB, lambda b: zlib.compress(b)),
    (0, lambda b: zlib.compress(b)),  # 0 in bits 8-10 means zlib (older clients)
    (codec.COMPRESSION_LZ4, lambda b: codec.compress_body(b, codec.COMPRESSION_LZ4)),
    (codec.COMPRESSION_ZSTD, lambda b: codec.compress_body(b, codec.COMPRESSION_ZSTD)),
])
def test_compressed_bodies_are_stored_compressed_and_read_plain(kind, packer):
    plain = b"compress me " * 50
    stored = packer(plain)
    sys_flag = codec.COMPRESSED_FLAG | kind
    got = encode(topic="T", body=stored, properties="", sys_flag=sys_flag)
    assert got == hand_record(topic=b"T", body=stored, props=b"", sys_flag=sys_flag)
    m = codec.decode_record(got)
    assert m.body == plain and m.stored_body == stored and m.body_crc == crc(stored)


def test_lz4_frame_matches_a_known_encoding():
    # An LZ4 frame as the Java client's LZ4FrameOutputStream writes it starts with the frame magic 0x184D2204.
    stored = codec.compress_body(b"abc", codec.COMPRESSION_LZ4)
    assert stored[:4] == bytes.fromhex("04224d18")
    assert codec.decompress_body(stored, codec.COMPRESSED_FLAG | codec.COMPRESSION_LZ4) == b"abc"


@pytest.mark.parametrize("tx", [codec.TRANSACTION_NOT_TYPE, codec.TRANSACTION_PREPARED_TYPE,
                                codec.TRANSACTION_COMMIT_TYPE, codec.TRANSACTION_ROLLBACK_TYPE])
def test_transaction_flags_round_trip(tx):
    got = encode(topic="T", body=b"tx", properties="", sys_flag=tx, prepared_transaction_offset=77)
    assert got == hand_record(topic=b"T", body=b"tx", props=b"", sys_flag=tx, prepared=77)
    m = codec.decode_record(got)
    assert codec.transaction_type(m.sys_flag) == tx and m.prepared_transaction_offset == 77
    assert codec.is_dispatched(m.sys_flag) == (tx in (0x0, 0x8))


def test_end_of_file_blank_record():
    assert codec.blank_record(100) == struct.pack(">i", 100) + bytes.fromhex("cbd43194")


def test_message_id_is_store_host_port_and_offset_in_upper_hex():
    assert codec.create_message_id(bytes([192, 168, 0, 1]), 10911, 0x1234) == "C0A8000100002A9F0000000000001234"
    assert codec.decode_message_id("C0A8000100002A9F0000000000001234") == (bytes([192, 168, 0, 1]), 10911, 0x1234)


def test_properties_rules():
    # empty key or value dropped; a later duplicate wins; the last pair may lack its \x02
    text = "a\x011\x02\x01x\x02y\x01\x02a\x012\x02b\x01v\x01w\x02c\x013"
    assert codec.string_to_properties(text) == {"a": "2", "b": "v\x01w", "c": "3"}
    assert codec.properties_to_string({"k": "v", "TAGS": "t"}) == "k\x01v\x02TAGS\x01t\x02"


def test_decode_refuses_bad_crc_and_bad_magic():
    good = bytearray(encode(topic="T", body=b"payload", properties=""))
    bad = bytearray(good)
    bad[-1 - 2 - 1 - 1 - 3] ^= 0xFF  # inside the body
    with pytest.raises(codec.RecordFormatError, match="CRC"):
        codec.decode_record(bytes(bad))
    bad = bytearray(good)
    bad[4] = 0
    with pytest.raises(codec.RecordFormatError, match="magic"):
        codec.decode_record(bytes(bad))
    with pytest.raises(codec.RecordFormatError):
        codec.decode_record(bytes(good[:-3]))
