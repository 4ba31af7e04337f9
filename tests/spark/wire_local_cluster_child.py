"""Run by test_wire_local_cluster.py in its own process (a local-cluster master needs its own SparkContext):
two brokers and a name server, the Apache RocketMQ C++ producer sending while two streams (a tag filter and a
SQL92 filter) run on separate executor JVMs into Parquet. Prints one JSON line of what came out."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from wire_cluster import ROOT, WireCluster, wait_until  # noqa: E402

from rmq_client import PullConsumer  # noqa: E402

CPP_PRODUCER = """
import sys
import time
from rocketmq.client import Message, Producer
from rocketmq.exceptions import ProducerSendSyncFailed
p = Producer("cpp-wire")
p.set_namesrv_addr(sys.argv[1])
p.start()
for i in range(int(sys.argv[2])):
    m = Message("Cluster")
    m.set_tags("TagA" if i % 4 == 0 else "TagB")
    m.set_property("seq", str(i))
    m.set_body("cpp-%d" % i)
    for attempt in range(10):
        try:
            p.send_sync(m)
            break
        except ProducerSendSyncFailed as e:
            # Only a failed route lookup (3 s each in the C++ client, missed on a loaded machine) is retried:
            # nothing was sent then, so a retry cannot duplicate.
            if "No route info" not in str(e) or attempt == 9:
                raise
            time.sleep(1)
p.shutdown()
"""
N = 400
CPP_CONSUMER = """
import sys
import time
from rocketmq.client import PushConsumer
out = open(sys.argv[2], "a")
def on_message(msg):  # returning normally is CONSUME_SUCCESS
    out.write((msg.body.decode() if isinstance(msg.body, bytes) else msg.body) + "\\n")
    out.flush()
