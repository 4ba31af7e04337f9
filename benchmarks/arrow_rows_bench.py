"""Spark's JVM half of a read alone: the Arrow batches the source's Python worker sends for one queue, turned into
rows as Spark turns them (benchmarks/java/ArrowRows.java runs MapInBatchEvaluatorFactory's steps: the struct column
split, each row through an UnsafeProjection), in JVMs with Arrow Java's per-value checks on (Java's defaults) and
off (conf/spark-defaults.conf's options), taking turns. Figures are the task's thread CPU per row, which moves
little with other load on the machine: the least and the median over the warm rounds.

Columns: all 16 (a stream's default), all but `properties`, and includeProperties=false (no `keys` either).

    .venv/bin/python benchmarks/arrow_rows_bench.py [--messages 1000000] [--rounds 45] [--repeat 2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from javac_cache import compiled  # noqa: E402
from spark_source_bench import TOPIC, build_store  # noqa: E402

# What Spark's launcher opens for Arrow's and Spark's direct memory access (JavaModuleOptions, the ones used here).
OPENS = [f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in ("java.lang", "java.nio", "java.util", "sun.nio.ch",
                                                            "jdk.internal.misc")]


def columns_variants() -> dict:
    from pyspark.sql.types import StructType

    from rmq_spark.schema import FULL, SCHEMA, default_schema, select
    return {"all 16 columns": FULL,
            "all but properties": select(StructType([f for f in SCHEMA.fields if f.name != "properties"])),
            "includeProperties=false": select(default_schema(False))}


def write_stream(store: str, selection, out: str) -> int:
    """Queue 0's batches as the source's worker yields them, wrapped in one struct column as pyspark's worker sends
    them to the JVM, as an Arrow stream file; returns the rows."""
    import pyarrow as pa
    from pyspark.sql.conversion import ArrowBatchTransformer

    from rmq_log.store_reads import StoreRange
    from rmq_spark.read_policy import POLICY
    batches = [ArrowBatchTransformer.wrap_struct(b)
               for b in StoreRange(store, TOPIC, 0, 0, 1 << 62, selection, POLICY).read()]
    with pa.OSFile(out, "wb") as f, pa.ipc.new_stream(f, batches[0].schema) as w:
        for b in batches:
            w.write_batch(b)
    return sum(b.num_rows for b in batches)


def run_jvm(classes: str, spark_jars: str, options: list[str], rounds: int, files: list[str]) -> dict:
    out = subprocess.run(["java", "-Xmx2g", *OPENS, *options, "-cp", f"{classes}:{os.path.join(spark_jars, '*')}",
                          "ArrowRows", str(rounds), *files], capture_output=True, text=True, check=True, timeout=3600)
    got = {}
    for line in out.stdout.splitlines():
        path, _, least, median = line.split("\t")
        got[path] = (float(least), float(median))
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000, help="the store's messages (queue 0 holds 1/8)")
    ap.add_argument("--dir", default="/tmp/rmq-arrow-rows-bench")
    ap.add_argument("--rounds", type=int, default=45, help="reads of each file per JVM")
    ap.add_argument("--repeat", type=int, default=2, help="JVMs per setting, the settings taking turns")
    args = ap.parse_args()
    import pyspark

    from rmq_cli.spark_java_options import ARROW_JAVA_OPTIONS
    spark_jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    store = os.path.join(args.dir, "store")
    os.makedirs(args.dir, exist_ok=True)
    build_store(store, args.messages)
    files, rows = {}, 0
    for i, (name, selection) in enumerate(columns_variants().items()):
        files[name] = os.path.join(args.dir, f"queue0-{i}.arrow")
        rows = write_stream(store, selection, files[name])
    classes = compiled(os.path.join(HERE, "java", "ArrowRows.java"), spark_jars, args.dir)
    settings = {"checks on": [], "checks off": list(ARROW_JAVA_OPTIONS)}
    best: dict = {}
    for r in range(args.repeat):
        for setting, options in settings.items():
            got = run_jvm(classes, spark_jars, options, args.rounds, list(files.values()))
            load = os.getloadavg()[0]
            for name, path in files.items():
                least, median = got[path]
                print(f"  round {r + 1} {setting:<10} {name:<24} least {least:6.0f} ns/row, median {median:6.0f} "
                      f"(load {load:.1f})", flush=True)
                prev = best.get((setting, name))
                best[(setting, name)] = (min(least, prev[0]), min(median, prev[1])) if prev else (least, median)
    print(f"\narrow_rows_bench: {rows:,} rows of queue 0 ({args.messages:,} messages), Spark's Arrow-to-rows pass, "
          f"thread CPU per row, least (and median) over {args.repeat} JVMs per setting")
    for name in files:
        on, off = best[("checks on", name)], best[("checks off", name)]
        print(f"{name:<24} checks on {on[0]:6.0f} ({on[1]:.0f}) ns/row, off {off[0]:6.0f} ({off[1]:.0f}) ns/row: "
              f"off/on {off[0] / on[0]:.2f}")


if __name__ == "__main__":
    main()
