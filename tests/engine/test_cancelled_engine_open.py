"""Engine.open() cancelled while a partition's segments are being opened in the executor closes
what that executor hop opened (its LogSegments used to be returned to nobody, their descriptors open)."""
import asyncio
import time
from pathlib import Path

from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record
from seglog.segments.fileio import FileOps, use_ops


class SlowOpen(FileOps):
    slow = False

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        if self.slow and path.endswith(".log"):
            time.sleep(0.1)
        return super().open(path, flags, mode)


async def test_a_cancelled_open_closes_what_it_opened(tmp_path: Path) -> None:
    ops = SlowOpen()
    with use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t", partitions=2)
            await engine.log("t", 0).append([Record(b"x")])
        ops.slow = True
        opening = asyncio.ensure_future(Engine.open(tmp_path))
        await asyncio.sleep(0.05)  # inside the executor hop that opens the .log files
        opening.cancel()
        await asyncio.gather(opening, return_exceptions=True)
        await asyncio.sleep(0.3)  # let the executor threads finish
        leaked = open_log_files_under(tmp_path)
    assert not leaked, f"descriptors left open by a cancelled Engine.open(): {leaked}"
