"""State after truncate_to: max timestamp, next offset, reads, index entries and the first batch's
timestamp match the data that remains (out-of-order timestamps, entries around the cut, a segment
opened without reading its first batch)."""
import random

from seghelpers import append, batch

from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=1 << 16, index_interval_bytes=150, roll_jitter_ms=0, now_ms=0)

async def test_truncate_to_leaves_timestamps_offsets_reads_and_indexes_consistent(tmp_path):
    rnd = random.Random(5)
    for trial in range(30):
        d = tmp_path / str(trial)
        d.mkdir()
        seg = LogSegment.open(d, 100, **KW)
        ts = [rnd.randrange(1000) for _ in range(60)]
        off = 100
        spans = []
        for i in range(0, 60, 3):
            b = [batch(off + j, "v" * rnd.randrange(1, 80), ts=ts[i + j]) for j in range(1)]
            await append(seg, b)
            spans.append((off, ts[i]))
            off += 1
        cut = rnd.randrange(100, off + 2)
        seg.truncate_to(cut, now_ms=0)
        kept = [(o, t) for o, t in spans if o < cut]
        exp_max = max((t for _, t in kept), default=-1)
        m = seg.read_max_timestamp_and_offset_so_far()
        assert m.timestamp == exp_max, (trial, m, exp_max)
        if kept:
            assert m.offset == next(o for o, t in kept if t == exp_max)
        assert seg.read_next_offset() == (kept[-1][0] + 1 if kept else 100)
        # append after truncation and check lookups by offset and timestamp against brute force
        first = kept[-1][0] + 1 if kept else 100  # offsets follow on (docs/FORMAT.md §2.3 rule 7)
        for j in range(10):
            o = first + j
            t = rnd.randrange(1000)
            await append(seg, [batch(o, "w" * rnd.randrange(1, 80), ts=t)])
            kept.append((o, t))
        for o, _ in kept:
            r = (seg.read(o, 1, min_one_message=True)).records()
            assert r[0].offset == o
        for target in range(0, 1001, 37):
            exp = next(((t, o) for o, t in kept if t >= target), None)
            got = seg.find_offset_by_timestamp(target)
            assert (None if got is None else (got.timestamp, got.offset)) == exp, (trial, target)
        seg.close()
        # reopen clean and check the persisted time index agrees
        seg = LogSegment.open(d, 100, file_already_exists=True, **KW)
        m = seg.read_max_timestamp_and_offset_so_far()
        assert m.timestamp == max(t for _, t in kept)
        for target in range(0, 1001, 37):
            exp = next(((t, o) for o, t in kept if t >= target), None)
            got = seg.find_offset_by_timestamp(target)
            assert (None if got is None else (got.timestamp, got.offset)) == exp, (trial, target, "reopen")
        seg.close()


async def test_a_bulk_opened_segment_made_active_by_truncation_rolls_by_its_first_batch_timestamp(tmp_path):
    # A segment opened with read_first_batch=False (every non-last segment at engine open) must learn its
    # first batch's timestamp when it becomes the active one (truncate_to after the later segments are
    # removed), as Kafka's timeWaitedForRoll loads rollingBasedTimestamp: time-based rolling used to be
    # measured from the open time instead, and first_batch_timestamp said "unknown" for a non-empty segment.
    kw = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0)
    seg = LogSegment.open(tmp_path, 0, now_ms=0, **kw)
    for i in range(5):
        await append(seg, [batch(i, "v", ts=1_000 + i)])
    seg.close()
    seg = await in_thread(LogSegment.open, tmp_path, 0, now_ms=10_000_000, file_already_exists=True,
                          read_first_batch=False, **kw)
    try:
        seg.truncate_to(3, now_ms=10_000_000)
        assert seg.first_batch_timestamp == 1_000
        # a new batch with timestamp 2_000 has waited 1_000 ms since the first batch (Kafka)
        assert seg.time_waited_for_roll(10_000_000, 2_000) == 1_000
    finally:
        seg.close()
