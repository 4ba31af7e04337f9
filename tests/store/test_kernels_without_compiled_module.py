"""rmq_common imported where its compiled modules are missing (a machine without a C compiler) binds the pure-Python
kernels, and they answer as the compiled ones on the same inputs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rmq_common import native

# Run in a fresh interpreter: an import hook refuses rmq_common._native and rmq_common._encode, as on a machine where
# they were never built, then the same calls as answers() below print their results.
CHILD = r'''
import importlib.abc, json, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("rmq_common._native", "rmq_common._encode"):
            raise ImportError(f"{name} hidden")
        return None

sys.meta_path.insert(0, Hide())
sys.path.insert(0, sys.argv[1])
import test_kernels_without_compiled_module as t
from rmq_common import message_codec, native
bound = {name: getattr(native, name) is fallback for name, fallback in native.FALLBACKS.items()}
print(json.dumps({"bound": bound, "ids": message_codec._id_chars is message_codec._id_chars_python,
                  "answers": t.answers()}))
'''


def answers() -> dict:
    """Every kernel with a pure-Python form, on inputs that meet its cases, as JSON-able values."""
    import numpy as np
    import pyarrow as pa

    from rmq_common import message_codec as codec
    from rmq_common.properties_column import parse_properties
    texts = ["a\x011\x02a\x012\x02b\x01x", "", "\x01\x02k\x01v", "TAGS\x01t\x02KEYS\x01k1 k2\x02", "é\x01😀"]
    data = "".join(texts).encode()
    lens = [len(t.encode()) for t in texts]
    ends = np.cumsum(lens)
    starts = ends - np.array(lens)
    strings = pa.array(["12", "-7", None, "x", "123456789012345678", "1234567890123456789", "", "ab"])
    # records as the kernels see them: TOTALSIZE and MAGICCODE checked, the rest carried
    sizes = np.array([120, 91, 200], dtype=np.int64)
    records = b"".join(int(n).to_bytes(4, "big") + (0xDAA320A7).to_bytes(4, "big") + bytes([i]) * (int(n) - 8)
                       for i, n in enumerate(sizes))
    batch = b"".join(
        (22 + len(b) + len(p)).to_bytes(4, "big") + bytes(12) + len(b).to_bytes(4, "big") + b
        + len(p).to_bytes(2, "big") + p for b, p in ((b"one", b"a\x01b"), (b"", b""), (b"three", b"k\x01v\x02")))
    out = np.zeros(len(records), dtype=np.uint8)
    record_starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    gathered = native.gather_records(records, record_starts, sizes, out)
    return {
        "available": native.available(),
        "crc32_spans": native.crc32_spans(data, starts, ends).tolist(),
        "gather_spans": [b.hex() for b in native.gather_spans(data, starts, ends).to_pylist()],
        "property_columns": [c.to_pylist() for c in native.property_columns(data, starts, ends, ["a", "TAGS", "k"])],
        "strings_in": native.strings_in(strings, ["12", "x", "zz"]).tolist(),
        "decimal_longs": [a.tolist() for a in native.decimal_longs(strings)],
        "message_batch_spans": [a.tolist() for a in native.message_batch_spans(batch)],
        "record_spans": [a.tolist() for a in native.record_spans(records)],
        "gather_records": [gathered, out.tobytes() == records],
        "last_of_each_key": [list(map(list, m)) for m in parse_properties(pa.array(texts)).to_pylist()],
        "generated_ids": codec.GeneratedIds(b"0A000001" * 3, 0xFFFFFFFE, 4).column().to_pylist(),
    }


@pytest.mark.skipif(not native.available(), reason="rmq_common._native is not built here (nothing to compare)")
def test_the_fallbacks_chosen_at_import_answer_as_the_compiled_kernels():
    import os
    child = subprocess.run([sys.executable, "-c", CHILD, os.path.dirname(__file__)], capture_output=True, text=True,
                           check=True)
    got = json.loads(child.stdout.strip().splitlines()[-1])
    assert all(got["bound"].values()), got["bound"]
    assert got["ids"]
    want = json.loads(json.dumps(answers()))
    assert want.pop("available") is True and got["answers"].pop("available") is False
    assert got["answers"] == want


def test_parsing_properties_asks_nothing_of_the_compiled_module_per_call(monkeypatch):
    """Which form parse_properties keeps one entry per key with is bound at import, as every kernel is."""
    import pyarrow as pa

    from rmq_common.properties_column import parse_properties

    monkeypatch.setattr(native, "available", lambda: pytest.fail("native.available() asked per call"))
    assert parse_properties(pa.array(["a\x011\x02a\x012\x02b\x01x", ""])).to_pylist() == [[("a", "2"), ("b", "x")], []]
