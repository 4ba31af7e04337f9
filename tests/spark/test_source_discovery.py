"""format("rmq") works in a fresh Spark session with no registration call: pyspark's lookup worker imports
every top-level pyspark_* module on the workers' path and registers its DefaultSource."""
import os
import subprocess
import sys
import textwrap

from source_testkit import fill

SCRIPT = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    rows = spark.read.format("rmq").option("topic", "T").load(sys.argv[1]).select("body").collect()
    print("BODIES", sorted(r.body.decode() for r in rows))
    spark.stop()
""")


def test_format_rmq_is_discovered_in_a_fresh_session(tmp_path):
    path = fill(tmp_path / "s", "T", n=3, queues=1)
    script = tmp_path / "fresh.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)  # + conftest's flags
    env.pop("PYTHONPATH", None)  # only what `pip install` put in site-packages
    out = subprocess.run([sys.executable, str(script), path], cwd=str(tmp_path), env=env, capture_output=True,
                         text=True, timeout=300)
    assert "BODIES ['body-T-0', 'body-T-1', 'body-T-2']" in out.stdout, out.stderr[-3000:]
