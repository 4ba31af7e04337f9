"""SIGKILL trials: writers appending under SYNC_FLUSH are killed at random moments; after each kill the store
must open, pass `rmq check`, hold every acknowledged message exactly once, and return no torn record.

    .venv/bin/python benchmarks/crash_bench.py [--trials 200] [--seed 1]
    .venv/bin/python benchmarks/crash_bench.py --sync-vs-async   # SYNC_FLUSH vs ASYNC_FLUSH append rate

A child process (this file with --child) opens the store (so it may be killed during its own recovery of the
previous crash) and appends batches of 1..8 (sometimes 50..400, spanning files) messages, each carrying UNIQ_KEY
"<child>-<seq>" and a body derived
from it; after put_batch returns it appends the keys to an ack file. Some trials run two writers at once and
kill one first, so the survivor repairs the dead writer's torn append under the lock, as a Spark executor would.
After a kill the parent alternates between verifying read-only (no repair), reopening read-write (recovery +
check), and leaving the recovery to the next child. The unit suite runs a handful of these trials through
run_trials(); this script runs hundreds and prints the totals.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Small files so appends roll commitlog and consume-queue files often (rolls are where torn writes hurt).
CRASH_CONFIG = dict(mappedFileSizeCommitLog=16 * 1024, mappedFileSizeConsumeQueue=20 * 64,
                    flushDiskType="SYNC_FLUSH", defaultTopicQueueNums=3)
TOPICS = ("CrashA", "CrashB")


def make_body(key: str) -> bytes:
    n = sum(map(ord, key)) % 300
    return (key + ":").encode() + bytes((i * 7 + len(key)) % 251 for i in range(n))


# -- the child: append until killed -------------------------------------------------------------------------

def child_main() -> None:
    """Import everything, say "ready", wait for the job on stdin (so the parent can start children ahead of
    time and kill them at a moment that does not include interpreter start-up), then append until killed."""
    import json
    import logging

    from store import MessageStore, StoreConfig
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    print("ready", flush=True)
    job = json.loads(sys.stdin.readline())
    store_dir, ack_path, child_id = job["store"], job["ack"], job["id"]
    rng = random.Random(job["seed"])
    ack = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    with MessageStore(store_dir, StoreConfig(**CRASH_CONFIG)) as store:
        seq = 0
        while True:
            n = rng.randint(1, 8) if rng.random() < 0.8 else rng.randint(50, 400)  # big ones span files
            keys = [f"{child_id}-{seq + i}" for i in range(n)]
            topic = [rng.choice(TOPICS) for _ in keys]
            store.put_batch(topic, [make_body(k) for k in keys], tags=[rng.choice("ab") for _ in keys],
                            properties=[{"UNIQ_KEY": k, "seq": str(seq + i), "child": child_id}
                                        for i, k in enumerate(keys)])
            os.write(ack, "".join(k + "\n" for k in keys).encode())  # acknowledged: put_batch returned
            seq += n


# -- the parent ---------------------------------------------------------------------------------------------

@dataclass
class Totals:
    trials: int = 0
    kills: int = 0
    acknowledged: int = 0
    lost: int = 0
    duplicated: int = 0
    torn: int = 0
    order_errors: int = 0
    check_failures: int = 0
    recoveries: int = 0
    tails_cut: int = 0       # recoveries that cut a torn record
    redispatched: int = 0    # recoveries that wrote units a dead writer did not
    problems: list = field(default_factory=list)

    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.torn or self.order_errors or self.check_failures)


class _Children:
    """Writers started ahead of time (interpreter start-up takes ~1 s), each waiting for its job."""

    def __init__(self, log_dir: str):
        self.ready: list = []
        self.log_dir = log_dir
        self.count = 0

    def _start(self):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.count += 1
        err = open(os.path.join(self.log_dir, f"child-{self.count}.log"), "wb")
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=err, env=env)
        err.close()
        p.log_path = err.name
        return p

    def fill(self, n: int) -> None:
        while len(self.ready) < n:
            self.ready.append(self._start())

    def take(self, store_dir: str, ack_path: str, child_id: str, seed: int):
        import json
        self.fill(1)
        p = self.ready.pop(0)
        p.stdout.readline()  # "ready"
        p.stdin.write((json.dumps({"store": store_dir, "ack": ack_path, "id": child_id, "seed": seed}) + "\n")
                      .encode())
        p.stdin.flush()
        return p

    def close(self) -> None:
        for p in self.ready:
            p.kill()
            p.wait()
            p.stdin.close()
            p.stdout.close()
        self.ready = []


def _count_repairs(log_path: str, totals: Totals) -> None:
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    totals.tails_cut += text.count("cutting a torn")
    totals.redispatched += text.count("re-dispatching")


def read_acks(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            data = f.read().decode()
    except FileNotFoundError:
        return []
    lines = data.split("\n")
    return [x for x in lines[:-1] if x]  # the last piece has no newline: a torn ack, not an acknowledgement


def verify(store_dir: str, acked: set, totals: Totals, *, read_only: bool, full_get: bool = False) -> None:
    """Every acknowledged message exactly once, bodies intact, per-queue order = each writer's order."""
    from store import GetMessageStatus, MessageStore, StoreConfig
    seen: dict[str, int] = {}
    with MessageStore(store_dir, StoreConfig(**CRASH_CONFIG), read_only=read_only) as store:
        for topic in store.topics():
            for qid in store.queues(topic):
                last_seq: dict[str, int] = {}
                expect_qo = store.min_offset(topic, qid)
                for batch in store.scan(topic, qid, 0):
                    props = batch.column("properties").to_pylist()
                    bodies = batch.column("body").to_pylist()
                    qos = batch.column("queue_offset").to_pylist()
                    for p, body, qo in zip(props, bodies, qos):
                        d = dict(p)
                        key = d.get("UNIQ_KEY", "")
                        if qo != expect_qo:
                            totals.order_errors += 1
                            totals.problems.append(f"{topic}/{qid}: queue offset {qo}, expected {expect_qo}")
                        expect_qo = qo + 1
                        if body != make_body(key) or d.get("seq") != key.rsplit("-", 1)[-1]:
                            totals.torn += 1
                            totals.problems.append(f"{topic}/{qid}@{qo}: torn or foreign record {key!r}")
                            continue
                        seen[key] = seen.get(key, 0) + 1
                        child, seq = d["child"], int(d["seq"])
                        if last_seq.get(child, -1) >= seq:
                            totals.order_errors += 1
                            totals.problems.append(f"{topic}/{qid}@{qo}: {key} after seq {last_seq[child]}")
                        last_seq[child] = seq
                # get_message over the tail (all of it when full_get): the pull path must agree
                mx = store.max_offset(topic, qid)
                off = 0 if full_get else max(store.min_offset(topic, qid), mx - 40)
                while off < mx:
                    r = store.get_message("crash", topic, qid, off, 32)
                    if r.status != GetMessageStatus.FOUND:
                        totals.problems.append(f"{topic}/{qid}@{off}: get_message {r.status}")
                        totals.torn += 1
                        break
                    for m in r.messages:
                        key = m.properties.get("UNIQ_KEY", "")
                        if m.body != make_body(key):
                            totals.torn += 1
                            totals.problems.append(f"{topic}/{qid}@{m.queue_offset}: torn via get_message")
                    off = r.next_begin_offset
    dup = [k for k, c in seen.items() if c > 1]
    lost = [k for k in acked if k not in seen]
    totals.duplicated += len(dup)
    totals.lost += len(lost)
    if dup:
        totals.problems.append(f"duplicated: {dup[:5]}")
    if lost:
        totals.problems.append(f"lost: {sorted(lost)[:5]}")


