"""flush_messages=N: the recovery point never claims an offset that is not fsynced, across a roll. (An
fsync'd append into a new segment used to move the recovery point over the sealed segment's unflushed
tail, and the background flush of that segment was then skipped.)"""
import asyncio
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record
from seglog.segments.faults import PowerLossOps
from seglog.segments.fileio import use_ops


async def test_the_recovery_point_never_passes_unsynced_data_of_a_rolled_segment(tmp_path: Path) -> None:
    ops = PowerLossOps()
    config = LogConfig(flush_messages=3, segment_bytes=300, segment_index_bytes=240, index_interval_bytes=4096)
    with use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        log = engine.log("t")
        acked = []
        for i in range(3):
            res = await log.append([Record(b"v%03d" % i * 10)])
            acked.append(res.first_offset)
        assert log.segment_count >= 2, "setup: a roll must have happened"
        await asyncio.gather(*log._background)  # the background post-roll flushes have run to their end
        rp = log.recovery_point
        # the engine claims every offset below rp is fsynced; simulate a power cut now
        await engine._abort_open()  # crash (same helper the project's crash tests use)
        ops.power_fail()
    async with Engine.open(tmp_path, config) as engine:
        log = engine.log("t")
        got = []
        off = log.log_start_offset
        while off < log.log_end_offset:
            r = await log.read(off)
            got += [x.offset for x in r.records]
            off = r.next_offset
        assert all(o in got for o in acked if o < rp), f"recovery point {rp} claimed {acked} durable, got {got}"
