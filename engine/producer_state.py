"""Producer state of a partition (Kafka's ``ProducerStateManager``): pure and synchronous.

For every producer id that wrote to a partition, the partition keeps its
epoch, the sequence ranges and offsets of its last five batches, the time of
its last write and the first offset of its open transaction. The appends of an
idempotent producer (Kafka's ``enable.idempotence``: each batch carries a
producer id, an epoch and the sequence number of its first record) are checked
against it before anything is written:

* a batch whose epoch and sequence range equal one of the producer's last five
  is a retry of a batch already written (its answer was lost): it is answered
  with the original offsets and not written again;
* a batch from an epoch older than the producer's is a zombie:
  :class:`~seglog.engine.errors.InvalidProducerEpochError`;
* a batch whose first sequence does not follow the producer's last one (or
  that starts a new epoch anywhere but at 0) is
  :class:`~seglog.engine.errors.OutOfOrderSequenceError`;
* a producer id the partition has no record of may start at any sequence
  (Kafka since 2.5, KIP-360: its earlier batches may have been deleted by
  retention, or the producer expired).

The state is snapshotted in ``<offset>.snapshot`` files beside the segments
(:func:`encode_snapshot`; the format is in docs/FORMAT.md) and rebuilt from
the batch headers of the log after the last snapshot (:meth:`ProducerStateManager.load_batch`).

Owns the rules, the snapshot codec and the snapshot file names. Does no I/O
(the partition log reads and writes the files) and needs no event loop.

Must not import: ``tools``, ``server``.
"""

from __future__ import annotations

import enum
import os
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

import google_crc32c

from seglog.engine.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from seglog.segments.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from seglog.segments.fileio import default_ops

__all__ = [
    "MAX_PRODUCER_EPOCH",
    "MAX_SNAPSHOT_BYTES",
    "NUM_BATCHES_TO_RETAIN",
    "PRODUCER_ID_EXPIRATION_MS",
    "AppendCheck",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerAppendInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "SnapshotPlan",
    "decode_snapshot",
    "decrement_sequence",
    "encode_snapshot",
    "increment_sequence",
    "plan_snapshot_load",
    "producer_fields_problem",
    "read_snapshot_file",
]

NUM_BATCHES_TO_RETAIN: Final = 5  # Kafka's: a producer has at most 5 requests in flight per partition
MAX_PRODUCER_EPOCH: Final = 32767  # int16, the width of the epoch in a batch header
MAX_SEQUENCE: Final = 2**31 - 1  # int32: sequences wrap from here to 0, as Kafka's
# Kafka's producer.id.expiration.ms default: a producer silent for a day (and with no open
# transaction) is forgotten, so that the state does not grow with every producer that ever wrote.
PRODUCER_ID_EXPIRATION_MS: Final = 24 * 60 * 60 * 1000
NO_TIMESTAMP: Final = -1

# Part of the format (docs/FORMAT.md): 'T' (the seglog batch magic) and format 1. Kafka's own
# snapshots are version 1 with another layout, so neither system mistakes the other's file for its own.
SNAPSHOT_VERSION: Final = 0x5401
_SNAPSHOT_HEAD: Final = struct.Struct(">hIi")  # part of the format: version, crc, producer count
_SNAPSHOT_PRODUCER: Final = struct.Struct(">qhiqqb")  # part of the format: id, epoch, coord. epoch, ts, txn, n
_SNAPSHOT_BATCH: Final = struct.Struct(">iqiq")  # part of the format: last seq, last offset, delta, timestamp
_CRC_START: Final = 6  # part of the format: the CRC-32C covers every byte after the version and the CRC
# A snapshot larger than this is not read (it is garbage: a million producers take ~31 MiB plus 24 bytes
# for each batch they remember).
MAX_SNAPSHOT_BYTES: Final = 256 << 20


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping past ``2**31 - 1`` to 0 (Kafka's ``DefaultRecordBatch``)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 to ``2**31 - 1`` (the inverse of :func:`increment_sequence`)."""
    if sequence < decrement:
        return MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == MAX_SEQUENCE)


