"""The public API contract (docs/API.md): the public names and calls that code outside the project relies on.

Each test runs the contract's own snippet (adapted only where it needs values), so a rename or a
changed signature fails here first.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from seglog import indexes
from seglog.engine import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    AppendResult,
    Engine,
    FetchResult,
    LogConfig,
    OffsetAndTimestamp,
    Record,
    errors,
)
from seglog.indexes import (
    AbortedTxn,
    LazyIndex,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
    TransactionIndex,
)


async def test_engine_snippet(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Engine.open(data, config=LogConfig()) as engine:
        await engine.create_topic("orders", partitions=3, config=None)
        with pytest.raises(errors.TopicExistsError):
            await engine.create_topic("orders", partitions=3, config=None)
        assert engine.topics() == ["orders"]
        log = engine.log("orders", 0)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            engine.log("orders", 3)
        res = await log.append(
            [Record(value=b"v", key=b"k", timestamp=1700000000000, headers=(("h", b"x"),))]
        )
        assert isinstance(res, AppendResult)
        assert (res.first_offset, res.last_offset, res.max_timestamp) == (0, 0, 1700000000000)
        got = await log.read(res.first_offset, max_bytes=1 << 20)
        assert isinstance(got, FetchResult)
        assert got.records == [Record(b"v", b"k", 1700000000000, (("h", b"x"),), 0)]
        assert (got.next_offset, got.high_watermark, got.log_start_offset) == (1, 1, 0)
        hit = await log.offset_for_timestamp(1700000000000)
        assert hit == OffsetAndTimestamp(0, 1700000000000)
        assert await log.offset_for_timestamp(1700000000001) is None
        assert await log.offset_for_timestamp(EARLIEST_TIMESTAMP) == OffsetAndTimestamp(0, -1)
        assert await log.offset_for_timestamp(LATEST_TIMESTAMP) == OffsetAndTimestamp(1, -1)
        assert await log.offset_for_timestamp(MAX_TIMESTAMP) == OffsetAndTimestamp(0, 1700000000000)
        assert (log.log_start_offset, log.log_end_offset) == (0, 1)

        async def first_from_subscription() -> Record:
            async for rec in log.subscribe(start_offset=0):
                return rec
            raise AssertionError("subscription ended")

        assert (await asyncio.wait_for(first_from_subscription(), 30)).value == b"v"
        await engine.commit_offset("billing", "orders", 0, 42)
        assert await engine.committed("billing", "orders", 0) == 42
        assert await engine.committed("billing", "orders", 1) is None
        await log.flush()
        await log.append([Record(b"w")])
        await log.delete_records_before(1)
        with pytest.raises(errors.OffsetOutOfRangeError):
            await log.read(0)
        await engine.enforce_retention()
        await engine.delete_topic("orders")
        assert engine.topics() == []
    engine2 = await Engine.open(data)  # the awaitable form
    await engine2.close()


def test_every_exception_is_rooted_and_exported() -> None:
    names = [
        "InvalidTopicError", "TopicExistsError", "UnknownTopicOrPartitionError", "OffsetOutOfRangeError",
        "RecordTooLargeError", "CorruptRecordError", "CorruptIndexError", "InvalidOffsetError",
        "InvalidTimestampError", "IndexFullError", "IndexOffsetOverflowError", "LogDirLockedError",
    ]
    for name in names:
        assert issubclass(getattr(errors, name), errors.SeglogError)
    for name in ["InvalidOffsetError", "InvalidTimestampError", "IndexFullError", "IndexOffsetOverflowError",
                 "CorruptIndexError"]:
        assert getattr(indexes, name) is getattr(errors, name)


def test_index_snippet(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_index_size=10 * 1024 * 1024, writable=True)
    assert idx.lookup(150) == OffsetPosition(100, 0)  # below the first entry: (base_offset, 0)
    idx.append(105, 0)
    idx.append(110, 4096)
    assert idx.lookup(107) == OffsetPosition(105, 0)
    assert idx.lookup_ceiling(107) == OffsetPosition(110, 4096)
    assert idx.lookup_ceiling(111) is None
    assert idx.entry(1) == OffsetPosition(110, 4096)
    assert (idx.entries, idx.max_entries, idx.is_full, idx.last_offset) == (2, 1310720, False, 110)
    with pytest.raises(errors.InvalidOffsetError):
        idx.append(110, 5000)
    with pytest.raises(errors.IndexOffsetOverflowError):
        idx.append(100 + 2**31, 6000)
    idx.truncate_to(110)
    assert idx.entries == 1
    idx.sanity_check()
    idx.trim_to_valid_size()
    assert path.stat().st_size == 8
    assert idx.is_full
    with pytest.raises(errors.IndexFullError):
        idx.append(200, 8192)
    idx.resize(80)
    idx.flush()
    idx.truncate()
    assert idx.entries == 0
    idx.close()
    with pytest.raises(errors.SeglogError):
        idx.lookup(100)
    again = OffsetIndex(path, 100)  # reopening the closed, trimmed file: no size needed
    assert again.entries == 0
    again.delete()
    assert not path.exists()

    tix = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, max_index_size=12 * 3, writable=True)
    assert tix.lookup(5) == TimestampOffset(-1, 100)  # below the first entry: (-1, base_offset)
    tix.maybe_append(1000, 105)
    with pytest.raises(errors.InvalidTimestampError):
        tix.maybe_append(999, 106)
    tix.maybe_append(1500, 107)
    assert tix.is_full  # 2 of 3 slots: the last one is kept for the roll/close entry
    with pytest.raises(errors.IndexFullError):
        tix.maybe_append(2000, 110)
    tix.maybe_append(2000, 110, skip_full_check=True)
    assert tix.last_entry == TimestampOffset(2000, 110)
    assert tix.lookup(1200) == TimestampOffset(1000, 105)
    tix.truncate_to(110)
    tix.sanity_check()
    tix.close()

    txn = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    txn.append(AbortedTxn(1, 0, 10, 11))
    txn.append(AbortedTxn(2, 5, 15, 13))
    found = txn.collect_aborted_txns(11, 100)
    assert list(found.aborted_txns) == [AbortedTxn(2, 5, 15, 13)]
    txn.truncate_to(15)
    assert list(txn.collect_aborted_txns(0, 100).aborted_txns) == [AbortedTxn(1, 0, 10, 11)]
    txn.close()

    lazy = LazyIndex.for_offset(tmp_path / "00000000000000000200.index", 200, 1024)
    assert not lazy.path.exists()
    lazy.rename_to(tmp_path / "00000000000000000200.index.deleted")
    loaded = lazy.get()
    assert isinstance(loaded, OffsetIndex) and lazy.get() is loaded and lazy.path.exists()
    assert lazy.delete() and not lazy.path.exists()
    lazy.close()
    lazy_time = LazyIndex.for_time(tmp_path / "00000000000000000200.timeindex", 200, 1200)
    assert isinstance(lazy_time.get(), TimeIndex)
    lazy_time.close()
