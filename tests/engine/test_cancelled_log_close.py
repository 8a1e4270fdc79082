"""A cancelled PartitionLog.close() never cancels the write in flight: the batch is acknowledged and
the log end offset moves past it (cancelling the writer task through asyncio.gather used to leave a
batch in the file below the log end, so the next append reused its offsets)."""
import asyncio
from pathlib import Path

from enginehelpers import reach

from seglog.engine import Engine, Record
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_a_cancelled_close_lets_the_write_in_flight_finish_and_move_the_log_end(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"a")])
            write = ops.gate("pwritev", path_contains=".log")
            append = asyncio.create_task(log.append([Record(b"b")]))
            await write.reached()  # the writer is inside the pwritev of b
            closing = asyncio.create_task(log.close())
            await reach(lambda: log._closing, "close() started and waits for the writer")
            closing.cancel()  # e.g. asyncio.wait_for(log.close(), timeout) expiring
            assert not write.left.is_set(), "the write must still be in flight when the close is cancelled"
            write.release()
            results = await asyncio.gather(append, closing, return_exceptions=True)
            # The write in flight completes and is acknowledged; the close completes too (it runs in a
            # task of its own); nothing reuses offset 1 and no bare ValueError escapes.
            assert results[0].first_offset == 1, results
            assert isinstance(results[1], asyncio.CancelledError), results
            await log.close()
            assert log.closed
    async with Engine.open(tmp_path) as engine:
        got = (await engine.log("t").read(0)).records
        assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b")]
        res = await engine.log("t").append([Record(b"c")])
        assert res.first_offset == 2
