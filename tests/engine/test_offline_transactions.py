"""read_committed without an engine: a partition's LSO and aborted transactions from its files, and bulk reads.

The directories are written by the real engine: an open transaction holds the
LSO, an aborted one is left out, a committed one is read; whether the engine
is still running, closed cleanly (its snapshot at the log end holds the open
transaction) or killed (the snapshot of the last roll, then the batches after it).
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, LogConfig, PartitionLog, Record, offline
from seglog.engine.errors import InvalidRecordError
from seglog.engine.offline import transactions as offline_transactions
from seglog.indexes.transaction_index import ABORTED_TXN, AbortedTxn

A, B, C = 7, 8, 9  # producer ids


async def _txn(log: PartitionLog, pid: int, seq: int, *values: str) -> None:
    await log.append([Record(v.encode()) for v in values], producer_id=pid, producer_epoch=0, base_sequence=seq,
                     transactional=True)


async def _write(log: PartitionLog) -> None:
    """0 plain | 1-2 A | 3 B | roll | 4 COMMIT A | 5 B | 6 ABORT B | 7 C (open) | 8 plain: LSO 7."""
    await log.append([Record(b"p0")])
    await _txn(log, A, 0, "a1", "a2")
    await _txn(log, B, 0, "b1")
    await log.roll()  # B's aborted transaction spans the roll: its first offset is in the first segment
    await log.write_txn_marker(A, 0, commit=True)
    await _txn(log, B, 1, "b2")
    await log.write_txn_marker(B, 0, commit=False)
    await _txn(log, C, 0, "c1")
    await log.append([Record(b"p8")])


def _values(log_dir: Path, isolation: str, **bounds: int) -> list[tuple[int, bytes | None]]:
    plan = offline.plan_partition(log_dir, "t", 0, offline.Bounds(**bounds), isolation=isolation)  # type: ignore[arg-type]
    return [(offset, value) for r in plan.ranges for cols in offline.scan_range(r)
            for offset, value in zip(cols.offsets, cols.values, strict=True)]


COMMITTED_BELOW_LSO = [(0, b"p0"), (1, b"a1"), (2, b"a2")]
EVERY_DATA_RECORD = [(0, b"p0"), (1, b"a1"), (2, b"a2"), (3, b"b1"), (5, b"b2"), (7, b"c1"), (8, b"p8")]
ABORTED_B = AbortedTxn(B, 3, 6, 7)


def _check(log_dir: Path) -> None:
    txns = offline.partition_transactions(log_dir, "t", 0)
    assert (txns.log_end_offset, txns.last_stable_offset, txns.open) == (9, 7, {C: 7})
    assert txns.aborted == (ABORTED_B,)
    assert _values(log_dir, "read_committed") == COMMITTED_BELOW_LSO
    assert _values(log_dir, "read_uncommitted") == EVERY_DATA_RECORD
    assert _values(log_dir, "read_committed", start_offset=2, end_offset=6) == [(2, b"a2")]


async def test_a_running_engines_partition_reads_committed_up_to_its_lso(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await _write(log)
        assert log.last_stable_offset == 7
        _check(tmp_path / "data")  # the open transaction is known only from the batches after the roll


async def test_after_a_clean_close_the_snapshot_at_the_log_end_holds_the_open_transaction(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        await _write(engine.log("t", 0))
    assert (tmp_path / "data" / "t-0" / f"{9:020d}.snapshot").exists()
    _check(tmp_path / "data")


async def _killed_copy(tmp_path: Path) -> Path:
    """The files of a running engine after ``_write``, as a kill -9 leaves them (no clean-shutdown record)."""
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("t", partitions=1)
        await _write(engine.log("t", 0))
        shutil.copytree(tmp_path / "data", tmp_path / "killed", ignore=shutil.ignore_patterns(".lock"))
    killed = tmp_path / "killed"
    (killed / ".clean-shutdown").unlink(missing_ok=True)
    return killed


async def test_after_a_kill_the_batches_after_the_last_snapshot_are_replayed(tmp_path: Path) -> None:
    killed = await _killed_copy(tmp_path)
    (killed / "t-0" / f"{4:020d}.txnindex").unlink(missing_ok=True)  # as if the abort's entry never reached disk
    assert sorted(p.name for p in (killed / "t-0").glob("*.snapshot")) == [f"{4:020d}.snapshot"]
    _check(killed)


async def test_without_transactions_read_committed_reads_what_read_uncommitted_does(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data", LogConfig(segment_bytes=4096)) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        for n in range(3):
            await log.append([Record(f"v{n}".encode())])
        txns = offline.partition_transactions(tmp_path / "data", "t", 0)
        assert (txns.last_stable_offset, txns.aborted, txns.open) == (3, (), {})
        assert _values(tmp_path / "data", "read_committed") == _values(tmp_path / "data", "read_uncommitted")


def test_an_unknown_isolation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRecordError, match="read_committed"):
        offline.plan_partition(tmp_path, "t", 0, isolation="committed")  # type: ignore[arg-type]


async def test_each_read_resumes_where_the_last_walk_ended_and_agrees_with_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Spark stream asks at every trigger: the walk must not start over from the last snapshot
    # (the whole active segment) each time, and what it finds must be what the engine says.
    starts: list[tuple[int, int]] = []
    real_reader = offline_transactions.segment_reader

    def spy(log: object, base_offset: int, max_batch_bytes: int, **options: Any) -> Any:
        starts.append((base_offset, options["start"]))
        return real_reader(log, base_offset, max_batch_bytes, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(offline_transactions, "segment_reader", spy)
    async with Engine.open(tmp_path, LogConfig(segment_bytes=1 << 20)) as engine:
        await engine.create_topic("t")
        log = engine.log("t")
        steps = [
            lambda: log.append([Record(b"p")]),
            lambda: _txn(log, A, 0, "a1", "a2"),
            lambda: _txn(log, B, 0, "b1"),
            lambda: log.append([Record(b"p")]),
            lambda: log.write_txn_marker(A, 0, commit=True),
            lambda: _txn(log, B, 1, "b2"),
            lambda: log.write_txn_marker(B, 0, commit=False),
            lambda: _txn(log, C, 0, "c1"),
            log.roll,
            lambda: _txn(log, C, 1, "c2"),
            lambda: log.write_txn_marker(C, 0, commit=False),
            lambda: log.append([Record(b"p")]),
        ]
        resumed = 0
        for step in steps:
            await step()
            starts.clear()
            txns = offline.partition_transactions(tmp_path, "t", 0)
            end = log.log_end_offset
            assert (txns.log_end_offset, txns.last_stable_offset) == (end, log.last_stable_offset)
            assert [(t.producer_id, t.first_offset) for t in txns.aborted] == [
                (t.producer_id, t.first_offset) for t in log.aborted_transactions(0, end)]
            if starts and starts[0][1] > 0:
                resumed += 1
        assert resumed >= 8  # every step but the first walks on from the last batch read (and the roll's)


async def test_a_partition_rewritten_since_the_last_read_is_walked_again(tmp_path: Path) -> None:
    # The cache is keyed by the directory: a topic deleted and created again under the same name
    # has other batches at the positions the last walk read, which must not be taken for them.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        await _txn(engine.log("t"), A, 0, "a1", "a2")
        txns = offline.partition_transactions(tmp_path, "t", 0)
        assert (txns.last_stable_offset, txns.open) == (0, {A: 0})
        await engine.delete_topic("t")
        await engine.create_topic("t")
        await engine.log("t").append([Record(b"plain-%d" % i) for i in range(4)])
        txns = offline.partition_transactions(tmp_path, "t", 0)
        assert (txns.log_end_offset, txns.last_stable_offset, txns.open) == (4, 4, {})


async def test_a_recovered_txnindex_is_rebuilt_at_open_not_left_empty_for_a_later_close(tmp_path: Path) -> None:
    # Recovery's scan empties the .txnindex of the segments it scans. Rebuilt only on the first
    # read_committed read, a close before it (or a crash after the next recovery-point checkpoint)
    # left it empty for good, and read_committed then served the aborted transaction's records.
    killed = await _killed_copy(tmp_path)
    async with Engine.open(killed):  # recovers the active segment, which holds B's abort marker at 6
        pass
    txnindex = killed / "t-0" / f"{4:020d}.txnindex"
    assert txnindex.stat().st_size == ABORTED_TXN.size
    async with Engine.open(killed) as engine:
        got = await engine.log("t", 0).read(0, isolation="read_committed")
        assert [(r.offset, r.value) for r in got.records] == COMMITTED_BELOW_LSO
    _check(killed)


async def test_an_offset_index_rebuilt_after_a_lie_keeps_the_segments_aborted_transactions(tmp_path: Path) -> None:
    # Rebuilding a lying offset index from the .log emptied the segment's .txnindex too: read_committed
    # then returned B's aborted b2, and after a restart b1 as well.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=1)
        await _write(engine.log("t", 0))
    segment = tmp_path / "t-0" / f"{4:020d}"
    Path(f"{segment}.index").write_bytes(struct.pack(">ii", 2, 7))  # "offset 6 at position 7": inside a batch
    for _ in range(2):  # the open that catches the lie and rebuilds, then the next one
        async with Engine.open(tmp_path) as engine:
            got = await engine.log("t", 0).read(0, isolation="read_committed")
            assert [(r.offset, r.value) for r in got.records] == COMMITTED_BELOW_LSO
        assert Path(f"{segment}.txnindex").stat().st_size == ABORTED_TXN.size
