"""The Spark job of test_across_hosts.py, run on its own test host (`ip netns exec`) against brokers on others.
Commands on stdin, one JSON line answered on stdout for each:
  start NAMESRV          topics Hosts (on every broker) and HostsOut; a stream of Hosts into Parquet; answers once it
                         runs
  wait COUNT             until the stream has written COUNT rows (or 180 s)
  finish                 stops the stream and reports its output (rows, duplicates, lost, store and born hosts);
                         reads Hosts with a tag filter and a SQL92 filter (batch queries) and reports them alike;
                         then the wire sink writes Hosts to HostsOut (availableNow) and a pull reads HostsOut back
The master is RMQ_HOSTS_MASTER (default local[2])."""
from __future__ import annotations

import json
import os
import sys
import time

N_TOTAL = int(os.environ.get("RMQ_HOSTS_TOTAL", "800"))
FILTERS = {"tags": ("tags", "TagA"), "sql": ("sql", "seq BETWEEN 100 AND 199")}


def expected(name: str) -> set[str]:
    if name == "tags":
        return {f"cpp-{i}" for i in range(N_TOTAL) if i % 4 == 0}
    if name == "sql":
        return {f"cpp-{i}" for i in range(100, 200)}
    return {f"cpp-{i}" for i in range(N_TOTAL)}


def _bodies(namesrv: str, topic: str) -> list[str]:
    from rmq_client import PullConsumer
    out: list[str] = []
    with PullConsumer(namesrv, "hosts-check") as pc:
        for mq, (lo, hi) in pc.queue_bounds(topic).items():
            out.extend(b.decode() for rb in pc.read_range(mq, lo, hi) for b in rb.column("body").to_pylist())
    return out


def _slow_worker(error) -> bool:
    """Spark waits 10 s (fixed) for a Python worker it starts to connect back; on a loaded 2-core machine one can
    take longer. A query that fails so is restarted from its checkpoint (reported), as a user would."""
    return "Python worker failed to connect back" in str(error)


def _collect(frame, restarts: list[str]) -> list:
    for attempt in range(3):
        try:
            return frame.collect()
        except Exception as e:
            if not _slow_worker(e) or attempt == 2:
                raise
            restarts.append(str(e).splitlines()[0])
    return []


def main(root: str) -> None:
    from pyspark.sql import SparkSession

    from rmq_client import Producer
    spark = (SparkSession.builder.master(os.environ.get("RMQ_HOSTS_MASTER", "local[2]")).appName("rmq-hosts")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             # Python workers start slowly on a loaded 2-core machine: more than the default 15 s to connect back
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable).getOrCreate())
    queries: dict = {}
    namesrv = ""
    restarts: list[str] = []

    def count(name: str) -> int:
        path = os.path.join(root, name)
        try:
            return spark.read.parquet(path).count()
        except Exception:  # nothing committed yet: no file to read the schema from
            return 0

    def answer(obj: dict) -> None:
        print(json.dumps(obj), flush=True)

    try:
        for line in sys.stdin:
            cmd = line.split()
            if not cmd:
                continue
            if cmd[0] == "start":
                namesrv = cmd[1]
                with Producer(namesrv) as p:
                    p.create_topic("Hosts", 2)
                    p.create_topic("HostsOut", 2)

                def start_stream():
                    return (spark.readStream.format("rmq").option("namesrvAddr", namesrv)
                            .option("topic", "Hosts").option("consumerGroup", "g-all")
                            .option("startingOffsets", "earliest").option("brokerTimeoutMs", "60000").load()
                            .select("body", "tags", "store_host", "born_host")
                            .writeStream.format("parquet").option("path", os.path.join(root, "all"))
                            .option("checkpointLocation", os.path.join(root, "cp-all"))
                            .trigger(processingTime="1 second").start())
                queries["all"] = start_stream()
                deadline = time.monotonic() + 180
                while queries["all"].status["message"] == "Initializing sources":
                    if time.monotonic() > deadline:
                        raise AssertionError("the stream did not start within 180 s")
                    time.sleep(0.2)
                answer({"started": True})
            elif cmd[0] == "wait":
                want = int(cmd[1])
                deadline = time.monotonic() + 180
                n = count("all")
                while n < want and time.monotonic() < deadline:
                    error = queries["all"].exception()
                    if error is not None:
                        if not _slow_worker(error):
                            raise AssertionError(f"the stream failed: {error}")
                        restarts.append(str(error).splitlines()[0])
                        queries["all"] = start_stream()  # from its checkpoint, as a user restarts a query
                    time.sleep(0.5)
                    n = count("all")
                answer({"rows": n})
            elif cmd[0] == "finish":
                time.sleep(3)  # a trigger more: its commit carries the last batch's end to the brokers
                queries["all"].stop()
                frames = {"all": spark.read.parquet(os.path.join(root, "all"))}
                for name, (opt, value) in FILTERS.items():
                    frames[name] = (spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", "Hosts")
                                    .option(opt, value).load().select("body", "tags", "store_host", "born_host"))
                out: dict = {}
                for name, frame in frames.items():
                    rows = _collect(frame, restarts)
                    bodies = [r.body.decode() for r in rows]
                    want_bodies = expected(name)
                    out[name] = {"rows": len(rows), "duplicates": len(bodies) - len(set(bodies)),
                                 "lost": len(want_bodies - set(bodies)), "extra": len(set(bodies) - want_bodies),
                                 "store_hosts": sorted({r.store_host for r in rows}),
                                 "born_hosts": sorted({r.born_host.rpartition(":")[0] for r in rows}),
                                 "wrong_tags": sum(1 for r in rows if name == "tags" and r.tags != "TagA")}
                start = time.monotonic()
                for attempt in range(3):
                    q = (spark.readStream.format("rmq").option("namesrvAddr", namesrv).option("topic", "Hosts")
                         .option("startingOffsets", "earliest").load().select("body", "tags")
                         .writeStream.format("rmq").option("namesrvAddr", namesrv).option("topic", "HostsOut")
                         .option("checkpointLocation", os.path.join(root, "cp-sink")).trigger(availableNow=True)
                         .start())
                    try:
                        q.awaitTermination(180)
                        break
                    except Exception as e:  # the same query again from its checkpoint: still exactly once
                        if not _slow_worker(e) or attempt == 2:
                            raise
                        restarts.append(str(e).splitlines()[0])
                pulled = _bodies(namesrv, "HostsOut")
                want = expected("all")
                out["sink"] = {"rows": len(pulled), "duplicates": len(pulled) - len(set(pulled)),
                               "lost": len(want - set(pulled)), "seconds": round(time.monotonic() - start, 2)}
                out["restarts"] = restarts
                answer(out)
                return
    finally:
        for q in queries.values():
            if q.isActive:
                q.stop()
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