def check(store_dir: str, totals: Totals) -> None:
    from store import StoreConfig
    from store.store_check import check_store
    report = check_store(store_dir, StoreConfig(**CRASH_CONFIG))
    if not report.ok:
        totals.check_failures += 1
        totals.problems.append("rmq check: " + report.summary())


def run_trials(trials: int, seed: int = 1, work_dir: str | None = None, epoch: int = 20,
               max_delay: float = 0.4, verbose: bool = False, min_delay: float = 0.0) -> Totals:
    from store import MessageStore, StoreConfig
    rng = random.Random(seed)
    own = work_dir is None
    work_dir = work_dir or tempfile.mkdtemp(prefix="rmq-crash-")
    totals = Totals()
    acked: set = set()
    store_dir = None
    children = _Children(work_dir)
    import logging

    class _CountRepairs(logging.Handler):  # the parent's own recoveries
        def emit(self, record):
            msg = record.getMessage()
            totals.tails_cut += "cutting a torn" in msg
            totals.redispatched += "re-dispatching" in msg

    store_log = logging.getLogger("store.recovery")
    handler = _CountRepairs(logging.INFO)
    store_log.addHandler(handler)
    store_log.setLevel(logging.INFO)
    try:
        for trial in tqdm(range(trials), desc="SIGKILL trials", leave=False, disable=None):
            if trial % epoch == 0:
                if store_dir is not None:
                    _final(store_dir, acked, totals)
                store_dir = os.path.join(work_dir, f"store-{trial // epoch}")
                acked = set()
            ack_paths = []
            writers = 2 if trial % 4 == 3 else 1
            procs = []
            for w in range(writers):
                ack_path = os.path.join(work_dir, f"ack-{trial}-{w}")
                ack_paths.append(ack_path)
                procs.append(children.take(store_dir, ack_path, f"t{trial}w{w}", rng.randrange(1 << 30)))
            time.sleep(rng.uniform(min_delay, max_delay))
            procs[0].kill()
            procs[0].wait()
            if writers == 2:  # the survivor repairs whatever the first one tore, then dies too
                time.sleep(rng.uniform(0.05, max_delay))
                procs[1].kill()
                procs[1].wait()
            totals.kills += writers
            children.fill(2)  # the next trial's writers start their interpreters while this one is verified
            for p in procs:
                p.stdin.close()
                p.stdout.close()
                _count_repairs(p.log_path, totals)
            for ack_path in ack_paths:
                keys = read_acks(ack_path)
                acked.update(keys)
                totals.acknowledged += len(keys)
            if not os.path.isdir(os.path.join(store_dir, "commitlog")):
                totals.trials += 1
                continue  # killed before the store was even created
            mode = trial % 3
            if mode == 0:
                verify(store_dir, acked, totals, read_only=True)
            elif mode == 1:
                with MessageStore(store_dir, StoreConfig(**CRASH_CONFIG)):
                    totals.recoveries += 1
                check(store_dir, totals)
                verify(store_dir, acked, totals, read_only=False)
            totals.trials += 1
            if verbose and (trial + 1) % 10 == 0:
                print(f"  {trial + 1} trials, {totals.acknowledged} acknowledged, lost {totals.lost}, "
                      f"duplicated {totals.duplicated}, torn {totals.torn}", flush=True)
        if store_dir is not None:
            _final(store_dir, acked, totals)
    finally:
        store_log.removeHandler(handler)
        children.close()
        if own and totals.ok():
            shutil.rmtree(work_dir, ignore_errors=True)
        elif not totals.ok():
            totals.problems.append(f"stores kept in {work_dir}")
    return totals


