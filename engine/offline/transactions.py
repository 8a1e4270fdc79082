"""A partition's transactions read offline: its last stable offset and its aborted transactions.

What a ``read_committed`` reader without an engine needs (the Spark source):
the last stable offset (LSO: the first offset of the oldest transaction still
open, else the log end; nothing at or above it is committed yet) and every
aborted transaction (producer id, first and last offset: a transactional
batch of that producer inside that range is not returned).

Worked out as the engine's own load does (Kafka's ``LogLoader``): the newest
producer-state snapshot that decodes gives the transactions open at its
offset, and the batch headers after it are replayed to the log end (a
transactional data batch opens its producer's transaction, a control batch
ends it; an abort adds the aborted transaction). The aborted transactions
before the snapshot come from the segments' ``.txnindex`` files (the engine
writes every entry when the abort marker is appended, and rebuilds them
after a crash). Read-only, synchronous, trusts nothing: a marker whose record
is not a transaction marker is a ``CorruptRecordError``.

The replay reads the headers (and markers) of every batch after the newest
snapshot: after a clean close that is nothing (the close writes one at the
log end), on a live directory the batches since the last roll.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log`` /
``seglog.engine.loader``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from seglog.engine.errors import CorruptRecordError, StorageError
from seglog.engine.offline.indexes import dump_txn_index
from seglog.engine.offline.listing import list_segments, open_log, partition_path, read_topic_file, segment_reader
from seglog.engine.offline.segment_scan import log_end_offset_of, trusted_index_position
from seglog.engine.offline.snapshots import dump_snapshot, list_snapshots
from seglog.indexes.transaction_index import AbortedTxn
from seglog.segments.files import TXN_INDEX_SUFFIX
from seglog.segments.kafka_batch import control_record

__all__ = ["PartitionTransactions", "partition_transactions"]


@dataclass(frozen=True, slots=True)
class PartitionTransactions:
    """The transactions of one partition when it was read (:func:`partition_transactions`)."""

    log_end_offset: int
    last_stable_offset: int
    aborted: tuple[AbortedTxn, ...]  # by last offset (the abort marker's)
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset of its open transaction

    def aborted_between(self, start_offset: int, end_offset: int) -> tuple[tuple[int, int, int], ...]:
        """``(producer_id, first_offset, last_offset)`` of the aborted transactions overlapping ``[start, end)``."""
        return tuple((t.producer_id, t.first_offset, t.last_offset) for t in self.aborted
                     if t.last_offset >= start_offset and t.first_offset < end_offset)


def partition_transactions(log_dir: str | os.PathLike[str], topic: str, partition: int) -> PartitionTransactions:
    """The last stable offset and the aborted transactions of one partition, from its files.

    Raises:
        StorageError: a file cannot be read.
        CorruptRecordError: a control batch whose record is not a transaction marker.
    """
    directory = partition_path(log_dir, topic, partition)
    segments = list_segments(directory)
    if not segments:
        return PartitionTransactions(0, 0, ())
    max_batch_bytes = read_topic_file(directory).max_batch_bytes
    end = log_end_offset_of(segments[-1], max_batch_bytes).next_offset
    first_base = segments[0].base_offset
    aborted: dict[tuple[int, int], AbortedTxn] = {}
    for seg in segments:
        if seg.txn_index_bytes:
            dump = dump_txn_index(seg.sibling(TXN_INDEX_SUFFIX), base_offset=seg.base_offset)
            bad = {slot for slot, _ in dump.bad_versions}
            for slot, txn in enumerate(dump.entries):
                if slot not in bad and txn.first_offset <= txn.last_offset < end:
                    aborted[(txn.producer_id, txn.last_offset)] = txn
    # The newest snapshot that decodes (inside the log) gives the transactions open at its offset.
    start, ongoing = first_base, {}
    for offset, path in reversed(list_snapshots(directory)):
        if not first_base <= offset <= end:
            continue
        try:
            snap = dump_snapshot(path)
        except StorageError:
            continue  # removed under us (the engine deletes snapshots): an older one, or the whole log
        if snap.problem is None:
            start = offset
            ongoing = {e.producer_id: e.current_txn_first_offset for e in snap.entries
                       if e.current_txn_first_offset is not None}
            break
    for seg in segments:
        if (seg.next_base_offset is not None and seg.next_base_offset <= start) or seg.base_offset >= end:
            continue
        position, first_offset = trusted_index_position(seg, start, max_batch_bytes) if seg.base_offset < start \
            else (0, seg.base_offset)
        with open_log(seg.log_path) as log:
            reader = segment_reader(log, seg.base_offset, max_batch_bytes, start=position, first_offset=first_offset,
                                    verify=False)
            for batch in reader:
                header = batch.header
                if header.base_offset >= end:
                    break
                if header.base_offset < start or not header.is_transactional:
                    continue
                pid = header.producer_id
                if header.is_control:
                    began = ongoing.pop(pid, None)
                    buf, at = reader.batch_bytes(batch)
                    try:
                        marker = control_record(buf, at, header)
                    except CorruptRecordError as exc:
                        raise CorruptRecordError(f"{seg.log_path}: {exc}") from exc
                    if began is not None and not marker.commit:
                        lso = min((o for p, o in ongoing.items() if p != pid), default=header.base_offset + 1)
                        aborted.setdefault((pid, header.base_offset), AbortedTxn(pid, began, header.base_offset, lso))
                elif pid not in ongoing:
                    ongoing[pid] = header.base_offset
    lso = max(min(ongoing.values(), default=end), first_base)
    return PartitionTransactions(end, min(lso, end), tuple(sorted(aborted.values(), key=lambda t: t.last_offset)),
                                 dict(ongoing))
