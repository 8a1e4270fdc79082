"""Appends queued when a PartitionLog.close() is cancelled are written once and acknowledged; an
append reported as failed is never written later. (A cancelled close used to cancel the writer,
which failed every queued append with ClosedError but left them queued: the next writer wrote them
anyway, so a producer told "closed" got its record in the log.)"""
import asyncio
import time
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record
from seglog.segments.fileio import FileOps, use_ops


class SlowSync(FileOps):
    slow = False

    def fdatasync(self, fd: int) -> None:
        if self.slow:
            time.sleep(0.2)
        super().fdatasync(fd)


async def test_appends_queued_behind_a_cancelled_close_are_written_once_and_acknowledged(tmp_path: Path) -> None:
    ops = SlowSync()
    with use_ops(ops):
        async with Engine.open(tmp_path, LogConfig()) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"first")])
            ops.slow = True
            flushing = asyncio.create_task(log.flush())  # holds the partition lock ~0.2 s
            await asyncio.sleep(0.02)
            a = asyncio.create_task(log.append([Record(b"A")]))
            await asyncio.sleep(0.01)  # the writer took [A] and waits for the lock
            b = asyncio.create_task(log.append([Record(b"B")]))
            await asyncio.sleep(0.01)
            closing = asyncio.create_task(log.close())
            await asyncio.sleep(0.01)
            closing.cancel()
            results = await asyncio.gather(flushing, a, b, closing, return_exceptions=True)
            ops.slow = False
            # The writer is no longer cancelled by a cancelled close: both queued appends are written
            # and acknowledged, then the close completes; nothing told "failed" is ever written.
            assert results[1].first_offset == 1 and results[2].first_offset == 2, results
            await log.close()
    async with Engine.open(tmp_path) as engine:
        values = [r.value for r in (await engine.log("t").read(0)).records]
        assert values == [b"first", b"A", b"B"]
