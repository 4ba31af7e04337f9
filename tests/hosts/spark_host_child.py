"""The Spark job of test_across_hosts.py, run on its own test host (`ip netns exec`) against brokers on others,
with master local-cluster[2,1,1024]: two executor JVMs (and their Python workers) started on the same host, never
given a store path. Commands on stdin, one JSON line answered on stdout for each:
  start NAMESRV          topics Hosts (on every broker) and HostsOut; three streams of Hosts into Parquet (all of
                         it, a tag filter, a SQL92 filter; a consumer group each); answers once they run
  wait COUNT             until the unfiltered stream has written COUNT rows (or 180 s)
  finish                 waits for the filtered streams' rows, stops the streams and reports each one's output (rows,
                         duplicates, lost, store and born hosts) and whether its group's offsets are at the queue
                         ends; reads Hosts with a tag filter and a SQL92 filter (batch queries) and reports them alike
  sink SEEN_FILE         the wire sink writes Hosts to HostsOut (availableNow) from the executors; its commit of
                         microbatch 0 pauses before its decision (tests/faults plugin): what a pull and the C++
                         push consumer (writing SEEN_FILE on another host) have of HostsOut then, and all of it after
The master is RMQ_HOSTS_MASTER (default local-cluster[2,1,1024])."""
from __future__ import annotations

import json
import os
import sys
import time

N_TOTAL = int(os.environ.get("RMQ_HOSTS_TOTAL", "800"))
FILTERS = {"tags": ("tags", "TagA"), "sql": ("sql", "seq BETWEEN 100 AND 199")}
COLUMNS = ("body", "tags", "store_host", "born_host")


def expected(name: str) -> set[str]:
    if name.endswith("tags"):
        return {f"cpp-{i}" for i in range(N_TOTAL) if i % 4 == 0}
    if name.endswith("sql"):
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


