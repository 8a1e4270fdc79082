"""Helpers shared by the segment tests: batches in the shapes Kafka's tests use."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from segments.batch import TimestampType, encode_batch, read_header
from segments.records import Record
from segments.segment import LogSegment

SegmentFactory = Callable[..., Coroutine[Any, Any, LogSegment]]


def batch(offset: int, *values: str, ts: int | None = None, now_ms: int = 0) -> bytes:
    """One batch of ``values`` at consecutive offsets from ``offset``; record timestamps ``offset * 10``
    (Kafka's test helper) unless ``ts`` is given."""
    records = [
        Record(v.encode(), timestamp=(offset + i) * 10 if ts is None else ts) for i, v in enumerate(values)
    ]
    return encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=now_ms)


def size_of(b: bytes) -> int:
    return read_header(b).size