def producer_fields_problem(producer_id: int, producer_epoch: int, base_sequence: int) -> str | None:
    """What is wrong with a batch's producer fields, or ``None``.

    A batch without a producer has id, epoch and sequence -1; a producer's
    batch has an id >= 0, an epoch in [0, 32767] and a sequence in [0, 2**31-1]
    (Kafka refuses a producer's batch without a sequence the same way).
    """
    if producer_id == NO_PRODUCER_ID:
        if producer_epoch != NO_PRODUCER_EPOCH or base_sequence != NO_SEQUENCE:
            return (
                f"a batch without a producer id has producer epoch {producer_epoch} and base sequence "
                f"{base_sequence}; both must be -1"
            )
        return None
    if producer_id < 0:
        return f"producer id {producer_id} is negative (-1 means none)"
    if not 0 <= producer_epoch <= MAX_PRODUCER_EPOCH:
        return f"producer {producer_id}: epoch {producer_epoch} is outside [0, {MAX_PRODUCER_EPOCH}]"
    if not 0 <= base_sequence <= MAX_SEQUENCE:
        return f"producer {producer_id}: base sequence {base_sequence} is outside [0, {MAX_SEQUENCE}]"
    return None


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one batch of a producer went: its last sequence and offset, and how many came before them in it."""

    last_seq: int
    last_offset: int
    offset_delta: int  # last_offset - first offset of the batch (= last_seq - first_seq, modulo the wrap)
    timestamp: int  # the batch's largest timestamp as written (the append time under LogAppendTime)

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    """What a partition knows of one producer id (Kafka's ``ProducerStateEntry``).

    ``batches`` holds the producer's last five batches of its current epoch,
    oldest first; a new epoch clears them.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None  # the first offset of the producer's open transaction

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, producer_epoch: int) -> bool:
        """Move to ``producer_epoch`` (forgetting the batches of the old one); whether it changed."""
        if self.producer_epoch == producer_epoch:
            return False
        self.batches.clear()
        self.producer_epoch = producer_epoch
        return True

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_epoch(producer_epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))  # maxlen drops the oldest
        self.last_timestamp = timestamp

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch of this epoch with exactly this sequence range, or ``None``."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended at one partition (Kafka's ``CompletedTxn``).

    ``first_offset`` is the offset of its first batch here (the marker's own
    offset when the producer had no open transaction: Kafka writes the marker
    anyway), ``last_offset`` the marker's offset.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class AppendOrigin(enum.Enum):
    """Who appends, which sets how much is checked (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"
    """A producer's batch before it is written: epoch, sequence and transaction state are checked."""
    LOG = "log"
    """A batch already in the log (rebuilding the state, or recording a write): taken as it is."""


