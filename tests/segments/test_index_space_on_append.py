"""A segment reserves index space before it writes its .log: no space fails the append with nothing written.

A full disk stands in as a ``FileOps`` whose ``fallocate`` fails with ENOSPC for the index files
(they go through the file layer's system calls as the ``.log`` does); ``tests/engine/test_full_disk.py``
fills a real tmpfs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from seghelpers import SegmentFactory, append, batch

from seglog.indexes.abstract import PREPARE_AHEAD_BYTES
from seglog.indexes.errors import StorageError
from seglog.indexes.fileops import FileOps
from seglog.segments.segment import LogSegment


class _NoSpace(FileOps):
    """System calls on a disk the test fills: an index's ``fallocate`` of more than ``allowed`` bytes fails."""

    def __init__(self, allowed: int = 0) -> None:
        self.allowed = allowed
        self.full = False
        self.refused = 0

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        if self.full and length > self.allowed:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        super().fallocate(fd, offset, length)


async def test_an_append_whose_index_space_cannot_be_had_fails_before_the_log_is_written(
    make_segment: SegmentFactory,
) -> None:
    no_space = _NoSpace()
    segment = await make_segment(0, max_index_size=1 << 20, ops=no_space)
    await append(segment, [batch(0, "first")])  # the first batch never gets an index entry
    size, log_length = segment.size, segment.log_path.stat().st_size
    no_space.full = True
    with pytest.raises(StorageError, match="ENOSPC"):
        await append(segment, [batch(1, "second")])  # an entry is due: the indexes need space
    assert no_space.refused
    assert segment.size == size
    assert segment.log_path.stat().st_size == log_length, "the .log was written although the append failed"
    assert segment.read_next_offset() == 1
    no_space.full = False
    await append(segment, [batch(1, "second")])  # space is back: the same offsets go in
    assert segment.read_next_offset() == 2
    located = segment.translate_offset(1)
    assert located is not None and located.position == size


async def test_a_close_without_space_for_the_final_time_entry_says_so_after_releasing_the_files(
    make_segment: SegmentFactory,
) -> None:
    # Only the close writes this segment's time index (no entry was due before): the next open would
    # trust an index without the largest timestamp, so the close must not pass for a clean one.
    no_space = _NoSpace()
    segment = await make_segment(0, max_index_size=1 << 20, ops=no_space)
    await append(segment, [batch(0, "only", ts=1234)])
    no_space.full = True
    with pytest.raises(StorageError, match="ENOSPC"):
        segment.close()
    assert no_space.refused
    assert segment.closed
    segment.close()  # idempotent: everything was released the first time


async def test_recovery_does_not_allocate_the_crash_left_indexes_it_rebuilds(tmp_path: Path) -> None:
    # A crash leaves the active segment's indexes preallocated (sparse, 1 MiB each here). Mapping them
    # would mean allocating all of that first; recovery rebuilds them anyway, from new files.
    no_space = _NoSpace(allowed=PREPARE_AHEAD_BYTES)

    async def open_segment(existing: bool) -> LogSegment:
        return LogSegment.open(
            tmp_path, 0, max_index_size=1 << 20, index_interval_bytes=10, roll_jitter_ms=0, now_ms=0,
            file_already_exists=existing, ops=no_space,
        )

    segment = await open_segment(False)
    for offset in range(20):
        await append(segment, [batch(offset, f"v{offset}", ts=1000 + offset)])
    segment.close_handlers()  # as a crash leaves it: nothing trimmed
    assert segment.offset_index_path.stat().st_size == 1 << 20
    no_space.full = True
    reopened = await open_segment(True)
    try:
        assert reopened.recover(1 << 20) == 0
        assert reopened.read_next_offset() == 20
        located = reopened.translate_offset(13)
        assert located is not None and located.header.base_offset == 13
        found = reopened.find_offset_by_timestamp(1013)
        assert found is not None and found.offset == 13
    finally:
        reopened.close()
