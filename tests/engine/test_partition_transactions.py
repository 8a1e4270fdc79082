"""Transactions at one partition: transactional appends, markers, the LSO, read_committed, the ``.txnindex``.

What Kafka's partition does for its transaction coordinator (``UnifiedLog``,
``ProducerStateManager``, ``LogSegment.updateTxnIndex``): a producer's
transactional batches are held above the last stable offset until a marker
(a control batch) ends the transaction; an abort gets its 34-byte AbortedTxn
entry; ``read_committed`` readers see only committed data records; all of it
survives a clean close and is rebuilt from the log after a crash.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
import time
from pathlib import Path

import google_crc32c
import pytest
from enginehelpers import reach, read_pairs

from seglog.engine import AbortedTransaction, Engine, LogConfig, PartitionLog, Record
from seglog.engine.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from seglog.segments.kafka_batch import KafkaBatchError
from seglog.server.records import encode_batch

PID, OTHER = 42, 43
CONFIG = LogConfig(segment_bytes=4096)


def _records(*values: str) -> list[Record]:
    return [Record(v.encode()) for v in values]


async def _txn(log: PartitionLog, seq: int, *values: str, pid: int = PID, epoch: int = 0) -> int:
    res = await log.append(_records(*values), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           transactional=True)
    return res.first_offset


def _kafka_txn_batch(values: list[bytes], *, pid: int, epoch: int, seq: int, attributes: int = 0x10) -> bytes:
    """A producer's RecordBatch v2 with the transactional bit (offsets from 0), CRC sealed."""
    now = time.time_ns() // 1_000_000  # a time-based roll compares record timestamps with the marker's
    batch = bytearray(encode_batch([Record(v, None, now + i, (), i) for i, v in enumerate(values)],
                                   leader_epoch=-1))
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">qhi", batch, 43, pid, epoch, seq)
    struct.pack_into(">I", batch, 17, google_crc32c.value(bytes(batch[21:])))
    return bytes(batch)


