"""Chunked recovery with batches larger than the 4 MiB chunk, straddling chunk boundaries, and a torn
big batch at the end: everything valid kept, only the torn tail cut, indexes as a fresh build."""

from seghelpers import append

from seglog.segments.batch import TimestampType, encode_batch
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=1 << 16, index_interval_bytes=4096, roll_jitter_ms=0, now_ms=0)
MiB = 1 << 20

def big(offset, size, ts):
    return encode_batch(offset, [Record(b"z" * size, timestamp=ts)], timestamp_type=TimestampType.CREATE_TIME, now_ms=0)

async def test_recovery_keeps_batches_larger_than_a_chunk_and_cuts_only_the_torn_tail(tmp_path):
    seg = LogSegment.open(tmp_path, 0, **KW)
    sizes = [3 * MiB, 5 * MiB, 100, 9 * MiB, 4 * MiB - 200, 4 * MiB + 7, 50, 6 * MiB]
    bs = [big(i, s, 1000 + i) for i, s in enumerate(sizes)]
    for b in bs:
        await append(seg, [b])
    before = [seg._offset_index.get().entry(i) for i in range(seg._offset_index.get().entries)]
    full = seg.size
    seg.close_handlers()
    with open(tmp_path / f"{0:020d}.log", "r+b") as f:
        f.truncate(full - 1000)  # tear the last (6 MiB) batch
    seg = LogSegment.open(tmp_path, 0, file_already_exists=True, **KW)
    try:
        cut = seg.recover(max_batch_bytes=16 * MiB)
        assert cut == len(bs[-1]) - 1000
        assert seg.size == sum(len(b) for b in bs[:-1])
        assert seg.read_next_offset() == len(bs) - 1
        oi = seg._offset_index.get()
        assert [oi.entry(i) for i in range(oi.entries)] == before[: oi.entries]
        assert (seg.read_max_timestamp_and_offset_so_far()).timestamp == 1000 + len(bs) - 2
        for o in range(len(bs) - 1):
            r = (seg.read(o, 1, min_one_message=True)).records()
            assert r[0].offset == o and len(r[0].value) == sizes[o]
    finally:
        seg.close()
