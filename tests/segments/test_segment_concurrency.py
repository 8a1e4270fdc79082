"""Concurrency and model tests of LogSegment: readers beside a writer, cancellation, the event-loop
thread, and reads/time lookups against a list model (Hypothesis, bounded)."""

from __future__ import annotations

import asyncio
import errno
import random
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seghelpers import LoopThreadOps, SegmentFactory, append

from seglog.engine.log import segment_read
from seglog.segments.batch import TimestampType, encode_batch
from seglog.segments.faults import FailingOps, GatedOps
from seglog.segments.fileio import WOULD_BLOCK, WouldBlock, in_thread
from seglog.segments.records import Record
from seglog.segments.segment import FetchData, LogSegment


def encoded(offset: int, values: Sequence[bytes], timestamps: Sequence[int]) -> bytes:
    records = [Record(v, None, t) for v, t in zip(values, timestamps, strict=True)]
    return encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)


async def test_readers_never_see_a_partial_batch(make_segment: SegmentFactory) -> None:
    ops = FailingOps()
    # Every second read is "not cached", so reads also run in threads while writes are in flight.
    ops.fail("preadv_nowait", errno.EAGAIN, times=None, after=0)
    seg = await make_segment(0, index_interval_bytes=256, max_index_size=1 << 16, ops=ops)
    rng = random.Random(3)
    stop = asyncio.Event()
    writing = False  # an append is in flight (the writer is suspended in it)
    seen: list[bool] = []  # per successful read: whether it started while an append was in flight

    async def writer() -> None:
        nonlocal writing
        offset = 0
        for _ in range(150):
            group = []
            for _ in range(rng.randint(1, 4)):
                n = rng.randint(1, 20)
                group.append(encoded(offset, [rng.randbytes(rng.randint(0, 300)) for _ in range(n)], [offset] * n))
                offset += n
            writing = True
            await append(seg, group, fsync=rng.random() < 0.05)
            writing = False
        stop.set()

    def read_at(start: int, size: int, nowait: bool) -> FetchData | WouldBlock | None:
        return seg.read(start, size, None, True, nowait=nowait)

    async def reader(seed: int) -> None:
        r = random.Random(seed)
        reads = 0
        while not stop.is_set() or not reads:  # until the writer is done, and at least one read each
            # As the engine reads: the page-cache attempt on the loop, else one thread hop.
            end = await segment_read(lambda nowait: seg.read_next_offset(nowait=nowait))
            start = r.randrange(end) if end else 0
            during_a_write = writing
            size = r.randint(1, 20_000)
            got = await segment_read(partial(read_at, start, size))
            if got is None:
                assert start >= end
                await asyncio.sleep(0)
                continue
            records = got.records()  # raises CorruptRecordError on any partial or torn batch
            offsets = [x.offset for x in records]
            assert offsets == list(range(start, start + len(offsets)))
            seen.append(during_a_write)
            reads += 1

    await asyncio.gather(writer(), *(reader(i) for i in range(4)))
    assert any(seen), "no read ran beside an append"
    got = seg.read(0, 1 << 30)
    assert got is not None
    assert [r.offset for r in got.records()] == list(range(seg.read_next_offset()))


@pytest.mark.parametrize(
    ("cancelled_at", "next_offset"), [(None, 2), ("pwritev", 4), ("fdatasync", 4)], ids=["before", "write", "sync"]
)
async def test_a_cancelled_append_is_all_or_nothing(
    make_segment: SegmentFactory, cancelled_at: str | None, next_offset: int
) -> None:
    # Cancelled before it starts, the append writes nothing; cancelled during its write or its sync, it
    # completes and its bytes count (the caller still gets CancelledError).
    with GatedOps() as ops:
        seg = await make_segment(0, index_interval_bytes=0, ops=ops)
        await append(seg, [encoded(0, [b"a"], [1])])
        await append(seg, [encoded(1, [b"a2"], [1])])  # loads the indexes: the next append goes straight to the write
        gate = ops.gate(cancelled_at or "pwritev")
        task = asyncio.ensure_future(
            append(seg, [encoded(2, [b"b" * 1000], [2]), encoded(3, [b"c"], [3])], fsync=True)
        )
        if cancelled_at is not None:
            await gate.reached()
        task.cancel()
        gate.release()
        with pytest.raises(asyncio.CancelledError):
            await task
    # The append happened entirely or not at all, and the bookkeeping matches the file.
    assert seg.read_next_offset() == next_offset
    assert seg.size == seg.log_path.stat().st_size
    await append(seg, [encoded(next_offset, [b"d"], [4])])
    got = seg.read(0, 1 << 20)
    assert got is not None
    assert [r.offset for r in got.records()] == list(range(next_offset + 1))


