"""The `rmq` command line: produce, consume and inspect a store (above `store` and `filters`)."""
from .cli import main

__all__ = ["main"]
