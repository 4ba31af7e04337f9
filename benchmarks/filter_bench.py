"""Filter throughput: per-record vs vectorised SQL92 evaluation, and
consume-queue tag-code pruning.  Run by hand:

    .venv/bin/python benchmarks/filter_bench.py [--messages 1000000] [--per-record 100000]

Both paths start from the stored properties text (RocketMQ's `k\\x01v\\x02`):
the per-record path parses it into a dict and evaluates; the vectorised path
cuts the properties the selector reads out of the whole column in one pass
(rmq_common._native.property_columns) and evaluates over those string columns.  Figures are best of a few runs, as
wall-clock and as this
process's CPU time (the latter is steadier on a shared machine); one thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from filters import MessageFilter, parse_properties  # noqa: E402
from store.tag_hash import tags_hash_code  # noqa: E402

SELECTORS = [
    "a > 5",
    "(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)",
    "region = 'eu-west' AND price >= 100.5 AND NOT (status IN ('cancelled','refunded'))",
]

TAGS = ["TagA", "TagB", "TagC", "TagD"]
REGIONS = ["eu-west", "eu-central", "us-east", "us-west", "ap-south"]
STATUSES = ["paid", "pending", "cancelled", "refunded", "shipped"]


def make_properties(n: int, seed: int = 42) -> list[str]:
    """Realistic stored properties: system TAGS/KEYS/UNIQ_KEY plus user a, region, price, status."""
    rng = np.random.default_rng(seed)
    tags = rng.integers(0, len(TAGS), n)
    a = rng.integers(0, 10, n)
    region = rng.integers(0, len(REGIONS), n)
    price = rng.integers(0, 20000, n)
    status = rng.integers(0, len(STATUSES), n)
    uniq = rng.integers(0, 2**62, n)
    out = []
    for i in range(n):
        out.append(
            f"TAGS\x01{TAGS[tags[i]]}\x02KEYS\x01order-{i}\x02UNIQ_KEY\x017F0000011F9018B4AAC2{uniq[i]:016X}\x02"
            f"a\x01{a[i]}\x02region\x01{REGIONS[region[i]]}\x02price\x01{price[i] / 100:.2f}\x02"
            f"status\x01{STATUSES[status[i]]}\x02"
        )
    return out


def best_of(runs: int, fn):
    """(best wall-clock seconds, best CPU seconds of this process, result)."""
    best = best_cpu = float("inf")
    result = None
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = fn()
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best, best_cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--per-record", type=int, default=100_000, help="messages timed on the per-record path")
    parser.add_argument("--tag-codes", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    texts = make_properties(args.messages)
    column = pa.array(texts, type=pa.string())
    subset = texts[: args.per_record]
    print(f"messages: {args.messages:,} (properties text {column.nbytes / 1e6:.0f} MB); "
          f"per-record path timed on the first {len(subset):,}")

    for selector in SELECTORS:
        f = MessageFilter.by_sql(selector)

        def per_record():
            matched = f.is_matched_by_commit_log
            return [matched(parse_properties(t)) for t in subset]

        def vectorised():
            return f.properties_text_mask(column)

        t_row, cpu_row, row_decisions = best_of(args.runs, per_record)
        t_vec, cpu_vec, mask = best_of(args.runs, vectorised)
        if mask.slice(0, len(subset)).to_pylist() != row_decisions:
            raise SystemExit(f"MISMATCH between per-record and vectorised decisions for {selector!r}")
        row_rate = len(subset) / t_row
        vec_rate = args.messages / t_vec
        print(f"selector: {selector}")
        print(f"  matched: {mask.true_count / len(mask):.1%} of messages "
              f"(both paths agree on the first {len(subset):,})")
        print(f"  per-record evaluations/s (wall): {row_rate:,.0f}")
        print(f"  vectorised evaluations/s (wall): {vec_rate:,.0f}")
        print(f"  vectorised / per-record (wall): {vec_rate / row_rate:.1f}x")
        print(f"  per-record evaluations/s (cpu): {len(subset) / cpu_row:,.0f}")
        print(f"  vectorised evaluations/s (cpu): {args.messages / cpu_vec:,.0f}")
        print(f"  vectorised / per-record (cpu): {(args.messages / cpu_vec) / (len(subset) / cpu_row):.1f}x")

    rng = np.random.default_rng(1)
    pool = np.array([tags_hash_code(f"Tag{c}") for c in "ABCDEFGHIJKLMNOP"] + [0], dtype=np.int64)
    codes = pool[rng.integers(0, len(pool), args.tag_codes)]
    for selector in ["TagA || TagB", " || ".join(f"Tag{c}" for c in "ABCDEFGHIJKL")]:
        f = MessageFilter.by_tags(selector)
        t_prune, cpu_prune, keep = best_of(args.runs, lambda: f.consume_queue_mask(codes))
        label = f"consume-queue pruning, {len(f.pruner.codes)} tags, {keep.mean():.1%} kept"
        print(f"{label} (wall): {args.tag_codes / t_prune / 1e6:,.0f}M tag codes/s")
        print(f"{label} (cpu): {args.tag_codes / cpu_prune / 1e6:,.0f}M tag codes/s")


if __name__ == "__main__":
    main()
