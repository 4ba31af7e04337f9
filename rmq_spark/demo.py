"""`make demo`: build a sample store under ./data/demo-store, summarise it per queue, and consume with filters.

(A later issue turns this into the Spark demo.) Fresh on every run; seconds, not minutes.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import time

from store import MessageStore, StoreConfig
from store.store_check import check_store

STORE_DIR = os.path.join("data", "demo-store")
TOPICS = {"Orders": 4, "Payments": 4, "Shipments": 2}
TAGS = ["TagA", "TagB", "TagC", "TagD"]
REGIONS = ["EU", "US", "APAC"]
MESSAGES_PER_TOPIC = {"Orders": 3000, "Payments": 1500, "Shipments": 500}
TAG_SELECTOR = "TagA || TagC"
SQL_SELECTOR = "region = 'EU' AND amount > 900"


def sample(topic: str, n: int, rng: random.Random) -> dict:
    """n messages of one topic: bodies, tags, keys and properties, one value per message."""
    bodies, tags, keys, props = [], [], [], []
    for i in range(n):
        order = f"{topic[0]}{i:05d}"
        region = rng.choice(REGIONS)
        amount = rng.randint(1, 1000)
        tags.append(rng.choice(TAGS))
        keys.append([order, f"customer-{rng.randint(1, 200)}"])
        props.append({"region": region, "amount": str(amount)})
        bodies.append(f'{{"id": "{order}", "topic": "{topic}", "amount": {amount}, "region": "{region}"}}')
    return {"bodies": bodies, "tags": tags, "keys": keys, "properties": props}


def table(rows, header) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in cells)


def pull_all(store, topic: str, message_filter) -> list:
    """Every matching message of a topic, pulled the way a RocketMQ consumer does (get_message loop)."""
    from store import GetMessageStatus
    got = []
    for qid in store.queues(topic):
        offset = store.min_offset(topic, qid)
        while True:
            r = store.get_message("demo", topic, qid, offset, 32, message_filter)
            got.extend(r.messages)
            if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE) \
                    or r.next_begin_offset == offset or r.next_begin_offset >= r.max_offset:
                break
            offset = r.next_begin_offset
    return got


def show(title: str, messages: list, expected: int) -> None:
    verdict = "as expected" if len(messages) == expected else f"EXPECTED {expected}"
    print(f"\n{title}: {len(messages)} messages ({verdict})")
    for m in messages[:5]:
        print(f"  {m.topic}/{m.queue_id}@{m.queue_offset}  tags={m.tags}  keys={' '.join(m.keys)}  "
              f"region={m.properties['region']} amount={m.properties['amount']}")
    if len(messages) > 5:
        print(f"  ... and {len(messages) - 5} more")


def main() -> int:
    started = time.monotonic()
    shutil.rmtree(STORE_DIR, ignore_errors=True)
    rng = random.Random(7)
    produced = {}
    # Small files, so the demo store rolls like a real one does at 1 GiB.
    config = StoreConfig(mappedFileSizeCommitLog=256 * 1024, mappedFileSizeConsumeQueue=20 * 1000)
    with MessageStore(STORE_DIR, config) as store:
        for topic, queues in TOPICS.items():
            store.create_topic(topic, queues)
            produced[topic] = sample(topic, MESSAGES_PER_TOPIC[topic], rng)
            store.put_batch(topic, produced[topic]["bodies"], tags=produced[topic]["tags"],
                            keys=produced[topic]["keys"], properties=produced[topic]["properties"])
        total = sum(MESSAGES_PER_TOPIC.values())
        print(f"Produced {total} messages into {os.path.abspath(STORE_DIR)} "
              f"({len(os.listdir(os.path.join(STORE_DIR, 'commitlog')))} commitlog files)\n")

        rows = []
        for topic in store.topics():
            for qid in store.queues(topic):
                lo, hi = store.min_offset(topic, qid), store.max_offset(topic, qid)
                rows.append([topic, qid, lo, hi, hi - lo])
        print(table(rows, ["TOPIC", "QUEUE", "MIN OFFSET", "MAX OFFSET", "MESSAGES"]))

        try:
            from filters import MessageFilter
        except ImportError:
            MessageFilter = None
        data = produced["Orders"]
        if MessageFilter is not None:
            wanted = set(t.strip() for t in TAG_SELECTOR.split("||"))
            got = pull_all(store, "Orders", MessageFilter.by_tags(TAG_SELECTOR))
            show(f"Orders with tag selector `{TAG_SELECTOR}`", got, sum(t in wanted for t in data["tags"]))
            got = pull_all(store, "Orders", MessageFilter.by_sql(SQL_SELECTOR))
            show(f"Orders with SQL92 selector `{SQL_SELECTOR}`", got,
                 sum(p["region"] == "EU" and int(p["amount"]) > 900 for p in data["properties"]))
        else:
            print("\n(the filters package is not installed: no filtered consume)")

    report = check_store(STORE_DIR)
    print(f"\n{report.summary()}")
    print(f"Done in {time.monotonic() - started:.1f} s. Try: rmq --store {STORE_DIR} consume --topic Orders "
          f"--tags '{TAG_SELECTOR}' --max 3")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
