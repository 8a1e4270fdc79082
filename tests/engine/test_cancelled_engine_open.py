"""Engine.open() cancelled while a partition's segments are being opened in the executor closes
what that executor hop opened (its LogSegments used to be returned to nobody, their descriptors open)."""
import asyncio
from pathlib import Path

from enginehelpers import open_log_files_under

from seglog.engine import Engine, Record
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_a_cancelled_open_closes_what_it_opened(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=2)
        await engine.log("t", 0).append([Record(b"x")])
    (tmp_path / ".clean-shutdown").unlink()  # as after a crash: the open opens every segment at once
    with GatedOps() as ops, use_ops(ops):
        # The second partition's .log: the executor hop has opened the first one already.
        opening_files = ops.gate("open", path_contains=".log", after=1)
        opening = asyncio.ensure_future(Engine.open(tmp_path))
        await opening_files.reached()  # inside the executor hop that opens the .log files
        opening.cancel()
        opening_files.release()
        (outcome,) = await asyncio.gather(opening, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), f"the open was not cancelled: {outcome!r}"
        leaked = open_log_files_under(tmp_path)
    assert not leaked, f"descriptors left open by a cancelled Engine.open(): {leaked}"
    async with Engine.open(tmp_path) as engine:  # and the directory lock was released
        assert engine.log("t", 0).log_end_offset == 1
