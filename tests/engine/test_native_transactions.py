"""``engine.transaction``: the native API over the transaction coordinator and real partitions.

Records appended in a transaction reach ``read_committed`` readers all at once
when it commits and never when it aborts; offsets committed in it become the
group's on commit only; a second holder of the transactional id fences the
first. Interleavings are forced with the partitions' own state (no sleeps).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from seglog.engine import Engine, Record
from seglog.engine.errors import (
    InvalidProducerEpochError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
)
from seglog.engine.transactions import TransactionState

BOUND_S = 10.0


def values(got: object) -> list[bytes]:
    return [r.value for r in got.records]  # type: ignore[attr-defined]


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with Engine.open(tmp_path) as opened:
        await opened.create_topic("out", partitions=2)
        await opened.create_topic("in", partitions=1)
        yield opened


async def test_committed_records_appear_to_read_committed_readers_only_at_commit(engine: Engine) -> None:
    log0 = engine.log("out", 0)
    await log0.append([Record(b"before")])
    async with engine.transaction("t1") as txn:
        await txn.append("out", 0, [Record(b"a"), Record(b"b")])
        await txn.append("out", 1, [Record(b"c")])
        await txn.append("out", 0, [Record(b"d")])
        # Open: read_uncommitted sees the records, read_committed stops at the transaction's first offset.
        assert values(await log0.read(0)) == [b"before", b"a", b"b", b"d"]
        assert log0.last_stable_offset == 1
        assert values(await log0.read(0, isolation="read_committed")) == [b"before"]
    assert txn.state == "committed"
    assert values(await log0.read(0, isolation="read_committed")) == [b"before", b"a", b"b", b"d"]
    assert values(await engine.log("out", 1).read(0, isolation="read_committed")) == [b"c"]
    assert log0.last_stable_offset == log0.log_end_offset == 5  # the marker took offset 4
    assert log0.aborted_transactions(0, 5) == []


async def test_an_exception_aborts_the_transaction_and_is_reraised(engine: Engine) -> None:
    log0 = engine.log("out", 0)
    with pytest.raises(RuntimeError, match="boom"):
        async with engine.transaction("t1") as txn:
            await txn.append("out", 0, [Record(b"x"), Record(b"y")])
            raise RuntimeError("boom")
    assert txn.state == "aborted"
    await log0.append([Record(b"after")])
    assert values(await log0.read(0, isolation="read_committed")) == [b"after"]
    assert values(await log0.read(0)) == [b"x", b"y", b"after"]  # read_uncommitted: aborted records are there
    aborted = log0.aborted_transactions(0, log0.log_end_offset)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(txn.producer_id, 0)]
    record = engine.transactions.state_of("t1")
    assert record is not None and record.state is TransactionState.COMPLETE_ABORT


async def test_explicit_abort_and_commit_end_the_transaction_early(engine: Engine) -> None:
    async with engine.transaction("t1") as txn:
        await txn.append("out", 0, [Record(b"x")])
        await txn.abort()
        with pytest.raises(InvalidTxnStateError):
            await txn.append("out", 0, [Record(b"y")])
    async with engine.transaction("t1") as txn:
        await txn.append("out", 0, [Record(b"z")])
        await txn.commit()
    assert values(await engine.log("out", 0).read(0, isolation="read_committed")) == [b"z"]


async def test_offsets_committed_in_a_transaction_are_the_groups_only_when_it_commits(engine: Engine) -> None:
    with pytest.raises(RuntimeError):
        async with engine.transaction("t1") as txn:
            await txn.append("out", 0, [Record(b"x")])
            await txn.commit_offsets("billing", {("in", 0): 10})
            assert await engine.committed("billing", "in", 0) is None  # pending until the end
            raise RuntimeError("redo this round")
    assert await engine.committed("billing", "in", 0) is None
    async with engine.transaction("t1") as txn:
        await txn.append("out", 0, [Record(b"x")])
        await txn.commit_offsets("billing", {("in", 0): 10})
    assert await engine.committed("billing", "in", 0) == 10


async def test_a_second_holder_of_the_transactional_id_fences_the_first_and_aborts_its_transaction(
    engine: Engine,
) -> None:
    log0 = engine.log("out", 0)
    first = engine.transaction("t1")
    await first.begin()
    await first.append("out", 0, [Record(b"zombie")])
    async with engine.transaction("t1") as second:
        assert second.producer_id == first.producer_id
        assert second.producer_epoch == first.producer_epoch + 2  # one bump for the abort, one for the new holder
        # The first one's open transaction was aborted, so read_committed readers are not held by it.
        assert values(await log0.read(0, isolation="read_committed")) == []
        with pytest.raises(InvalidProducerEpochError):
            await first.append("out", 0, [Record(b"late")])
        await second.append("out", 0, [Record(b"fresh")])
    with pytest.raises(InvalidProducerEpochError):
        await first.commit()
    assert values(await log0.read(0, isolation="read_committed")) == [b"fresh"]


async def test_a_transaction_with_nothing_in_it_ends_without_the_coordinator(engine: Engine) -> None:
    async with engine.transaction("t1") as txn:
        pass
    assert txn.state == "committed"
    record = engine.transactions.state_of("t1")
    assert record is not None and record.state is TransactionState.EMPTY


async def test_bad_timeouts_are_refused_before_anything_happens(engine: Engine) -> None:
    with pytest.raises(InvalidTransactionTimeoutError):
        engine.transaction("t1", timeout_ms=0)
    assert engine.transactions.state_of("t1") is None


async def test_transactions_survive_a_restart_committed_ones_stay_committed(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("out", partitions=1)
        async with engine.transaction("t1", timeout_ms=60_000) as txn:
            await txn.append("out", 0, [Record(b"kept")])
            await txn.commit_offsets("g", {("out", 0): 1})
        pid = txn.producer_id
    async with Engine.open(tmp_path) as engine:
        record = engine.transactions.state_of("t1")
        assert record is not None and record.state is TransactionState.COMPLETE_COMMIT
        assert values(await engine.log("out", 0).read(0, isolation="read_committed")) == [b"kept"]
        assert await engine.committed("g", "out", 0) == 1
        async with asyncio.timeout(BOUND_S), engine.transaction("t1") as again:
            assert again.producer_id == pid
