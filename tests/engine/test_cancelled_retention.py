"""A retention pass cancelled while a segment is being renamed to .deleted (e.g. the background
retention task cancelled by Engine.close) still deletes that segment: no file of it stays open and
no *.deleted file survives close() (the segment used to be dropped from the partition without being
registered for deletion)."""
import asyncio
import gc
import time
import warnings
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record
from seglog.segments.fileio import FileOps, use_ops


class SlowRename(FileOps):
    def replace(self, src: str, dst: str) -> None:
        if dst.endswith(".deleted"):
            time.sleep(0.2)
        super().replace(src, dst)


async def test_a_cancelled_retention_pass_deletes_the_segments_it_took_out(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, segment_index_bytes=240, retention_bytes=1)
    with use_ops(SlowRename()):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        log = engine.log("t")
        for i in range(6):
            await log.append([Record(b"v%03d" % i * 10)])
        assert log.segment_count >= 3
        task = asyncio.create_task(engine.enforce_retention())
        await asyncio.sleep(0.05)  # inside the rename of the first segment
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await engine.close()
    left = sorted(p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".deleted"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()
    assert not left, f"close() left files of a deleted segment behind (and their descriptors open): {left}"
