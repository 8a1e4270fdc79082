"""Engine.close() promises "finish appends in flight, flush, checkpoint, mark a clean shutdown":

* an append in flight when close() starts is written and fsynced before the directory is marked
  clean; an append that arrives after close() started is refused (close used to flush before
  draining the writer, so a batch queued behind the lock was acknowledged and never fsynced);
* close() waits for an admin operation in flight: a create_topic running meanwhile leaves no open
  file behind (close used to snapshot the partitions and miss those created after it started).
"""
import asyncio
from pathlib import Path

from enginehelpers import open_log_files_under, reach

from seglog.engine import Engine, Record, errors
from seglog.segments.faults import GatedOps, PowerLossOps
from seglog.segments.fileio import use_ops


async def test_close_fsyncs_every_append_it_acknowledged_and_refuses_later_ones(tmp_path: Path) -> None:
    power = PowerLossOps()
    with GatedOps(power) as ops, use_ops(ops):
        engine = await Engine.open(tmp_path)
        await engine.create_topic("t")
        log = engine.log("t")
        write = ops.gate("pwritev", path_contains=".log")
        a = asyncio.create_task(log.append([Record(b"A")]))
        await write.reached()  # the writer is writing A, holding the partition lock
        closing = asyncio.create_task(engine.close())
        await reach(lambda: log._closing, "the engine's close() reached the partition")
        b = asyncio.create_task(log.append([Record(b"B")]))
        write.release()
        results = await asyncio.gather(a, b, closing, return_exceptions=True)
        # A closing log takes no new append; what it acknowledged is fsynced before close returns.
        assert isinstance(results[1], errors.ClosedError), results
        acked = results[0].first_offset
        power.power_fail()
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t")
        assert log.log_end_offset == acked + 1, (
            f"close() returned after acknowledging offset {acked}, but after a power cut the log ends at "
            f"{log.log_end_offset}"
        )


async def test_close_waits_for_a_create_topic_in_flight(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        engine = await Engine.open(tmp_path)
        second = ops.gate("open", path_contains=".log", after=1)  # partition 0 exists, 1 is being created
        creating = asyncio.create_task(engine.create_topic("t", partitions=4))
        await second.reached()
        closing = asyncio.create_task(engine.close())
        await reach(lambda: engine._closing, "close() started")
        second.release()
        results = await asyncio.gather(creating, closing, return_exceptions=True)
        leaked = open_log_files_under(tmp_path)
    for plog in list(engine._logs.values()):  # clean up so teardown does not add noise
        await plog.close()
    assert results == [None, None], results
    assert not leaked, f"segment files still open after Engine.close(): {leaked}"
