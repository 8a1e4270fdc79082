"""The follow-up work of an append (its worker thread runs the indexes' prepare_ahead after the write).

prepare_ahead writes the bytes after an index's last entry under the index lock, so a rebuild, a trim
or a close that runs meanwhile is never undone by it (it used to write outside the lock from a
snapshot); and whatever the follow-up raises, an append whose bytes are written succeeds (a
BaseException there used to fail an append whose bytes stayed in the file).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from seghelpers import append, batch, wait_until

from seglog.indexes import OffsetIndex
from seglog.indexes.abstract import AbstractIndex
from seglog.indexes.errors import ClosedError
from seglog.indexes.fileops import Buffer, FileOps
from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment


class _GatedOps(FileOps):
    """System calls whose pwrite into an ``.index`` file waits for ``go`` once ``armed``: prepare_ahead's.

    Models the worker thread being descheduled (or the pwrite being slow: it allocates blocks)
    just before its pwrite, while another thread changes the index.
    """

    def __init__(self) -> None:
        self.armed = False
        self.entered = threading.Event()
        self.go = threading.Event()
        self._paths: dict[int, str] = {}

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self._paths[fd] = path
        return fd

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> int:
        if self.armed and self._paths.get(fd, "").endswith(".index"):
            self.entered.set()
            assert self.go.wait(60)
        return super().pwritev(fd, buffers, position)


class _WatchedLock:
    """An index's RLock that notes when a thread had to wait for it (another thread held it)."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self.contended.set()
        return bool(self._lock.acquire(blocking, timeout))

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _watch_lock(index: AbstractIndex[Any]) -> _WatchedLock:
    watched = _WatchedLock(index._lock)
    index._lock = watched  # type: ignore[assignment]
    return watched


def _prepare_in_thread(index: AbstractIndex[Any], gated: _GatedOps) -> threading.Thread:
    gated.armed = True
    worker = threading.Thread(target=index.prepare_ahead)
    worker.start()
    assert gated.entered.wait(60)  # the snapshot (start, end) is taken; the pwrite has not happened yet
    return worker


def _run_beside_the_pwrite(other: threading.Thread, lock: _WatchedLock) -> None:
    # The other thread either waits for the index lock the held pwrite is under, or (no lock taken
    # around the pwrite) does all its work meanwhile: either way it has met the pwrite in flight.
    other.start()
    assert wait_until(lambda: lock.contended.is_set() or not other.is_alive(), 60)


def test_prepare_ahead_never_zeroes_entries_a_concurrent_rebuild_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index claims thread safety (one RLock per method), but prepare_ahead wrote outside the lock
    # from a snapshot. A rebuild (reset() keeps the length, so no remap and no new generation) that
    # re-adds entries meanwhile - the read path's first-load check does exactly this in another
    # executor thread - got every entry at or after the snapshot's start overwritten with zeros.
    gated = _GatedOps()
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=1 << 20, ops=gated)
    try:
        for i in range(10):
            index.append(i, i * 100)
        lock = _watch_lock(index)
        worker = _prepare_in_thread(index, gated)

        def rebuild() -> None:
            index.reset()  # rebuild: same length, same mapping
            for i in range(20):
                index.append(i, i * 100)

        other = threading.Thread(target=rebuild)
        _run_beside_the_pwrite(other, lock)
        gated.go.set()
        worker.join(60)
        other.join(60)
        assert [index.entry(n).offset for n in range(20)] == list(range(20))
    finally:
        gated.go.set()
        index.close()


