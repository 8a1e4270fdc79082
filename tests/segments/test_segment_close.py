"""Closing from a worker thread never races a read on the loop: a read on the loop never uses a
descriptor a worker thread has closed (the OS may already have given its number to another file)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from seghelpers import batch

from seglog.indexes.errors import ClosedError
from seglog.segments.fileio import FileOps, in_thread
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=1 << 30, roll_jitter_ms=0, now_ms=0)


async def test_begin_close_on_the_loop_refuses_reads_before_the_files_close(tmp_path: Path) -> None:
    seg = await LogSegment.open(tmp_path, 0, **KW)  # type: ignore[arg-type]
    await seg.append([batch(0, "hello")])
    assert (await seg.read(0, 1000)) is not None
    seg.begin_close()
    with pytest.raises(ClosedError):
        await seg.read(0, 1000)
    await in_thread(seg.close_in_thread)
    await in_thread(seg.close_in_thread)  # once only
    await seg.close()


class _ReadGate(FileOps):
    """Holds a cached read on the loop until a worker thread is trying to close the file."""

    def __init__(self) -> None:
        self.hold = False
        self.closing = threading.Event()
        self.closed_fd_while_reading = False
        self.reading = False

    def preadv_nowait(self, fd: int, buf: bytearray, position: int) -> int:
        if self.hold:
            self.hold = False
            self.reading = True
            self.closing.wait(2)  # the close below has started in its thread
            got = super().preadv_nowait(fd, buf, position)
            self.reading = False
            return got
        return super().preadv_nowait(fd, buf, position)

    def close(self, fd: int) -> None:
        self.closed_fd_while_reading |= self.reading
        super().close(fd)


async def test_a_close_in_a_thread_waits_for_a_read_on_the_loop(tmp_path: Path) -> None:
    ops = _ReadGate()
    seg = await LogSegment.open(tmp_path, 0, ops=ops, **KW)  # type: ignore[arg-type]
    await seg.append([batch(0, "hello")])
    await seg.read(0, 1000)  # indexes loaded
    loop = asyncio.get_running_loop()

    def close_soon() -> None:
        ops.closing.set()
        seg.close_in_thread()

    ops.hold = True
    loop.call_soon(lambda: loop.run_in_executor(None, close_soon))
    await asyncio.sleep(0)  # the executor job is submitted; the next read blocks until it runs
    data = await seg.read(0, 1000)
    assert data is not None and bytes(data.data[:8]) == bytes(8)  # base offset 0: our own bytes
    for _ in range(200):
        if seg._log.closed and seg.closed:
            break
        await asyncio.sleep(0.01)
    assert not ops.closed_fd_while_reading
    await seg.close()
