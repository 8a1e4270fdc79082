"""Helpers for users' own end-to-end tests: read back and assert what a topic holds.

Used by the ``seglog`` pytest plugin (``seglog.engine.pytest_plugin``) and usable on
their own::

    from seglog.engine.testing import topic_records, assert_topic_holds
    await assert_topic_holds(engine, "orders", [b"a", b"b"])

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import Sequence

from seglog.engine.engine import Engine
from seglog.engine.log import PartitionLog
from seglog.segments.records import Record

__all__ = ["assert_topic_holds", "partition_records", "topic_records"]


async def partition_records(log: PartitionLog, start_offset: int | None = None) -> list[Record]:
    """Every record of one partition from ``start_offset`` (default: the log start) to the log end."""
    out: list[Record] = []
    offset = log.log_start_offset if start_offset is None else start_offset
    end = log.log_end_offset
    while offset < end:
        got = await log.read(offset, 1 << 20)
        if not got.records:
            break
        out.extend(r for r in got.records if r.offset < end)
        offset = got.next_offset
    return out


async def topic_records(engine: Engine, topic: str) -> dict[int, list[Record]]:
    """Every record of every partition of ``topic``, by partition."""
    return {p: await partition_records(engine.log(topic, p)) for p in range(engine.partitions_for(topic))}


async def assert_topic_holds(
    engine: Engine,
    topic: str,
    expected_values: Sequence[bytes | None],
    *,
    partition: int | None = None,
    keys: Sequence[bytes | None] | None = None,
) -> None:
    """Assert that ``topic`` (or one partition of it) holds exactly these values, in order.

    Across partitions, order is only defined within a partition, so the values
    are compared as a multiset unless ``partition`` is given.
    """
    if partition is not None:
        records = await partition_records(engine.log(topic, partition))
        actual = [r.value for r in records]
        expected = list(expected_values)
        assert actual == expected, f"{topic}-{partition} holds {actual!r}, expected {expected!r}"
        if keys is not None:
            got_keys = [r.key for r in records]
            assert got_keys == list(keys), f"{topic}-{partition} keys are {got_keys!r}, expected {list(keys)!r}"
        return
    by_partition = await topic_records(engine, topic)
    actual_all: list[bytes] = sorted(r.value or b"" for rs in by_partition.values() for r in rs)
    expected_all: list[bytes] = sorted(v or b"" for v in expected_values)
    assert actual_all == expected_all, f"{topic} holds {actual_all!r}, expected {expected_all!r}"
    if keys is not None:
        actual_keys = sorted(r.key or b"" for rs in by_partition.values() for r in rs)
        assert actual_keys == sorted(k or b"" for k in keys), f"{topic} keys are {actual_keys!r}"
