"""A retention pass cancelled while a segment is being renamed to .deleted (e.g. the background
retention task cancelled by Engine.close) still deletes that segment: no file of it stays open and
no *.deleted file survives close() (the segment used to be dropped from the partition without being
registered for deletion)."""
import asyncio
import gc
import warnings
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_a_cancelled_retention_pass_deletes_the_segments_it_took_out(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, segment_index_bytes=240, retention_bytes=1)
    with GatedOps() as ops, use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        log = engine.log("t")
        for i in range(6):
            await log.append([Record(b"v%03d" % i * 10)])
        assert log.segment_count >= 3
        segments_before = log.segment_count
        rename = ops.gate("replace", path_contains=".deleted")
        task = asyncio.create_task(engine.enforce_retention())
        await rename.reached()  # inside the rename of the first segment to .deleted
        task.cancel()
        rename.release()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), f"the retention pass was not cancelled: {outcome!r}"
        assert log.segment_count < segments_before, "the segment being renamed is out of the partition"
        await engine.close()
    left = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()
    assert not left, f"close() left files of a deleted segment behind (and their descriptors open): {left}"
