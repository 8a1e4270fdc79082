"""Index file space is allocated before the mapping touches it; no space is a StorageError, never SIGBUS.

A store through a shared mapping into a hole of a file system that has no room left is answered
with SIGBUS (on tmpfs even a read is). These tests stand in for a full disk with a ``FileOps`` whose
``fallocate`` fails (``test_full_disk.py`` fills a real tmpfs), and check the rule: every slot
is allocated before it is written, a failed allocation raises a ``StorageError`` naming ENOSPC with
nothing written, and where ``posix_fallocate`` is missing the pages are written instead.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from seglog.indexes import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset, abstract
from seglog.indexes.errors import StorageError
from seglog.indexes.fileops import Buffer, FileOps

BASE = 100
SIZE = 1 << 20


class Disk(FileOps):
    """The indexes' system calls on a disk the test fills: ``posix_fallocate`` (and ``pwrite``) fail as told."""

    def __init__(self) -> None:
        self.fallocate_errno: int | None = None
        self.pwrite_fails = False
        self.fallocated: list[tuple[int, int]] = []

    def fill(self, fallocate_errno: int | None = errno.ENOSPC, pwrite_fails: bool = True) -> Disk:
        self.fallocate_errno, self.pwrite_fails = fallocate_errno, pwrite_fails
        return self

    def free(self) -> None:
        self.fill(None, pwrite_fails=False)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        if self.fallocate_errno is not None:
            raise OSError(self.fallocate_errno, os.strerror(self.fallocate_errno))
        self.fallocated.append((offset, length))
        super().fallocate(fd, offset, length)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        if self.pwrite_fails:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return super().pwritev(fd, buffers, position)


