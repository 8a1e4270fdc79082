"""A read-only LogSegment followed while someone else appends to its .log (the segment layer of followers).

The test plays the writer by writing bytes to the file itself, so every
interleaving is exact: what the follower's scan sees is what the file holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from seghelpers import batch

from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=100, roll_jitter_ms=0, now_ms=0)
MAX_BATCH = 1 << 20


async def _followed(path: Path) -> LogSegment:
    segment = await in_thread(
        LogSegment.open, path, 0, file_already_exists=True, writable=False, index_files_existed=(False, False), **KW
    )
    await in_thread(segment.begin_follow, trust_indexes=False)
    return segment


async def _follow(segment: LogSegment, limit: int = 1 << 30) -> bool:
    scan = await in_thread(segment.follow, MAX_BATCH, limit)
    if not scan.restart:
        segment.apply_follow(scan)
    return scan.restart


async def test_the_view_ends_at_the_last_complete_crc_valid_batch_and_grows_with_the_file(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    first, second = batch(0, "a", "b"), batch(2, "c")
    log.write_bytes(first + second[:30] + bytes(4000))  # a write in progress, then preallocated zeros
    segment = await _followed(tmp_path)
    try:
        assert not await _follow(segment)
        assert segment.size == len(first)
        assert segment.read_next_offset() == 2
        with open(log, "r+b") as f:
            f.seek(len(first))
            f.write(second)
        assert not await _follow(segment)
        assert segment.size == len(first) + len(second)
        got = segment.read(2, 1000)
        assert got is not None and [r.value for r in got.records()] == [b"c"]
        assert log.stat().st_size == len(first) + 30 + 4000  # nothing was cut or written
    finally:
        segment.close()


async def test_a_file_cut_below_the_view_or_a_validated_batch_overwritten_asks_for_a_restart(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    first, second = batch(0, "a"), batch(1, "b")
    log.write_bytes(first + second)
    segment = await _followed(tmp_path)
    try:
        assert not await _follow(segment)
        with open(log, "r+b") as f:
            f.truncate(len(first))
        assert await _follow(segment)  # shorter than the view
        with open(log, "r+b") as f:
            f.seek(len(first))
            f.write(batch(1, "B, other records at the same offsets"))
        assert await _follow(segment)  # as long as the view, but the last validated batch is another one
        assert segment.size == len(first) + len(second)  # a restart applies nothing
    finally:
        segment.close()


async def test_reads_deep_in_a_followed_segment_start_from_the_followers_own_entries(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(batch(i, f"v{i:03d}", ts=1000 + i) for i in range(300)))
    segment = await _followed(tmp_path)
    try:
        assert not await _follow(segment)
        floor = segment._follow_floor(250)
        assert floor is not None and floor[0] > 0 and floor[1] <= 250
        got = segment.read(250, 1, min_one_message=True)
        assert got is not None and [r.value for r in got.records()] == [b"v250"]
        assert segment._follow_time_floor(1250) is not None
        found = segment.find_offset_by_timestamp(1250)
        assert found is not None and (found.offset, found.timestamp) == (250, 1250)
        assert (segment.read_max_timestamp_and_offset_so_far()) == (1299, 299)
    finally:
        segment.close()


async def test_a_scan_stops_at_its_byte_limit_and_says_there_is_more(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"".join(batch(i, f"v{i:03d}") for i in range(20)))
    segment = await _followed(tmp_path)
    try:
        scan = await in_thread(segment.follow, MAX_BATCH, 200)
        assert scan.more and 0 < scan.valid_end < log.stat().st_size
        segment.apply_follow(scan)
        scan = await in_thread(segment.follow, MAX_BATCH, 1 << 30)
        assert not scan.more and scan.valid_end == log.stat().st_size and scan.next_offset == 20
        big = batch(20, "x" * 1000)  # one batch larger than the limit is read whole
        with open(log, "ab") as f:
            f.write(big)
        segment.apply_follow(scan)
        scan = await in_thread(segment.follow, MAX_BATCH, 200)
        assert scan.next_offset == 21 and not scan.more
    finally:
        segment.close()


async def test_only_a_read_only_segment_is_followed(tmp_path: Path) -> None:
    segment = LogSegment.open(tmp_path, 0, **KW)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match="read-only"):
            await in_thread(segment.begin_follow, trust_indexes=False)
        with pytest.raises(ValueError, match="follower"):
            segment._log.follow_size(0)
    finally:
        segment.close()