class ProducerAppendInfo:
    """The batches of one producer in one write, checked one after another (Kafka's ``ProducerAppendInfo``).

    Starts from a copy of the producer's entry; :meth:`append_data_batch`
    checks a batch against the entry as the earlier batches left it and then
    records it. Nothing reaches the manager until :meth:`ProducerStateManager.update`.
    A refused batch leaves the copy as it was.
    """

    __slots__ = ("completed_transactions", "entry", "origin", "producer_id", "started_transactions")

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.entry = current.copy() if current is not None else ProducerStateEntry(producer_id)
        self.started_transactions: list[int] = []  # first offsets of the transactions these batches opened
        self.completed_transactions: list[CompletedTxn] = []  # what the markers among them ended

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        return self.entry.find_duplicate(producer_epoch, first_seq, last_seq)

    def append_data_batch(
        self,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        max_timestamp: int,
        first_offset: int,
        last_offset: int,
        *,
        is_transactional: bool = False,
    ) -> None:
        """Check (for a client's batch) and record one data batch.

        Raises:
            InvalidProducerEpochError: the epoch is older than the producer's.
            OutOfOrderSequenceError: ``first_seq`` does not follow the producer's last sequence.
            InvalidTxnStateError: a non-transactional batch while the producer's transaction is open.
        """
        entry = self.entry
        if self.origin is AppendOrigin.CLIENT:
            self._check_epoch(producer_epoch, first_offset)
            self._check_sequence(producer_epoch, first_seq, first_offset)
            if entry.current_txn_first_offset is not None and not is_transactional:
                raise InvalidTxnStateError(
                    f"producer {self.producer_id} wrote a non-transactional batch at offset {first_offset} while "
                    f"its transaction from offset {entry.current_txn_first_offset} is open; end the transaction first"
                )
        entry.add_batch(producer_epoch, last_seq, last_offset, last_offset - first_offset, max_timestamp)
        if is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(
        self, producer_epoch: int, coordinator_epoch: int, offset: int, timestamp: int, *, commit: bool
    ) -> CompletedTxn:
        """Check (from the coordinator) and record a transaction marker at ``offset`` (Kafka's ``appendEndTxnMarker``).

        Ends the producer's open transaction here; with none open, the marker
        is still written (Kafka does) and ends an empty one at ``offset``. A
        newer epoch is taken (the coordinator bumped it when aborting a
        timed-out transaction); the producer's batches of the old one are forgotten.

        Raises:
            InvalidProducerEpochError: the marker's epoch is older than the producer's.
            TransactionCoordinatorFencedError: its coordinator epoch is older than the
                one of the marker written before it for this producer.
        """
        entry = self.entry
        if self.origin is AppendOrigin.CLIENT:
            self._check_epoch(producer_epoch, offset)
            if coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"producer {self.producer_id}: the marker for offset {offset} comes from coordinator epoch "
                    f"{coordinator_epoch}, older than epoch {entry.coordinator_epoch} that wrote this producer's "
                    "last marker: a newer coordinator took over"
                )
        entry.maybe_update_epoch(producer_epoch)
        first = entry.current_txn_first_offset
        completed = CompletedTxn(self.producer_id, offset if first is None else first, offset, not commit)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        if first is not None and first in self.started_transactions:
            self.started_transactions.remove(first)  # opened and ended in the same write
        self.completed_transactions.append(completed)
        return completed

    def _check_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.entry.producer_epoch
        if producer_epoch < current:
            raise InvalidProducerEpochError(
                f"producer {self.producer_id}: epoch {producer_epoch} of the batch for offset {offset} is older than "
                f"epoch {current}, which already wrote: a newer instance of this producer took over (fenced)"
            )

    def _check_sequence(self, producer_epoch: int, first_seq: int, offset: int) -> None:
        entry = self.entry
        if producer_epoch != entry.producer_epoch:
            # A new epoch starts at sequence 0, unless the partition has no record of the producer at all.
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id}: the first batch of epoch {producer_epoch} (for offset {offset}) "
                    f"starts at sequence {first_seq}; a new epoch starts at 0 (the partition holds epoch "
                    f"{entry.producer_epoch})"
                )
        elif not _in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {self.producer_id} epoch {producer_epoch}: the batch for offset {offset} starts at "
                f"sequence {first_seq}, but the last sequence written is {entry.last_seq} (expected "
                f"{increment_sequence(entry.last_seq, 1)}); a batch before it is missing, or it is a retry older "
                f"than the last {NUM_BATCHES_TO_RETAIN} batches"
            )