def _final(store_dir: str, acked: set, totals: Totals) -> None:
    if not os.path.isdir(os.path.join(store_dir, "commitlog")):
        return
    from store import MessageStore, StoreConfig
    with MessageStore(store_dir, StoreConfig(**CRASH_CONFIG)):
        totals.recoveries += 1
    check(store_dir, totals)
    verify(store_dir, acked, totals, read_only=False, full_get=True)


# -- many writers, many readers ----------------------------------------------------------------------------

CONCURRENCY_CONFIG = dict(mappedFileSizeCommitLog=256 * 1024, mappedFileSizeConsumeQueue=20 * 1000)

_WRITER = """
import random, sys
from store import MessageStore, StoreConfig
path, wid, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(int(wid[1:]))
with MessageStore(path, StoreConfig(mappedFileSizeCommitLog=256 * 1024, mappedFileSizeConsumeQueue=20000)) as s:
    seq = 0
    while seq < total:
        n = min(total - seq, 1 if rng.random() < 0.3 else rng.randint(2, 40))
        topics = [rng.choice(["C1", "C2"]) for _ in range(n)]
        if n == 1:
            s.put(topics[0], b"%s-%d" % (wid.encode(), seq), properties={"w": wid, "seq": str(seq)})
        else:
            s.put_batch(topics, [b"%s-%d" % (wid.encode(), seq + i) for i in range(n)],
                        properties=[{"w": wid, "seq": str(seq + i)} for i in range(n)])
        seq += n
"""

