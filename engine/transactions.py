"""The transaction coordinator: Kafka's transactions for Kafka clients and ``engine.transaction`` alike.

One ``TransactionCoordinator`` per engine (``engine.transactions``) keeps the
state of every transactional id, as Kafka's ``TransactionCoordinator``,
``TransactionStateManager`` and ``TransactionMetadata`` do
(``core/src/main/scala/kafka/coordinator/transaction/``):

* **InitProducerId** with a transactional id gives the id its producer id and
  the next epoch; every older producer of the id is fenced from then on
  (``PRODUCER_FENCED``). A transaction the previous epoch left open is aborted
  first, with the epoch bumped once more so that its markers fence the old
  producer at every partition. An exhausted epoch (32766) moves the id to a new
  producer id.
* **AddPartitionsToTxn** / **AddOffsetsToTxn** move the transaction to
  ``Ongoing`` and record which partitions and consumer groups it touches.
* **TxnOffsetCommit** records a consumer group's offsets as the producer's
  pending commit in the group store (Kafka's ``pendingTransactionalOffsetCommits``):
  durable, but invisible until the transaction ends.
* **EndTxn** writes ``PrepareCommit`` or ``PrepareAbort`` durably (from then on
  the outcome is decided and survives a crash), then a commit or abort marker
  (a control batch) to every partition of the transaction
  (``PartitionLog.write_txn_marker``) and the end of the transaction to every
  group (pending offsets committed or dropped), then ``CompleteCommit`` or
  ``CompleteAbort``.
* **Timeouts**: a transaction still ``Ongoing`` its timeout after it began is
  aborted by the coordinator, with the epoch bumped (the producer is fenced).
* **Expiry**: a transactional id whose state is ``Empty``, ``CompleteCommit``
  or ``CompleteAbort`` and that nothing changed for ``transactional_id_expiration_ms``
  (Kafka's ``transactional.id.expiration.ms``, 7 days) is forgotten by the
  periodic sweep (:meth:`TransactionCoordinator.remove_expired_transactional_ids`),
  a tombstone written first as Kafka does; a later InitProducerId with it starts afresh.
* **After a crash** the state is read back: a ``Prepare*`` transaction is
  finished (markers written again: a marker for a producer without an open
  transaction is harmless), an ``Ongoing`` one waits for its producer or its
  timeout.

The states live in a log of frames (``seglog.engine.framestore``; format
below and in docs/FORMAT.md), read at open and never trusted: a frame that
does not make sense is skipped with a warning. Files::

    <log_dir>/transaction-state/transactions.log
    <log_dir>/transaction-state/transactions.log.compacting   a compaction in progress; removed at open

Frames (part of the on-disk format)::

    [0, 1]                                                   header: format version 1
    [1, transactional_id, producer_id, last_producer_id, producer_epoch, last_producer_epoch,
        timeout_ms, state, start_ms, update_ms, [[topic, partition], ...], [group, ...]]

    [2, transactional_id]                                    tombstone: the id expired

``state`` is Kafka's ``TransactionState`` id (0 Empty, 1 Ongoing, 2 PrepareCommit,
3 PrepareAbort, 4 CompleteCommit, 5 CompleteAbort); a later frame replaces an
earlier one of the same id, and a tombstone removes it.

Concurrency: call it only on the engine's event loop. Each state change is
checked and marked *pending* without an ``await`` in between (Kafka's
``pendingState``); a request that meets a pending change is answered
``CONCURRENT_TRANSACTIONS``. The in-memory state changes once the frame is
durable. Markers and group ends run in a task of their own, so a caller that
stops waiting does not leave a transaction half-ended.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from seglog.engine.coordinator import NO_MEMBER, CommitMember, GroupCoordinator, GroupErrorCode
from seglog.engine.errors import (
    ClosedError,
    ConcurrentTransactionsError,
    GroupError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerError,
    ProducerFencedError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from seglog.engine.framestore import HEADER, FrameStore, encode_frame
from seglog.engine.log import PartitionLog
from seglog.engine.producer_ids import ProducerIdManager
from seglog.engine.producer_state import MAX_PRODUCER_EPOCH, increment_sequence
from seglog.engine.results import AppendResult
from seglog.engine.validate import validate_group, validate_offset
from seglog.engine.watch import ChangeWatch
from seglog.segments.fileio import FileOps
from seglog.segments.records import Record, text_problem

__all__ = [
    "DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS",
    "DEFAULT_TRANSACTIONS_CLEANUP_INTERVAL_MS",
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "MAX_TRANSACTION_TIMEOUT_MS",
    "TRANSACTIONS_DIR",
    "TRANSACTIONS_FILE",
    "Transaction",
    "TransactionCoordinator",
    "TransactionLog",
    "TransactionState",
    "TxnImage",
    "TxnRecord",
    "validate_transactional_id",
]

log = logging.getLogger("seglog.transactions")

TRANSACTIONS_DIR: Final = "transaction-state"  # part of the on-disk layout
TRANSACTIONS_FILE: Final = "transactions.log"  # part of the on-disk layout
FORMAT_VERSION: Final = 1  # part of the on-disk format
TXN_STATE: Final = 1  # part of the on-disk format: the kind of a transaction's state frame
TXN_TOMBSTONE: Final = 2  # part of the on-disk format: the kind of an expired id's tombstone frame
HEADER_FRAME: Final = encode_frame([HEADER, FORMAT_VERSION])

# Kafka's transaction.max.timeout.ms: the longest timeout a producer may ask for.
MAX_TRANSACTION_TIMEOUT_MS: Final = 15 * 60 * 1000
# Kafka producers' transaction.timeout.ms default.
DEFAULT_TRANSACTION_TIMEOUT_MS: Final = 60_000
# Kafka's transactional.id.expiration.ms: an id unused this long (and not in a transaction) is forgotten.
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: Final = 7 * 24 * 60 * 60 * 1000
# Kafka's transactions.remove.expired.transaction.cleanup.interval.ms: how often expired ids are looked for.
DEFAULT_TRANSACTIONS_CLEANUP_INTERVAL_MS: Final = 60 * 60 * 1000
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_TRANSACTIONAL_ID_BYTES: Final = 32767  # the longest string a Kafka client can send
# Markers that failed (a full disk) are tried again after this long, doubling up to the maximum.
MARKER_RETRY_MS: Final = 100
MARKER_RETRY_MAX_MS: Final = 10_000
_MAX_INT64: Final = 2**63 - 1
_MAX_INT32: Final = 2**31 - 1

TopicPartition = tuple[str, int]
MarkerWriter = Callable[[str, int, int, int, bool], Awaitable[None]]
"""``(topic, partition, producer_id, producer_epoch, commit)``: write a transaction marker at a partition."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionState(enum.IntEnum):
    """A transaction's state; the values are Kafka's ``TransactionState`` ids (part of the on-disk format)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6  # never written as a state: the id is being removed (its tombstone is being written)

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    @property
    def preparing(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @staticmethod
    def from_kafka_name(name: str) -> TransactionState | None:
        """The state Kafka names ``name`` (``"Ongoing"``, ...; case-sensitive, as Kafka's ``fromName``), or ``None``."""
        return _BY_KAFKA_NAME.get(name)


_KAFKA_NAMES: Final = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
}
_BY_KAFKA_NAME: Final = {name: state for state, name in _KAFKA_NAMES.items()}
# Kafka's TransactionState.isExpirationAllowed: no transaction in flight.
_EXPIRABLE: Final = frozenset({TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                               TransactionState.COMPLETE_ABORT})


