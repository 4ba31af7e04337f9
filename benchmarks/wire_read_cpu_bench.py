"""CPU per row of a partition read, over the wire against the store directory, without Spark: what a Spark Python
worker spends reading a broker's range (rmq_log's ClusterRange: pulls, decode, the Spark batch) and `rmq serve` in
answering its pulls, beside the scan of the same store directory's range (StoreRange). Process CPU time, not wall
time, so a shared machine moves the figures less; the two reads are interleaved round after round.

    .venv/bin/python benchmarks/wire_read_cpu_bench.py --messages 1000000 --rounds 3
    .venv/bin/python benchmarks/wire_read_cpu_bench.py --profile /tmp/wire-read.svg   # py-spy of the worker's side

The messages are spark_source_bench.py's (100 B bodies, a key, a tag and two properties, 8 queues); every column
is read (the default schema), one queue's whole range per partition, pullBatchSize 4,096 (what kafka_bench's w
case asks).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_source_bench import QUEUES, TOPIC, _serve, _stop, build_store  # noqa: E402

from rmq_log.open_log import open_log  # noqa: E402
from rmq_log.reads import ReadSettings  # noqa: E402
from rmq_spark.read_policy import POLICY  # noqa: E402
from rmq_spark.schema import FULL  # noqa: E402


def process_cpu(pid: int) -> float:
    """CPU seconds of a process: the sum of its threads' time on a CPU, in nanoseconds (schedstat), where the
    kernel keeps it; else user + system time in clock ticks (10 ms: 10 ns a row of 1M rows)."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (FileNotFoundError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_all(readers) -> int:
    return sum(b.num_rows for r in readers for b in r.read())


def range_readers(path, namesrv, pull_batch_size: int) -> list:
    """Every queue's whole range as the source's readers read it, from the directory or through the brokers."""
    settings = ReadSettings(group="cpu-bench", policy=POLICY, pull_batch_size=pull_batch_size)
    reads = open_log(store=path, namesrv=namesrv).reads(settings)
    queues = [(TOPIC, q) for q in reads.queues(TOPIC)]
    ranges = [(t, q, mn, mx) for (t, q), (mn, mx) in reads.queue_bounds(queues).items()]
    return reads.range_readers(ranges, None, None, None, FULL, True)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pull-batch-size", type=int, default=4096)
    ap.add_argument("--dir", default="/tmp/rmq-wire-read-cpu")
    ap.add_argument("--profile", metavar="FILE", help="py-spy's profile of the wire read alone (pip install py-spy): a "
                                                      "flame graph for FILE.svg, else collapsed stacks")
    args = ap.parse_args()

    store_path = os.path.join(args.dir, "store")
    build_store(store_path, args.messages)
    server, namesrv = _serve(store_path, os.path.join(args.dir, "serve"))
    try:
        local = range_readers(store_path, None, args.pull_batch_size)
        wire = range_readers(None, namesrv, args.pull_batch_size)
        assert len(local) == len(wire) == QUEUES
        read_all(local[:1])  # imports, the store's maps and the connection made before timing
        read_all(wire[:1])
        if args.profile:
            return _profile(args, wire)
        for r in range(1, args.rounds + 1):
            for name, readers in (("directory", local), ("wire", wire)):
                load = os.getloadavg()[0]
                c0, s0, t0 = time.process_time(), process_cpu(server.pid), time.perf_counter()
                rows = read_all(readers)
                c1, s1, t1 = time.process_time(), process_cpu(server.pid), time.perf_counter()
                served = f", rmq serve {(s1 - s0) / rows * 1e9:5.0f} ns/row" if name == "wire" else ""
                print(f"round {r} {name:9} {rows:,} rows: worker {(c1 - c0) / rows * 1e9:5.0f} ns/row{served}, "
                      f"wall {t1 - t0:.2f} s, load {load:.1f}; {rows / (c1 - c0):,.0f} rows/s of worker CPU",
                      flush=True)
    finally:
        _stop(server)
    return 0


def _profile(args, wire) -> int:
    """The wire read alone in a child under py-spy (native frames too)."""
    code = ("import pickle, sys\n"
            "readers = pickle.load(open(sys.argv[1], 'rb'))\n"
            "for _ in range(3):\n    sum(b.num_rows for r in readers for b in r.read())\n")
    import pickle
    shipped = os.path.join(args.dir, "wire-parts.pickle")
    with open(shipped, "wb") as f:
        pickle.dump(wire, f)
    raw = ["--format", "raw"] if not args.profile.endswith(".svg") else []  # collapsed stacks, one per line
    subprocess.run(["py-spy", "record", "--native", "-r", "200", *raw, "-o", args.profile, "--", sys.executable, "-c",
                    code, shipped], check=True)
    print(f"flame graph: {args.profile}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
