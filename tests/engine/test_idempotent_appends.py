"""Appends of idempotent producers through ``PartitionLog.append``, and producer ids of a log directory.

A producer batch carries a producer id, an epoch and the sequence of its first
record; the partition writes each batch once (a retry is answered with where
it went), refuses gaps and older epochs, and keeps ``<offset>.snapshot`` files
of its producer state at each roll and at a clean close.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from enginehelpers import reach, read_all

from seglog.engine import AppendResult, Engine, LogConfig, PartitionLog, Record
from seglog.engine.errors import (
    ClosedError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    StorageError,
)
from seglog.engine.producer_ids import BLOCK_SIZE, PRODUCER_IDS_FILE
from seglog.engine.producer_state import decode_snapshot
from seglog.segments.files import snapshot_file_name

PID = 42


def _records(*values: str) -> list[Record]:
    return [Record(v.encode()) for v in values]


async def _in_one_write(log: PartitionLog, calls: list[Coroutine[Any, Any, AppendResult]]) -> list[object]:
    """Run ``calls`` (appends) so that the writer takes them all in one write; their results or errors."""
    queued = 0

    async def queue(call: Coroutine[Any, Any, AppendResult]) -> AppendResult:
        nonlocal queued
        queued += 1  # append() queues its batch before its first await
        return await call

    async with log._lock:  # the writer takes what is queued, then waits for the lock
        tasks = [asyncio.ensure_future(queue(call)) for call in calls]
        await reach(
            lambda: queued == len(calls) and not log._pending and log._writer is not None,
            "every append taken by the writer, which waits for the held lock",
        )
    return list(await asyncio.gather(*tasks, return_exceptions=True))


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with Engine.open(tmp_path / "data", LogConfig(segment_bytes=4096)) as opened:
        await opened.create_topic("t", partitions=1)
        yield opened


async def test_a_retried_batch_is_answered_with_its_offsets_and_not_written_again(engine: Engine) -> None:
    log = engine.log("t", 0)
    await log.append(_records("x"))  # a native append first: producer batches share the offsets
    first = await log.append(_records("a", "b"), producer_id=PID, producer_epoch=0, base_sequence=0)
    again = await log.append(_records("a", "b"), producer_id=PID, producer_epoch=0, base_sequence=0)
    assert (first.first_offset, first.last_offset) == (again.first_offset, again.last_offset) == (1, 2)
    assert again.max_timestamp == first.max_timestamp
    assert log.log_end_offset == 3
    assert [r.value for r in await read_all(log)] == [b"x", b"a", b"b"]


async def test_a_retry_queued_beside_its_batch_in_one_write_gets_the_same_offsets(engine: Engine) -> None:
    log = engine.log("t", 0)
    first, second = await _in_one_write(
        log, [log.append(_records("a"), producer_id=PID, producer_epoch=0, base_sequence=0) for _ in range(2)]
    )
    assert isinstance(first, AppendResult) and isinstance(second, AppendResult)
    assert (first.first_offset, second.first_offset) == (0, 0)
    assert log.log_end_offset == 1


async def test_a_sequence_gap_and_an_older_epoch_are_refused_and_nothing_is_written(engine: Engine) -> None:
    log = engine.log("t", 0)
    await log.append(_records("a"), producer_id=PID, producer_epoch=3, base_sequence=0)
    with pytest.raises(OutOfOrderSequenceError, match="expected 1"):
        await log.append(_records("b"), producer_id=PID, producer_epoch=3, base_sequence=2)
    with pytest.raises(InvalidProducerEpochError, match="fenced"):
        await log.append(_records("b"), producer_id=PID, producer_epoch=2, base_sequence=1)
    assert log.log_end_offset == 1
    await log.append(_records("b"), producer_id=PID, producer_epoch=3, base_sequence=1)
    assert [r.value for r in await read_all(log)] == [b"a", b"b"]


async def test_a_refused_batch_does_not_fail_the_appends_written_with_it(engine: Engine) -> None:
    log = engine.log("t", 0)
    results = await _in_one_write(log, [
        log.append(_records("a"), producer_id=PID, producer_epoch=0, base_sequence=0),
        log.append(_records("gap"), producer_id=PID, producer_epoch=0, base_sequence=5),
        log.append(_records("plain")),
        log.append(_records("b"), producer_id=PID, producer_epoch=0, base_sequence=1),
    ])
    assert isinstance(results[1], OutOfOrderSequenceError)
    assert [r.first_offset for r in results if isinstance(r, AppendResult)] == [0, 1, 2]
    assert [r.value for r in await read_all(log)] == [b"a", b"plain", b"b"]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"producer_id": PID}, "epoch -1"),
        ({"producer_id": PID, "producer_epoch": 0}, "base sequence -1"),
        ({"producer_epoch": 0, "base_sequence": 0}, "both must be -1"),
        ({"producer_id": PID, "producer_epoch": 40000, "base_sequence": 0}, "epoch 40000"),
        ({"producer_id": "42", "producer_epoch": 0, "base_sequence": 0}, "must be ints"),
    ],
)
async def test_producer_fields_out_of_range_are_refused(
    engine: Engine, fields: dict[str, object], problem: str
) -> None:
    with pytest.raises(InvalidRecordError, match=problem):
        await engine.log("t", 0).append(_records("a"), **fields)  # type: ignore[arg-type]


async def test_a_roll_and_a_clean_close_leave_snapshots_of_the_producer_state(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data", LogConfig(segment_bytes=4096)) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append(_records("a", "b"), producer_id=PID, producer_epoch=1, base_sequence=0)
        await log.roll()
        await log.append(_records("c"), producer_id=PID, producer_epoch=1, base_sequence=2)
        directory = log.directory
    at_roll = decode_snapshot((directory / snapshot_file_name(2)).read_bytes(), 2)
    assert [(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset) for e in at_roll] == [(PID, 1, 1, 1)]
    at_close = decode_snapshot((directory / snapshot_file_name(3)).read_bytes(), 3)
    assert [(e.last_seq, e.last_data_offset, len(e.batches)) for e in at_close] == [(2, 2, 2)]


async def test_retention_deletes_a_segments_snapshot_with_it(engine: Engine) -> None:
    log = engine.log("t", 0)
    await log.append(_records("a"), producer_id=PID, producer_epoch=0, base_sequence=0)
    await log.roll()
    await log.append(_records("b"), producer_id=PID, producer_epoch=0, base_sequence=1)
    await log.roll()
    assert (log.directory / snapshot_file_name(1)).exists()
    await log.delete_records_before(2)
    assert log.segment_base_offsets() == [2]
    assert not (log.directory / snapshot_file_name(1)).exists()
    assert (log.directory / snapshot_file_name(2)).exists()


async def test_producer_ids_are_never_handed_out_twice_across_restarts(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        first = [await engine.init_producer_id() for _ in range(3)]
    async with Engine.open(tmp_path / "data") as engine:
        second = await engine.init_producer_id()
    assert [pid for pid, _ in first] == [0, 1, 2] and all(epoch == 0 for _, epoch in first)
    assert second == (BLOCK_SIZE, 0)  # the rest of the first block is left, never reused
    assert (tmp_path / "data" / PRODUCER_IDS_FILE).read_text() == f"0\n{2 * BLOCK_SIZE}\n"


async def test_a_producer_presenting_its_id_gets_the_next_epoch(engine: Engine) -> None:
    pid, epoch = await engine.init_producer_id()
    assert await engine.init_producer_id(pid, epoch) == (pid, 1)
    assert await engine.init_producer_id(pid, 32765) == (pid, 32766)
    exhausted = await engine.init_producer_id(pid, 32766)
    assert exhausted[0] != pid and exhausted[1] == 0
    stranger = await engine.init_producer_id(10**12, 0)  # never handed out here: a new id, not its epoch
    assert stranger[0] < BLOCK_SIZE and stranger[1] == 0


async def test_a_producer_ids_file_that_does_not_parse_moves_ids_above_any_handed_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        before, _ = await engine.init_producer_id()
    (tmp_path / "data" / PRODUCER_IDS_FILE).write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="seglog"):
        async with Engine.open(tmp_path / "data") as engine:
            after, _ = await engine.init_producer_id()
    assert after > before + BLOCK_SIZE
    assert "does not parse" in caplog.text


async def test_a_read_only_engine_hands_out_no_producer_id(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data"):
        pass
    async with Engine.open(tmp_path / "data", read_only=True) as engine:
        with pytest.raises(ClosedError, match="read-only"):
            await engine.init_producer_id()


# ------------------------------------------------------------------------------------------ across restarts


async def _produce(log: PartitionLog, first_seq: int, *values: str) -> AppendResult:
    return await log.append(_records(*values), producer_id=PID, producer_epoch=0, base_sequence=first_seq)


def _crash_copy(source: Path, target: Path) -> Path:
    """The files of an open engine as a kill -9 would leave them: no clean-shutdown marker, no close snapshot."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".lock"))
    return target


