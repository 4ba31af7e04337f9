"""The Spark side of rmq-spark: the "rmq" Python data source (reader and writer)."""
from .register import register

__all__ = ["register"]