@pytest.fixture
async def log(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with Engine.open(tmp_path / "data", CONFIG) as engine:
        await engine.create_topic("t", partitions=1)
        yield engine.log("t", 0)


# ------------------------------------------------------------------------------------------ the LSO


async def test_an_open_transaction_holds_the_lso_at_its_first_offset_until_its_commit(log: PartitionLog) -> None:
    await log.append(_records("before"))
    first = await _txn(log, 0, "t1", "t2")
    await log.append(_records("plain"))
    assert log.last_stable_offset == first == 1
    assert await read_pairs(log, "read_committed") == [(0, b"before")]
    marker = await log.write_txn_marker(PID, 0, commit=True)
    assert marker == 4 and log.last_stable_offset == log.log_end_offset == 5
    assert await read_pairs(log, "read_committed") == [(0, b"before"), (1, b"t1"), (2, b"t2"), (3, b"plain")]
    assert log.aborted_transactions(0, 5) == []


async def test_the_lso_is_the_first_offset_of_the_oldest_of_several_open_transactions(log: PartitionLog) -> None:
    a = await _txn(log, 0, "a", pid=PID)
    b = await _txn(log, 0, "b", pid=OTHER)
    assert log.last_stable_offset == a
    await log.write_txn_marker(PID, 0, commit=True)
    assert log.last_stable_offset == b
    await log.write_txn_marker(OTHER, 0, commit=True)
    assert log.last_stable_offset == log.log_end_offset


# ------------------------------------------------------------------------------------------ aborts


async def test_aborted_records_are_seen_only_by_read_uncommitted_and_markers_by_neither(log: PartitionLog) -> None:
    await _txn(log, 0, "gone1", "gone2")
    await log.append(_records("kept"))
    abort = await log.write_txn_marker(PID, 0, commit=False)
    await _txn(log, 2, "yes")
    commit = await log.write_txn_marker(PID, 0, commit=True)
    assert (abort, commit) == (3, 5)
    assert await read_pairs(log) == [(0, b"gone1"), (1, b"gone2"), (2, b"kept"), (4, b"yes")]
    assert await read_pairs(log, "read_committed") == [(2, b"kept"), (4, b"yes")]
    assert log.aborted_transactions(0, 6) == [AbortedTransaction(PID, 0)]
    assert log.aborted_transactions(4, 6) == []  # the abort ended at 3, before the range


async def test_a_read_at_a_marker_goes_on_past_it(log: PartitionLog) -> None:
    await _txn(log, 0, "x")
    marker = await log.write_txn_marker(PID, 0, commit=True)
    got = await log.read(marker)
    assert got.records == [] and got.next_offset == log.log_end_offset == marker + 1
    await log.append(_records("after"))
    got = await log.read(marker)
    assert [(r.offset, r.value) for r in got.records] == [(marker + 1, b"after")]


async def test_an_abort_writes_kafkas_34_byte_entry_to_the_segments_txnindex(log: PartitionLog) -> None:
    await _txn(log, 0, "a", pid=PID)  # offset 0, still open when OTHER aborts
    await _txn(log, 0, "b", "c", pid=OTHER)  # offsets 1-2
    abort = await log.write_txn_marker(OTHER, 0, commit=False)  # offset 3
    raw = (log.directory / "00000000000000000000.txnindex").read_bytes()
    # int16 version, int64 producer id, first offset, last offset, last stable offset (PID's open txn at 0).
    assert raw == struct.pack(">hqqqq", 0, OTHER, 1, abort, 0)


async def test_an_abort_with_no_transaction_open_is_written_and_indexed_as_kafka_does(log: PartitionLog) -> None:
    marker = await log.write_txn_marker(PID, 0, commit=False)
    assert log.aborted_transactions(0, 1) == [AbortedTransaction(PID, marker)]
    assert await read_pairs(log) == []


# ------------------------------------------------------------------------------------------ refusals


async def test_a_marker_from_an_older_epoch_is_fenced_and_a_newer_one_taken(log: PartitionLog) -> None:
    await _txn(log, 0, "a", epoch=3)
    with pytest.raises(InvalidProducerEpochError):
        await log.write_txn_marker(PID, 2, commit=True)
    assert log.last_stable_offset == 0
    await log.write_txn_marker(PID, 4, commit=False)  # the coordinator bumped the epoch to abort
    assert log.last_stable_offset == log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        await _txn(log, 1, "zombie", epoch=3)


async def test_a_marker_from_an_older_coordinator_epoch_is_fenced(log: PartitionLog) -> None:
    await _txn(log, 0, "a")
    await log.write_txn_marker(PID, 0, commit=True, coordinator_epoch=5)
    await _txn(log, 1, "b")
    with pytest.raises(TransactionCoordinatorFencedError):
        await log.write_txn_marker(PID, 0, commit=True, coordinator_epoch=4)
    assert log.last_stable_offset == 2


async def test_a_plain_batch_of_a_producer_with_an_open_transaction_is_refused(log: PartitionLog) -> None:
    await _txn(log, 0, "a")
    with pytest.raises(InvalidTxnStateError):
        await log.append(_records("b"), producer_id=PID, producer_epoch=0, base_sequence=1)


async def test_bad_transactional_arguments_are_refused(log: PartitionLog) -> None:
    with pytest.raises(InvalidRecordError, match="needs producer_id"):
        await log.append(_records("a"), transactional=True)
    with pytest.raises(InvalidRecordError, match="isolation"):
        await log.read(0, isolation="committed")  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="commit must be a bool"):
        await log.write_txn_marker(PID, 0, commit=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidRecordError, match="marker needs"):
        await log.write_txn_marker(-1, 0, commit=True)


# ------------------------------------------------------------------------------------------ Kafka batches


async def test_a_kafka_transactional_batch_opens_a_transaction_and_a_producers_control_batch_is_refused(
    log: PartitionLog,
) -> None:
    await log.append_kafka_batch(_kafka_txn_batch([b"k1", b"k2"], pid=PID, epoch=0, seq=0))
    assert log.last_stable_offset == 0
    with pytest.raises(KafkaBatchError, match="control batch"):
        await log.append_kafka_batch(_kafka_txn_batch([b"m"], pid=PID, epoch=0, seq=2, attributes=0x30))
    await log.write_txn_marker(PID, 0, commit=True)
    assert await read_pairs(log, "read_committed") == [(0, b"k1"), (1, b"k2")]
    batches = await log.read_batches(0)
    assert [(h.is_transactional, h.is_control) for h, _ in batches] == [(True, False), (True, True)]


async def test_read_batches_under_read_committed_stops_at_the_lso(log: PartitionLog) -> None:
    await log.append(_records("a"))
    await _txn(log, 0, "b")
    await log.append(_records("c"))
    assert [h.base_offset for h, _ in await log.read_batches(0, isolation="read_committed")] == [0]
    assert await log.read_batches(1, isolation="read_committed") == []