def holes(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < os.fstat(fd).st_size
    finally:
        os.close(fd)


def reports_holes(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    with probe.open("wb") as f:
        f.truncate(1 << 20)
    try:
        return holes(probe)
    finally:
        probe.unlink()


def offset_index(path: Path, ops: FileOps | None = None) -> OffsetIndex:
    return OffsetIndex(path, BASE, max_index_size=SIZE, ops=ops)


def time_index(path: Path, ops: FileOps | None = None) -> TimeIndex:
    return TimeIndex(path, BASE, max_index_size=SIZE, ops=ops)


def add_offset(index: OffsetIndex | TimeIndex, n: int) -> None:
    if isinstance(index, OffsetIndex):
        index.append(BASE + n, n * 10)
    else:
        index.maybe_append(1000 + n, BASE + n)


@pytest.mark.parametrize("make", [offset_index, time_index])
def test_an_entry_that_cannot_get_space_is_a_storage_error_naming_enospc_and_nothing_is_written(
    tmp_path: Path, make: Callable[[Path, FileOps], OffsetIndex | TimeIndex]
) -> None:
    path = tmp_path / "00000000000000000100.index"
    disk = Disk()
    index = make(path, disk)
    try:
        disk.fill()
        with pytest.raises(StorageError, match="ENOSPC") as raised:
            add_offset(index, 0)
        assert "nothing was written" in str(raised.value)
        assert index.entries == 0
        disk.free()
        assert path.read_bytes() == bytes(len(path.read_bytes())), "an entry reached the file"
        add_offset(index, 0)  # space is back: the same append works
        add_offset(index, 1)
        assert index.entries == 2
    finally:
        index.close()


def test_reserve_allocates_ahead_and_an_entry_then_needs_no_allocation(tmp_path: Path) -> None:
    if not reports_holes(tmp_path):
        pytest.skip("this file system does not report holes (SEEK_HOLE)")
    path = tmp_path / "00000000000000000100.index"
    fake = Disk()
    index = offset_index(path, fake)
    try:
        index.reserve(3)
        assert fake.fallocated == [(0, abstract.PREPARE_AHEAD_BYTES)]
        fake.fallocate_errno = errno.ENOSPC  # the disk is full now: entries in reserved space still go in
        for n in range(100):
            add_offset(index, n)
        assert index.lookup(BASE + 42) == OffsetPosition(BASE + 42, 420)
    finally:
        index.close()


def test_when_only_a_page_is_left_reserve_takes_that_page(tmp_path: Path) -> None:
    class _OnePageLeft(Disk):
        def fallocate(self, fd: int, offset: int, length: int) -> None:
            if length > os.sysconf("SC_PAGE_SIZE"):
                raise OSError(errno.ENOSPC, "no space")
            super().fallocate(fd, offset, length)

    fake = _OnePageLeft()
    index = offset_index(tmp_path / "00000000000000000100.index", fake)
    try:
        index.reserve(1)
        assert fake.fallocated == [(0, os.sysconf("SC_PAGE_SIZE"))]
    finally:
        index.close()


@pytest.mark.parametrize("unsupported", [errno.EOPNOTSUPP, errno.ENOSYS])
def test_without_fallocate_the_pages_are_written_before_the_mapping_touches_them(
    tmp_path: Path, unsupported: int
) -> None:
    if not reports_holes(tmp_path):
        pytest.skip("this file system does not report holes (SEEK_HOLE)")
    path = tmp_path / "00000000000000000100.timeindex"
    disk = Disk()
    index = time_index(path, disk)
    try:
        disk.fill(fallocate_errno=unsupported, pwrite_fails=False)
        add_offset(index, 0)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_HOLE) >= os.sysconf("SC_PAGE_SIZE")  # the entry's page is written
        finally:
            os.close(fd)
        # And without room, the write fallback fails the entry the same way.
        disk.fill(fallocate_errno=unsupported, pwrite_fails=True)
        with pytest.raises(StorageError, match="ENOSPC"):
            for n in range(1, SIZE // index.entry_size):
                add_offset(index, n)
        assert index.lookup(1000) == TimestampOffset(1000, BASE)
    finally:
        disk.free()
        index.close()


def _sparse_existing_index(path: Path, entries: int) -> bytes:
    index = offset_index(path)
    for n in range(entries):
        add_offset(index, n)
    index.close()  # trimmed to its entries
    data = path.read_bytes()
    with path.open("r+b") as f:
        f.truncate(SIZE)  # as a crash leaves it: preallocated, a hole after the entries
    return data


@pytest.mark.parametrize("fallocate_errno", [None, errno.EOPNOTSUPP])
def test_an_existing_index_with_holes_is_allocated_whole_before_it_is_mapped(
    tmp_path: Path, fallocate_errno: int | None
) -> None:
    if not reports_holes(tmp_path):
        pytest.skip("this file system does not report holes (SEEK_HOLE)")
    path = tmp_path / "00000000000000000100.index"
    data = _sparse_existing_index(path, 10)
    assert holes(path)
    index = offset_index(path, Disk().fill(fallocate_errno=fallocate_errno, pwrite_fails=False))
    try:
        assert not holes(path)
        assert path.read_bytes()[: len(data)] == data  # the entries are kept (the fallback reads them back)
        assert index.entries == SIZE // index.entry_size  # an existing file is all entries (Kafka's rule)
    finally:
        index.close()


def test_an_existing_index_with_holes_on_a_full_disk_is_a_storage_error(tmp_path: Path) -> None:
    if not reports_holes(tmp_path):
        pytest.skip("this file system does not report holes (SEEK_HOLE)")
    path = tmp_path / "00000000000000000100.index"
    _sparse_existing_index(path, 10)
    with pytest.raises(StorageError, match="ENOSPC"):
        offset_index(path, Disk().fill())


def test_a_trimmed_existing_index_is_opened_without_allocating(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = offset_index(path)
    add_offset(index, 0)
    index.close()
    reopened = offset_index(path, Disk().fill())  # a full disk: a trimmed file needs nothing more
    try:
        assert reopened.lookup(BASE) == OffsetPosition(BASE, 0)
    finally:
        reopened.close()
