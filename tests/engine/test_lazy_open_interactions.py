"""The lazy clean open beside other work: topic deletion, cancelled first uses, retention, and a clean
shutdown record too large to read. Each test failed before its fix."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest
from enginehelpers import break_first_segment, open_log_files_under

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def fill(root: Path, topic: str = "t", partitions: int = 2, segments: int = 3,
               config: LogConfig | None = None) -> None:
    async with Engine.open(root) as engine:
        await engine.create_topic(topic, partitions=partitions, config=config)
        for p in range(partitions):
            log = engine.log(topic, p)
            for s in range(segments):
                await log.append([Record(b"%d-%d" % (p, s), timestamp=1000 + s)])
                await log.roll()
            await log.append([Record(b"last", timestamp=5000)])


async def test_a_read_racing_delete_topic_raises_a_seglog_error(tmp_path: Path) -> None:
    # delete_topic pops the topic from Engine._topics before it closes each partition; a first use of a
    # partition not closed yet then reached Engine._open_unopened, which looked the topic up: KeyError.
    await fill(tmp_path)
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.log("t", 0).read(0)  # partition 0's files are open: its close has files to close
            log1 = engine.log("t", 1)
            closing_0 = ops.gate("close", path_contains=f"t-0{os.sep}")
            deleting = asyncio.ensure_future(engine.delete_topic("t"))
            await closing_0.reached()  # the topic is gone from the engine; partition 0 is closing, 1 not yet
            assert "t" not in engine.topics() and not log1.closed
            with pytest.raises(errors.SeglogError):  # ClosedError("... is being deleted") expected
                await log1.read(0)
            closing_0.release()
            await deleting
    assert open_log_files_under(tmp_path) == []


async def test_a_failed_open_whose_callers_were_all_cancelled_is_retried_by_the_next_call(tmp_path: Path) -> None:
    # OPERATIONS.md §3: a failed open "fails nothing else, and the next call tries again". When every
    # caller of the failed attempt was cancelled, nobody cleared PartitionLog._opening, and the next
    # call was handed the stale error of the old attempt instead of trying again.
    await fill(tmp_path)
    bad = break_first_segment(tmp_path / "t-1")  # a directory where a segment should be
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t", 1)
        with GatedOps() as ops, use_ops(ops):
            reaching_bad = ops.gate("stat_size", path_contains=str(bad))
            first = asyncio.ensure_future(log.read(1))
            await reaching_bad.reached()  # the open task is in its thread, about to fail on the bad segment
            opening = log._opening
            assert opening is not None
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            reaching_bad.release()
            await asyncio.wait({opening})
        assert isinstance(opening.exception(), errors.StorageError), "the open failed after its caller was gone"
        bad.rmdir()
        bad.touch()  # repaired: offset 0 is gone, the rest is there
        got = await log.read(1)  # must open the (now good) files
        assert got.records[0].offset == 1


async def test_a_partition_that_cannot_be_opened_does_not_stop_retention_of_the_others(
    tmp_path: Path,
) -> None:
    # Eagerly, a partition whose files are broken failed Engine.open. Lazily the engine opens, and the
    # first retention pass raises that partition's StorageError out of Engine.enforce_retention's loop:
    # the partitions after it (here "b-0") never get retention, on every background tick.
    await fill(tmp_path, topic="a", partitions=1)
    await fill(tmp_path, topic="b", partitions=1, config=LogConfig(retention_ms=1000))  # timestamps are 1970
    break_first_segment(tmp_path / "a-0")  # a directory where a segment should be
    async with Engine.open(tmp_path) as engine:
        assert engine.log("b", 0).segment_count == 4
        with contextlib.suppress(errors.StorageError):  # a-0's error: it may be reported, but ...
            await engine.enforce_retention()
        assert engine.log("b", 0).segment_count == 1  # ... b-0's old segments must be deleted anyway


async def test_the_background_retention_pass_opens_no_partition_it_has_nothing_to_do_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # OPERATIONS.md §3: "a seglog engine that serves a few of many partitions never pays for the rest".
    # The retention tick (every 5 minutes by default) calls retention_plan on every partition, which
    # opens its files, even with retention switched off: after one tick every partition holds its fds.
    off = LogConfig(retention_ms=-1, retention_bytes=-1)
    await fill(tmp_path, partitions=4, config=off)
    passes = 0
    three_passes = asyncio.Event()
    enforce_retention = Engine.enforce_retention

    async def counted(self: Engine) -> int:
        nonlocal passes
        try:
            return await enforce_retention(self)
        finally:
            passes += 1
            if passes >= 3:
                three_passes.set()

    monkeypatch.setattr(Engine, "enforce_retention", counted)
    async with Engine.open(tmp_path, config=off, retention_check_interval_ms=20) as engine:
        assert open_log_files_under(tmp_path) == []
        await asyncio.wait_for(three_passes.wait(), 60)  # three background retention passes have run
        assert open_log_files_under(tmp_path) == [], "a retention pass with nothing to do opened every partition"
        assert len(engine.logs()) == 4


async def test_a_clean_shutdown_record_too_large_to_read_falls_back_to_an_eager_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record grows with the number of SEGMENTS (every base offset), the checkpoints with the number
    # of partitions; both are read through _fs._read_small, bounded by MAX_SMALL_FILE_BYTES (64 MiB, "a
    # checkpoint of ~1M partitions"). A record over the bound makes _scan raise StorageError: the
    # engine cannot open the directory it closed cleanly, instead of falling back to an eager open
    # (FORMAT.md §7: "a record that does not parse is logged and the open opens every partition").
    # The bound is scaled down here so that a few dozen real segments cross it.
    from seglog.engine import _fs

    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for _ in range(60):
            await log.append([Record(b"x" * 10)] * 50)
            await log.roll()
    record = (tmp_path / ".clean-shutdown").stat().st_size
    largest_other = max(
        (tmp_path / "recovery-point-offset-checkpoint").stat().st_size,
        (tmp_path / "log-start-offset-checkpoint").stat().st_size,
        (tmp_path / "t-0" / "topic.json").stat().st_size,
    )
    assert record > 2 * largest_other
    monkeypatch.setattr(_fs, "MAX_SMALL_FILE_BYTES", record - 1)  # every other file still fits
    async with Engine.open(tmp_path) as engine:
        assert engine.log("t", 0).log_end_offset == 60 * 50