class ProducerStateManager:
    """The producer state of one partition up to ``map_end_offset`` (Kafka's ``ProducerStateManager``).

    Not thread-safe: the partition's writer is its only user. ``map_end_offset``
    is the offset up to which the log's batches are reflected (the log end
    offset once loaded).
    """

    __slots__ = ("_ongoing_txns", "_producers", "map_end_offset")

    def __init__(self, map_end_offset: int = 0) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, int] = {}  # first offset of an open transaction -> producer id
        self.map_end_offset = map_end_offset

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """The entries by producer id (a read-only view)."""
        return MappingProxyType(self._producers)

    @property
    def is_empty(self) -> bool:
        return not self._producers

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def first_undecided_offset(self) -> int | None:
        """The first offset of the oldest open transaction, or ``None`` when none is open."""
        return min(self._ongoing_txns) if self._ongoing_txns else None

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        return ProducerAppendInfo(producer_id, self._producers.get(producer_id), origin)

    def update(self, info: ProducerAppendInfo) -> None:
        """Take the entry ``info`` built (its batches must be the next ones of the producer in the log)."""
        self._producers[info.producer_id] = info.entry
        for completed in info.completed_transactions:
            if self._ongoing_txns.get(completed.first_offset) == completed.producer_id:
                del self._ongoing_txns[completed.first_offset]
        for first_offset in info.started_transactions:
            self._ongoing_txns[first_offset] = info.producer_id

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO an aborted transaction's ``.txnindex`` entry records (Kafka's ``lastStableOffset(completedTxn)``).

        The first offset of the oldest transaction still open of another
        producer, else the offset after the marker. Asked before
        :meth:`update` takes the marker.
        """
        others = [first for first, pid in self._ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def load_marker(
        self, producer_id: int, producer_epoch: int, offset: int, timestamp: int, *, commit: bool,
        coordinator_epoch: int,
    ) -> tuple[CompletedTxn, int]:
        """Record a transaction marker that is in the log at ``offset``: the transaction it ended, and its LSO.

        Nothing is checked (the marker was checked before it was written, or is
        read back while rebuilding); the LSO is :meth:`last_stable_offset`'s.
        """
        self.map_end_offset = max(self.map_end_offset, offset + 1)
        info = self.prepare_update(producer_id, AppendOrigin.LOG)
        completed = info.append_end_txn_marker(producer_epoch, coordinator_epoch, offset, timestamp, commit=commit)
        lso = self.last_stable_offset(completed)
        self.update(info)
        return completed, lso

    def load_batch(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        base_offset: int,
        last_offset_delta: int,
        max_timestamp: int,
        *,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None:
        """Record a batch that is in the log (a write just made, or one read back while rebuilding).

        Nothing is checked against the state (the batch was checked before it
        was written); a batch without a producer, or with producer fields that
        break :func:`producer_fields_problem`, changes nothing. Control batches
        (transaction markers) change nothing yet: seglog writes none.
        """
        end = base_offset + last_offset_delta + 1
        self.map_end_offset = max(self.map_end_offset, end)
        if producer_id == NO_PRODUCER_ID or is_control:
            return
        if producer_fields_problem(producer_id, producer_epoch, base_sequence) is not None:
            return
        info = self.prepare_update(producer_id, AppendOrigin.LOG)
        info.append_data_batch(
            producer_epoch,
            base_sequence,
            increment_sequence(base_sequence, last_offset_delta),
            max_timestamp,
            base_offset,
            base_offset + last_offset_delta,
            is_transactional=is_transactional,
        )
        self.update(info)

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    def remove_expired_producers(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers silent for ``expiration_ms`` without an open transaction; how many went."""
        expired = [pid for pid, entry in self._producers.items() if _expired(entry, now_ms, expiration_ms)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer: the state of an empty log starting at ``offset``."""
        self._producers.clear()
        self._ongoing_txns.clear()
        self.map_end_offset = offset

    def load_snapshot(
        self, entries: Iterable[ProducerStateEntry], offset: int, *, now_ms: int,
        expiration_ms: int = PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        """Replace the state with a snapshot's ``entries`` taken at ``offset`` (expired producers left out)."""
        self.truncate_fully_and_start_at(offset)
        for entry in entries:
            if _expired(entry, now_ms, expiration_ms):
                continue
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                self._ongoing_txns[entry.current_txn_first_offset] = entry.producer_id

    def snapshot(self) -> bytes:
        """The snapshot of the state at ``map_end_offset``: the bytes of ``<map_end_offset>.snapshot``."""
        return encode_snapshot(self._producers.values())


def _expired(entry: ProducerStateEntry, now_ms: int, expiration_ms: int) -> bool:
    return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= expiration_ms


class AppendCheck:
    """The producers' batches of one write, checked in order (Kafka's ``analyzeAndValidateProducerState``).

    The writer of a partition takes several appends at once; they must be
    judged as if written one after another: a batch is checked against the
    state and against the batches of the same producer admitted before it in
    this write. The manager is not changed (each batch is recorded with
    :meth:`ProducerStateManager.load_batch` once it is in the file).
    """

    __slots__ = ("_infos", "_manager")

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self._infos: dict[int, ProducerAppendInfo] = {}

    def check(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        first_offset: int,
        last_offset_delta: int,
        max_timestamp: int,
        *,
        is_transactional: bool = False,
    ) -> BatchMetadata | None:
        """``None`` when the batch is to be written at ``first_offset``; the earlier batch it repeats otherwise.

        The earlier batch may be one admitted before it in this write (its
        offsets are where that one is about to be written).

        Raises:
            InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError:
                the batch is refused (nothing of it is recorded).
        """
        info = self._info(producer_id)
        last_seq = increment_sequence(base_sequence, last_offset_delta)
        duplicate = info.find_duplicate(producer_epoch, base_sequence, last_seq)
        if duplicate is not None:
            return duplicate
        info.append_data_batch(
            producer_epoch, base_sequence, last_seq, max_timestamp, first_offset, first_offset + last_offset_delta,
            is_transactional=is_transactional,
        )
        return None

    def check_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, offset: int, timestamp: int, *,
        commit: bool,
    ) -> None:
        """Check a transaction marker to be written at ``offset`` after the batches admitted before it.

        Raises:
            InvalidProducerEpochError, TransactionCoordinatorFencedError: the marker is refused.
        """
        self._info(producer_id).append_end_txn_marker(
            producer_epoch, coordinator_epoch, offset, timestamp, commit=commit
        )

    def _info(self, producer_id: int) -> ProducerAppendInfo:
        info = self._infos.get(producer_id)
        if info is None:
            info = self._infos[producer_id] = self._manager.prepare_update(producer_id, AppendOrigin.CLIENT)
        return info