# ------------------------------------------------------------------------------------------ subscribe


async def test_a_read_committed_subscriber_waits_at_the_lso_until_the_commit(log: PartitionLog) -> None:
    await _txn(log, 0, "t")
    await log.append(_records("plain"))
    got: list[bytes | None] = []

    async def consume() -> None:
        async for record in log.subscribe(0, isolation="read_committed"):
            got.append(record.value)
            if len(got) == 2:
                return

    task = asyncio.ensure_future(consume())
    await reach(lambda: len(log._data_waiters) == 1, "the subscriber waiting at the LSO")
    assert got == []
    await log.write_txn_marker(PID, 0, commit=True)
    await asyncio.wait_for(task, 30)
    assert got == [b"t", b"plain"]


# ------------------------------------------------------------------------------------------ restarts


def _crash_copy(source: Path, target: Path) -> Path:
    """The files of an open engine as a kill -9 leaves them: no clean-shutdown marker, no close snapshot."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".lock"))
    return target


@pytest.mark.parametrize("stop", ["clean", "crash"])
async def test_open_and_aborted_transactions_survive_a_restart(tmp_path: Path, stop: str) -> None:
    async with Engine.open(tmp_path / "data", CONFIG) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _txn(log, 0, "aborted", pid=OTHER)
        await log.roll()
        await _txn(log, 0, "open", pid=PID)  # offset 1: open across the restart
        await log.append(_records("plain"))
        await log.write_txn_marker(OTHER, 0, commit=False)
        await log.roll()
        await log.append(_records("after"))
        before = (log.last_stable_offset, log.aborted_transactions(0, 100))
        index = log.directory / "00000000000000000001.txnindex"
        entry = index.read_bytes()
        data = tmp_path / "data" if stop == "clean" else _crash_copy(tmp_path / "data", tmp_path / "crashed")
        if stop == "crash":  # the crash copy's recovery resets and rebuilds the index of what it scans
            (data / "t-0" / "00000000000000000001.txnindex").unlink()
    async with Engine.open(data, CONFIG) as engine:
        log = engine.log("t", 0)
        await log.load_producer_state()  # after a crash: rebuilt on first need, or now
        assert (log.last_stable_offset, log.aborted_transactions(0, 100)) == before == (1, [(OTHER, 0)])
        assert (data / "t-0" / "00000000000000000001.txnindex").read_bytes() == entry
        assert await read_pairs(log, "read_committed") == []
        await log.write_txn_marker(PID, 0, commit=True)
        assert await read_pairs(log, "read_committed") == [(1, b"open"), (2, b"plain"), (4, b"after")]


async def test_recovery_rebuilds_the_txnindex_of_the_segments_it_scans(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data", CONFIG) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _txn(log, 0, "a", pid=PID)
        await _txn(log, 0, "b", pid=OTHER)
        await log.write_txn_marker(OTHER, 0, commit=False)  # entry (OTHER, 1, 2, lso 0)
        await log.write_txn_marker(PID, 0, commit=False)  # entry (PID, 0, 3, lso 4)
        index = log.directory / "00000000000000000000.txnindex"
        entries = index.read_bytes()
        crashed = _crash_copy(tmp_path / "data", tmp_path / "crashed")
    # The index lost its entries (as a torn write after a power loss leaves it): recovery scans the
    # segment (no clean shutdown) and rebuilds them from the markers in the log.
    (crashed / "t-0" / "00000000000000000000.txnindex").write_bytes(b"")
    async with Engine.open(crashed, CONFIG) as engine:
        log = engine.log("t", 0)
        await log.load_producer_state()
        assert (crashed / "t-0" / "00000000000000000000.txnindex").read_bytes() == entries
        assert entries == struct.pack(">hqqqqhqqqq", 0, OTHER, 1, 2, 0, 0, PID, 0, 3, 4)
        assert await read_pairs(log, "read_committed") == []


async def test_retention_forgets_the_aborts_of_the_segments_it_deletes(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data", CONFIG) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _txn(log, 0, "a")
        await log.write_txn_marker(PID, 0, commit=False)
        await log.roll()
        await log.append(_records("b"))
        assert log.aborted_transactions(0, 3) == [(PID, 0)]
        await log.delete_records_before(2)
        assert log.aborted_transactions(0, 3) == []
        assert await read_pairs(log, "read_committed") == [(2, b"b")]
