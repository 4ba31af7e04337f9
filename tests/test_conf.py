"""conf/: the files users pass to MessageStore, `rmq --config` and `spark-submit --properties-file`."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from store import MessageStore, StoreConfig

CONF = Path(__file__).resolve().parent.parent / "conf"


def entries(path: Path) -> list:
    """(key, value, comment lines just above it) for each setting of a broker.conf-style file."""
    out, comment = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
        elif stripped:
            key, _, value = stripped.partition("=")
            out.append((key.strip(), value.strip(), comment))
            comment = []
        else:
            comment = []
    return out


def spark_defaults() -> dict:
    conf = {}
    for line in (CONF / "spark-defaults.conf").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split(None, 1)
            assert key not in conf, f"{key} set twice"
            conf[key] = value.strip()
    return conf


def test_store_conf_lists_every_store_config_key_with_its_default_and_a_comment():
    fields = [f.name for f in dataclasses.fields(StoreConfig)]
    found = entries(CONF / "store.conf")
    assert [k for k, _, _ in found] == fields  # every key, once, in StoreConfig's order
    assert all(comment for _, _, comment in found), "each key has a comment line above it"
    assert StoreConfig.from_file(CONF / "store.conf") == StoreConfig()
    defaults = StoreConfig()
    for key, value, _ in found:
        assert StoreConfig.from_dict({key: value}) == defaults, f"{key} = {value} is not the default"


def test_store_conf_opens_a_store(tmp_path):
    with MessageStore(tmp_path / "s", str(CONF / "store.conf")) as store:
        assert store.config == StoreConfig()
        put = store.put("T", b"x")
        assert store.max_offset("T", put.queue_id) == 1 and len(store.queues("T")) == 8


def test_spark_defaults_turn_on_arrow_and_keep_local_runs_light():
    conf = spark_defaults()
    assert conf["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    # off: pyspark 4.3 reuses a pushed-down scan for later queries of the same DataFrame (wrong rows)
    assert conf["spark.sql.python.filterPushdown.enabled"] == "false"
    assert conf["spark.ui.enabled"] == "false"
    assert 1 <= int(conf["spark.sql.shuffle.partitions"]) <= 16
    assert re.fullmatch(r"local\[\d+\]", conf["spark.master"])
    assert "-Dlog4j2.configurationFile=conf/log4j2.properties" in conf["spark.driver.extraJavaOptions"]
    # the Python workers forked with the source imported (tests/spark/test_python_daemon.py)
    assert conf["spark.python.daemon.module"] == "rmq_spark.daemon"


def test_spark_defaults_turn_arrow_javas_checks_off_for_driver_and_executors():
    from rmq_cli.spark_java_options import missing_options
    conf = spark_defaults()
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert missing_options(conf[key]) == [], key


def test_spark_defaults_keys_are_spark_settings(spark):
    # Each key is one Spark defines (Spark silently ignores a misspelt one). spark.master has no ConfigEntry.
    find = spark.sparkContext._jvm.org.apache.spark.internal.config.ConfigEntry.findEntry
    assert find("spark.no.such.setting") is None
    unknown = [key for key in spark_defaults() if key != "spark.master" and find(key) is None]
    assert not unknown, f"not Spark settings: {unknown}"


def test_log4j2_properties_quiet_spark_to_warnings():
    text = (CONF / "log4j2.properties").read_text(encoding="utf-8")
    props = dict(line.split("=", 1) for line in (ln.strip() for ln in text.splitlines())
                 if line and not line.startswith("#"))
    props = {k.strip(): v.strip() for k, v in props.items()}
    assert props["rootLogger.level"] in ("warn", "error")
    assert props["appender.console.type"] == "Console"