c = PushConsumer("cpp-sink-watcher")
c.set_namesrv_addr(sys.argv[1])
c.subscribe("ClusterOut", on_message, "*")
c.start()
time.sleep(float(sys.argv[3]))
c.shutdown()
"""
# the sink's commit of microbatch 0 pauses after the tasks' sends, before its decision: consumers are checked then
os.environ["RMQ_WIRE_SINK_TEST_PAUSE"] = "before_decision@0:8"


def main(root: str) -> None:
    from pyspark.sql import SparkSession

    with WireCluster(os.path.join(root, "cluster"), brokers=("broker-a", "broker-b")) as c:
        from rmq_client import Producer
        with Producer(c.namesrv) as p:
            p.create_topic("Cluster", 4)
        spark = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("rmq-wire-cluster")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable).getOrCreate())
        try:
            queries = {}
            for name, opt, value in (("tags", "tags", "TagA"), ("sql", "sql", "seq BETWEEN 100 AND 199")):
                queries[name] = (spark.readStream.format("rmq").option("namesrvAddr", c.namesrv)
                                 .option("topic", "Cluster").option(opt, value).option("consumerGroup", f"g-{name}")
                                 .option("startingOffsets", "earliest").load()
                                 .select("body", "tags", "properties", "queue_id", "store_host")
                                 .writeStream.format("parquet").option("path", os.path.join(root, name))
                                 .option("checkpointLocation", os.path.join(root, f"cp-{name}"))
                                 .trigger(processingTime="1 second").start())
            # The executor JVMs and Python workers start before the C++ producer does, so its 3 s route lookups do
            # not compete with them for the two cores.
            spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).collect()
            wait_until(lambda: all(q.status["message"] != "Initializing sources" for q in queries.values()), 180,
                       "the streams past their start")
            env = dict(os.environ, HOME=root, PYTHONPATH=ROOT)
            cpp = subprocess.run([sys.executable, "-c", textwrap.dedent(CPP_PRODUCER), c.namesrv, str(N)], env=env,
                                 capture_output=True, text=True, timeout=300)
            assert cpp.returncode == 0, cpp.stderr[-2000:]
            want = {"tags": {f"cpp-{i}" for i in range(N) if i % 4 == 0}, "sql": {f"cpp-{i}" for i in range(100, 200)}}

            def done() -> bool:
                return all(os.path.isdir(os.path.join(root, n, "_spark_metadata")) and
                           spark.read.parquet(os.path.join(root, n)).count() >= len(want[n]) for n in want)

            wait_until(done, 180, "every matching message in the output")
            time.sleep(3)  # a trigger more: its commit carries the last batch's end to the brokers
            for q in queries.values():
                q.stop()
            out: dict = {"hosts": sorted(c.addresses.values())}
            for n, w in want.items():
                rows = spark.read.parquet(os.path.join(root, n)).collect()
                bodies = [r.body.decode() for r in rows]
                out[n] = {"rows": len(rows), "duplicates": len(bodies) - len(set(bodies)),
                          "lost": len(w - set(bodies)), "extra": len(set(bodies) - w),
                          "store_hosts": sorted({r.store_host for r in rows}),
                          "wrong_tags": sum(1 for r in rows if n == "tags" and r.tags != "TagA")}
            for n in want:
                with PullConsumer(c.namesrv, f"g-{n}") as pc:
                    ends = pc.queue_bounds("Cluster")
                    out[n]["offsets_at_end"] = all(pc.query_offset(mq) == mx for mq, (_, mx) in ends.items())
                    out[n]["brokers"] = sorted({mq.broker_name for mq in ends})
            out["sink"] = _sink_round_trip(spark, c, root, env)
            print(json.dumps(out), flush=True)
        finally:
            spark.stop()


def _out_bodies(namesrv: str) -> list[str]:
    bodies: list[str] = []
    with PullConsumer(namesrv, "sink-check") as pc:
        for mq, (lo, hi) in pc.queue_bounds("ClusterOut").items():
            bodies.extend(b.decode() for rb in pc.read_range(mq, lo, hi) for b in rb.column("body").to_pylist())
    return bodies


def _sink_round_trip(spark, c, root: str, env: dict) -> dict:
    """The stream read from the brokers written back through them by the wire sink on the executor JVMs; the
    C++ push consumer and a pull see nothing of the microbatch before its commit and all of it after."""
    from rmq_client import Producer
    with Producer(c.namesrv) as p:
        p.create_topic("ClusterOut", 2)
    seen_file = os.path.join(root, "cpp-seen.txt")
    open(seen_file, "w").close()
    watcher = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CPP_CONSUMER), c.namesrv, seen_file, "90"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(5)  # the push consumer has rebalanced and holds its pulls
        checkpoint = os.path.join(root, "cp-sink")
        q = (spark.readStream.format("rmq").option("namesrvAddr", c.namesrv).option("topic", "Cluster")
             .option("startingOffsets", "earliest").load().select("body", "tags", "properties")
             .writeStream.format("rmq").option("namesrvAddr", c.namesrv).option("topic", "ClusterOut")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        marker = os.path.join(checkpoint, "rmq-wire-sink", "paused-before_decision-0")
        wait_until(lambda: os.path.exists(marker), 120, "the sink's commit pausing before its decision")
        time.sleep(2)  # the consumers' held pulls would have answered by now
        before = {"cpp": len(open(seen_file).read().split()), "pull": len(_out_bodies(c.namesrv))}
        q.awaitTermination(120)
        wait_until(lambda: len(open(seen_file).read().split()) >= N, 60, "the C++ consumer receiving the batch")
        time.sleep(2)
        cpp = open(seen_file).read().split()
        pulled = _out_bodies(c.namesrv)
        want = {f"cpp-{i}" for i in range(N)}
        return {"before_commit": before, "rows": len(pulled), "duplicates": len(pulled) - len(set(pulled)),
                "lost": len(want - set(pulled)), "cpp_rows": len(cpp), "cpp_lost": len(want - set(cpp)),
                "brokers": sorted({mq.broker_name for mq in PullConsumer(c.namesrv, "x").queue_bounds("ClusterOut")})}
    finally:
        watcher.kill()
        watcher.wait()


if __name__ == "__main__":
    main(sys.argv[1])
