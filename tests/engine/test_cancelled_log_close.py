"""A cancelled PartitionLog.close() never cancels the write in flight: the batch is acknowledged and
the log end offset moves past it (cancelling the writer task through asyncio.gather used to leave a
batch in the file below the log end, so the next append reused its offsets)."""
import asyncio
import time
from pathlib import Path

from seglog.engine import Engine, Record
from seglog.segments.fileio import FileOps, use_ops


class SlowWrites(FileOps):
    slow = False

    def pwritev(self, fd, buffers, position):  # type: ignore[override]
        if self.slow:
            time.sleep(0.2)
        return super().pwritev(fd, buffers, position)


async def test_a_cancelled_close_lets_the_write_in_flight_finish_and_move_the_log_end(tmp_path: Path) -> None:
    ops = SlowWrites()
    with use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"a")])
            ops.slow = True
            append = asyncio.create_task(log.append([Record(b"b")]))
            await asyncio.sleep(0.05)  # the writer is inside pwritev
            closing = asyncio.create_task(log.close())
            await asyncio.sleep(0.01)
            closing.cancel()  # e.g. asyncio.wait_for(log.close(), timeout) expiring
            results = await asyncio.gather(append, closing, return_exceptions=True)
            ops.slow = False
            # The write in flight completes and is acknowledged; the close completes too (it runs in a
            # task of its own); nothing reuses offset 1 and no bare ValueError escapes.
            assert results[0].first_offset == 1, results
            await log.close()
            assert log.closed
    async with Engine.open(tmp_path) as engine:
        got = (await engine.log("t").read(0)).records
        assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b")]
        res = await engine.log("t").append([Record(b"c")])
        assert res.first_offset == 2
