"""Large appends of large records: planned on the event loop, their bodies written by the append's thread.

What a producer relies on does not change with where the body is written: its records stored exactly as
given when it called ``append`` (even if it reuses its list while it waits), its offsets and timestamps,
CRCs that verify, a full disk that leaves the log as it was, and the same data after a reopen.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest
from enginehelpers import reach, read_all, writer_held

from seglog.engine import Engine, LogConfig, PartitionLog, Record, errors
from seglog.engine.config import LOG_APPEND_TIME
from seglog.engine.log import LATE_BODY_BYTES, LATE_BODY_RECORD_BYTES, LATE_BODY_RECORDS
from seglog.segments import batch as batch_module
from seglog.segments.batch import scan_batches
from seglog.segments.faults import FailingOps, GatedOps
from seglog.segments.fileio import use_ops

needs_c = pytest.mark.skipif(bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="SEGLOG_PURE_PYTHON=1: no C module")

VALUE = LATE_BODY_RECORD_BYTES * 2
COUNT = max(LATE_BODY_RECORDS, LATE_BODY_BYTES // VALUE + 1)  # a batch that takes the late path
BIG = LogConfig(max_message_bytes=8 << 20)


def big_batch(tag: bytes, timestamp: int | None = 1_700_000_000_000) -> list[Record]:
    return [
        Record(tag + b"%06d" % i + b"." * (VALUE - len(tag) - 6), b"k%d" % i, timestamp, (("n", b"%d" % i),))
        for i in range(COUNT)
    ]


def verify_files(log: PartitionLog) -> int:
    """Every batch on disk passes its header and CRC checks; the number of records."""
    total = 0
    for path in sorted(log.directory.glob("*.log")):
        data = path.read_bytes()
        scan = scan_batches(data, max_batch_bytes=1 << 30)
        tail = data[scan.valid_end :]
        assert tail.count(0) == len(tail), f"{path.name}: {scan.stop} {scan.reason}"  # only preallocated zeros
        total += sum(header.record_count for _, header in scan.batches)
    return total


@pytest.fixture
def made_in() -> list[threading.Thread]:
    """The threads LateBody.materialize ran in (a spy on the real method)."""
    threads: list[threading.Thread] = []
    original = batch_module.LateBody.materialize

    def spy(self: batch_module.LateBody) -> bytes:
        threads.append(threading.current_thread())
        return original(self)

    batch_module.LateBody.materialize = spy  # type: ignore[method-assign]
    yield threads
    batch_module.LateBody.materialize = original  # type: ignore[method-assign]


@needs_c
async def test_large_records_are_stored_as_given_with_valid_crcs(
    tmp_path: Path, made_in: list[threading.Thread]
) -> None:
    async with Engine.open(tmp_path, BIG) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        first, second = big_batch(b"a"), big_batch(b"b", timestamp=None)
        r1 = await log.append(first)
        r2 = await log.append(second)
        assert (r1.first_offset, r1.last_offset, r2.first_offset) == (0, COUNT - 1, COUNT)
        assert r1.max_timestamp == 1_700_000_000_000
        assert made_in and all(t is not threading.main_thread() for t in made_in)  # the late path ran
        stored = await read_all(log, 8 << 20)
        assert [(r.value, r.key, r.headers) for r in stored] == [(r.value, r.key, r.headers) for r in first + second]
        assert verify_files(log) == 2 * COUNT
    async with Engine.open(tmp_path, BIG) as eng:
        assert [r.value for r in await read_all(eng.log("t"), 8 << 20)] == [r.value for r in first + second]


@needs_c
async def test_a_caller_reusing_its_list_while_it_waits_changes_nothing_stored(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path, BIG) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            records = big_batch(b"a")
            expected = [r.value for r in records]
            async with writer_held(log, ops):
                task = asyncio.ensure_future(log.append(records))
                await reach(lambda: len(log._pending) == 1, "the append is planned and queued; its body is not made")
                records[:] = [Record(b"other")] * len(records)
            await task
            assert [r.value for r in await read_all(log, 8 << 20)] == [b"blocker", *expected]
            assert verify_files(log) == COUNT + 1


@needs_c
async def test_log_append_time_stamps_a_late_body(tmp_path: Path) -> None:
    config = LogConfig(max_message_bytes=8 << 20, message_timestamp_type=LOG_APPEND_TIME)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        result = await log.append(big_batch(b"a", timestamp=5))
        assert result.log_append_time == result.max_timestamp > 1_700_000_000_000
        assert {r.timestamp for r in await read_all(log, 8 << 20)} == {result.log_append_time}
        assert verify_files(log) == COUNT


@needs_c
async def test_a_full_disk_during_a_late_body_append_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    ops = FailingOps()
    with use_ops(ops):
        async with Engine.open(tmp_path, BIG) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append([Record(b"before")])
            ops.fail("pwritev", errno.ENOSPC, partial_bytes=4096, times=1)
            with pytest.raises(errors.StorageError, match="No space left"):
                await log.append(big_batch(b"lost"))
            assert log.log_end_offset == 1
            result = await log.append(big_batch(b"after"))
            assert result.first_offset == 1
            assert verify_files(log) == 1 + COUNT
    async with Engine.open(tmp_path, BIG) as eng:
        values = [r.value for r in await read_all(eng.log("t"), 8 << 20)]
        assert values[0] == b"before" and len(values) == 1 + COUNT and values[1].startswith(b"after")


async def test_a_large_append_rolls_and_indexes_like_any_other(tmp_path: Path) -> None:
    # Sizes are exact before the body exists: rolls happen at the same places and fetches by
    # offset land on the right records (also on the Python path, where nothing is planned).
    config = LogConfig(max_message_bytes=8 << 20, segment_bytes=3 * COUNT * VALUE, index_interval_bytes=4096)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for tag in (b"a", b"b", b"c", b"d", b"e"):
            await log.append(big_batch(tag))
        assert log.segment_count >= 2
        got = await log.read(3 * COUNT + 5, 1)
        assert got.records[0].offset == 3 * COUNT + 5 and got.records[0].value.startswith(b"d000005")
        assert verify_files(log) == 5 * COUNT
