"""The async file layer on real files: appends, reads, truncation, sync, renames, faults."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from pathlib import Path

import pytest
from seghelpers import LoopThreadOps, append_file, read_at, wait_until

from seglog.indexes.errors import ClosedError, StorageError
from seglog.segments import fileio
from seglog.segments.faults import FailingOps, GatedOps, PowerLossOps
from seglog.segments.fileio import FileOps, SegmentFile


async def test_create_append_read_reopen(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    f = SegmentFile.open(path, create=True)
    assert f.size == 0
    assert await append_file(f, [b"hello ", bytearray(b"big "), memoryview(b"world")]) == 0
    assert await append_file(f, [b"!"]) == 15
    assert await append_file(f, []) == 16
    assert f.size == 16 and path.read_bytes() == b"hello big world!"
    assert bytes(await read_at(f, 6, 3)) == b"big"
    assert bytes(await read_at(f, 10, 100)) == b"world!"  # clamped at the logical end
    assert bytes(await read_at(f, 16, 10)) == b""
    f.fsync()
    f.close()
    f.close()  # idempotent
    g = SegmentFile.open(path, create=False, writable=False)
    assert g.size == 16
    with pytest.raises(ClosedError, match="read-only"):
        await append_file(g, [b"x"])
    g.close()


async def test_many_buffers_beyond_iov_max(tmp_path: Path) -> None:
    f = SegmentFile.open(tmp_path / "b.log", create=True)
    parts = [bytes([i % 256]) * 3 for i in range(2500)]
    await append_file(f, parts)
    assert bytes(await read_at(f, 0, f.size)) == b"".join(parts)
    f.close()


async def test_preallocate_then_trim_on_close(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    f = SegmentFile.open(path, create=True, preallocate_bytes=1 << 20)
    assert (f.size, f.file_length, path.stat().st_size) == (0, 1 << 20, 1 << 20)
    await append_file(f, [b"abc"])
    assert bytes(await read_at(f, 0, 100)) == b"abc"  # never the preallocated zeros
    f.close()
    assert path.stat().st_size == 3
    g = SegmentFile.open(path, create=True, preallocate_bytes=1 << 20)  # exists: kept as is
    assert (g.size, g.file_length) == (3, 3)
    g.close()


async def test_truncate_and_trim(tmp_path: Path) -> None:
    f = SegmentFile.open(tmp_path / "t.log", create=True, preallocate_bytes=4096)
    await append_file(f, [b"0123456789"])
    f.truncate(4)
    assert f.size == 4 and (tmp_path / "t.log").stat().st_size == 4
    with pytest.raises(ValueError, match="cannot truncate to 5"):
        f.truncate(5)
    await append_file(f, [b"xy"])
    assert bytes(await read_at(f, 0, 10)) == b"0123xy"
    f.trim()
    f.close()


async def test_closed_file_refuses_everything(tmp_path: Path) -> None:
    f = SegmentFile.open(tmp_path / "c.log", create=True)
    f.close()
    for call in (lambda: f.write([b"x"], 0), lambda: f.pread(0, 1), f.fsync, lambda: f.truncate(0),
                 lambda: f.read_nowait(lambda pread: pread(0, 1)), lambda: f.read(lambda pread: pread(0, 1))):
        with pytest.raises(ClosedError, match="closed"):
            call()


async def test_os_errors_become_storage_errors_naming_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "x.log"
    with pytest.raises(StorageError, match=r"no-such-dir/x\.log: open failed") as info:
        SegmentFile.open(missing, create=True)
    assert isinstance(info.value.__cause__, FileNotFoundError)
    with pytest.raises(StorageError, match="open failed"):
        SegmentFile.open(tmp_path / "absent.log", create=False)
    with pytest.raises(StorageError, match="directory fsync"):
        await fileio.fsync_dir(tmp_path / "no-such-dir")
    with pytest.raises(StorageError, match="rename"):
        await fileio.replace(tmp_path / "absent", tmp_path / "b")
    with pytest.raises(StorageError, match="list"):
        await fileio.list_dir(tmp_path / "no-such-dir")


async def test_directory_and_small_file_helpers(tmp_path: Path) -> None:
    ckpt = tmp_path / "sub" / "recovery-point-offset-checkpoint"
    await fileio.make_dirs(ckpt.parent)
    assert await fileio.read_small_file(ckpt) is None
    await fileio.atomic_write(ckpt, b"0\n1\norders 0 42\n")
    await fileio.atomic_write(ckpt, b"0\n1\norders 0 43\n")
    assert await fileio.read_small_file(ckpt) == b"0\n1\norders 0 43\n"
    assert sorted(await fileio.list_dir(ckpt.parent)) == [ckpt.name]  # no .tmp left behind
    await fileio.replace(ckpt, ckpt.with_name("moved"))
    assert await fileio.remove(ckpt.with_name("moved")) is True
    assert await fileio.remove(ckpt.with_name("moved")) is False
    await fileio.fsync_dir(tmp_path)


async def test_rename_keeps_the_descriptor(tmp_path: Path) -> None:
    f = SegmentFile.open(tmp_path / "r.log", create=True)
    await append_file(f, [b"abc"])
    f.rename(tmp_path / "r.log.deleted")
    assert f.path == tmp_path / "r.log.deleted" and not (tmp_path / "r.log").exists()
    await append_file(f, [b"def"])
    assert (tmp_path / "r.log.deleted").read_bytes() == b"abcdef"
    assert f.mtime_ms() > 0
    f.close()


async def test_enospc_mid_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    ops = FailingOps()
    path = tmp_path / "full.log"
    f = SegmentFile.open(path, create=True, ops=ops)
    await append_file(f, [b"kept"])
    ops.fail("pwritev", errno.ENOSPC, partial_bytes=3)
    with pytest.raises(StorageError, match=r"full.log: write failed: No space left on device") as info:
        await append_file(f, [b"lost-1", b"lost-2"])
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
    assert f.size == 4 and path.read_bytes() == b"kept"  # the 3 bytes that got through are cut off
    await append_file(f, [b"+next"])
    assert path.read_bytes() == b"kept+next"
    f.close()


async def test_failed_fdatasync_rolls_the_append_back(tmp_path: Path) -> None:
    ops = FailingOps()
    path = tmp_path / "sync.log"
    f = SegmentFile.open(path, create=True, ops=ops)
    await append_file(f, [b"a"], fsync=True)
    ops.fail("fdatasync", errno.EIO)
    with pytest.raises(StorageError, match="fdatasync failed"):
        await append_file(f, [b"b"], fsync=True)
    assert f.size == 1 and path.read_bytes() == b"a"
    await append_file(f, [b"c"], fsync=True)
    assert path.read_bytes() == b"ac"
    assert ops.calls["fdatasync"] == 3
    f.close()


async def test_reads_use_the_page_cache_on_the_loop_and_fall_back_to_a_thread(tmp_path: Path) -> None:
    ops = FailingOps()
    f = SegmentFile.open(tmp_path / "cache.log", create=True, ops=ops)
    await append_file(f, [b"x" * 10_000])
    assert bytes(await read_at(f, 100, 50)) == b"x" * 50
    assert (ops.calls["preadv_nowait"], ops.calls["pread"]) == (1, 0)  # just written: cached
    ops.fail("preadv_nowait", errno.EAGAIN)
    assert bytes(await read_at(f, 100, 50)) == b"x" * 50
    assert (ops.calls["preadv_nowait"], ops.calls["pread"]) == (2, 1)
    ops.fail("preadv_nowait", errno.EOPNOTSUPP)  # a file system without RWF_NOWAIT
    assert bytes(await read_at(f, 0, 5)) == b"xxxxx"
    assert bytes(await read_at(f, 0, 5)) == b"xxxxx"
    assert (ops.calls["preadv_nowait"], ops.calls["pread"]) == (3, 3)  # fast path switched off
    ops.fail("pread", errno.EIO)
    with pytest.raises(StorageError, match="read of 5 bytes at 0"):
        await read_at(f, 0, 5)
    f.close()


async def test_a_read_that_would_block_is_run_again_whole_with_blocking_reads(tmp_path: Path) -> None:
    ops = FailingOps()
    f = SegmentFile.open(tmp_path / "rr.log", create=True, ops=ops)
    await append_file(f, [b"0123456789"])
    threads: list[str] = []

    def two_reads(pread: fileio.PRead) -> bytes:
        threads.append(threading.current_thread().name)
        return bytes(pread(0, 2)) + bytes(pread(8, 2))

    ops.fail("preadv_nowait", errno.EAGAIN, after=1)  # the second read is "not cached"
    assert f.read_nowait(two_reads) is fileio.WOULD_BLOCK
    assert await fileio.in_thread(f.read, two_reads) == b"0189"
    assert threads[0] == threading.current_thread().name and threads[1] != threads[0]
    assert (ops.calls["preadv_nowait"], ops.calls["pread"]) == (2, 2)
    f.close()


async def test_the_page_cache_attempt_makes_no_blocking_call_on_the_event_loop_thread(tmp_path: Path) -> None:
    ops = LoopThreadOps()
    with fileio.use_ops(ops):
        f = await fileio.in_thread(SegmentFile.open, tmp_path / "t.log", create=True, preallocate_bytes=8192)
        await append_file(f, [b"abc"], fsync=True)
        await read_at(f, 0, 3)
        assert f.read_nowait(lambda pread: pread(0, 3)) == b"abc"  # on the loop, page cache only
        await fileio.in_thread(f.truncate, 1)
        await fileio.in_thread(f.close)
        await fileio.atomic_write(tmp_path / "ckpt", b"x")
    assert ops.on_loop == []


async def test_a_write_is_seen_by_readers_only_once_its_owner_publishes_it(tmp_path: Path) -> None:
    with GatedOps() as ops:
        f = SegmentFile.open(tmp_path / "w.log", create=True, ops=ops)
        writing = ops.gate("pwritev")
        job = fileio.submit(f.write, [b"x" * 1000], 0)
        await writing.reached()
        writing.release()
        assert await job == 1000 == (tmp_path / "w.log").stat().st_size
        assert f.size == 0 and f.read_nowait(lambda pread: pread(0, 10)) == b""
        with pytest.raises(ValueError, match="not at the logical end 0"):
            f.write([b"y"], 1000)  # the next write goes where the published size says
        f.advance(1000)
        assert f.size == 1000 and await read_at(f, 990, 100) == b"x" * 10
        f.close()


async def test_close_waits_for_reads_running_in_threads(tmp_path: Path) -> None:
    failing = FailingOps()
    with GatedOps(failing) as ops:
        f = SegmentFile.open(tmp_path / "w.log", create=True, ops=ops)
        await append_file(f, [b"y" * 100])
        failing.fail("preadv_nowait", errno.EAGAIN, times=None)  # every read goes to a thread
        reading = ops.gate("pread")
        read_done_at_close: list[bool] = []
        ops.gate("close", hold=False, on_enter=lambda: read_done_at_close.append(reading.left.is_set()))
        reads = [asyncio.ensure_future(read_at(f, 0, 100)) for _ in range(20)]
        await reading.reached()  # one read is inside its pread, in a thread
        closing = asyncio.ensure_future(fileio.in_thread(f.close))
        assert await asyncio.to_thread(wait_until, lambda: f._idle is not None), "close() waits for the read"
        reading.release()
        await closing
        results = await asyncio.gather(*reads, return_exceptions=True)
    assert read_done_at_close == [True], "the descriptor was closed under a read"
    assert results.count(b"y" * 100) >= 1
    assert all(r == b"y" * 100 or isinstance(r, ClosedError) for r in results)


async def test_power_loss_keeps_only_synced_data(tmp_path: Path) -> None:
    ops = PowerLossOps()
    await fileio.make_dirs(tmp_path / "d", ops=ops)
    old = tmp_path / "d" / "old.log"
    old.write_bytes(b"existing")
    f = SegmentFile.open(old, create=False, ops=ops)
    await append_file(f, [b"+synced"], fsync=True)
    await append_file(f, [b"+lost"])
    h = SegmentFile.open(tmp_path / "d" / "kept.log", create=True, ops=ops)  # creation is durable
    await append_file(h, [b"unsynced"])
    # A file created behind the file layer's back, its directory never fsynced: its entry is lost.
    fd = ops.open(str(tmp_path / "d" / "new.log"), os.O_CREAT | os.O_WRONLY)
    ops.pwritev(fd, [b"gone"], 0)
    ops.fdatasync(fd)
    ops.close(fd)
    for x in (f, h):
        x.close()
    ops.power_fail()
    assert old.read_bytes() == b"existing+synced"
    assert not (tmp_path / "d" / "new.log").exists()
    assert (tmp_path / "d" / "kept.log").read_bytes() == b""


async def test_power_loss_can_tear_the_unsynced_tail(tmp_path: Path) -> None:
    ops = PowerLossOps()
    path = tmp_path / "torn.log"
    path.write_bytes(b"")
    f = SegmentFile.open(path, create=False, ops=ops)
    await append_file(f, [b"durable|"], fsync=True)
    await append_file(f, [b"0123456789"])
    f.close()
    assert ops.power_fail(torn_bytes=4) == [str(path)]
    assert path.read_bytes() == b"durable|0123"


def test_failing_ops_refuses_unknown_operations() -> None:
    with pytest.raises(ValueError, match="no operation"):
        FailingOps().fail("writev")


def test_an_unclosed_file_warns_and_releases_its_descriptor(tmp_path: Path) -> None:
    import gc

    fd = os.open(tmp_path / "leak.log", os.O_RDWR | os.O_CREAT)
    f = SegmentFile(tmp_path / "leak.log", fd, size=0, file_length=0, ops=FileOps(), writable=True)
    with pytest.warns(ResourceWarning, match="unclosed segment file"):
        del f
        gc.collect()
    with pytest.raises(OSError):
        os.fstat(fd)


class RecordingOps(FileOps):
    def __init__(self) -> None:
        self.opened: list[str] = []

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        self.opened.append(os.path.basename(path))
        return super().open(path, flags, mode)

    def segment_opens(self) -> int:
        return sum(1 for name in self.opened if name.startswith("seg.log"))


async def test_a_deferred_file_opens_its_descriptor_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    path.write_bytes(b"0123456789")
    ops = RecordingOps()
    f = SegmentFile.open(path, create=False, ops=ops, defer=True)
    assert (f.size, f.file_length, ops.segment_opens()) == (10, 10, 0)
    f.fsync()  # nothing of it was written through this object: no descriptor needed
    f.rename(tmp_path / "seg.log.deleted")  # by path (the directory is opened for its fsync)
    assert ops.segment_opens() == 0
    assert await read_at(f, 2, 3) == b"234"  # the first read opens it (in a thread), under the new name
    assert await read_at(f, 0, 2) == b"01"
    assert ops.opened.count("seg.log.deleted") == 1
    await append_file(f, [b"ab"])
    assert (await read_at(f, 8, 10), ops.segment_opens()) == (b"89ab", 1)
    f.close()
    never = SegmentFile.open(tmp_path / "seg.log.deleted", create=False,
                                   ops=ops, defer=True)
    never.close()  # closing a file that was never opened opens nothing
    assert ops.segment_opens() == 1
    with pytest.raises(ClosedError):
        await read_at(never, 0, 1)
    with pytest.raises(StorageError, match="not a regular file"):
        SegmentFile.open(tmp_path, create=False, defer=True)


async def test_a_slow_deferred_open_does_not_block_the_loop(tmp_path: Path) -> None:
    # A cold inode (or NFS) makes the lazy open() slow; a read on the loop meanwhile must not wait.
    (tmp_path / "seg.log").write_bytes(b"x" * 4096)
    with GatedOps() as ops:
        f = SegmentFile.open(tmp_path / "seg.log", create=False, ops=ops,
                                   defer=True)
        opening = ops.gate("open", path_contains="seg.log")
        first = asyncio.ensure_future(read_at(f, 0, 10))  # goes to a thread and opens, slowly
        await opening.reached()
        # The loop's page-cache attempt declines at once (no descriptor yet) instead of waiting for the
        # open in flight: were it to wait, it could only return once the gate gave up on the test.
        assert f.read_cached(10, 10) is None
        assert not opening.left.is_set(), "the loop-side read waited for the open in flight"
        second = asyncio.ensure_future(read_at(f, 10, 10))
        opening.release()
        assert (await first, await second) == (b"x" * 10, b"x" * 10)
        f.close()


async def test_a_deferred_open_racing_a_rename_opens_the_renamed_file(tmp_path: Path) -> None:
    # Retention renames a segment to .deleted while a consumer still reads it: the read must work.
    (tmp_path / "seg.log").write_bytes(b"0123456789")
    with GatedOps() as ops:
        f = SegmentFile.open(tmp_path / "seg.log", create=False,
                                   ops=ops, defer=True)
        syncing_dir = ops.gate("fsync")
        rename = asyncio.ensure_future(fileio.in_thread(f.rename, tmp_path / "seg.log.deleted"))
        await syncing_dir.reached()  # the file has its new name; the directory fsync is still running
        assert not (tmp_path / "seg.log").exists()
        assert await read_at(f, 0, 4) == b"0123"
        syncing_dir.release()
        await rename
        assert f.path.name == "seg.log.deleted" and await read_at(f, 4, 2) == b"45"
        f.close()


class _PlainOps(FileOps):
    """The default system calls under a type of a test's own: read_cached_spans takes its Python loop."""