def test_prepare_ahead_never_regrows_an_index_trimmed_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The generation check only voided `_prepared`; the pwrite computed before the trim (roll or
    # close) still landed past the new end of file and extended it with 64 KiB of zeros. Reopened,
    # an existing index is taken as full of valid entries (Kafka's rule): 8,000+ zero "entries".
    path = tmp_path / "00000000000000000000.index"
    gated = _GatedOps()
    index = OffsetIndex(path, 0, max_index_size=1 << 20, ops=gated)
    for i in range(10):
        index.append(i, i * 100)
    lock = _watch_lock(index)
    worker = _prepare_in_thread(index, gated)
    other = threading.Thread(target=index.close)  # trims to the 10 entries (what roll / close do)
    try:
        _run_beside_the_pwrite(other, lock)
    finally:
        gated.go.set()
        worker.join(60)
        other.join(60)
    assert path.stat().st_size == 10 * index.entry_size
    reopened = OffsetIndex(path, 0)
    try:
        assert reopened.entries == 10
    finally:
        reopened.close()


class _Abort(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit (asyncio passes it on normally)."""


async def test_a_base_exception_in_the_follow_up_work_does_not_fail_a_written_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A BaseException raised by the follow-up work (`then`) comes after the pwritev (and fdatasync)
    # succeeded. It used to fail the append while its bytes stayed in the .log (nothing cuts them
    # back on that path), so a "failed" append came back after a reopen. The follow-up is best
    # effort: the append succeeds and is accounted for.
    async def open_segment(existing: bool) -> LogSegment:
        return LogSegment.open(
            tmp_path, 0, max_index_size=1000, index_interval_bytes=10, roll_jitter_ms=0, now_ms=0,
            file_already_exists=existing,
        )

    segment = await open_segment(False)
    try:
        await append(segment, [batch(0, "a")])
        await append(segment, [batch(1, "b")])  # an index entry is due: the indexes load, prepare runs
        size = segment.size

        def abort(self: AbstractIndex[Any]) -> None:
            raise _Abort

        monkeypatch.setattr(AbstractIndex, "prepare_ahead", abort)
        await append(segment, [batch(2, "written")])
        assert segment.size > size
        size = segment.size
    finally:
        segment.close()
    monkeypatch.undo()
    reopened = await open_segment(True)
    try:
        assert reopened.size == size
        assert reopened.read_next_offset() == 3
    finally:
        reopened.close()


async def test_an_engine_append_whose_follow_up_work_fails_is_acknowledged_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same through the engine: the writer used to hand the BaseException to the caller (the
    # append "failed", the log end stayed) while the record was in the file and came back after a
    # reopen. Now the append is acknowledged, and kept.
    from seglog.engine import Engine, Record

    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"x" * 5000)])
        await log.append([Record(b"y" * 5000)])  # an index entry is due: indexes loaded, prepare runs

        def abort(self: AbstractIndex[Any]) -> None:
            raise _Abort

        monkeypatch.setattr(AbstractIndex, "prepare_ahead", abort)
        assert (await log.append([Record(b"kept")])).first_offset == 2
        assert log.log_end_offset == 3
        monkeypatch.undo()
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 0)
        assert [r.value for r in (await log.read(2)).records] == [b"kept"]
        assert log.log_end_offset == 3


async def test_a_close_during_an_append_leaves_no_zero_entries_in_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LogSegment.close() while an append is in flight: the close trims both indexes while the
    # append's follow-up (prepare_ahead) is about to pwrite. It used to pwrite from a pre-trim
    # snapshot outside the lock: the closed .index grew back to 64 KiB, and reopened, its zero tail
    # was taken for 8,192 entries. Now the pwrite holds the index lock, so the trim comes after it.
    import asyncio

    gated = _GatedOps()
    segment = LogSegment.open(
        tmp_path, 0, max_index_size=1 << 20, index_interval_bytes=10, roll_jitter_ms=0, now_ms=0, ops=gated
    )
    try:
        await append(segment, [batch(0, "a")])
        await append(segment, [batch(1, "b")])  # indexes loaded; prepare covers the first 64 KiB
        await append(segment, [batch(2, "c")])
        # As when the entries have used up half of the prepared span: the next append prepares again.
        segment._offset_index.get()._prepared = segment._time_index.get()._prepared = 0
        offset = segment.read_next_offset()
        lock = _watch_lock(segment._offset_index.get())
        gated.armed = True
        appending = asyncio.ensure_future(append(segment, [batch(offset, "e")]))
        assert await asyncio.to_thread(gated.entered.wait, 60)  # the offset index's prepare is at its pwrite
        closing = asyncio.ensure_future(in_thread(segment.close))
        # the close waits for the offset index's lock (the trim comes after the pwrite), or
        # (no lock around the pwrite) trims and closes the indexes meanwhile.
        offset_index = segment._offset_index.get()
        assert await asyncio.to_thread(wait_until, lambda: lock.contended.is_set() or offset_index.closed, 60)
        gated.go.set()
        with contextlib.suppress(ClosedError):  # its index entries meet the closed index
            await appending
        await closing
    finally:
        gated.go.set()
        segment.close()
    index_path = tmp_path / "00000000000000000000.index"
    assert index_path.stat().st_size % 8 == 0
    entries = OffsetIndex(index_path, 0)
    try:
        assert entries.entry(entries.entries - 1).offset > 0, "trailing zero entries after a clean close"
    finally:
        entries.close()
