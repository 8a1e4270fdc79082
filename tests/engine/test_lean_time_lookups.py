"""A time lookup and the one-record read that follows it, answered from the batch table and the page cache,
cost a small, fixed number of Python calls.

``offset_for_timestamp(ts)`` then ``read(offset, 1)`` is a handful of microseconds of work on the event loop,
so its Python calls are most of its cost: every helper, property and NamedTuple construction on the path
shows in the p50. Counted (``sys.setprofile``), not timed. Before the path was trimmed, one lookup + read
made about forty Python calls; the checks on the bytes read (the table against the batch header, the CRC
in the C reader) are the same.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import FrameType

import pytest

from seglog.engine import Engine, LogConfig, PartitionLog, Record
from seglog.engine.errors import CorruptRecordError
from seglog.indexes import TimestampOffset

PURE_PYTHON = bool(os.environ.get("SEGLOG_PURE_PYTHON"))
BASE_TS = 1_700_000_000_000
# Python calls (every frame, seglog's or not) of one cached lookup + one-record read, with the C reader, by
# records per append: batches read whole (one C call finds and builds the record), and large batches with
# record tables (the record's header, key and value read in one more guarded access).
MAX_CALLS = {1: 9, 100: 9, 1000: 11}


async def profiled_lookup_and_read(log: PartitionLog, timestamp: int) -> tuple[int, Record]:
    """The Python calls of one awaited ``offset_for_timestamp`` then ``read(offset, 1)``, and the record read."""
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        found = await log.offset_for_timestamp(timestamp)
        assert found is not None
        result = await log.read(found.offset, 1)
    finally:
        sys.setprofile(None)
    return calls, result.records[0]


@pytest.mark.skipif(PURE_PYTHON, reason="the pure-Python reader decodes in Python calls by design")
@pytest.mark.parametrize(
    "per_append",
    [
        pytest.param(1, id="one-record-batches-decoded-whole"),
        pytest.param(100, id="mid-sized-batches-searched-in-C"),
        pytest.param(1000, id="large-batches-with-record-tables"),
    ],
)
async def test_a_cached_time_lookup_and_its_read_make_a_small_fixed_number_of_python_calls(
    tmp_path: Path, per_append: int
) -> None:
    async with Engine.open(tmp_path, LogConfig()) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        count = 2000
        for first in range(0, count, per_append):
            await log.append(
                [Record(b"v%05d" % i + bytes(94), b"k", BASE_TS + i) for i in range(first, first + per_append)]
            )
        for i in range(0, count, 97):  # the first lookups table the segment's batches (one walk)
            found = await log.offset_for_timestamp(BASE_TS + i)
            assert found is not None
            await log.read(found.offset, 1)
        for target in (1234, 1235, 17):
            calls, record = await profiled_lookup_and_read(log, BASE_TS + target)
            assert (record.offset, record.timestamp) == (target, BASE_TS + target)
            assert calls <= MAX_CALLS[per_append], f"{calls} Python calls for one cached time lookup + read"


async def test_a_lookup_from_the_log_start_bisects_the_batch_table_once(tmp_path: Path) -> None:
    # A bisect of a table column costs more the larger the segment (a Python int per probe): a lookup from
    # the log start bisects only the running largest timestamps, and the read after it takes the record
    # the lookup kept. The ratio of a 10-million-record log's lookup to a 100,000-record one's depends on it.
    async with Engine.open(tmp_path, LogConfig()) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for first in range(0, 2000, 10):
            await log.append([Record(b"v%05d" % i, None, BASE_TS + i) for i in range(first, first + 10)])
        await log.offset_for_timestamp(BASE_TS)  # the first lookup tables the segment's batches (one walk)
        for target in (17, 1234, 1985):  # (the last write's batch is read from memory, not the table)
            bisects = 0

            def profile(frame: FrameType, event: str, arg: object) -> None:
                nonlocal bisects
                if event == "c_call" and getattr(arg, "__name__", None) == "bisect_left":
                    bisects += 1

            sys.setprofile(profile)
            try:
                found = await log.offset_for_timestamp(BASE_TS + target)
                assert found is not None
                result = await log.read(found.offset, 1)
            finally:
                sys.setprofile(None)
            assert (result.records[0].offset, bisects) == (target, 1)


@pytest.mark.parametrize("answer", [pytest.param(5, id="below-its-base"), pytest.param(40, id="beyond-the-next-base")])
async def test_a_lookup_answer_outside_its_segments_range_is_refused_as_a_misplaced_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: int
) -> None:
    # The range check the lean path makes inline (base <= offset < next base) refuses what the segment
    # says, as before: a segment whose files are not where its name says gives no answer.
    async with Engine.open(tmp_path, LogConfig()) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"a%d" % i, None, BASE_TS + i) for i in range(10)])
        await log.roll()
        await log.append([Record(b"b%d" % i, None, BASE_TS + i) for i in range(10, 30)])
        await log.roll()
        await log.append([Record(b"c%d" % i, None, BASE_TS + i) for i in range(30, 50)])
        segment = log._segments.floor_segment(15)
        assert segment is not None and segment.base_offset == 10
        monkeypatch.setattr(
            segment, "find_offset_by_timestamp_cached", lambda ts, start: TimestampOffset(BASE_TS + 15, answer)
        )
        with pytest.raises(CorruptRecordError, match="misplaced segment"):
            await log.offset_for_timestamp(BASE_TS + 15)