# ------------------------------------------------------------------------------------ snapshot files


@dataclass(frozen=True, slots=True)
class SnapshotPlan:
    """Which snapshots of a partition to use and which to delete when it is opened (Kafka's ``LogLoader``)."""

    candidates: tuple[int, ...]
    """Offsets of the snapshots to try, newest first: the first that reads back is loaded."""
    delete: tuple[int, ...]
    """Snapshots of no use: past the log end (the log was cut shorter), below the log start, or stray."""
    assume_empty: bool
    """No snapshot at all after a clean shutdown: a directory from before snapshots, whose batches carry
    no producer (an empty state at the log end, without reading the log)."""


def plan_snapshot_load(
    snapshot_offsets: Iterable[int],
    segment_base_offsets: Iterable[int],
    *,
    log_start_offset: int,
    log_end_offset: int,
    clean_shutdown: bool,
) -> SnapshotPlan:
    """Decide how a partition's producer state is loaded from its snapshot files.

    A snapshot is of use when its offset lies in ``[log_start_offset,
    log_end_offset]`` and is a segment's base offset (written at a roll), or
    is the newest one and above every base offset (written at a clean close);
    the others are stray (Kafka's ``removeStraySnapshots``) or were cut off
    with the log (a recovery truncated it, ``truncateAndReload``).
    """
    offsets = sorted(set(snapshot_offsets))
    bases = set(segment_base_offsets)
    last_base = max(bases, default=-1)
    keep: list[int] = []
    delete: list[int] = []
    for offset in offsets:
        in_range = log_start_offset <= offset <= log_end_offset
        is_close_snapshot = offset == offsets[-1] and offset > last_base
        (keep if in_range and (offset in bases or is_close_snapshot) else delete).append(offset)
    return SnapshotPlan(tuple(reversed(keep)), tuple(delete), clean_shutdown and not offsets)



def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """The bytes of a snapshot file holding ``entries`` (layout in docs/FORMAT.md)."""
    parts: list[bytes] = []
    count = 0
    for entry in entries:
        count += 1
        txn = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        parts.append(
            _SNAPSHOT_PRODUCER.pack(
                entry.producer_id, entry.producer_epoch, entry.coordinator_epoch, entry.last_timestamp, txn,
                len(entry.batches),
            )
        )
        parts.extend(
            _SNAPSHOT_BATCH.pack(batch.last_seq, batch.last_offset, batch.offset_delta, batch.timestamp)
            for batch in entry.batches
        )
    tail = struct.pack(">i", count) + b"".join(parts)
    crc = google_crc32c.value(tail)
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + tail