# A reader opened before any write, with the default config (as a Spark reader would be): it must find the
# file sizes the writers use, and never see a unit before its record.
_READER = """
import json, os, sys, time
from store import GetMessageStatus, MessageStore
path, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
seen, problems, last = {}, [], {}
with MessageStore(path, read_only=True) as s:
    pos = {(t, q): 0 for t in ("C1", "C2") for q in range(4)}
    def take(t, q, qo, props, body):
        w, seq = props["w"], int(props["seq"])
        if body != b"%s-%d" % (w.encode(), seq):
            problems.append(f"torn {t}/{q}@{qo}")
        if qo != pos[(t, q)]:
            problems.append(f"gap {t}/{q}: {qo} after {pos[(t, q)]}")
        if last.get((t, q, w), -1) >= seq:
            problems.append(f"order {t}/{q}@{qo}: {w} {seq}")
        last[(t, q, w)] = seq
        pos[(t, q)] = qo + 1
        seen[f"{w}-{seq}"] = seen.get(f"{w}-{seq}", 0) + 1
    while True:
        done = os.path.exists(os.path.join(path, "writers-done"))
        before = sum(pos.values())
        for (t, q) in list(pos):
            if mode == "scan":
                for b in s.scan(t, q, pos[(t, q)]):
                    for row in b.select(["queue_offset", "properties", "body"]).to_pylist():
                        take(t, q, row["queue_offset"], dict(row["properties"]), row["body"])
            else:
                r = s.get_message("readers", t, q, pos[(t, q)], 32)
                for m in r.messages:
                    take(t, q, m.queue_offset, m.properties, m.body)
                if r.status not in (GetMessageStatus.FOUND, GetMessageStatus.OFFSET_OVERFLOW_ONE,
                                    GetMessageStatus.NO_MESSAGE_IN_QUEUE):
                    problems.append(f"{t}/{q}@{pos[(t, q)]}: {r.status}")
        if done and all(pos[k] >= s.max_offset(*k) for k in pos):
            break
        if sum(pos.values()) == before:
            time.sleep(0.002)
with open(out, "w") as f:
    json.dump({"seen": seen, "problems": problems[:20]}, f)
"""


def concurrency_run(store_dir: str, writers: int = 4, per_writer: int = 10_000) -> dict:
    """`writers` processes append per_writer messages each into topics C1/C2 (4 queues each) while a
    get_message reader and a scan reader tail every queue. Returns what each reader saw and the store's
    final contents per queue: {"readers": {mode: {"seen": {key: count}, "problems": [...]}},
    "queues": {(topic, qid): [(writer, seq), ...] in queue order}, "seconds": wall time of the writes}."""
    import json

    from store import MessageStore, StoreConfig
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with MessageStore(store_dir, StoreConfig(**CONCURRENCY_CONFIG)) as s:
        s.create_topic("C1", 4)
        s.create_topic("C2", 4)
    readers = {mode: subprocess.Popen([sys.executable, "-c", _READER, store_dir, mode,
                                       os.path.join(store_dir, f"reader-{mode}.json")], env=env)
               for mode in ("get_message", "scan")}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, store_dir, f"w{i}", str(per_writer)], env=env)
             for i in range(writers)]
    codes = [p.wait(timeout=600) for p in procs]
    seconds = time.perf_counter() - t0
    open(os.path.join(store_dir, "writers-done"), "w").close()
    reader_codes = {m: p.wait(timeout=600) for m, p in readers.items()}
    if any(codes) or any(reader_codes.values()):
        raise RuntimeError(f"writer exit codes {codes}, reader exit codes {reader_codes}")
    out = {"readers": {}, "queues": {}, "seconds": seconds}
    for mode in readers:
        with open(os.path.join(store_dir, f"reader-{mode}.json")) as f:
            out["readers"][mode] = json.load(f)
    with MessageStore(store_dir, StoreConfig(**CONCURRENCY_CONFIG), read_only=True) as s:
        for t in ("C1", "C2"):
            for q in range(4):
                rows = []
                expect = 0
                for b in s.scan(t, q, 0):
                    for qo, props in zip(b.column("queue_offset").to_pylist(), b.column("properties").to_pylist()):
                        if qo != expect:
                            raise AssertionError(f"{t}/{q}: queue offset {qo}, expected {expect}")
                        expect += 1
                        p = dict(props)
                        rows.append((p["w"], int(p["seq"])))
                out["queues"][(t, q)] = rows
    return out


