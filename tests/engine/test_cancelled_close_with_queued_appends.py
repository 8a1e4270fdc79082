"""Appends queued when a PartitionLog.close() is cancelled are written once and acknowledged; an
append reported as failed is never written later. (A cancelled close used to cancel the writer,
which failed every queued append with ClosedError but left them queued: the next writer wrote them
anyway, so a producer told "closed" got its record in the log.)"""
import asyncio
from pathlib import Path

from enginehelpers import reach

from seglog.engine import Engine, LogConfig, Record
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_appends_queued_behind_a_cancelled_close_are_written_once_and_acknowledged(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path, LogConfig()) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"first")])
            sync = ops.gate("fdatasync", path_contains=".log")
            flushing = asyncio.create_task(log.flush())
            await sync.reached()  # the flush holds the partition lock
            a = asyncio.create_task(log.append([Record(b"A")]))
            await reach(lambda: log._writer is not None and not log._pending, "the writer took [A], waits for the lock")
            b = asyncio.create_task(log.append([Record(b"B")]))
            await reach(lambda: len(log._pending) == 1, "B is queued behind the writer")
            closing = asyncio.create_task(log.close())
            await reach(lambda: log._closing, "close() started and waits for the writer")
            closing.cancel()
            assert not sync.left.is_set() and not a.done() and not b.done()
            sync.release()
            results = await asyncio.gather(flushing, a, b, closing, return_exceptions=True)
            # The writer is no longer cancelled by a cancelled close: both queued appends are written
            # and acknowledged, then the close completes; nothing told "failed" is ever written.
            assert results[1].first_offset == 1 and results[2].first_offset == 2, results
            await log.close()
    async with Engine.open(tmp_path) as engine:
        values = [r.value for r in (await engine.log("t").read(0)).records]
        assert values == [b"first", b"A", b"B"]
