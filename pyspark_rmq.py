"""Spark discovers Python data sources in top-level modules named pyspark_*: this one is format("rmq").

pyspark's lookup worker imports every importable module whose name starts with "pyspark_" and registers its
DefaultSource under DefaultSource.name(), once per session, the first time any Python data source is used.
"""
from rmq_spark.source import RmqDataSource as DefaultSource

__all__ = ["DefaultSource"]