def validate_transactional_id(transactional_id: object) -> str:
    """Return ``transactional_id`` if it is usable: a non-empty str, valid UTF-8 without NUL, at most 32,767 bytes.

    Raises:
        InvalidRecordError: it is not.
    """
    if not isinstance(transactional_id, str):
        raise InvalidRecordError(f"transactional id must be a str, got {type(transactional_id).__name__}")
    if not transactional_id:
        raise InvalidRecordError("transactional id is empty; use a non-empty str (Kafka refuses it too)")
    problem = text_problem(transactional_id)
    if problem is not None:
        raise InvalidRecordError(f"transactional id {transactional_id[:60]!r} {problem}")
    if len(transactional_id.encode("utf-8")) > MAX_TRANSACTIONAL_ID_BYTES:
        raise InvalidRecordError(
            f"transactional id {transactional_id[:60]!r}... is longer than {MAX_TRANSACTIONAL_ID_BYTES} UTF-8 bytes"
        )
    return transactional_id


def _epoch_exhausted(epoch: int) -> bool:
    # Kafka's TransactionMetadata.isEpochExhausted: the last epoch is kept for the fencing bump.
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A transactional id's state as it is written to the log (Kafka's ``TxnTransitMetadata``)."""

    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    start_ms: int
    update_ms: int
    partitions: frozenset[TopicPartition] = frozenset()
    groups: frozenset[str] = frozenset()

    def frame(self) -> bytes:
        return encode_frame([
            TXN_STATE, self.transactional_id, self.producer_id, self.last_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.timeout_ms, int(self.state), self.start_ms, self.update_ms,
            [[t, p] for t, p in sorted(self.partitions)], sorted(self.groups),
        ])


def _int_in(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def parse_record(payload: Any) -> TxnRecord | None:
    """The state a ``[1, ...]`` frame holds, or ``None`` when any field does not make sense."""
    if not isinstance(payload, list) or len(payload) != 12 or payload[0] != TXN_STATE:
        return None
    (_, txn_id, pid, last_pid, epoch, last_epoch, timeout_ms, state, start_ms, update_ms, parts, groups) = payload
    if not (
        isinstance(txn_id, str) and txn_id and text_problem(txn_id) is None
        and _int_in(pid, 0, _MAX_INT64) and _int_in(last_pid, NO_PRODUCER_ID, _MAX_INT64)
        and _int_in(epoch, 0, MAX_PRODUCER_EPOCH) and _int_in(last_epoch, NO_PRODUCER_EPOCH, MAX_PRODUCER_EPOCH)
        and _int_in(timeout_ms, 1, _MAX_INT32) and _int_in(state, 0, TransactionState.COMPLETE_ABORT)
        and _int_in(start_ms, -1, _MAX_INT64) and _int_in(update_ms, -1, _MAX_INT64)
        and isinstance(parts, list) and isinstance(groups, list)
    ):
        return None
    partitions: set[TopicPartition] = set()
    for item in parts:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and item[0]
                and _int_in(item[1], 0, _MAX_INT32)):
            return None
        partitions.add((item[0], item[1]))
    if not all(isinstance(g, str) and g for g in groups):
        return None
    return TxnRecord(txn_id, pid, last_pid, epoch, last_epoch, timeout_ms, TransactionState(state), start_ms,
                     update_ms, frozenset(partitions), frozenset(groups))


@dataclass(slots=True)
class TxnImage:
    """Every transactional id's last written state."""

    states: dict[str, TxnRecord] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def apply(self, payload: Any) -> bool:
        if isinstance(payload, list) and payload[:1] == [HEADER]:
            return len(payload) == 2 and payload[1] == FORMAT_VERSION
        if isinstance(payload, list) and payload[:1] == [TXN_TOMBSTONE]:
            if len(payload) != 2 or not isinstance(payload[1], str) or not payload[1]:
                return False
            self.states.pop(payload[1], None)
            return True
        record = parse_record(payload)
        if record is None:
            return False
        self.states[record.transactional_id] = record
        return True

    def frames(self) -> Iterator[bytes]:
        yield HEADER_FRAME
        for record in self.states.values():
            yield record.frame()


