"""A point read, and a time lookup + read, cost one bisect of the batch table and one exact read of the page
cache, whatever the batch shape (issue 22, points 1 and 2).

Counted, not timed: the reads of the ``.log`` each operation makes (page-cache reads and their bytes,
blocking reads in a thread), the header walks and the CRC-32C computations. Without the batch table a
read of a log of one-record batches misses the offset index's span (one entry per 4 KiB) and walks
headers in a thread; a read of one record of a 1000-record batch copies and checks the whole batch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from seglog.engine import Engine, LogConfig, PartitionLog, Record
from seglog.segments import batch as batch_module
from seglog.segments.batch_table import default_budget
from seglog.segments.fileio import SegmentFile
from seglog.segments.segment import LogSegment, _HeaderWalk
from tests.segments.kafkahelpers import kafka_batch

CONFIG = LogConfig(max_message_bytes=4 << 20)
BASE_TS = 1_700_000_000_000


@dataclass
class Counts:
    cached_reads: int = 0
    cached_bytes: int = 0
    pieces: int = 0  # the (position, size) ranges the page-cache reads asked for: one system call each
    blocking_reads: int = 0
    header_walks: int = 0
    crcs: int = 0

    def reset(self) -> None:
        self.cached_reads = self.cached_bytes = self.pieces = self.blocking_reads = self.header_walks = self.crcs = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    got = Counts()
    read_cached, read_spans = SegmentFile.read_cached, SegmentFile.read_cached_spans
    read, walk = SegmentFile.read, _HeaderWalk.__iter__
    crc_value, crc_of = batch_module._crc_value, batch_module._crc_of

    def counted_cached(self: SegmentFile, position: int, size: int) -> Any:
        got.cached_reads += 1
        got.cached_bytes += size
        got.pieces += 1
        return read_cached(self, position, size)

    def counted_spans(self: SegmentFile, spans: list[tuple[int, int]]) -> Any:
        got.cached_reads += 1
        got.cached_bytes += sum(size for _, size in spans)
        got.pieces += len(spans)
        return read_spans(self, spans)

    def counted_read(self: SegmentFile, fn: Any, **kw: Any) -> Any:
        got.blocking_reads += 1
        return read(self, fn, **kw)

    def counted_walk(self: _HeaderWalk) -> Any:
        got.header_walks += 1
        return walk(self)

    def counted_crc_value(data: bytes) -> int:
        got.crcs += 1
        return int(crc_value(data))

    def counted_crc_of(buf: Any, start: int, end: int) -> int:
        got.crcs += 1
        return crc_of(buf, start, end)

    monkeypatch.setattr(SegmentFile, "read_cached", counted_cached)
    monkeypatch.setattr(SegmentFile, "read_cached_spans", counted_spans)
    monkeypatch.setattr(SegmentFile, "read", counted_read)
    monkeypatch.setattr(_HeaderWalk, "__iter__", counted_walk)
    monkeypatch.setattr(batch_module, "_crc_value", counted_crc_value)
    monkeypatch.setattr(batch_module, "_crc_of", counted_crc_of)
    yield got


def _records(count: int, first: int, value_bytes: int) -> list[Record]:
    return [
        Record(b"%08d" % i + b"v" * (value_bytes - 8), b"k%07d" % i, BASE_TS + i) for i in range(first, first + count)
    ]


async def _log(tmp_path: Path, per_append: int, appends: int, value_bytes: int) -> tuple[Engine, PartitionLog]:
    engine = await Engine.open(tmp_path, CONFIG)
    await engine.create_topic("t")
    log = engine.log("t")
    for n in range(appends):
        await log.append(_records(per_append, n * per_append, value_bytes))
    return engine, log


async def _kafka_log(tmp_path: Path, per_batch: int) -> tuple[Engine, PartitionLog]:
    """400 records of 100 B in Kafka batches of ``per_batch``, as Kafka clients send them (``append_kafka_batch``)."""
    engine = await Engine.open(tmp_path, CONFIG)
    await engine.create_topic("t")
    log = engine.log("t")
    for first in range(0, 400, per_batch):
        await log.append_kafka_batch(kafka_batch(first, _records(per_batch, first, 100)))
    return engine, log


def _page_cache_reads(log: PartitionLog) -> bool:
    segment: LogSegment = log._segments.active_segment  # type: ignore[assignment]
    return bool(segment._log._page_cache_reads)


async def _verify_large_batches(log: PartitionLog) -> None:
    """Read once in each of the first two 1000-record batches (their CRC verified, their records noted);
    skip where only the thread path exists."""
    await log.read(10, 1)
    await log.read(1010, 1)
    if not _page_cache_reads(log):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")


def _check(record: Record, offset: int, value_bytes: int) -> None:
    assert record.offset == offset
    assert record.value == b"%08d" % offset + b"v" * (value_bytes - 8)
    assert record.key == b"k%07d" % offset
    assert record.timestamp == BASE_TS + offset


async def test_a_point_read_of_one_record_batches_is_one_exact_read(tmp_path: Path, counts: Counts) -> None:
    engine, log = await _log(tmp_path, 1, 400, 100)
    async with engine:
        await log.read(0, 1)  # the segment's first read tables its batches (one walk, in a thread)
        if not _page_cache_reads(log):
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")
        for offset in range(1, 399, 7):
            counts.reset()
            got = await log.read(offset, 1)
            _check(got.records[0], offset, 100)
            assert (counts.cached_reads, counts.blocking_reads, counts.header_walks) == (1, 0, 0), counts
            assert counts.cached_bytes < 300, counts  # exactly the batch: 61 B of header, one record


@pytest.mark.parametrize("per_batch", [1, 10])
async def test_a_point_read_of_kafka_batches_is_one_exact_read(
    tmp_path: Path, counts: Counts, per_batch: int
) -> None:
    # Batches as Kafka clients produce them (the wire server stores them as sent): the batch table
    # places them as it places seglog's, and the read decodes the one batch, no header walk.
    engine, log = await _kafka_log(tmp_path, per_batch)
    async with engine:
        await log.read(0, 1)  # the segment's first read tables its batches (one walk, in a thread)
        if not _page_cache_reads(log):
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")
        for offset in range(1, 390, 7):  # (the last write's batches are read from memory, not the file)
            counts.reset()
            got = await log.read(offset, 1)
            _check(got.records[0], offset, 100)
            assert len(got.records) == 1
            assert (counts.cached_reads, counts.blocking_reads, counts.header_walks) == (1, 0, 0), counts
            assert counts.cached_bytes < 200 * per_batch, counts  # exactly the batch


@pytest.mark.skipif(
    bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="without the C module a Kafka batch takes the checked window"
)
@pytest.mark.parametrize("per_batch", [1, 10, 100])
async def test_a_time_lookup_then_read_of_kafka_batches_reads_the_batch_once(
    tmp_path: Path, counts: Counts, per_batch: int
) -> None:
    # A Kafka batch under 32 KiB is checked, CRC-verified and searched by the one-batch C reader in the
    # lookup (only the record found is built), and the read that follows takes that record: no second
    # read of the batch, no header walk, no thread.
    engine, log = await _kafka_log(tmp_path, per_batch)
    async with engine:
        await log.offset_for_timestamp(BASE_TS)  # the first lookup tables the segment's batches
        if not _page_cache_reads(log):
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")
        for offset in range(1, 390, 7):  # (the last write's batches are read from memory, not the file)
            counts.reset()
            found = await log.offset_for_timestamp(BASE_TS + offset)
            assert found is not None and (found.offset, found.timestamp) == (offset, BASE_TS + offset)
            got = await log.read(found.offset, 1)
            _check(got.records[0], offset, 100)
            assert (counts.cached_reads, counts.blocking_reads, counts.header_walks) == (1, 0, 0), counts


# Of each 1000-record batch of _log(tmp_path, 1000, n, 1024), the first few dozen records have a key ending
# within a page of the batch start (the timestamp column and the keys before it): their header and key are
# one read.
NEAR_KEYS = 30


def _read_only_the_record(counts: Counts, offset: int) -> None:
    # A record-table read: the header, the key and the value (61 + 8 + 1024 bytes, three ranges), or the
    # header and key in one range of at most a page when the key lies that near the batch start.
    if offset % 1000 < NEAR_KEYS:
        assert counts.pieces == 2 and 61 + 8 + 1024 < counts.cached_bytes <= 4096 + 1024, counts
    else:
        assert (counts.pieces, counts.cached_bytes) == (3, 61 + 8 + 1024), counts


async def test_a_point_read_of_a_large_batch_reads_only_the_record(tmp_path: Path, counts: Counts) -> None:
    engine, log = await _log(tmp_path, 1000, 3, 1024)
    async with engine:
        await _verify_large_batches(log)
        for offset in (0, 1, 500, 999, 1000, 1999):
            counts.reset()
            got = await log.read(offset, 1)
            _check(got.records[0], offset, 1024)
            assert len(got.records) == 1
            assert (counts.cached_reads, counts.blocking_reads, counts.header_walks, counts.crcs) == (1, 0, 0, 0)
            _read_only_the_record(counts, offset)


# seglog's Python calls in one record-table point read, from PartitionLog.read to the three page-cache
# reads of header, key and value: a fixed path, with a small margin for a check added later.
MAX_RECORD_TABLE_READ_CALLS = 17


async def test_a_point_read_of_a_large_batch_is_a_fixed_small_number_of_python_calls(tmp_path: Path) -> None:
    engine, log = await _log(tmp_path, 1000, 3, 1024)
    async with engine:
        await _verify_large_batches(log)
        calls: dict[bool, set[int]] = {True: set(), False: set()}  # by whether the key is near the header
        for offset in (0, 1, 500, 999, 1000, 1999):
            names: list[str] = []

            def profile(frame: FrameType, event: str, arg: object, names: list[str] = names) -> None:
                if event == "call" and f"{os.sep}seglog{os.sep}" in frame.f_code.co_filename:
                    names.append(frame.f_code.co_qualname)

            sys.setprofile(profile)
            try:
                got = await log.read(offset, 1)
            finally:
                sys.setprofile(None)
            _check(got.records[0], offset, 1024)
            assert len(names) <= MAX_RECORD_TABLE_READ_CALLS, names
            calls[offset % 1000 < NEAR_KEYS].add(len(names))
        # The same path for every record (the Python read loop makes one call per range read: one fewer
        # where the header and key are one read).
        assert all(len(counted) == 1 for counted in calls.values()), calls


async def test_a_time_lookup_then_read_of_a_large_batch_checks_its_header_once(
    tmp_path: Path, counts: Counts
) -> None:
    engine, log = await _log(tmp_path, 1000, 3, 1024)
    async with engine:
        await _verify_large_batches(log)
        for offset in (0, 700, 1000, 1500):
            counts.reset()
            found = await log.offset_for_timestamp(BASE_TS + offset)
            assert found is not None and (found.offset, found.timestamp) == (offset, BASE_TS + offset)
            got = await log.read(found.offset, 1)
            _check(got.records[0], offset, 1024)
            assert (counts.blocking_reads, counts.header_walks, counts.crcs) == (0, 0, 0), counts
            _read_only_the_record(counts, offset)  # no second header read, no batch copy


async def test_a_time_lookup_then_read_of_a_small_batch_reads_it_once(tmp_path: Path, counts: Counts) -> None:
    engine, log = await _log(tmp_path, 10, 100, 100)
    async with engine:
        await log.read(0, 1)
        if not _page_cache_reads(log):
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")
        for offset in (3, 111, 555, 980):
            counts.reset()
            found = await log.offset_for_timestamp(BASE_TS + offset)
            assert found is not None and found.offset == offset
            got = await log.read(found.offset, 1)
            _check(got.records[0], offset, 100)
            assert (counts.cached_reads, counts.blocking_reads, counts.header_walks) == (1, 0, 0), counts


async def test_tables_stay_within_their_budget_and_reads_stay_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = default_budget()
    monkeypatch.setattr(budget, "_limit", 6000)  # room for about 187 batch entries: less than 3 logs' 300
    async with Engine.open(tmp_path, CONFIG) as engine:
        logs = []
        for name in ("a", "b", "c"):
            await engine.create_topic(name)
            log = engine.log(name)
            for i in range(100):
                await log.append(_records(1, i, 100))
            logs.append(log)
        for _ in range(2):
            for log in logs:
                for offset in range(0, 99, 9):
                    _check((await log.read(offset, 1)).records[0], offset, 100)
                    assert budget.used_bytes <= 6000
        tabled = [log._segments.active_segment._batch_table is not None for log in logs]  # type: ignore[union-attr]
        assert tabled.count(True) == 1, tabled  # the least recently read ones were dropped
        assert budget.used_bytes > 0


async def test_time_lookups_table_a_segment_larger_than_one_walk(
    tmp_path: Path, counts: Counts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(LogSegment, "_walk_max_bytes", 4096)  # ~20 one-record batches per walk
    engine, log = await _log(tmp_path, 1, 200, 100)
    async with engine:
        for _ in range(30):  # each lookup that the tabled part cannot answer tables the next part
            found = await log.offset_for_timestamp(BASE_TS + 198)
            assert found is not None and found.offset == 198
        if not _page_cache_reads(log):
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT): every read takes the thread")
        counts.reset()
        found = await log.offset_for_timestamp(BASE_TS + 198)
        assert found is not None and found.offset == 198
        assert (counts.blocking_reads, counts.header_walks) == (0, 0), counts


async def test_a_read_after_a_time_lookup_returns_what_it_would_without_it(tmp_path: Path) -> None:
    engine, log = await _log(tmp_path, 10, 20, 100)
    async with engine:
        await log.read(0, 1)
        plain = {(offset, size): await log.read(offset, size) for offset in (3, 57, 150) for size in (1, 300, 1 << 20)}
        for (offset, size), expected in plain.items():
            found = await log.offset_for_timestamp(BASE_TS + offset)
            assert found is not None and found.offset == offset
            got = await log.read(offset, size)
            assert got.records == expected.records and got.next_offset == expected.next_offset, (offset, size)