async def test_the_one_call_read_of_spans_returns_what_the_python_loop_returns(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    with_c = SegmentFile.open(tmp_path / "c.log", create=True)
    looped = SegmentFile.open(tmp_path / "py.log", create=True, ops=_PlainOps())
    for f in (with_c, looped):
        await append_file(f, [data])
    if not with_c._page_cache_reads:
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    cases = [
        ((0, 61), (5000, 16), (9000, 1024)),
        ((100, 0), (len(data) - 10, 50), (len(data), 5), (len(data) + 100, 7)),  # clamped at the logical end
        ((7, 1),),
        (),
    ]
    for spans in cases:
        got, expected = with_c.read_cached_spans(spans), looped.read_cached_spans(spans)
        assert got is not None and expected is not None
        assert [bytes(p) for p in got] == [bytes(p) for p in expected] == [data[p : p + n] for p, n in spans]
        if fileio._pread_spans is not None:
            assert all(type(p) is bytes for p in got)  # the C call's pieces: no bytearray to copy again
    # What the C call declines, the loop decides: a negative span is refused as before.
    for f in (with_c, looped):
        with pytest.raises(ValueError, match="negative read position"):
            f.read_cached_spans(((0, 10), (-1, 5)))
    with_c.close()
    looped.close()


def test_the_c_read_of_spans_declines_what_it_cannot_read_whole(tmp_path: Path) -> None:
    pread_spans = fileio._pread_spans
    if pread_spans is None:
        pytest.skip("SEGLOG_PURE_PYTHON=1 or no C module: read_cached_spans' loop alone")
    path = tmp_path / "spans.bin"
    path.write_bytes(b"0123456789")
    fd = os.open(path, os.O_RDONLY)
    try:
        whole = pread_spans(fd, ((2, 3), (8, 5), (20, 1)), 10)
        if whole is None:
            pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
        assert whole == [b"234", b"89", b""]
        assert pread_spans(fd, ((8, 5),), 20) is None  # the file is shorter than the size given: a short read
        assert pread_spans(fd, ((-1, 5),), 10) is None
        assert pread_spans(fd, ((0, -5),), 10) is None
        assert pread_spans(fd, ((0, 5, 1),), 10) is None
        assert pread_spans(fd, (("0", 5),), 10) is None
    finally:
        os.close(fd)
    assert pread_spans(fd, ((0, 5),), 10) is None  # a closed descriptor: the loop reads again and reports


async def test_a_fault_injected_into_page_cache_reads_reaches_a_read_of_spans(tmp_path: Path) -> None:
    # The C call is only for the default system calls: a FileOps of a test's own sees every read.
    ops = FailingOps()
    f = SegmentFile.open(tmp_path / "faults.log", create=True, ops=ops)
    await append_file(f, [b"x" * 1000])
    if not f._page_cache_reads:
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    assert f.read_cached_spans(((0, 10), (500, 10))) == [b"x" * 10] * 2
    assert ops.calls["preadv_nowait"] == 2
    ops.fail("preadv_nowait", errno.EIO)
    with pytest.raises(StorageError, match="read of 10 bytes at 0"):
        f.read_cached_spans(((0, 10), (500, 10)))
    f.close()
