"""State after truncate_to: max timestamp, next offset, reads, and index entries must match the data
that remains (out-of-order timestamps, entries around the cut)."""
import random

from seghelpers import batch

from seglog.segments.segment import LogSegment

KW = dict(max_index_size=1 << 16, index_interval_bytes=150, roll_jitter_ms=0, now_ms=0)

async def test_truncate_state(tmp_path):
    rnd = random.Random(5)
    for trial in range(30):
        d = tmp_path / str(trial)
        d.mkdir()
        seg = await LogSegment.open(d, 100, **KW)
        ts = [rnd.randrange(1000) for _ in range(60)]
        off = 100
        spans = []
        for i in range(0, 60, 3):
            b = [batch(off + j, "v" * rnd.randrange(1, 80), ts=ts[i + j]) for j in range(1)]
            await seg.append(b)
            spans.append((off, ts[i]))
            off += 1
        cut = rnd.randrange(100, off + 2)
        await seg.truncate_to(cut, now_ms=0)
        kept = [(o, t) for o, t in spans if o < cut]
        exp_max = max((t for _, t in kept), default=-1)
        m = await seg.read_max_timestamp_and_offset_so_far()
        assert m.timestamp == exp_max, (trial, m, exp_max)
        if kept:
            assert m.offset == next(o for o, t in kept if t == exp_max)
        assert await seg.read_next_offset() == (kept[-1][0] + 1 if kept else 100)
        # append after truncation and check lookups by offset and timestamp against brute force
        first = kept[-1][0] + 1 if kept else 100  # offsets follow on (docs/FORMAT.md §2.3 rule 7)
        for j in range(10):
            o = first + j
            t = rnd.randrange(1000)
            await seg.append([batch(o, "w" * rnd.randrange(1, 80), ts=t)])
            kept.append((o, t))
        for o, _ in kept:
            r = (await seg.read(o, 1, min_one_message=True)).records()
            assert r[0].offset == o
        for target in range(0, 1001, 37):
            exp = next(((t, o) for o, t in kept if t >= target), None)
            got = await seg.find_offset_by_timestamp(target)
            assert (None if got is None else (got.timestamp, got.offset)) == exp, (trial, target)
        await seg.close()
        # reopen clean and check the persisted time index agrees
        seg = await LogSegment.open(d, 100, file_already_exists=True, **KW)
        m = await seg.read_max_timestamp_and_offset_so_far()
        assert m.timestamp == max(t for _, t in kept)
        for target in range(0, 1001, 37):
            exp = next(((t, o) for o, t in kept if t >= target), None)
            got = await seg.find_offset_by_timestamp(target)
            assert (None if got is None else (got.timestamp, got.offset)) == exp, (trial, target, "reopen")
        await seg.close()
