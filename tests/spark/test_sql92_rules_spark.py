"""The RocketMQ selector rules through Spark's `sql` option: the same rows as the filter's own paths, and the
same refusals, naming the option."""
import pytest
from store_fill import fill_store

from filters import MessageFilter

PROPS = [{"a": "1"}, {"a": "3"}, {"a": "-3"}, {"a": "true"}, {"a": "x"}, {}, {"b": "1"}]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("sql92") / "s"
    fill_store(p, len(PROPS), body=b"m%d", properties=[m or None for m in PROPS])
    return str(p)


@pytest.mark.parametrize("selector", ["a = --1", "a BETWEEN -1 AND -5", "a NOT BETWEEN 10 AND 1", "TRUE = a",
                                      "NOT (TRUE = a)", "1 = TRUE", "andy IS NULL AND a > -9223372036854775807"])
def test_spark_reads_what_the_filter_delivers(spark, path, selector):
    f = MessageFilter.by_sql(selector)
    expected = sorted(b"m%d" % i for i, m in enumerate(PROPS) if f.is_matched_by_commit_log(m))
    rows = spark.read.format("rmq").option("topic", "T").option("sql", selector).load(path).select("body").collect()
    assert sorted(bytes(r.body) for r in rows) == expected


@pytest.mark.parametrize("selector, reason", [("AND = 1", "is a keyword"), ("TRUE = 1", "cannot be compared"),
                                              ("a = -9223372036854775808", "64-bit"),
                                              ("a = 1 -- no line end", "line end")])
def test_spark_refuses_what_rocketmq_refuses(spark, path, selector, reason):
    with pytest.raises(Exception) as e:
        spark.read.format("rmq").option("topic", "T").option("sql", selector).load(path).collect()
    assert "option 'sql'" in str(e.value) and reason in str(e.value)