@pytest.mark.parametrize("stop", ["clean", "crash"])
async def test_a_retry_after_a_restart_is_answered_with_its_offsets(tmp_path: Path, stop: str) -> None:
    config = LogConfig(segment_bytes=4096)
    async with Engine.open(tmp_path / "data", config) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for n in range(4):  # two rolls: the newest snapshot at a roll, a batch after it
            await _produce(log, n, f"v{n}")
            if n in (0, 2):
                await log.roll()
        data = tmp_path / "data" if stop == "clean" else _crash_copy(tmp_path / "data", tmp_path / "crashed")
    async with Engine.open(data, config) as engine:
        log = engine.log("t", 0)
        for n in range(4):  # every batch of the last five is known again, whichever way it was restored
            again = await _produce(log, n, f"v{n}")
            assert (again.first_offset, again.last_offset) == (n, n)
        with pytest.raises(OutOfOrderSequenceError):
            await _produce(log, 9, "gap")
        assert (await _produce(log, 4, "v4")).first_offset == 4
        assert [r.value for r in await read_all(log)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]


async def test_a_corrupt_snapshot_is_ignored_with_a_warning_and_the_state_rebuilt_from_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _produce(log, 0, "a")
        await _produce(log, 1, "b")
        directory = log.directory
    snapshot = directory / snapshot_file_name(2)
    raw = bytearray(snapshot.read_bytes())
    raw[-1] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="seglog"):
        async with Engine.open(tmp_path / "data") as engine:
            log = engine.log("t", 0)
            assert (await _produce(log, 0, "a")).first_offset == 0  # still known: rebuilt from the .log
            assert (await _produce(log, 2, "c")).first_offset == 2
    assert "CRC-32C mismatch" in caplog.text and "rebuilt from the log" in caplog.text