class TransactionLog(FrameStore[TxnImage]):
    """The durable states of every transactional id (``transaction-state/transactions.log``)."""

    what = "transaction log"

    def __init__(self, directory: Path, *, read_only: bool, ops: FileOps | None = None) -> None:
        super().__init__(directory, TRANSACTIONS_FILE, TxnImage(), HEADER_FRAME, read_only=read_only, ops=ops)

    def _fresh_image(self) -> TxnImage:
        return TxnImage()

    @property
    def states(self) -> Mapping[str, TxnRecord]:
        return self._image.states

    async def put(self, record: TxnRecord) -> None:
        """Durably record ``record`` as its transactional id's state.

        Raises:
            StorageError: the write failed; nothing changed.
            ClosedError: the log is closed.
        """
        await self._enqueue(record.frame(), lambda: self._image.states.__setitem__(record.transactional_id, record))

    async def remove(self, transactional_id: str) -> None:
        """Durably forget ``transactional_id`` (a tombstone frame; a compaction drops both).

        Raises:
            StorageError: the write failed; nothing changed.
            ClosedError: the log is closed.
        """
        await self._enqueue(encode_frame([TXN_TOMBSTONE, transactional_id]),
                            lambda: self._image.states.pop(transactional_id, None))


class _Txn:
    """A transactional id in memory: its durable state plus what is in flight."""

    __slots__ = ("completion", "pending", "record", "timer")

    def __init__(self, record: TxnRecord) -> None:
        self.record = record
        self.pending: TransactionState | None = None  # a change being written (Kafka's pendingState)
        self.completion: asyncio.Task[None] | None = None  # markers and group ends of a Prepare* state
        self.timer: asyncio.TimerHandle | None = None  # the timeout of an Ongoing transaction

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class TransactionCoordinator:
    """Every transactional id of one engine; see the module docstring for the rules.

    ``write_marker`` writes a marker at one partition (the engine gives
    ``PartitionLog.write_txn_marker``); ``partition_exists`` tells whether a
    partition can be added to a transaction. ``clock`` (epoch milliseconds)
    times transactions and expiry; tests may replace it.
    """

    def __init__(
        self,
        store: TransactionLog,
        producer_ids: ProducerIdManager,
        groups: GroupCoordinator,
        write_marker: MarkerWriter,
        partition_exists: Callable[[str, int], bool],
        *,
        max_timeout_ms: int = MAX_TRANSACTION_TIMEOUT_MS,
        transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self._store = store
        self._producer_ids = producer_ids
        self._groups = groups
        self._write_marker = write_marker
        self._partition_exists = partition_exists
        self.max_timeout_ms = max_timeout_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.clock = clock
        self._txns: dict[str, _Txn] = {}
        self._retries: set[asyncio.TimerHandle] = set()
        self._closed = False
        self._started = False
        self._watch = ChangeWatch()  # wakes wait_until callers after each change

    # -- start and close ------------------------------------------------------------------------

    def start(self) -> None:
        """Take over the loaded states: finish ``Prepare*`` transactions, time ``Ongoing`` ones (call once, on the
        loop, after the store is loaded and the partitions can take markers)."""
        if self._started:
            return
        self._started = True
        for txn_id, record in self._store.states.items():
            txn = self._txns[txn_id] = _Txn(record)
            if self._store.read_only:
                continue
            if record.state.preparing:
                log.info("transaction %s (producer %d epoch %d) was %s at the last stop; finishing it",
                         txn_id, record.producer_id, record.producer_epoch, record.state.kafka_name)
                self._start_completion(txn)
            elif record.state is TransactionState.ONGOING:
                self._schedule_timeout(txn)

    async def close(self) -> None:
        """Stop the timeouts and retries; let markers in flight finish (a ``Prepare*`` left is finished at the next
        open). Idempotent."""
        if self._closed:
            return
        self._closed = True
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        tasks = []
        for txn in self._txns.values():
            txn.cancel_timer()
            if txn.completion is not None and not txn.completion.done():
                tasks.append(txn.completion)
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(task)
        self._watch.notify()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the engine is closed: its transaction coordinator no longer answers")
        if self._store.read_only:
            raise ClosedError("the engine is read-only: it runs no transactions")

    # -- what exists ------------------------------------------------------------------------------

    def state_of(self, transactional_id: str) -> TxnRecord | None:
        """The last durable state of ``transactional_id``, or ``None`` when it is unknown."""
        txn = self._txns.get(transactional_id)
        # An id whose first state is still being written (or failed to be) has none yet.
        return None if txn is None or txn.record.producer_epoch == NO_PRODUCER_EPOCH else txn.record

    def transactional_ids(self) -> list[str]:
        """Every transactional id with a state, sorted."""
        return sorted(t for t, txn in self._txns.items() if txn.record.producer_epoch != NO_PRODUCER_EPOCH)

    def list_transactions(
        self,
        *,
        states: Collection[TransactionState] = (),
        producer_ids: Collection[int] = (),
        min_duration_ms: int = -1,
        pattern: re.Pattern[str] | None = None,
    ) -> list[TxnRecord]:
        """The states of the transactional ids that pass every filter given, by id (Kafka's ``listTransactionStates``).

        ``states``, ``producer_ids``: an id in one of them (empty: any);
        ``min_duration_ms`` >= 0: a transaction that began more than that long
        ago; ``pattern``: an id the regular expression matches whole.
        """
        now = self.clock()
        found = []
        for txn_id in self.transactional_ids():
            record = self._txns[txn_id].record
            if (
                (not producer_ids or record.producer_id in producer_ids)
                and (not states or record.state in states)
                and (min_duration_ms < 0 or now - record.start_ms > min_duration_ms)
                and (pattern is None or pattern.fullmatch(txn_id) is not None)
            ):
                found.append(record)
        return found

    def is_idle(self, transactional_id: str) -> bool:
        """Whether no change of ``transactional_id`` is being written and no transaction of it is ending."""
        txn = self._txns.get(transactional_id)
        return txn is None or (txn.pending is None and not txn.record.state.preparing)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, checked after every state change (for tests and tools).

        Bound it with ``asyncio.timeout``: the coordinator never gives up by itself.
        """
        await self._watch.wait_until(predicate)

    # -- InitProducerId ---------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str | None,
        timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> tuple[int, int]:
        """``(producer id, epoch)`` for a producer of ``transactional_id`` (Kafka's InitProducerId).

        Without a transactional id: an idempotent producer's id
        (``ProducerIdManager.init_producer_id``). With one: the id's producer id
        and its next epoch, fencing every older producer of the id; a
        transaction left open by the previous epoch is aborted first (this
        waits for its markers). ``producer_id``/``producer_epoch`` are what the
        producer has (KIP-360; ``-1, -1`` when it has none): a producer whose
        epoch is not the id's current one is fenced.

        Raises:
            InvalidRecordError: a bad transactional id, or only one of ``producer_id``/``producer_epoch`` given.
            InvalidTransactionTimeoutError: ``timeout_ms`` not in [1, ``max_timeout_ms``].
            ProducerFencedError: ``producer_id``/``producer_epoch`` are not the id's current producer.
            ConcurrentTransactionsError: the id's previous transaction is still being ended by another call.
            StorageError: the state could not be written.
            ClosedError: the engine is closed or read-only.
        """
        if type(producer_id) is not int or type(producer_epoch) is not int:
            raise InvalidRecordError(
                f"producer_id and producer_epoch must be ints, got {producer_id!r} and {producer_epoch!r}"
            )
        if transactional_id is None:
            self._check_open()
            return await self._producer_ids.init_producer_id(producer_id, producer_epoch)
        validate_transactional_id(transactional_id)
        if type(timeout_ms) is not int or not 0 < timeout_ms <= self.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {timeout_ms!r} ms: use an int in [1, {self.max_timeout_ms}] (Kafka's "
                "transaction.max.timeout.ms)"
            )
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            raise InvalidRecordError(
                f"producer_id {producer_id} and producer_epoch {producer_epoch}: give both or neither (-1, -1)"
            )
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        self._check_open()
        while True:
            txn = self._txns.get(transactional_id)
            if txn is None:
                new_id = await self._producer_ids.generate()
                self._check_open()
                txn = self._txns.get(transactional_id)  # another call may have created it meanwhile
                if txn is None:
                    now = self.clock()
                    txn = self._txns[transactional_id] = _Txn(TxnRecord(
                        transactional_id, new_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms,
                        TransactionState.EMPTY, -1, now,
                    ))
            waited = await self._init_once(txn, expected, timeout_ms)
            if waited is None:
                return txn.record.producer_id, txn.record.producer_epoch
            # The previous epoch's transaction is being aborted: once it is, bump again (Kafka makes the
            # client retry after CONCURRENT_TRANSACTIONS; the outcome is the same).
            await asyncio.shield(waited)
            self._check_open()

    async def _init_once(
        self, txn: _Txn, expected: tuple[int, int] | None, timeout_ms: int
    ) -> asyncio.Task[None] | None:
        """One pass of InitProducerId: ``None`` when the new epoch is written, else a completion to wait for."""
        record = txn.record
        if txn.pending is not None:
            raise ConcurrentTransactionsError(
                f"transactional id {record.transactional_id!r} is changing state ({txn.pending.kafka_name}); retry"
            )
        if expected is not None and not (
            record.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == record.producer_id
            or (expected[0] == record.last_producer_id and _epoch_exhausted(expected[1]))
        ):
            raise self._fenced(record, *expected)
        state = record.state
        if state.preparing:
            if txn.completion is not None and not txn.completion.done():
                return txn.completion
            raise ConcurrentTransactionsError(
                f"transactional id {record.transactional_id!r} is ending its transaction ({state.kafka_name}); retry"
            )
        now = self.clock()
        if state is TransactionState.ONGOING:
            return self._fence_and_abort(txn, "a new producer of the transactional id started")
        # Empty, CompleteCommit, CompleteAbort: a new epoch (or a new producer id once the epochs run out).
        if _epoch_exhausted(record.producer_epoch) and (expected is None or expected[1] == record.producer_epoch):
            txn.pending = TransactionState.EMPTY
            try:
                new_id = await self._producer_ids.generate()
            except BaseException:
                txn.pending = None
                raise
            target = replace(
                record, producer_id=new_id, last_producer_id=record.producer_id, producer_epoch=0,
                last_producer_epoch=record.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
                timeout_ms=timeout_ms, state=TransactionState.EMPTY, update_ms=now, partitions=frozenset(),
                groups=frozenset(),
            )
        else:
            if expected is None:
                epoch, last_epoch = record.producer_epoch + 1, NO_PRODUCER_EPOCH
            elif record.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == record.producer_epoch:
                epoch, last_epoch = record.producer_epoch + 1, record.producer_epoch
            elif expected[1] == record.last_producer_epoch:
                epoch, last_epoch = record.producer_epoch, record.last_producer_epoch  # a retry: the same answer
            else:
                raise self._fenced(record, *expected)
            target = replace(
                record, producer_epoch=epoch, last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                state=TransactionState.EMPTY, update_ms=now, partitions=frozenset(), groups=frozenset(),
            )
            txn.pending = TransactionState.EMPTY
        await self._write(txn, target)
        log.info("transactional id %s: producer %d epoch %d", target.transactional_id, target.producer_id,
                 target.producer_epoch)
        return None

    @staticmethod
    def _fenced(record: TxnRecord, producer_id: int, producer_epoch: int) -> ProducerFencedError:
        return ProducerFencedError(
            f"transactional id {record.transactional_id!r}: producer {producer_id} epoch {producer_epoch} is "
            f"fenced; its current producer is {record.producer_id} epoch {record.producer_epoch} (another producer "
            "with the same transactional id started, or the transaction timed out): stop this producer"
        )

    # -- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------------------

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> None:
        """Add ``partitions`` to the producer's transaction, beginning it if none is open (AddPartitionsToTxn).

        Raises:
            InvalidRecordError: a bad transactional id.
            UnknownTopicOrPartitionError: a partition that does not exist (nothing is added).
            InvalidProducerIdMappingError: the id is unknown or held by another producer id.
            ProducerFencedError: ``producer_epoch`` is not the id's current epoch.
            ConcurrentTransactionsError: the previous transaction is still being ended.
            StorageError, ClosedError: as :meth:`init_producer_id`.
        """
        wanted = frozenset(partitions)
        for topic, partition in wanted:
            if not self._partition_exists(topic, partition):
                raise UnknownTopicOrPartitionError(
                    f"partition {topic}-{partition} does not exist; create it before adding it to a transaction"
                )
        await self._add(transactional_id, producer_id, producer_epoch, wanted, frozenset())

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> None:
        """Add consumer group ``group_id``'s offsets to the producer's transaction (AddOffsetsToTxn).

        Raises:
            InvalidRecordError: a bad transactional id or group id.
            InvalidProducerIdMappingError, ProducerFencedError, ConcurrentTransactionsError, StorageError,
                ClosedError: as :meth:`add_partitions`.
        """
        validate_group(group_id)
        await self._add(transactional_id, producer_id, producer_epoch, frozenset(), frozenset((group_id,)))

    async def _add(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: frozenset[TopicPartition], groups: frozenset[str],
    ) -> None:
        txn = self._checked(transactional_id, producer_id, producer_epoch)
        record = txn.record
        if record.state.preparing:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} is ending its transaction ({record.state.kafka_name}); "
                "retry once it has ended"
            )
        if record.state is TransactionState.ONGOING and partitions <= record.partitions and groups <= record.groups:
            return
        now = self.clock()
        fresh = record.state is not TransactionState.ONGOING
        target = replace(
            record, state=TransactionState.ONGOING, update_ms=now, start_ms=now if fresh else record.start_ms,
            partitions=partitions if fresh else record.partitions | partitions,
            groups=groups if fresh else record.groups | groups,
        )
        txn.pending = TransactionState.ONGOING
        await self._write(txn, target)
        if fresh:
            self._schedule_timeout(txn)

    def _checked(self, transactional_id: str, producer_id: int, producer_epoch: int) -> _Txn:
        """The transaction of a client's call, after Kafka's checks of its producer id and epoch."""
        validate_transactional_id(transactional_id)
        self._check_open()
        txn = self._txns.get(transactional_id)
        if txn is None or txn.record.producer_epoch == NO_PRODUCER_EPOCH:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} is unknown: call init_producer_id with it first"
            )
        record = txn.record
        if record.producer_id != producer_id:
            raise InvalidProducerIdMappingError(
                f"transactional id {transactional_id!r} belongs to producer {record.producer_id}, not "
                f"{producer_id}: call init_producer_id with it first"
            )
        if record.producer_epoch != producer_epoch:
            raise self._fenced(record, producer_id, producer_epoch)
        if txn.pending is not None:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} is changing state ({txn.pending.kafka_name}); retry"
            )
        return txn

    # -- TxnOffsetCommit --------------------------------------------------------------------------

    async def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, int],
        *,
        metadata: Mapping[TopicPartition, str] | None = None,
        committer: CommitMember = NO_MEMBER,
    ) -> None:
        """Commit ``offsets`` of ``group_id`` inside the producer's transaction (TxnOffsetCommit).

        They are durable when this returns and become the group's committed
        offsets when the transaction commits; an abort drops them. The group
        must have been added (:meth:`add_offsets`). ``committer``: the group
        member the producer's consumer is (TxnOffsetCommit v3), if any.

        Raises:
            InvalidRecordError: a bad transactional id or group id.
            InvalidProducerIdMappingError, ProducerFencedError: as :meth:`add_partitions`.
            InvalidTxnStateError: no transaction is open, or it does not hold ``group_id``.
            GroupError: the group refused the member (``code``: ``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``, ...).
            StorageError, ClosedError: as :meth:`init_producer_id`.
        """
        validate_group(group_id)
        txn = self._checked(transactional_id, producer_id, producer_epoch)
        record = txn.record
        if record.state is not TransactionState.ONGOING or group_id not in record.groups:
            raise InvalidTxnStateError(
                f"transactional id {transactional_id!r} ({record.state.kafka_name}) has not added group "
                f"{group_id!r} to an open transaction: call add_offsets first"
            )
        error = await self._groups.txn_commit_offsets(group_id, producer_id, offsets, metadata=metadata,
                                                      committer=committer)
        if error is not GroupErrorCode.NONE:
            raise GroupError(f"group {group_id!r} refused the transactional commit: {error.name}", error.name)

    # -- EndTxn -----------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """Commit (``commit=True``) or abort the producer's open transaction (EndTxn).

        Returns once the outcome is durable and, unless a partition could not
        take its marker (retried in the background until it can), every
        partition and group of the transaction holds it. Ending again the way
        it already ended is a no-op (a client's retry).

        Raises:
            InvalidRecordError: a bad transactional id or ``commit`` not a bool.
            InvalidProducerIdMappingError, ProducerFencedError: as :meth:`add_partitions`.
            InvalidTxnStateError: no transaction is open, or it is ending the other way.
            ConcurrentTransactionsError: the transaction is already ending the same way (retry).
            StorageError, ClosedError: as :meth:`init_producer_id`.
        """
        if type(commit) is not bool:
            raise InvalidRecordError(f"commit must be a bool, got {commit!r}")
        txn = self._checked(transactional_id, producer_id, producer_epoch)
        record = txn.record
        state = record.state
        wanted = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        preparing = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        if state is wanted:
            return
        if state is preparing:
            raise ConcurrentTransactionsError(
                f"transactional id {transactional_id!r} is already {state.kafka_name}; retry"
            )
        if state is not TransactionState.ONGOING:
            raise InvalidTxnStateError(
                f"transactional id {transactional_id!r} cannot {'commit' if commit else 'abort'}: its "
                f"transaction is {state.kafka_name}"
                + (" (nothing was added to it)" if state is TransactionState.EMPTY else "")
            )
        completion = await self._prepare(txn, preparing, record.producer_epoch)
        await asyncio.shield(completion)

    async def _prepare(self, txn: _Txn, preparing: TransactionState, epoch: int) -> asyncio.Task[None]:
        """Write ``Prepare*`` (the outcome is decided from here on) and start the markers."""
        txn.cancel_timer()
        record = txn.record
        target = replace(record, state=preparing, producer_epoch=epoch, update_ms=self.clock(),
                         last_producer_epoch=record.last_producer_epoch if epoch == record.producer_epoch
                         else NO_PRODUCER_EPOCH)
        txn.pending = preparing
        try:
            await self._write(txn, target)
        except BaseException:
            if txn.record.state is TransactionState.ONGOING:
                self._schedule_timeout(txn)
            raise
        return self._start_completion(txn)

    def _fence_and_abort(self, txn: _Txn, why: str) -> asyncio.Task[None]:
        """Abort the open transaction with the epoch bumped, so that its producer is fenced at every partition.

        Returns the task; ``init_producer_id`` and the timeout wait for it.
        """
        record = txn.record
        epoch = record.producer_epoch if _epoch_exhausted(record.producer_epoch) else record.producer_epoch + 1
        log.info("transactional id %s: aborting the transaction of producer %d epoch %d (%s)",
                 record.transactional_id, record.producer_id, record.producer_epoch, why)
        txn.pending = TransactionState.PREPARE_ABORT  # no other call gets in while the epoch moves
        txn.cancel_timer()

        async def run() -> None:
            try:
                txn.pending = None
                completion = await self._prepare(txn, TransactionState.PREPARE_ABORT, epoch)
            except BaseException:
                txn.pending = None
                raise
            await completion

        task = asyncio.get_running_loop().create_task(run(), name=f"seglog-txn-fence-{record.transactional_id}")
        txn.completion = task
        task.add_done_callback(_log_failure)
        return task

    def _start_completion(self, txn: _Txn) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(
            self._complete(txn), name=f"seglog-txn-end-{txn.record.transactional_id}"
        )
        txn.completion = task
        task.add_done_callback(_log_failure)
        return task

    async def _complete(self, txn: _Txn, delay_ms: int = MARKER_RETRY_MS) -> None:
        """Markers to every partition, the end to every group, then ``Complete*`` (Kafka's marker channel)."""
        record = txn.record
        commit = record.state is TransactionState.PREPARE_COMMIT
        results = await asyncio.gather(
            *(self._marker(record, topic, partition, commit) for topic, partition in sorted(record.partitions)),
            *(self._groups.end_txn(group, record.producer_id, commit) for group in sorted(record.groups)),
            return_exceptions=True,
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            if self._closed:
                return  # finished at the next open
            log.warning("transactional id %s: %d marker(s) of its %s failed (%s); retrying in %d ms",
                        record.transactional_id, len(failures), "commit" if commit else "abort", failures[0],
                        delay_ms)
            self._retry_later(txn, min(delay_ms * 2, MARKER_RETRY_MAX_MS), delay_ms)
            return
        done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        target = replace(record, state=done, update_ms=self.clock(), partitions=frozenset(), groups=frozenset())
        txn.pending = done
        try:
            await self._write(txn, target)
        except SeglogError as exc:
            if self._closed:
                return
            log.warning("transactional id %s: writing %s failed (%s); retrying in %d ms", record.transactional_id,
                        done.kafka_name, exc, delay_ms)
            self._retry_later(txn, min(delay_ms * 2, MARKER_RETRY_MAX_MS), delay_ms)

    def _retry_later(self, txn: _Txn, next_delay_ms: int, delay_ms: int) -> None:
        def retry() -> None:
            self._retries.discard(handle)
            if not self._closed and txn.record.state.preparing:
                task = asyncio.get_running_loop().create_task(self._complete(txn, next_delay_ms))
                txn.completion = task
                task.add_done_callback(_log_failure)

        handle = asyncio.get_running_loop().call_later(delay_ms / 1000, retry)
        self._retries.add(handle)

    async def _marker(self, record: TxnRecord, topic: str, partition: int, commit: bool) -> None:
        try:
            await self._write_marker(topic, partition, record.producer_id, record.producer_epoch, commit)
        except UnknownTopicOrPartitionError:
            log.warning("transactional id %s: partition %s-%d is gone; no marker written there",
                        record.transactional_id, topic, partition)
        except ProducerError as exc:
            # The partition holds a newer epoch of the producer: that one's coordinator decision stands
            # (Kafka's marker handler gives up on INVALID_PRODUCER_EPOCH too).
            log.warning("transactional id %s: partition %s-%d refused the marker: %s", record.transactional_id,
                        topic, partition, exc)

    # -- timeouts ---------------------------------------------------------------------------------

    def _schedule_timeout(self, txn: _Txn) -> None:
        txn.cancel_timer()
        record = txn.record
        due_ms = record.start_ms + record.timeout_ms - self.clock()
        txn.timer = asyncio.get_running_loop().call_later(
            max(0, due_ms) / 1000, self._on_timeout, txn, record.producer_id, record.producer_epoch
        )

    def _on_timeout(self, txn: _Txn, producer_id: int, producer_epoch: int) -> None:
        txn.timer = None
        record = txn.record
        if (
            self._closed or record.state is not TransactionState.ONGOING or record.producer_id != producer_id
            or record.producer_epoch != producer_epoch
        ):
            return
        if txn.pending is not None:
            # A change is being written (a partition being added): look again once it is.
            txn.timer = asyncio.get_running_loop().call_later(MARKER_RETRY_MS / 1000, self._on_timeout, txn,
                                                              producer_id, producer_epoch)
            return
        self._fence_and_abort(txn, f"its timeout of {record.timeout_ms} ms passed")

    # -- expiry -----------------------------------------------------------------------------------

    async def remove_expired_transactional_ids(self) -> list[str]:
        """Forget every transactional id unused for ``transactional_id_expiration_ms``; the ids removed.

        Kafka's ``TransactionStateManager.removeExpiredTransactionalIds``: an id
        in ``Empty``, ``CompleteCommit`` or ``CompleteAbort`` with no change in
        flight whose last change is that old gets a tombstone in the log, then
        leaves the coordinator; a later InitProducerId with it gets a new
        producer id at epoch 0. A call on the id while its tombstone is written
        is answered ``CONCURRENT_TRANSACTIONS``. The engine runs this every
        ``transactions_remove_expired_transaction_cleanup_interval_ms``.

        Raises:
            StorageError: a tombstone could not be written (that id and the later ones stay).
            ClosedError: the engine is closed or read-only.
        """
        self._check_open()
        cutoff = self.clock() - self.transactional_id_expiration_ms
        expired = [txn for txn in self._txns.values()
                   if txn.pending is None and txn.record.state in _EXPIRABLE
                   and txn.record.producer_epoch != NO_PRODUCER_EPOCH and txn.record.update_ms <= cutoff]
        removed = []
        for txn in expired:
            txn_id = txn.record.transactional_id
            txn.pending = TransactionState.DEAD  # no await before: nothing else started on it meanwhile
            try:
                await self._store.remove(txn_id)
            except BaseException:
                txn.pending = None
                self._watch.notify()
                raise
            txn.pending = None
            if self._txns.get(txn_id) is txn:
                del self._txns[txn_id]
            self._watch.notify()
            removed.append(txn_id)
            log.info("transactional id %s expired (unused since %d); forgotten", txn_id, txn.record.update_ms)
        return removed

    # -- writes -----------------------------------------------------------------------------------

    async def _write(self, txn: _Txn, target: TxnRecord) -> None:
        """Write ``target`` durably and make it ``txn``'s state; ``txn.pending`` is cleared either way."""
        try:
            await self._store.put(target)
            txn.record = target
        finally:
            txn.pending = None
            self._watch.notify()


def _log_failure(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None and not isinstance(exc, ClosedError):
        log.error("a transaction's end failed: %s", exc, exc_info=exc)


class Transaction:
    """One transaction of the native API: ``async with engine.transaction("txn-id") as txn:``.

    Entering gets the transactional id's producer id and a new epoch
    (``init_producer_id``: an older holder of the id is fenced, and a
    transaction it left open is aborted). :meth:`append` writes records as
    transactional batches of that producer, :meth:`commit_offsets` commits a
    consumer group's offsets inside the transaction. The block's normal end
    commits; an exception aborts and is re-raised; :meth:`commit` and
    :meth:`abort` end it early. Read with ``isolation="read_committed"``, the
    records appear all at once when the transaction commits, and never if it
    aborts. One task at a time should use a transaction (calls on one
    partition are written in call order).
    """

    def __init__(
        self,
        coordinator: TransactionCoordinator,
        log_of: Callable[[str, int], PartitionLog],
        transactional_id: str,
        timeout_ms: int,
    ) -> None:
        validate_transactional_id(transactional_id)
        if type(timeout_ms) is not int or not 0 < timeout_ms <= coordinator.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"transaction timeout {timeout_ms!r} ms: use an int in [1, {coordinator.max_timeout_ms}]"
            )
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._coordinator = coordinator
        self._log_of = log_of
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._sequences: dict[TopicPartition, int] = {}
        self._locks: dict[TopicPartition, asyncio.Lock] = {}
        self._groups: set[str] = set()
        self._state = "new"  # new -> open -> committed | aborted

    @property
    def state(self) -> str:
        """``"new"``, ``"open"``, ``"committed"`` or ``"aborted"``."""
        return self._state

    async def begin(self) -> None:
        """Get the producer id and epoch (``async with`` does it).

        Raises:
            ProducerFencedError, StorageError, ClosedError: as ``TransactionCoordinator.init_producer_id``.
        """
        if self._state != "new":
            raise InvalidTxnStateError(f"transaction {self.transactional_id!r} was already begun")
        while True:
            try:
                self.producer_id, self.producer_epoch = await self._coordinator.init_producer_id(
                    self.transactional_id, self.timeout_ms
                )
                break
            except ConcurrentTransactionsError:
                # Another call is ending the id's previous transaction: wait for that, then take the id over.
                await self._coordinator.wait_until(lambda: self._coordinator.is_idle(self.transactional_id))
        self._state = "open"

    def _check_open(self) -> None:
        if self._state != "open":
            raise InvalidTxnStateError(
                f"transaction {self.transactional_id!r} is {self._state}: "
                + ("use it inside 'async with'" if self._state == "new" else "begin a new one")
            )

    async def append(self, topic: str, partition: int, records: Sequence[Record]) -> AppendResult:
        """Append ``records`` to ``topic``/``partition`` inside the transaction (one batch).

        Raises:
            InvalidTxnStateError: the transaction is not open.
            UnknownTopicOrPartitionError, InvalidTopicError: no such partition.
            ProducerFencedError, InvalidProducerEpochError: a newer producer of the transactional id took over
                (or the transaction timed out): this transaction is aborted.
            InvalidRecordError, RecordTooLargeError, StorageError: as ``PartitionLog.append``.
        """
        self._check_open()
        plog = self._log_of(topic, partition)
        key = (topic, partition)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # sequences are handed out in the order the batches reach the log
            self._check_open()
            if key not in self._sequences:
                await self._coordinator.add_partitions(
                    self.transactional_id, self.producer_id, self.producer_epoch, [key]
                )
                self._sequences.setdefault(key, 0)
            sequence = self._sequences[key]
            result = await plog.append(
                records, producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=sequence,
                transactional=True,
            )
            self._sequences[key] = increment_sequence(sequence, result.last_offset - result.first_offset + 1)
            return result

    async def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``group``'s offsets inside the transaction: they become its committed offsets when it commits.

        Raises:
            InvalidTxnStateError: the transaction is not open.
            InvalidRecordError: a bad group id or offset.
            UnknownTopicOrPartitionError: a partition that does not exist.
            GroupError: the group has active members (only they commit its offsets; Kafka's ``UNKNOWN_MEMBER_ID``
                does not apply to transactional commits without a member, so this is not raised for those).
            ProducerFencedError, StorageError, ClosedError: as :meth:`append`.
        """
        self._check_open()
        validate_group(group)
        if not isinstance(offsets, Mapping):
            raise InvalidRecordError(
                f"offsets must be a mapping of (topic, partition) to offset, got {type(offsets).__name__}"
            )
        rows: dict[TopicPartition, int] = {}
        for key, offset in offsets.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise InvalidRecordError(f"offsets keys must be (topic, partition) pairs, got {key!r}")
            self._log_of(*key)
            rows[key] = validate_offset(offset, "committed offset")
        if group not in self._groups:
            await self._coordinator.add_offsets(self.transactional_id, self.producer_id, self.producer_epoch, group)
            self._groups.add(group)
        await self._coordinator.txn_offset_commit(
            self.transactional_id, group, self.producer_id, self.producer_epoch, rows
        )

    async def commit(self) -> None:
        """Commit: every record appended and every offset committed in it becomes visible, at once.

        Raises:
            InvalidTxnStateError: the transaction is not open.
            ProducerFencedError: a newer producer of the transactional id took over, or the transaction timed out
                and was aborted by the coordinator.
            StorageError, ClosedError: the outcome could not be written (the transaction then times out).
        """
        await self._end(True)

    async def abort(self) -> None:
        """Abort: nothing appended or committed in the transaction becomes visible to ``read_committed`` readers.

        Raises:
            InvalidTxnStateError, ProducerFencedError, StorageError, ClosedError: as :meth:`commit`.
        """
        await self._end(False)

    async def _end(self, commit: bool) -> None:
        self._check_open()
        self._state = "committed" if commit else "aborted"
        if not self._sequences and not self._groups:
            return  # nothing was added: the coordinator never saw a transaction (Kafka's clients do the same)
        await self._coordinator.end_txn(self.transactional_id, self.producer_id, self.producer_epoch, commit)

    async def __aenter__(self) -> Transaction:
        await self.begin()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._state != "open":
            return
        if exc is None:
            await self.commit()
            return
        try:
            await self.abort()
        except SeglogError as abort_failure:
            # The exception of the block is the one that matters; a fenced or timed-out transaction is
            # aborted anyway.
            log.warning("transaction %s: abort after %r failed: %s", self.transactional_id, exc, abort_failure)

    def __repr__(self) -> str:
        return (f"<Transaction {self.transactional_id!r} {self._state} producer {self.producer_id} "
                f"epoch {self.producer_epoch}>")