# -- SYNC_FLUSH vs ASYNC_FLUSH append throughput -------------------------------------------------------------

def sync_vs_async(messages: int = 3000, body_size: int = 100, batch: int = 1) -> dict:
    """Appends of `batch` messages per put_batch under each flush mode, in the same run."""
    from store import MessageStore, StoreConfig
    out = {}
    for mode in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        d = tempfile.mkdtemp(prefix="rmq-flush-")
        try:
            with MessageStore(d, StoreConfig(flushDiskType=mode, mappedFileSizeCommitLog=64 << 20)) as s:
                body = b"x" * body_size
                s.put_batch("Flush", [body] * batch)  # warm-up: topic creation, first file
                t0 = time.perf_counter()
                for _ in range(messages // batch):
                    s.put_batch("Flush", [body] * batch)
                dt = time.perf_counter() - t0
            out[mode] = (messages // batch) * batch / dt
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-delay", type=float, default=0.4, help="kill within this many seconds of start")
    ap.add_argument("--sync-vs-async", action="store_true")
    ap.add_argument("--concurrency", action="store_true", help="4 writers x 10,000 messages, 2 readers")
    args = ap.parse_args(argv)
    if args.sync_vs_async:
        for batch in (1, 32):
            r = sync_vs_async(messages=3000 if batch == 1 else 32000, batch=batch)
            print(f"append, 100-byte bodies, {batch} per put_batch: ASYNC_FLUSH {r['ASYNC_FLUSH']:,.0f} msg/s, "
                  f"SYNC_FLUSH {r['SYNC_FLUSH']:,.0f} msg/s, SYNC/ASYNC ratio {r['SYNC_FLUSH'] / r['ASYNC_FLUSH']:.3f}")
        return 0
    if args.concurrency:
        d = tempfile.mkdtemp(prefix="rmq-conc-")
        try:
            r = concurrency_run(d, 4, 10_000)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        expected = {f"w{i}-{q}" for i in range(4) for q in range(10_000)}
        for mode, res in r["readers"].items():
            ok = set(res["seen"]) == expected and set(res["seen"].values()) == {1} and not res["problems"]
            print(f"reader {mode}: {len(res['seen'])} distinct, exactly once and in order: {ok} {res['problems'][:3]}")
        stored = [x for rows in r["queues"].values() for x in rows]
        order = all(all(a[1] < b[1] for a, b in zip([x for x in rows if x[0] == w],
                                                       [x for x in rows if x[0] == w][1:]))
                    for rows in r["queues"].values() for w in {x[0] for x in rows})
        print(f"4 writers x 10,000 messages in {r['seconds']:.1f} s ({40_000 / r['seconds']:,.0f} msg/s); stored "
              f"{len(stored)} ({len(set(stored))} distinct); per-queue order = append order: {order}")
        return 0
    t0 = time.perf_counter()
    totals = run_trials(args.trials, seed=args.seed, max_delay=args.max_delay, verbose=True)
    dt = time.perf_counter() - t0
    print(f"trials run: {totals.trials} ({totals.kills} SIGKILLs, {totals.recoveries} recoveries, {dt:.0f} s)")
    print(f"acknowledged messages: {totals.acknowledged}")
    print(f"lost: {totals.lost} (must be 0)")
    print(f"duplicated: {totals.duplicated} (must be 0)")
    print(f"torn records returned: {totals.torn} (must be 0)")
    print(f"order errors: {totals.order_errors}; rmq check failures: {totals.check_failures}; "
          f"repairs seen in writers: {totals.tails_cut} torn tails cut, {totals.redispatched} re-dispatches")
    for p in totals.problems[:20]:
        print("  " + p)
    return 0 if totals.ok() else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main()
    else:
        sys.exit(main())
