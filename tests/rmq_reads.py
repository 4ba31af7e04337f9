"""The tests' one way to read format("rmq") as a batch: a store directory (path) or the brokers of a cluster
(namesrv), with options and an optional schema."""
from __future__ import annotations

from typing import Optional


def read_rmq(spark, *, path: Optional[str] = None, namesrv: Optional[str] = None, schema: Optional[str] = None,
             **options):
    """spark.read.format("rmq") of the store at `path`, or through the name servers `namesrv`, each option set
    (option names as the source takes them), loaded."""
    reader = spark.read.format("rmq")
    if namesrv is not None:
        reader = reader.option("namesrvAddr", namesrv)
    for name, value in options.items():
        reader = reader.option(name, value)
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load(path) if path is not None else reader.load()
