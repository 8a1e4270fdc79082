"""The transaction coordinator's rules (Kafka's TransactionCoordinator), driven in-process with recorded markers.

The partitions are stood in for by a marker writer that records each marker
(and can be held on an event, or made to fail), so that these tests hold the
coordinator's state machine and its durable log on their own; the engine tests
(``test_native_transactions.py``) hold it together with real partitions.
Every wait is on the coordinator's state (``wait_until``) or an event, bounded
by ``asyncio.timeout``; the one timer under test (a transaction timeout) is a
second long.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from seglog.engine import errors
from seglog.engine.coordinator import GroupCoordinator
from seglog.engine.framestore import encode_frame
from seglog.engine.groups import GROUPS_DIR, GroupStore
from seglog.engine.producer_ids import ProducerIdManager
from seglog.engine.transactions import (
    TRANSACTIONS_DIR,
    TRANSACTIONS_FILE,
    TransactionCoordinator,
    TransactionLog,
    TransactionState,
    TxnRecord,
)

BOUND_S = 10.0
S = TransactionState


@dataclass
class Markers:
    """The stand-in for the partitions: records markers; ``hold`` parks them, ``fail`` makes the next ones fail."""

    written: list[tuple[str, int, int, int, bool]] = field(default_factory=list)
    hold: asyncio.Event | None = None
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    fail: int = 0

    async def __call__(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> None:
        self.reached.set()
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            self.fail -= 1
            raise errors.StorageError("disk full (injected)")
        self.written.append((topic, partition, producer_id, epoch, commit))


async def end_held_at_the_markers(
    env: Env, coord: TransactionCoordinator, pid: int, epoch: int
) -> asyncio.Task[None]:
    """A commit of transaction "t" started and parked at its first marker (``PrepareCommit`` written); its task."""
    env.markers.hold = asyncio.Event()
    ending = asyncio.create_task(coord.end_txn("t", pid, epoch, True))
    async with asyncio.timeout(BOUND_S):
        await env.markers.reached.wait()
    return ending


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.markers = Markers()

    async def open(self, *, start: bool = True) -> TransactionCoordinator:
        self.groups = GroupStore(self.root / GROUPS_DIR, read_only=False)
        await self.groups.load()
        self.group_coord = GroupCoordinator(self.groups)
        self.log = TransactionLog(self.root / TRANSACTIONS_DIR, read_only=False)
        await self.log.load()
        self.coord = TransactionCoordinator(
            self.log, ProducerIdManager(self.root), self.group_coord, self.markers,
            lambda topic, partition: topic != "missing",
        )
        if start:
            self.coord.start()
        return self.coord

    async def close(self) -> None:
        await self.coord.close()
        await self.group_coord.close()
        await self.groups.close()
        await self.log.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    opened = Env(tmp_path)
    await opened.open()
    yield opened
    await opened.close()


async def until(coord: TransactionCoordinator, predicate: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND_S):
        await coord.wait_until(predicate)


def state(coord: TransactionCoordinator, txn_id: str = "t") -> TransactionState | None:
    record = coord.state_of(txn_id)
    return None if record is None else record.state


# -- InitProducerId ---------------------------------------------------------------------------------


async def test_init_gives_a_new_id_epoch_0_then_bumps_the_epoch_of_the_same_id(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    assert epoch == 0
    assert await env.coord.init_producer_id("t", 60_000) == (pid, 1)
    other, other_epoch = await env.coord.init_producer_id("u", 60_000)
    assert other != pid and other_epoch == 0
    assert state(env.coord) is S.EMPTY


async def test_init_without_transactional_id_is_an_idempotent_producer(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id(None, 60_000)
    assert epoch == 0
    assert env.coord.state_of("t") is None
    assert await env.coord.init_producer_id(None, 60_000, pid, epoch) == (pid, 1)


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001, 1.5, True])
async def test_a_timeout_outside_1_to_the_maximum_is_refused(env: Env, timeout_ms: object) -> None:
    with pytest.raises(errors.InvalidTransactionTimeoutError):
        await env.coord.init_producer_id("t", timeout_ms)  # type: ignore[arg-type]


@pytest.mark.parametrize("txn_id", ["", "a\0b", 5])
async def test_a_bad_transactional_id_is_refused(env: Env, txn_id: object) -> None:
    with pytest.raises(errors.InvalidRecordError):
        await env.coord.init_producer_id(txn_id, 60_000)  # type: ignore[arg-type]


async def test_a_producer_presenting_an_older_epoch_is_fenced_and_a_retry_of_the_last_bump_is_answered_again(
    env: Env,
) -> None:
    pid, _ = await env.coord.init_producer_id("t", 60_000)
    assert await env.coord.init_producer_id("t", 60_000, pid, 0) == (pid, 1)
    # The same request again (its answer was lost): the same epoch, no second bump (Kafka's lastProducerEpoch).
    assert await env.coord.init_producer_id("t", 60_000, pid, 0) == (pid, 1)
    await env.coord.init_producer_id("t", 60_000, pid, 1)
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.init_producer_id("t", 60_000, pid, 0)
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.init_producer_id("t", 60_000, pid + 1, 0)


async def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id(env: Env) -> None:
    pid, _ = await env.coord.init_producer_id("t", 60_000)
    record = env.coord.state_of("t")
    assert record is not None
    from dataclasses import replace

    await env.log.put(replace(record, producer_epoch=32766))
    await env.close()
    coord = await env.open()
    new_pid, epoch = await coord.init_producer_id("t", 60_000)
    assert new_pid != pid and epoch == 0
    after = coord.state_of("t")
    assert after is not None and after.last_producer_id == pid


# -- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------


async def test_add_partitions_needs_the_ids_current_producer_and_epoch(env: Env) -> None:
    with pytest.raises(errors.InvalidProducerIdMappingError):
        await env.coord.add_partitions("t", 0, 0, [("a", 0)])
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    with pytest.raises(errors.InvalidProducerIdMappingError):
        await env.coord.add_partitions("t", pid + 1, epoch, [("a", 0)])
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.add_partitions("t", pid, epoch + 1, [("a", 0)])
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        await env.coord.add_partitions("t", pid, epoch, [("a", 0), ("missing", 0)])
    assert state(env.coord) is S.EMPTY
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    await env.coord.add_partitions("t", pid, epoch, [("a", 1), ("a", 0)])
    await env.coord.add_offsets("t", pid, epoch, "g")
    record = env.coord.state_of("t")
    assert record is not None
    assert record.state is S.ONGOING
    assert record.partitions == {("a", 0), ("a", 1)}
    assert record.groups == {"g"}


# -- EndTxn ---------------------------------------------------------------------------------------------


async def test_commit_writes_a_commit_marker_to_every_partition_then_completes(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0), ("b", 3)])
    await env.coord.end_txn("t", pid, epoch, True)
    assert sorted(env.markers.written) == [("a", 0, pid, epoch, True), ("b", 3, pid, epoch, True)]
    assert state(env.coord) is S.COMPLETE_COMMIT
    await env.coord.end_txn("t", pid, epoch, True)  # a client's retry: nothing more
    assert len(env.markers.written) == 2
    with pytest.raises(errors.InvalidTxnStateError):
        await env.coord.end_txn("t", pid, epoch, False)


async def test_abort_writes_abort_markers_and_a_new_transaction_starts_with_only_its_own_partitions(
    env: Env,
) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    await env.coord.end_txn("t", pid, epoch, False)
    assert env.markers.written == [("a", 0, pid, epoch, False)]
    assert state(env.coord) is S.COMPLETE_ABORT
    await env.coord.add_partitions("t", pid, epoch, [("b", 0)])
    await env.coord.end_txn("t", pid, epoch, True)
    assert env.markers.written[1:] == [("b", 0, pid, epoch, True)]


async def test_ending_a_transaction_that_never_began_is_an_invalid_state(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    with pytest.raises(errors.InvalidTxnStateError):
        await env.coord.end_txn("t", pid, epoch, True)


async def test_calls_meeting_a_transaction_being_ended_are_told_to_retry_and_init_waits_for_it(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    ending = await end_held_at_the_markers(env, env.coord, pid, epoch)
    assert state(env.coord) is S.PREPARE_COMMIT  # durable before any marker
    with pytest.raises(errors.ConcurrentTransactionsError):
        await env.coord.add_partitions("t", pid, epoch, [("b", 0)])
    with pytest.raises(errors.ConcurrentTransactionsError):
        await env.coord.end_txn("t", pid, epoch, True)
    with pytest.raises(errors.InvalidTxnStateError):
        await env.coord.end_txn("t", pid, epoch, False)
    init = asyncio.create_task(env.coord.init_producer_id("t", 60_000))
    await asyncio.sleep(0)
    assert not init.done()
    env.markers.hold.set()
    async with asyncio.timeout(BOUND_S):
        await ending
        assert await init == (pid, epoch + 1)
    assert state(env.coord) is S.EMPTY


async def test_a_caller_that_stops_waiting_does_not_stop_the_markers(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    ending = await end_held_at_the_markers(env, env.coord, pid, epoch)
    ending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await ending
    env.markers.hold.set()
    await until(env.coord, lambda: state(env.coord) is S.COMPLETE_COMMIT)
    assert env.markers.written == [("a", 0, pid, epoch, True)]


async def test_a_marker_that_fails_is_retried_until_the_transaction_completes(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    env.markers.fail = 2
    await env.coord.end_txn("t", pid, epoch, True)
    assert state(env.coord) is S.PREPARE_COMMIT  # decided, not yet everywhere
    await until(env.coord, lambda: state(env.coord) is S.COMPLETE_COMMIT)
    assert env.markers.written == [("a", 0, pid, epoch, True)]


# -- fencing ----------------------------------------------------------------------------------------------


async def test_a_new_producer_aborts_the_open_transaction_with_a_bumped_epoch_and_fences_the_old_one(
    env: Env,
) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    assert await env.coord.init_producer_id("t", 60_000) == (pid, epoch + 2)
    # The abort's marker carries the bumped epoch: the partition fences the old producer's late batches.
    assert env.markers.written == [("a", 0, pid, epoch + 1, False)]
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.end_txn("t", pid, epoch, True)
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.add_partitions("t", pid, epoch, [("a", 0)])


async def test_an_open_transaction_past_its_timeout_is_aborted_with_the_epoch_bumped(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 1000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    await until(env.coord, lambda: state(env.coord) is S.COMPLETE_ABORT)
    assert env.markers.written == [("a", 0, pid, epoch + 1, False)]
    with pytest.raises(errors.ProducerFencedError):
        await env.coord.end_txn("t", pid, epoch, True)
    record = env.coord.state_of("t")
    assert record is not None and record.producer_epoch == epoch + 1


# -- transactional offset commits --------------------------------------------------------------------------


async def test_transactional_offsets_are_invisible_until_commit_and_dropped_by_abort(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    with pytest.raises(errors.InvalidTxnStateError):  # the group was not added
        await env.coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 5})
    await env.coord.add_offsets("t", pid, epoch, "g")
    await env.coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 5, ("in", 1): 7})
    assert env.groups.committed("g", "in", 0) is None
    assert env.group_coord.pending_partitions("g") == {("in", 0), ("in", 1)}
    await env.coord.end_txn("t", pid, epoch, True)
    assert env.groups.offsets("g") == {("in", 0): 5, ("in", 1): 7}
    assert env.group_coord.pending_partitions("g") == set()

    await env.coord.add_offsets("t", pid, epoch, "g")
    await env.coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 9})
    await env.coord.end_txn("t", pid, epoch, False)
    assert env.groups.offsets("g") == {("in", 0): 5, ("in", 1): 7}
    assert env.group_coord.pending_partitions("g") == set()


async def test_a_commit_outside_the_transaction_after_its_offset_commit_keeps_its_later_offset(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_offsets("t", pid, epoch, "g")
    await env.coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 5, ("in", 1): 5})
    await env.group_coord.commit_outside_group("g", {("in", 1): 8})
    await env.coord.end_txn("t", pid, epoch, True)
    assert env.groups.offsets("g") == {("in", 0): 5, ("in", 1): 8}
    await env.close()
    await env.open()  # the log read back gives the same
    assert env.groups.offsets("g") == {("in", 0): 5, ("in", 1): 8}


async def test_pending_offsets_survive_a_restart_and_a_compaction(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_offsets("t", pid, epoch, "g")
    await env.coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 5, ("in", 1): 5})
    await env.group_coord.commit_outside_group("g", {("in", 1): 8})
    frames = b"".join(env.groups._image.frames())
    path = env.groups.path
    await env.close()
    path.write_bytes(frames)  # the log as a compaction writes it
    coord = await env.open()
    assert env.group_coord.pending_partitions("g") == {("in", 0)}
    await coord.end_txn("t", pid, epoch, True)
    assert env.groups.offsets("g") == {("in", 0): 5, ("in", 1): 8}


# -- durability ---------------------------------------------------------------------------------------------


async def test_states_are_read_back_after_a_restart(env: Env) -> None:
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
    await env.close()
    coord = await env.open()
    record = coord.state_of("t")
    assert record is not None
    assert (record.producer_id, record.producer_epoch, record.state) == (pid, epoch, S.ONGOING)
    assert record.partitions == {("a", 0)}
    await coord.end_txn("t", pid, epoch, True)
    assert env.markers.written == [("a", 0, pid, epoch, True)]


async def test_a_transaction_left_preparing_by_a_crash_is_finished_at_the_next_start(tmp_path: Path) -> None:
    env = Env(tmp_path)
    coord = await env.open()
    pid, epoch = await coord.init_producer_id("t", 60_000)
    await coord.add_partitions("t", pid, epoch, [("a", 0), ("a", 1)])
    await coord.add_offsets("t", pid, epoch, "g")
    await coord.txn_offset_commit("t", "g", pid, epoch, {("in", 0): 3})
    ending = await end_held_at_the_markers(env, coord, pid, epoch)  # the crash comes after PrepareCommit
    ending.cancel()
    # A crash: the files stay as they are; nothing more is written through these objects.
    await env.groups.close()
    await env.log.close()
    env.markers.hold.set()
    with pytest.raises((asyncio.CancelledError, errors.ClosedError)):
        await ending
    await coord.close()

    env.markers = Markers()
    coord = await env.open(start=False)
    assert state(coord) is None  # not taken over before start()
    coord.start()
    await until(coord, lambda: state(coord) is S.COMPLETE_COMMIT)
    assert sorted(env.markers.written) == [("a", 0, pid, epoch, True), ("a", 1, pid, epoch, True)]
    assert env.groups.offsets("g") == {("in", 0): 3}
    await env.close()


async def test_an_ongoing_transaction_read_back_is_aborted_at_its_timeout(tmp_path: Path) -> None:
    env = Env(tmp_path)
    coord = await env.open()
    pid, epoch = await coord.init_producer_id("t", 1000)
    await coord.add_partitions("t", pid, epoch, [("a", 0)])
    await env.close()
    coord = await env.open()
    await until(coord, lambda: state(coord) is S.COMPLETE_ABORT)
    assert env.markers.written == [("a", 0, pid, epoch + 1, False)]
    await env.close()


async def test_the_log_is_never_trusted_bad_frames_are_skipped_and_a_torn_tail_cut(tmp_path: Path) -> None:
    env = Env(tmp_path)
    coord = await env.open()
    pid, epoch = await coord.init_producer_id("t", 60_000)
    await coord.init_producer_id("u", 60_000)
    await env.close()
    path = tmp_path / TRANSACTIONS_DIR / TRANSACTIONS_FILE
    good = TxnRecord("v", 7, -1, 0, -1, 60_000, S.EMPTY, -1, 0).frame()
    nonsense = [
        encode_frame([1, "w", -5, -1, 0, -1, 60_000, 0, -1, 0, [], []]),  # a negative producer id
        encode_frame([1, "w", 1, -1, 0, -1, 60_000, 9, -1, 0, [], []]),  # an unknown state
        encode_frame([1, "w", 1, -1, 0, -1, 0, 0, -1, 0, [], []]),  # a zero timeout
        encode_frame([1, "w", 1, -1, 0, -1, 60_000, 1, 0, 0, [["a", -1]], []]),  # a negative partition
        encode_frame([1, "w", 1, -1, 0, -1, 60_000, 1, 0, 0, [], [""]]),  # an empty group id
        encode_frame([7, "w"]),  # an unknown kind
    ]
    data = path.read_bytes() + b"".join(nonsense) + good
    path.write_bytes(data + good[:9])  # and a torn write at the end
    coord = await env.open()
    assert coord.transactional_ids() == ["t", "u", "v"]
    record = coord.state_of("t")
    assert record is not None and (record.producer_id, record.producer_epoch) == (pid, epoch)
    assert path.stat().st_size == len(data)
    await env.close()


async def test_the_log_is_compacted_to_one_frame_per_transactional_id(tmp_path: Path) -> None:
    env = Env(tmp_path)
    await env.open()
    env.log.compact_min_bytes = 2000
    pid, epoch = await env.coord.init_producer_id("t", 60_000)
    for _ in range(60):
        await env.coord.add_partitions("t", pid, epoch, [("a", 0)])
        await env.coord.end_txn("t", pid, epoch, True)
    assert env.log._compaction is not None or env.log.writes > 0
    if env.log._compaction is not None:
        async with asyncio.timeout(BOUND_S):
            await env.log._compaction
    await env.close()
    size = (tmp_path / TRANSACTIONS_DIR / TRANSACTIONS_FILE).stat().st_size
    assert size < 2000 + 200  # 120 states written (about 10 kB) were compacted to a few frames at least once
    coord = await env.open()
    record = coord.state_of("t")
    assert record is not None and record.state is S.COMPLETE_COMMIT
    await env.close()