def _wait(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def _report(name: str, rows: list) -> dict:
    bodies = [r.body.decode() for r in rows]
    want = expected(name)
    return {"rows": len(rows), "duplicates": len(bodies) - len(set(bodies)), "lost": len(want - set(bodies)),
            "extra": len(set(bodies) - want), "store_hosts": sorted({r.store_host for r in rows}),
            "born_hosts": sorted({r.born_host.rpartition(":")[0] for r in rows}),
            "wrong_tags": sum(1 for r in rows if name.endswith("tags") and r.tags != "TagA")}


def main(root: str) -> None:
    from pyspark.sql import SparkSession

    from rmq_client import Producer, PullConsumer
    spark = (SparkSession.builder.master(os.environ.get("RMQ_HOSTS_MASTER", "local-cluster[2,1,1024]"))
             .appName("rmq-hosts")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             # Python workers start slowly on a loaded 2-core machine: more than the default 15 s to connect back
             .config("spark.python.authenticate.socketTimeout", "120s")
             .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
             # the tests' JVM flags (tests/conftest.py), for the driver and the executor JVMs
             .config("spark.driver.extraJavaOptions", os.environ.get("RMQ_TEST_SPARK_JAVA_OPTIONS", ""))
             .config("spark.executor.extraJavaOptions", os.environ.get("RMQ_TEST_SPARK_JAVA_OPTIONS", ""))
             .getOrCreate())
    queries: dict = {}
    namesrv = ""
    restarts: list[str] = []

    def count(name: str) -> int:
        path = os.path.join(root, name)
        try:
            return spark.read.parquet(path).count()
        except Exception:  # nothing committed yet: no file to read the schema from
            return 0

    began = time.monotonic()

    def answer(obj: dict) -> None:
        print(f"spark_host_child: answered {cmd[0]} at {time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
        print(json.dumps(obj), flush=True)

    def start_stream(name: str):
        reader = (spark.readStream.format("rmq").option("namesrvAddr", namesrv).option("topic", "Hosts")
                  .option("consumerGroup", f"g-{name}").option("startingOffsets", "earliest")
                  .option("brokerTimeoutMs", "60000"))
        if name in FILTERS:
            reader = reader.option(*FILTERS[name])
        return (reader.load().select(*COLUMNS)
                .writeStream.format("parquet").option("path", os.path.join(root, name))
                .option("checkpointLocation", os.path.join(root, f"cp-{name}"))
                .trigger(processingTime="1 second").start())

    def running(name: str) -> None:
        """A stream that failed only on a slow Python worker is started again from its checkpoint."""
        error = queries[name].exception()
        if error is not None:
            if not _slow_worker(error):
                raise AssertionError(f"the stream {name} failed: {error}")
            restarts.append(str(error).splitlines()[0])
            queries[name] = start_stream(name)

    def started(name: str) -> bool:
        running(name)
        return queries[name].status["message"] != "Initializing sources"

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
                # the executor JVMs and their Python workers start before the streams and the C++ producer do, and
                # the streams one after the other: each one's Python source runner must connect back to the driver
                # within 10 s (fixed), which a loaded 2-core machine misses when they all start at once
                spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).collect()
                for name in ("all", *FILTERS):
                    queries[name] = start_stream(name)
                    _wait(lambda: started(name), 180, f"the stream {name} past its start")
                answer({"started": True})
            elif cmd[0] == "wait":
                want = int(cmd[1])
                deadline = time.monotonic() + 180
                n = count("all")
                while n < want and time.monotonic() < deadline:
                    running("all")
                    time.sleep(0.5)
                    n = count("all")
                answer({"rows": n})
            elif cmd[0] == "finish":
                def filtered_done() -> bool:
                    for name in FILTERS:
                        running(name)
                    return all(count(name) >= len(expected(name)) for name in FILTERS)
                _wait(filtered_done, 180, "every matching message in the filtered streams' output")

                def at_end(name: str) -> tuple[bool, list[str]]:
                    """Whether the group's offsets are at the queue ends of Hosts; the brokers of its queues."""
                    with PullConsumer(namesrv, f"g-{name}") as pc:
                        ends = pc.queue_bounds("Hosts")
                        return (all(pc.query_offset(mq) == mx for mq, (_, mx) in ends.items()),
                                sorted({mq.broker_name for mq in ends}))
                # a trigger more commits the last batch's end to the brokers: waited for (the report says whether
                # it came), then the streams stop
                try:
                    _wait(lambda: all(at_end(name)[0] for name in queries), 30, "the groups' offsets at the ends")
                except AssertionError:
                    pass
                for q in queries.values():
                    q.stop()
                out: dict = {}
                for name in queries:
                    out[name] = _report(name, _collect(spark.read.parquet(os.path.join(root, name)), restarts))
                    out[name]["offsets_at_end"], out[name]["brokers"] = at_end(name)
                for name, (opt, value) in FILTERS.items():
                    frame = (spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", "Hosts")
                             .option(opt, value).load().select(*COLUMNS))
                    out[f"batch-{name}"] = _report(name, _collect(frame, restarts))
                answer(out)
            elif cmd[0] == "sink":
                seen_file = cmd[1]

                def seen() -> list[str]:
                    return open(seen_file).read().split()
                checkpoint = os.path.join(root, "cp-sink")
                marker = os.path.join(checkpoint, "rmq-wire-sink", "paused-before_decision-0")
                before = None
                start = time.monotonic()
                for attempt in range(3):
                    q = (spark.readStream.format("rmq").option("namesrvAddr", namesrv).option("topic", "Hosts")
                         .option("startingOffsets", "earliest").load().select("body", "tags")
                         .writeStream.format("rmq").option("namesrvAddr", namesrv).option("topic", "HostsOut")
                         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
                    _wait(lambda: os.path.exists(marker) or not q.isActive, 180,
                          "the sink's commit pausing before its decision")
                    if before is None and os.path.exists(marker):
                        time.sleep(2)  # the consumers' held pulls would have answered by now
                        before = {"cpp": len(seen()), "pull": len(_bodies(namesrv, "HostsOut"))}
                        # the commit goes on
                        open(os.path.join(os.path.dirname(marker), "resume-before_decision-0"), "w").close()
                    try:
                        q.awaitTermination(180)
                        break
                    except Exception as e:  # the same query again from its checkpoint: still exactly once
                        if not _slow_worker(e) or attempt == 2:
                            raise
                        restarts.append(str(e).splitlines()[0])
                seconds = round(time.monotonic() - start, 2)
                _wait(lambda: len(seen()) >= N_TOTAL, 60, "the C++ consumer receiving the batch")
                time.sleep(2)  # anything more (a duplicate) would have arrived by now
                pulled, cpp = _bodies(namesrv, "HostsOut"), seen()
                want = expected("all")
                with PullConsumer(namesrv, "hosts-check") as pc:
                    brokers = sorted({mq.broker_name for mq in pc.queue_bounds("HostsOut")})
                answer({"before_commit": before, "rows": len(pulled), "duplicates": len(pulled) - len(set(pulled)),
                        "lost": len(want - set(pulled)), "cpp_rows": len(cpp), "cpp_lost": len(want - set(cpp)),
                        "brokers": brokers, "seconds": seconds, "restarts": restarts})
                return
    finally:
        for q in queries.values():
            if q.isActive:
                q.stop()
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
