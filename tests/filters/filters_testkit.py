"""Helpers shared by the filter tests (imported by module name: pytest puts
tests/filters on sys.path).  Every decision is made through the per-record
path and the vectorised paths, which must agree."""

from __future__ import annotations

import pyarrow as pa

from filters import MessageFilter


def to_text(props: dict) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def scan_batch(messages: list) -> pa.RecordBatch:
    """A batch shaped like the store's scan, as far as filters read it."""
    properties = pa.array([list(m.items()) for m in messages], type=pa.map_(pa.string(), pa.string()))
    return pa.RecordBatch.from_arrays(
        [pa.array([m.get("TAGS") for m in messages], pa.string()), properties],
        names=["tags", "properties"],
    )


def storable(props: dict) -> bool:
    """Whether the properties survive RocketMQ's text form unchanged."""
    return all(k and v and not set(k + v) & {"\x01", "\x02"} for k, v in props.items())


def decide_all(message_filter: MessageFilter, messages: list) -> list:
    per_record = [message_filter.is_matched_by_commit_log(m) for m in messages]
    vectorised = message_filter.commit_log_mask(scan_batch(messages)).to_pylist()
    assert vectorised == per_record, f"{message_filter}: vectorised {vectorised} != per-record {per_record}"
    if all(storable(m) for m in messages):
        from_text = message_filter.properties_text_mask([to_text(m) for m in messages]).to_pylist()
        assert from_text == per_record, f"{message_filter}: from text {from_text} != per-record {per_record}"
    return per_record


