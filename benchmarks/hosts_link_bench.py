"""Reading a broker on another test host over a clean link and over one with 50 ms delay and 1% loss (netem), in
the same run. Hosts are network namespaces (tests/hosts/netns_hosts.py; root and iproute2 needed): a
broker on host B listening on 0.0.0.0 with its name server, the messages sent from host E, read on host D with the
Python client the Spark executors use (PullConsumer.read_range, pulls in flight). Prints rows/s for each link and
the ratio netem/clean; without netem in the kernel it says so and prints the clean row only.

    .venv/bin/python benchmarks/hosts_link_bench.py [--messages 200000]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "hosts"))

from netns_hosts import TestHosts, rmq, why_not  # noqa: E402

SEND = """
import sys
from rmq_client import Producer
n = int(sys.argv[2])
with Producer(sys.argv[1]) as p:
    p.create_topic("Link", 4)
    body = b"x" * 100
    for start in range(0, n, 1000):
        p.send_batch("Link", [body] * min(1000, n - start))
"""
READ = """
import json, sys, time
from rmq_client import PullConsumer
t = time.perf_counter()
rows = 0
with PullConsumer(sys.argv[1], "bench-%s" % sys.argv[2]) as pc:
    for mq, (lo, hi) in pc.queue_bounds("Link").items():
        rows += sum(rb.num_rows for rb in pc.read_range(mq, lo, hi))
print(json.dumps({"rows": rows, "seconds": time.perf_counter() - t}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=200_000)
    args = ap.parse_args()
    reason = why_not()
    if reason is not None:
        sys.exit(f"hosts_link_bench: {reason}")
    import json
    with tempfile.TemporaryDirectory(prefix="rmq-hosts-bench-") as root, TestHosts(["b", "d", "e"], ipv6=False) as h:
        conf = os.path.join(root, "broker.conf")
        with open(conf, "w") as f:
            f.write("maxTransferCountOnMessageInMemory = 4096\nmaxTransferBytesOnMessageInMemory = 8388608\n")
        _, out = rmq(h, "b", ["-s", os.path.join(root, "store"), "serve", "--config", conf, "--listen",
                              "0.0.0.0:10911", "--namesrv-listen", "0.0.0.0:9876"], os.path.join(root, "b.log"))
        sent = h.run("e", [sys.executable, "-c", textwrap.dedent(SEND), out["namesrv"], str(args.messages)],
                     timeout=600)
        assert sent.returncode == 0, sent.stderr[-2000:]

        def read(label: str) -> dict:
            r = h.run("d", [sys.executable, "-c", textwrap.dedent(READ), out["namesrv"], label], timeout=900)
            assert r.returncode == 0, r.stderr[-2000:]
            got = json.loads(r.stdout.strip().splitlines()[-1])
            assert got["rows"] == args.messages, got
            return got

        clean = read("clean")
        print(f"\nhosts_link_bench: {args.messages:,} messages of 100 bytes, broker on host B, read on host D")
        print(f"clean link        {clean['rows'] / clean['seconds']:>10,.0f} rows/s  ({clean['seconds']:.2f} s)")
        tc = h.tc("b", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "50ms", "loss", "1%")
        if tc.returncode != 0:
            print(f"50 ms + 1% loss   not measured: this kernel has no netem (tc: {tc.stderr.strip()})")
            return
        lossy = read("netem")
        print(f"50 ms + 1% loss   {lossy['rows'] / lossy['seconds']:>10,.0f} rows/s  ({lossy['seconds']:.2f} s)")
        print(f"netem/clean = {clean['seconds'] / lossy['seconds']:.2f}", flush=True)


if __name__ == "__main__":
    main()
