"""A segment whose index fails its check is rebuilt lazily, in an executor thread, by whoever loads it
first; concurrent reads of that segment share one rebuild and all succeed ("a corrupt index is rebuilt,
never fatal"). Readers do not take the partition lock, and several of them used to run the rebuild
(reset + append) on the same mmapped indexes at once: reads failed with InvalidOffsetError."""
import asyncio
from pathlib import Path

from seglog.engine import Engine, LogConfig, PartitionLog, Record

CONFIG = LogConfig(index_interval_bytes=64, segment_index_bytes=1 << 20, segment_bytes=1 << 19)


async def test_concurrent_reads_of_a_segment_with_a_corrupt_index_all_succeed(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, CONFIG) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        for i in range(0, 40000, 4):
            await log.append([Record(b"v%05d" % j) for j in range(i, i + 4)])
        assert log.segment_count >= 2
    index = tmp_path / "t-0" / "00000000000000000000.index"
    problems: list[str] = []
    for _attempt in range(6):
        data = bytearray(index.read_bytes())
        data[0:8] = b"\x00\x00\x00\x05\x00\x00\x00\x00"  # entry 0 points at the wrong batch
        index.write_bytes(bytes(data))
        async with Engine.open(tmp_path, CONFIG) as engine:
            log = engine.log("t")

            async def reader(offset: int, log: PartitionLog = log) -> None:
                try:
                    got = await log.read(offset, max_bytes=1)
                    assert got.records[0].offset == offset, (offset, got.records[0].offset)
                except Exception as exc:
                    problems.append(repr(exc))

            await asyncio.gather(*(reader(o) for o in range(0, 15000, 23)))
        if problems:
            break
    assert not problems, problems[:3]
