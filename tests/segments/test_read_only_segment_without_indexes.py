"""A read-only segment whose index files are absent (a valid state: docs/OPERATIONS.md §3 step 3)
answers reads and time lookups by scanning the .log (time lookups used to crash)."""
import os

from seghelpers import append, batch

from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0, now_ms=0)

async def _make(tmp_path, remove):
    seg = LogSegment.open(tmp_path, 0, **KW)
    for i in range(5):
        await append(seg, [batch(i * 2, "a", "b")])
    seg.close()
    for suffix in remove:
        os.remove(tmp_path / f"{0:020d}{suffix}")
    return LogSegment.open(tmp_path, 0, file_already_exists=True, writable=False, **KW)

async def test_find_offset_by_timestamp_scans_the_log_without_index_files(tmp_path):
    seg = await _make(tmp_path, [".index", ".timeindex"])
    try:
        found = seg.find_offset_by_timestamp(35)
        assert found is not None and found.offset == 4
    finally:
        seg.close()

async def test_read_works_without_a_time_index_file(tmp_path):
    seg = await _make(tmp_path, [".timeindex"])
    try:
        data = seg.read(4, 10_000)
        assert data is not None and data.records()[0].offset == 4
    finally:
        seg.close()

async def test_read_next_offset_works_without_a_time_index_file(tmp_path):
    seg = await _make(tmp_path, [".timeindex"])
    try:
        assert seg.read_next_offset() == 10
    finally:
        seg.close()
