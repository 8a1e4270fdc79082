"""Engine.close() snapshots self._logs and does not wait for admin operations: a create_topic
in flight adds PartitionLogs (with open segment files) after close() returned, and they are
never closed (and the topic was created in a directory whose lock is already released)."""
import asyncio
from pathlib import Path

from enginehelpers import open_log_files_under

from seglog.engine import Engine


async def test_close_waits_for_create_topic(tmp_path: Path) -> None:
    engine = await Engine.open(tmp_path)
    creating = asyncio.create_task(engine.create_topic("t", partitions=4))
    await asyncio.sleep(0)  # create_topic is inside its first executor hop
    await engine.close()
    await asyncio.gather(creating, return_exceptions=True)
    leaked = open_log_files_under(tmp_path)
    for plog in list(engine._logs.values()):  # clean up so teardown does not add noise
        await plog.close()
    assert not leaked, f"segment files still open after Engine.close(): {leaked}"
