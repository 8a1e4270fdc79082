"""Closing from a worker thread never races a read on the loop: a read on the loop never uses a
descriptor a worker thread has closed (the OS may already have given its number to another file)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from seghelpers import append, batch, wait_until

from seglog.indexes.errors import ClosedError
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=1 << 30, roll_jitter_ms=0, now_ms=0)


async def test_begin_close_on_the_loop_refuses_reads_before_the_files_close(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, **KW)  # type: ignore[arg-type]
    await append(seg, [batch(0, "hello")])
    assert (seg.read(0, 1000)) is not None
    seg.begin_close()
    with pytest.raises(ClosedError):
        seg.read(0, 1000)
    await in_thread(seg.close)
    await in_thread(seg.close)  # once only
    seg.close()


async def test_a_close_in_a_thread_waits_for_a_read_on_the_loop(tmp_path: Path) -> None:
    # The interleaving is forced: the read is on the loop, inside its page-cache pread (its file is
    # busy), when a worker thread starts closing the segment; the read waits there until the closer
    # is waiting for it, or has (wrongly) closed the descriptor under it.
    ops = GatedOps()
    seg = LogSegment.open(tmp_path, 0, ops=ops, **KW)  # type: ignore[arg-type]
    await append(seg, [batch(0, "hello")])
    seg.read(0, 1000)  # indexes loaded: the next read's only file access is the .log pread
    closer = threading.Thread(target=seg.close)
    closed_during_read: list[bool] = []

    def close_while_reading() -> None:
        closer.start()
        # The closer waits for the read in flight (its condition variable exists), or it closed the
        # file without waiting (the bug): whichever happens first, the race was run.
        wait_until(lambda: seg._log._idle is not None or close.entered.is_set())
        closed_during_read.append(close.entered.is_set())

    close = ops.gate("close", path_contains=".log", hold=False)
    read = ops.gate("preadv_nowait", path_contains=".log", hold=False, on_enter=close_while_reading)
    try:
        data = seg.read(0, 1000, nowait=True)  # on the loop: the page-cache attempt
        await read.passed()
        await asyncio.to_thread(closer.join, 30)
    finally:
        ops.release_all()
    assert closed_during_read == [False], "the descriptor was closed while a read on the loop was using it"
    assert data is not None and bytes(data.data[:8]) == bytes(8)  # base offset 0: our own bytes
    assert close.entered.is_set() and seg.closed and seg._log.closed
    seg.close()
