"""Messages for the Spark-against-stock-broker tests, sent by the stock Java producer, and the rows a stock Java
consumer's messages make (the oracle: what format("rmq") must return for the same selector)."""
from __future__ import annotations

import base64

# Properties the Java consumer adds on its side after a pull (PullAPIWrapper, ConsumeMessageService): not stored,
# so never in a row read from a broker.
CLIENT_SIDE_PROPERTIES = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}

COLORS = ("red", "green", "blue", "yellow")
BIG = 6000  # bodies over 4 KiB are compressed by the Java producer on single sends (compressMsgBodyOverHowmuch)


def message(topic: str, i: int) -> dict:
    m = {"topic": topic, "keys": f"k{i} g{i % 7}", "props": {"n": str(i), "color": COLORS[i % 4]},
         "body": f"message {i} " + "x" * (i % 50)}
    if i % 10 != 9:  # every tenth message has no tag
        m["tags"] = "abc"[i % 3]
    return m


def messages(topic: str, start: int, n: int, singles: int = 10, batch: int = 100) -> list[dict]:
    """The producer's input for messages start..start+n-1: `singles` single sends (the first with a body the
    producer compresses), then send(Collection) batches of `batch`."""
    msgs = [message(topic, i) for i in range(start, start + n)]
    if singles:
        msgs[0]["body"] = "big " * (BIG // 4)
    return msgs[:singles] + [{"batch": msgs[k:k + batch]} for k in range(singles, n, batch)]


def expected_row(m: dict) -> dict:
    """A stock consumer's message as a format("rmq") row (timestamps in epoch ms, keys split at spaces)."""
    return {
        "topic": m["topic"], "queue_id": m["queueId"], "queue_offset": m["queueOffset"],
        "commit_log_offset": m["commitLogOffset"], "msg_id": m["offsetMsgId"], "tags": m.get("tags"),
        "keys": m["keys"].split(" ") if m.get("keys") else [],
        "properties": {k: v for k, v in m["properties"].items() if k not in CLIENT_SIDE_PROPERTIES},
        "body": base64.b64decode(m["bodyBase64"]), "born_ms": m["bornTimestamp"], "store_ms": m["storeTimestamp"],
        "born_host": m["bornHost"], "store_host": m["storeHost"], "sys_flag": stored_sys_flag(m), "flag": m["flag"],
        "reconsume_times": m["reconsumeTimes"],
    }


def spark_rows(df) -> dict[str, dict]:
    """A format("rmq") DataFrame's rows by msg_id, in expected_row's shape."""
    rows = df.selectExpr("*", "unix_millis(born_timestamp) AS born_ms", "unix_millis(store_timestamp) AS store_ms") \
        .drop("born_timestamp", "store_timestamp").collect()
    out = {}
    for r in rows:
        d = r.asDict()
        d["body"] = bytes(d["body"])
        d["keys"] = list(d["keys"] or [])
        d["properties"] = dict(d["properties"] or {})
        assert d["msg_id"] not in out, f"message {d['msg_id']} read twice"
        out[d["msg_id"]] = d
    return out


COMPRESSED_FLAG = 0x1


def stored_sys_flag(m: dict) -> int:
    """The sys flag as the broker stored it. The 5.x Java client clears COMPRESSED (0x1) on a message whose body it
    decompressed (its ZLIB type bits 0x300 stay), the 4.9 client keeps it; Spark shows the stored flag with the body
    decompressed, as the 4.9 client does."""
    flag = m["sysFlag"]
    if flag & 0x700 and not flag & COMPRESSED_FLAG:  # a compression type without the bit: the 5.x client cleared it
        flag |= COMPRESSED_FLAG
    return flag


def expected_rows(consumed: list[dict]) -> dict[str, dict]:
    return {m["offsetMsgId"]: expected_row(m) for m in consumed}


def differences(got: dict[str, dict], want: dict[str, dict], limit: int = 5) -> list:
    """What differs between two row sets by msg_id: missing and extra ids, then (id, column, got, want)."""
    out: list = []
    if set(got) != set(want):
        out.append(("missing", sorted(set(want) - set(got))[:limit], "extra", sorted(set(got) - set(want))[:limit]))
    for k in sorted(set(got) & set(want)):
        for c, v in want[k].items():
            if got[k].get(c) != v:
                out.append((k, c, got[k].get(c), v))
                if len(out) >= limit:
                    return out
    return out
