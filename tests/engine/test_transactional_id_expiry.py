"""Transactional ids expire as Kafka's ``transactional.id.expiration.ms`` says.

An id with no transaction in flight (Empty, CompleteCommit, CompleteAbort)
that nothing changed for the expiration time is removed by the coordinator's
sweep, durably (a tombstone in the transaction log); a later InitProducerId
with it starts afresh at a new producer id. Time is an injected clock; the
background sweep is awaited through the coordinator's own change watch.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from seglog.engine import Engine
from seglog.engine.errors import InvalidConfigError
from seglog.engine.transactions import (
    DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    TRANSACTIONS_DIR,
    TRANSACTIONS_FILE,
    TransactionState,
)

BOUND_S = 10.0
EXPIRY_MS = 1_000
HOUR_MS = 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now_ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now_ms


def _open(path: Path, **options: int) -> object:
    return Engine.open(path, transactional_id_expiration_ms=EXPIRY_MS,
                       transactions_remove_expired_transaction_cleanup_interval_ms=HOUR_MS, **options)


def test_the_default_expiration_is_kafkas_seven_days() -> None:
    assert DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS == 604_800_000


async def test_an_unused_id_expires_durably_and_a_later_producer_starts_afresh(tmp_path: Path) -> None:
    clock = Clock()
    async with _open(tmp_path) as engine:  # type: ignore[attr-defined]
        coordinator = engine.transactions
        coordinator.clock = clock
        pid, epoch = await coordinator.init_producer_id("t", 60_000)
        assert epoch == 0
        clock.now_ms += EXPIRY_MS - 1
        assert await coordinator.remove_expired_transactional_ids() == []
        assert coordinator.state_of("t") is not None
        clock.now_ms += 1
        assert await coordinator.remove_expired_transactional_ids() == ["t"]
        assert coordinator.state_of("t") is None
        assert coordinator.transactional_ids() == []
    assert (tmp_path / TRANSACTIONS_DIR / TRANSACTIONS_FILE).exists()
    async with Engine.open(tmp_path) as engine:
        coordinator = engine.transactions
        assert coordinator.state_of("t") is None  # the tombstone survived the reopen
        new_pid, new_epoch = await coordinator.init_producer_id("t", 60_000)
        assert (new_pid != pid, new_epoch) == (True, 0)


async def test_ids_in_a_transaction_do_not_expire_and_ended_ones_do(tmp_path: Path) -> None:
    clock = Clock()
    async with _open(tmp_path) as engine:  # type: ignore[attr-defined]
        await engine.create_topic("out", partitions=1)
        coordinator = engine.transactions
        coordinator.clock = clock
        open_pid, open_epoch = await coordinator.init_producer_id("open", 60_000)
        await coordinator.add_partitions("open", open_pid, open_epoch, [("out", 0)])
        done_pid, done_epoch = await coordinator.init_producer_id("done", 60_000)
        await coordinator.add_partitions("done", done_pid, done_epoch, [("out", 0)])
        await coordinator.end_txn("done", done_pid, done_epoch, commit=True)
        async with asyncio.timeout(BOUND_S):
            await coordinator.wait_until(lambda: coordinator.is_idle("done"))
        state = coordinator.state_of("done")
        assert state is not None and state.state is TransactionState.COMPLETE_COMMIT
        clock.now_ms += 10 * EXPIRY_MS
        assert await coordinator.remove_expired_transactional_ids() == ["done"]
        state = coordinator.state_of("open")
        assert state is not None and state.state is TransactionState.ONGOING
        await coordinator.end_txn("open", open_pid, open_epoch, commit=False)


async def test_the_engine_sweeps_expired_ids_in_the_background(tmp_path: Path) -> None:
    clock = Clock()
    async with Engine.open(tmp_path, transactional_id_expiration_ms=EXPIRY_MS,
                           transactions_remove_expired_transaction_cleanup_interval_ms=5) as engine:
        coordinator = engine.transactions
        coordinator.clock = clock
        await coordinator.init_producer_id("t", 60_000)
        assert coordinator.state_of("t") is not None  # not yet expired: the sweeps so far kept it
        clock.now_ms += EXPIRY_MS
        async with asyncio.timeout(BOUND_S):
            await coordinator.wait_until(lambda: coordinator.state_of("t") is None)


@pytest.mark.parametrize(
    "option", ["transactional_id_expiration_ms", "transactions_remove_expired_transaction_cleanup_interval_ms"]
)
async def test_the_expiry_options_must_be_positive(tmp_path: Path, option: str) -> None:
    with pytest.raises(InvalidConfigError, match=option):
        await Engine.open(tmp_path, **{option: 0})  # type: ignore[arg-type]
