"""A segment whose index fails its check is rebuilt lazily, in an executor thread, by whoever loads it
first; concurrent reads of that segment share one rebuild and all succeed ("a corrupt index is rebuilt,
never fatal"). Readers do not take the partition lock, and several of them used to run the rebuild
(reset + append) on the same mmapped indexes at once: reads failed with InvalidOffsetError."""
import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, LogConfig, PartitionLog, Record
from seglog.segments.batch_table import default_budget
from seglog.segments.segment import LogSegment

CONFIG = LogConfig(index_interval_bytes=64, segment_index_bytes=1 << 20, segment_bytes=1 << 14)
READERS = 4  # at most the default executor's threads (min(32, cpus + 4)) minus the one rebuilding


async def test_concurrent_reads_of_a_segment_with_a_corrupt_index_share_one_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Engine.open(tmp_path, CONFIG) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        for i in range(0, 2000, 4):
            await log.append([Record(b"v%05d" % j) for j in range(i, i + 4)])
        assert log.segment_count >= 2
        first_segment_end = log.segment_base_offsets()[1]
    index = tmp_path / "t-0" / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[0:8] = b"\x00\x00\x00\x05\x00\x00\x00\x00"  # entry 0 points at the wrong batch
    index.write_bytes(bytes(data))

    # The rule is the index path's: with batch tables on, the readers after the first find their batch
    # by the table the first one's walk built, and never come to the indexes.
    monkeypatch.setattr(default_budget(), "_limit", 0)
    # The first rebuild waits until every other reader has come to load the same indexes: they are
    # then all in the load path while it runs, whatever the thread scheduling.
    lock = threading.Lock()
    arrived = 0
    all_arrived = threading.Event()
    rebuilds = 0
    load = LogSegment._load_read_indexes
    rebuild = LogSegment._rebuild_indexes

    def counted_load(self: LogSegment) -> Any:
        nonlocal arrived
        if self.base_offset == 0:
            with lock:
                arrived += 1
                if arrived == READERS + 1:
                    all_arrived.set()
        return load(self)

    def held_rebuild(self: LogSegment, *args: Any) -> Any:
        nonlocal rebuilds
        with lock:
            rebuilds += 1
            first = rebuilds == 1
        if first:
            assert all_arrived.wait(60), f"only {arrived} of {READERS + 1} readers came to load the indexes"
        return rebuild(self, *args)

    monkeypatch.setattr(LogSegment, "_load_read_indexes", counted_load)
    monkeypatch.setattr(LogSegment, "_rebuild_indexes", held_rebuild)
    problems: list[str] = []
    async with Engine.open(tmp_path, CONFIG) as engine:
        log = engine.log("t")

        async def reader(offset: int, log: PartitionLog = log) -> None:
            try:
                got = await log.read(offset, max_bytes=1)
                assert got.records[0].offset == offset, (offset, got.records[0].offset)
            except Exception as exc:
                problems.append(repr(exc))

        offsets = range(0, first_segment_end, first_segment_end // (READERS + 1))[: READERS + 1]
        await asyncio.gather(*(reader(o) for o in offsets))
    assert all_arrived.is_set()
    assert not problems, problems[:3]
    assert rebuilds == 1, f"{rebuilds} rebuilds of one index ran at once"