async def test_the_page_cache_attempts_do_no_blocking_io_on_the_loop(make_segment: SegmentFactory) -> None:
    # The segment is synchronous; what runs on the loop is its appends' bookkeeping and the nowait
    # attempts of its reads (the engine runs everything else in a thread hop, as here).
    ops = LoopThreadOps()
    seg = await make_segment(0, index_interval_bytes=0, preallocate_bytes=1 << 16, ops=ops)
    for i in range(5):
        await append(seg, [encoded(i, [b"v"], [i])], fsync=i == 4)
    attempts = [
        seg.read(2, 100, nowait=True),
        seg.find_offset_by_timestamp(30, nowait=True),
        seg.translate_offset(3, nowait=True),
        seg.read_next_offset(nowait=True),
        seg.largest_timestamp(nowait=True),
    ]
    assert all(a is not WOULD_BLOCK for a in attempts), "just written: every attempt answers from the page cache"
    for blocking in (partial(seg.truncate_to, 4, now_ms=0), seg.flush, partial(seg.recover, 1 << 20),
                     seg.on_become_inactive, partial(seg.change_file_suffixes, "", ".deleted"), seg.delete):
        await in_thread(blocking)
    assert ops.on_loop == []


segments_strategy = st.lists(
    st.lists(st.tuples(st.binary(max_size=40), st.integers(0, 1000)), min_size=1, max_size=6),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments_strategy, st.integers(0, 400), st.data())
def test_reads_and_time_lookups_match_a_list_model(
    tmp_path_factory: object, batches: list[list[tuple[bytes, int]]], interval: int, data: st.DataObject
) -> None:
    directory: Path = tmp_path_factory.mktemp("model")  # type: ignore[attr-defined]

    async def scenario() -> None:
        seg = LogSegment.open(
            directory, 10, max_index_size=4096, index_interval_bytes=interval, roll_jitter_ms=0, now_ms=0
        )
        try:
            model: list[tuple[int, bytes, int]] = []
            offset = 10
            pending: list[bytes] = []
            for records in batches:
                pending.append(encoded(offset, [v for v, _ in records], [t for _, t in records]))
                model += [(offset + i, v, t) for i, (v, t) in enumerate(records)]
                offset += len(records)
                if data.draw(st.booleans()):  # group several batches into one append sometimes
                    await append(seg, pending)
                    pending = []
            await append(seg, pending)
            if data.draw(st.booleans()):
                seg.recover(1 << 20)
            for _ in range(10):
                start = data.draw(st.integers(0, offset + 2))
                got = seg.read(start, data.draw(st.integers(0, 3000)), min_one_message=True)
                want = [(o, v, t) for o, v, t in model if o >= start]
                if not want:
                    assert got is None
                    continue
                assert got is not None
                records = [(r.offset, r.value, r.timestamp) for r in got.records()]
                assert records == want[: len(records)] and records
                target = data.draw(st.integers(0, 1001))
                from_offset = data.draw(st.integers(0, offset))
                hit = seg.find_offset_by_timestamp(target, starting_offset=from_offset)
                expected = next(((t, o) for o, _, t in model if t >= target and o >= from_offset), None)
                assert (None if hit is None else (hit.timestamp, hit.offset)) == expected
            assert seg.read_next_offset() == offset
        finally:
            seg.delete()

    asyncio.run(scenario())
