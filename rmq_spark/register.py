"""Explicit registration, for sessions where the package is not on the Python workers' import path at
start-up (format("rmq") is otherwise discovered through the top-level module pyspark_rmq)."""
from __future__ import annotations


def register(spark) -> None:
    from .source import RmqDataSource

    spark.dataSource.register(RmqDataSource)
