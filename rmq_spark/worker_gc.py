"""What a Spark Python worker's garbage collector traverses: Spark's daemon runs a full gc.collect() after every
task of a reused worker (pyspark/daemon.py), measured at 20-76 ms over the ~60,000 objects the modules of a read
or a write import (pyspark, pyarrow, numpy, the source), as long as a small microbatch's whole read. Frozen once a
process, at its first task, they are no longer traversed (0.1-0.2 ms a collection); objects made later are
collected as before."""
from __future__ import annotations

import gc
import os

_frozen_in = 0  # the process whose imported objects are frozen (a worker forked from a frozen one freezes anew)


def freeze_imported_objects() -> None:
    global _frozen_in
    if _frozen_in != os.getpid():
        gc.freeze()
        _frozen_in = os.getpid()