def decode_snapshot(data: bytes, offset: int) -> list[ProducerStateEntry]:
    """The entries of the snapshot file ``data`` whose name says ``offset``; nothing in it is trusted.

    Raises:
        CorruptSnapshotError: a wrong version, a CRC-32C mismatch, a length
            that does not add up, or a value no writer produces (an epoch or
            sequence out of range, a batch at or past ``offset``, batches out of
            order, a producer id twice).
    """
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"{len(data)} bytes, fewer than the {_SNAPSHOT_HEAD.size} of the header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"version {version:#06x} is not seglog's {SNAPSHOT_VERSION:#06x}")
    computed = google_crc32c.value(data[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC-32C mismatch: stored {crc:#010x}, computed {computed:#010x}")
    if not 0 <= count <= (len(data) - _SNAPSHOT_HEAD.size) // _SNAPSHOT_PRODUCER.size:
        raise CorruptSnapshotError(f"producer count {count} does not fit in {len(data)} bytes")
    entries: list[ProducerStateEntry] = []
    seen: set[int] = set()
    position = _SNAPSHOT_HEAD.size
    for _ in range(count):
        if position + _SNAPSHOT_PRODUCER.size > len(data):
            raise CorruptSnapshotError(
                f"cut short at byte {position}: a producer entry needs {_SNAPSHOT_PRODUCER.size} bytes"
            )
        pid, epoch, coordinator_epoch, last_timestamp, txn, batch_count = _SNAPSHOT_PRODUCER.unpack_from(data, position)
        position += _SNAPSHOT_PRODUCER.size
        if pid < 0:
            raise CorruptSnapshotError(f"producer id {pid} is negative")
        problem = producer_fields_problem(pid, epoch, 0)
        if problem is not None:
            raise CorruptSnapshotError(problem)
        if pid in seen:
            raise CorruptSnapshotError(f"producer {pid} appears twice")
        seen.add(pid)
        if coordinator_epoch < -1:
            raise CorruptSnapshotError(f"producer {pid}: coordinator epoch {coordinator_epoch} is below -1")
        if txn != -1 and not 0 <= txn < offset:
            raise CorruptSnapshotError(f"producer {pid}: open transaction at offset {txn}, outside [0, {offset})")
        if not 0 <= batch_count <= NUM_BATCHES_TO_RETAIN:
            raise CorruptSnapshotError(f"producer {pid}: {batch_count} batches, outside [0, {NUM_BATCHES_TO_RETAIN}]")
        if position + batch_count * _SNAPSHOT_BATCH.size > len(data):
            raise CorruptSnapshotError(f"cut short at byte {position}: producer {pid} announces {batch_count} batches")
        entry = ProducerStateEntry(
            pid, epoch, coordinator_epoch=coordinator_epoch, last_timestamp=last_timestamp,
            current_txn_first_offset=None if txn == -1 else txn,
        )
        previous_last = -1
        for _ in range(batch_count):
            last_seq, last_offset, delta, timestamp = _SNAPSHOT_BATCH.unpack_from(data, position)
            position += _SNAPSHOT_BATCH.size
            if not 0 <= last_seq <= MAX_SEQUENCE or not 0 <= delta <= last_offset < offset:
                raise CorruptSnapshotError(
                    f"producer {pid}: batch (last sequence {last_seq}, last offset {last_offset}, delta {delta}) "
                    f"out of range for a snapshot at offset {offset}"
                )
            if last_offset - delta <= previous_last:
                raise CorruptSnapshotError(f"producer {pid}: batches out of offset order at offset {last_offset}")
            previous_last = last_offset
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, timestamp))
        entries.append(entry)
    if position != len(data):
        raise CorruptSnapshotError(f"{len(data) - position} bytes after the last producer entry")
    return entries


def read_snapshot_file(path: Path) -> bytes:
    """The bytes of a snapshot file (blocking); one too large to be one is refused before it is read.

    Raises:
        CorruptSnapshotError: larger than ``MAX_SNAPSHOT_BYTES``, or gone (removed under the open).
        StorageError: the OS refused.
    """
    ops = default_ops()
    try:
        fd = ops.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise CorruptSnapshotError("the file is gone") from exc
    except OSError as exc:
        raise StorageError(f"{path}: open failed: {exc.strerror or exc}") from exc
    try:
        size = ops.fstat_size(fd)
        if size > MAX_SNAPSHOT_BYTES:
            raise CorruptSnapshotError(f"{size} bytes, more than a snapshot can hold ({MAX_SNAPSHOT_BYTES})")
        return bytes(ops.pread(fd, size, 0))
    except OSError as exc:
        raise StorageError(f"{path}: read failed: {exc.strerror or exc}") from exc
    finally:
        ops.close(fd)