async def test_snapshots_past_a_log_cut_short_by_recovery_are_deleted(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _produce(log, 0, "a")
        await log.roll()
        await _produce(log, 1, "b")
        directory = log.directory
    crashed = _crash_copy(tmp_path / "data", tmp_path / "crashed") / directory.name
    (crashed.parent / ".clean-shutdown").unlink(missing_ok=True)
    second = crashed / f"{1:020d}.log"
    second.write_bytes(second.read_bytes()[:-3])  # a torn last batch: recovery cuts it, the log ends at 1
    assert (crashed / snapshot_file_name(2)).exists()
    async with Engine.open(crashed.parent) as engine:
        log = engine.log("t", 0)
        assert log.log_end_offset == 1
        result = await _produce(log, 1, "b")  # not a duplicate any more: its batch was cut off
        assert result.first_offset == 1
        assert not (crashed / snapshot_file_name(2)).exists()  # deleted when the state was loaded
    # The clean close writes the state at offset 2 again: the new batch "b".
    assert decode_snapshot((crashed / snapshot_file_name(2)).read_bytes(), 2)[0].last_data_offset == 1


async def test_a_producer_state_that_cannot_be_loaded_refuses_only_producer_batches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _produce(log, 0, "a")
        directory = log.directory
    snapshot = directory / snapshot_file_name(1)
    snapshot.unlink()
    snapshot.mkdir()  # cannot be read: the OS refuses, which is not a corrupt snapshot to skip
    with caplog.at_level(logging.WARNING, logger="seglog"):
        async with Engine.open(tmp_path / "data") as engine:
            log = engine.log("t", 0)
            results = await _in_one_write(log, [_produce(log, 1, "b"), log.append(_records("plain"))])
            assert isinstance(results[0], StorageError)
            assert isinstance(results[1], AppendResult) and results[1].first_offset == 1
    assert "could not be loaded" in caplog.text
    assert "producer snapshot at offset 2 not written" in caplog.text  # the close goes on without it


async def test_a_snapshot_past_where_recovery_ended_the_log_is_removed_before_appends_reach_its_offset(
    tmp_path: Path,
) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append(_records("x"))
        await _produce(log, 0, "a")  # offset 1
        await log.roll()  # the snapshot at 2 holds the producer's batch at offset 1
        await log.append(_records("y"))
        directory = log.directory
        crashed = _crash_copy(tmp_path / "data", tmp_path / "crashed") / directory.name
    for name in (".clean-shutdown", "recovery-point-offset-checkpoint"):
        (crashed.parent / name).unlink(missing_ok=True)  # recovered from offset 0
    first = crashed / f"{0:020d}.log"
    first.write_bytes(first.read_bytes()[:-3])  # the producer's batch torn: the log ends at 1
    assert (crashed / snapshot_file_name(2)).exists()
    async with Engine.open(crashed.parent) as engine:
        log = engine.log("t", 0)
        assert log.log_end_offset == 1
        assert not (crashed / snapshot_file_name(2)).exists()  # removed by the open, before any append
        await log.append(_records("z1", "z2"))  # offsets 1 and 2: the old snapshot's offset is inside the log
        again = await _produce(log, 0, "a")  # its batch was cut off: written now, not taken for a retry
        assert again.first_offset == 3
        assert [r.value for r in await read_all(log)] == [b"x", b"z1", b"z2", b"a"]


async def test_a_partition_whose_files_disagree_with_the_clean_close_record_rebuilds_its_producer_state(
    tmp_path: Path,
) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _produce(log, 0, "a")
        one_batch = log.size_bytes
        await _produce(log, 1, "b")
        directory = log.directory
    segment = directory / f"{0:020d}.log"
    segment.write_bytes(segment.read_bytes()[:one_batch])  # the last batch gone after the clean close
    assert (directory / snapshot_file_name(2)).exists()  # the close's snapshot, now past the log's end
    async with Engine.open(tmp_path / "data") as engine:
        log = engine.log("t", 0)
        # The first use opens the files: the record does not match them, the partition is recovered,
        # the snapshot past its end is removed -- and no snapshot left is not read as "no producers".
        again = await _produce(log, 0, "a")
        assert (again.first_offset, log.log_end_offset) == (0, 1)
        assert [r.value for r in await read_all(log)] == [b"a"]
