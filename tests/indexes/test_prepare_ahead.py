"""prepare_ahead: the bytes after a writable index's last entry are written for real, entries untouched.

A preallocated index is a sparse file; the first mapped write into a hole makes ext4 reserve a block
inside the page fault (1-3 ms measured), on the event loop for an append. The segment's append job
reserves (allocates and zero-fills) the index space in its worker thread, before the write, so that
the loop's entry writes land on written bytes; prepare_ahead is the best-effort form of reserve.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog.indexes import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from seglog.indexes.abstract import PREPARE_AHEAD_BYTES

BASE = 1000
SIZE = 1 << 20


def data_ranges(path: Path) -> list[tuple[int, int]]:
    """The (start, end) ranges of ``path`` that hold data, per SEEK_DATA / SEEK_HOLE."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        position = 0
        while position < end:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError:
                break
            stop = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, stop))
            position = stop
    finally:
        os.close(fd)
    return out


def covered(path: Path, start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in data_ranges(path))


def test_the_bytes_after_the_last_entry_stop_being_a_hole(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, BASE, max_index_size=SIZE)
    if data_ranges(path) != []:
        pytest.skip("this file system does not report holes (SEEK_HOLE)")
    index.prepare_ahead()
    assert covered(path, 0, PREPARE_AHEAD_BYTES)
    assert not covered(path, PREPARE_AHEAD_BYTES, 2 * PREPARE_AHEAD_BYTES)
    # Entries up to half the prepared span need nothing more; past it, the next span is written.
    half = PREPARE_AHEAD_BYTES // 2 // index.entry_size
    for i in range(half + 1):
        index.append(BASE + i, i * 100)
    index.prepare_ahead()
    assert covered(path, 0, (half + 1) * index.entry_size + PREPARE_AHEAD_BYTES)
    index.close()


@pytest.mark.parametrize("kind", ["offset", "time"])
def test_entries_are_never_overwritten(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"00000000000000001000.{kind}index"
    index: OffsetIndex | TimeIndex = (
        OffsetIndex(path, BASE, max_index_size=SIZE) if kind == "offset" else TimeIndex(path, BASE, max_index_size=SIZE)
    )
    count = 0
    for round_ in range(5):  # prepare, append across the prepared span's middle, prepare again, ...
        index.prepare_ahead()
        for _ in range(PREPARE_AHEAD_BYTES // 3 // index.entry_size):
            if isinstance(index, OffsetIndex):
                index.append(BASE + count, count * 10)
            else:
                index.maybe_append(10_000 + count, BASE + count)
            count += 1
        assert index.entries == count, round_
    index.truncate_to(BASE + count // 2)  # stale entries after the valid ones: zeroed, never re-read
    index.prepare_ahead()
    index.close()
    again: OffsetIndex | TimeIndex = (
        OffsetIndex(path, BASE, max_index_size=SIZE) if kind == "offset" else TimeIndex(path, BASE, max_index_size=SIZE)
    )
    assert again.entries == count // 2
    for i in range(0, count // 2, 97):
        if isinstance(again, OffsetIndex):
            assert again.lookup(BASE + i) == OffsetPosition(BASE + i, i * 10)
        else:
            assert again.lookup(10_000 + i) == TimestampOffset(10_000 + i, BASE + i)
    again.close()


def test_a_read_only_closed_or_resized_index_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, BASE, max_index_size=SIZE)
    index.append(BASE, 0)
    index.close()  # trimmed to its one entry: nothing after it to prepare
    before = path.read_bytes()
    reader = OffsetIndex(path, BASE, writable=False)
    reader.prepare_ahead()
    reader.close()
    writer = OffsetIndex(path, BASE, max_index_size=SIZE)
    writer.prepare_ahead()  # trimmed: no slot after the last entry
    assert path.read_bytes() == before
    writer.resize(SIZE)  # grown again: a new mapping, prepared from scratch
    writer.prepare_ahead()
    if data_ranges(path) != [(0, len(before))]:  # holes are reported: the span after the entry is written
        assert covered(path, 0, PREPARE_AHEAD_BYTES)
    writer.close()
    writer.prepare_ahead()  # closed: nothing, no error
    assert path.read_bytes() == before


async def test_an_engine_append_prepares_the_active_indexes(tmp_path: Path) -> None:
    # Through the public API: after appends that add index entries, the next entries of both index
    # files of the active segment land on written bytes, not on holes.
    from seglog.engine import Engine, Record

    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for _ in range(20):
            await log.append([Record(b"x" * 5000)])  # > index.interval.bytes: an entry per append
        index = tmp_path / "t-0" / f"{0:020d}.index"
        time_index = tmp_path / "t-0" / f"{0:020d}.timeindex"
        if all(start == 0 for start, _ in data_ranges(index)) and data_ranges(index) == [(0, index.stat().st_size)]:
            pytest.skip("this file system does not report holes (SEEK_HOLE)")
        assert covered(index, 0, 19 * 8 + PREPARE_AHEAD_BYTES // 2)
        assert covered(time_index, 0, 19 * 12 + PREPARE_AHEAD_BYTES // 2)
