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
log end), on a live directory the batches since the last roll. A later call
for the same partition in the same process walks on from where the last one
ended, once the files show that what it read is still there.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log`` /
``seglog.engine.loader``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from seglog.engine.errors import CorruptRecordError, StorageError
from seglog.engine.offline.indexes import dump_txn_index
from seglog.engine.offline.listing import (
    SegmentInfo,
    list_segments,
    open_log,
    partition_path,
    read_topic_file,
    segment_reader,
)
from seglog.engine.offline.segment_scan import log_end_offset_of, trusted_index_position
from seglog.engine.offline.snapshots import dump_snapshot, list_snapshots
from seglog.indexes.transaction_index import AbortedTxn
from seglog.segments.files import TXN_INDEX_SUFFIX
from seglog.segments.kafka_batch import control_record
from seglog.segments.reader import LocatedBatch

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


@dataclass(frozen=True, slots=True)
class _Cursor:
    """Where the last walk of a partition ended: the last batch it read, and the state after it."""

    directory: Path
    segment_base: int
    position: int  # of the last batch walked, in its segment's .log
    base_offset: int
    crc: int
    size: int
    ongoing: tuple[tuple[int, int], ...]  # producer id, first offset of its open transaction


# The last walk of each partition read in this process, so that a reader asking again (a Spark stream,
# every trigger) walks only the batches appended since, not the whole active segment. Each resume is
# checked against the files first (the last batch walked must still be there, same offset and CRC);
# anything else is a full walk.
_CACHE_SIZE: Final = 4096
_cache: OrderedDict[Path, tuple[PartitionTransactions, _Cursor]] = OrderedDict()
_cache_lock = threading.Lock()


def partition_transactions(log_dir: str | os.PathLike[str], topic: str, partition: int) -> PartitionTransactions:
    """The last stable offset and the aborted transactions of one partition, from its files.

    A second call for the same partition in the same process resumes where
    the first one's walk ended, when the files show that nothing it read has
    changed (the segments it read are still listed, the last batch it read is
    still at its position with its offset and CRC-32C); otherwise it walks
    as the first call did.

    Raises:
        StorageError: a file cannot be read.
        CorruptRecordError: a control batch whose record is not a transaction marker.
    """
    directory = Path(os.path.realpath(partition_path(log_dir, topic, partition)))
    segments = list_segments(directory)
    if not segments:
        return PartitionTransactions(0, 0, ())
    max_batch_bytes = read_topic_file(directory).max_batch_bytes
    with _cache_lock:
        cached = _cache.get(directory)
    found = None
    if cached is not None:
        found = _resume(cached[0], cached[1], segments, max_batch_bytes)
    if found is None:
        end = log_end_offset_of(segments[-1], max_batch_bytes).next_offset
        found = _walk_all(directory, segments, end, max_batch_bytes)
    result, cursor = found
    with _cache_lock:
        if cursor is None:
            _cache.pop(directory, None)
        else:
            _cache[directory] = (result, cursor)
            _cache.move_to_end(directory)
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    return result


def _walk_all(
    directory: Path, segments: list[SegmentInfo], end: int, max_batch_bytes: int
) -> tuple[PartitionTransactions, _Cursor | None]:
    """The aborted transactions in the ``.txnindex`` files, then a walk from the newest snapshot to ``end``."""
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
    walks = []
    for seg in segments:
        if (seg.next_base_offset is not None and seg.next_base_offset <= start) or seg.base_offset >= end:
            continue
        position, first_offset = trusted_index_position(seg, start, max_batch_bytes) if seg.base_offset < start \
            else (0, seg.base_offset)
        walks.append((seg, position, first_offset))
    cursor, _ = _walk(directory, walks, start, end, max_batch_bytes, ongoing, aborted, None)
    return _result(first_base, end, ongoing, aborted), cursor


def _resume(
    previous: PartitionTransactions, cursor: _Cursor, segments: list[SegmentInfo], max_batch_bytes: int
) -> tuple[PartitionTransactions, _Cursor | None] | None:
    """``previous`` brought to the log end from ``cursor``; ``None`` when the files no longer show what it read.

    The batches after the cursor are checked as they are walked (CRC-32C
    included): the walk itself finds the log end, where the first is cut
    short or bad, as :func:`log_end_offset_of` does from an index entry.
    """
    first_base = segments[0].base_offset
    at = next((i for i, seg in enumerate(segments) if seg.base_offset == cursor.segment_base), None)
    if at is None or segments[at].size_bytes < cursor.position + cursor.size:
        return None
    ongoing = dict(cursor.ongoing)
    aborted = {(t.producer_id, t.last_offset): t for t in previous.aborted if t.last_offset >= first_base}
    walks: list[tuple[SegmentInfo, int, int | None]] = [(segments[at], cursor.position, cursor.base_offset)]
    walks += [(seg, 0, seg.base_offset) for seg in segments[at + 1:]]
    try:
        moved, end = _walk(cursor.directory, walks, cursor.base_offset, None, max_batch_bytes, ongoing, aborted,
                           cursor)
    except _Changed:
        return None
    if end is None or end < previous.log_end_offset:
        return None
    return _result(first_base, end, ongoing, aborted), moved or cursor


class _Changed(Exception):
    """The batch a resumed walk starts at is not the one the last walk ended at."""


def _walk(
    directory: Path,
    walks: list[tuple[SegmentInfo, int, int | None]],
    start: int,
    end: int | None,
    max_batch_bytes: int,
    ongoing: dict[int, int],
    aborted: dict[tuple[int, int], AbortedTxn],
    resume: _Cursor | None,
) -> tuple[_Cursor | None, int | None]:
    """Replay the batch headers of ``walks`` (segment, position, its batch's offset) below ``end``.

    Transactional batches at or after ``start`` open their producer's
    transaction in ``ongoing``; markers close it, and an abort is added to
    ``aborted``. With ``resume``, the first batch must be the cursor's (same
    offset and CRC-32C; :class:`_Changed` otherwise) and is not replayed
    again. ``end=None``: every batch is checked (CRC-32C included) and the
    walk ends at the first that is cut short or bad. Returns where the walk
    ended (``None``: no batch walked) and the next offset the last segment's
    walk reached (``None``: no segment walked).
    """
    last: tuple[SegmentInfo, LocatedBatch] | None = None
    reached = None
    for seg, position, first_offset in walks:
        with open_log(seg.log_path) as log:
            reader = segment_reader(log, seg.base_offset, max_batch_bytes, start=position, first_offset=first_offset,
                                    verify=end is None)
            for batch in reader:
                header = batch.header
                if resume is not None:
                    if (batch.position, header.base_offset, header.crc) != (
                            resume.position, resume.base_offset, resume.crc):
                        raise _Changed
                    resume = None
                    continue
                if end is not None and header.base_offset >= end:
                    break
                if header.base_offset < start:  # before the snapshot: in the state already
                    continue
                last = (seg, batch)
                if not header.is_transactional:
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
        if resume is not None:
            raise _Changed  # the cursor's batch is gone (the file was cut under it)
        reached = reader.next_offset if reader.next_offset is not None else seg.base_offset
    if last is None:
        return None, reached
    seg, batch = last
    cursor = _Cursor(directory, seg.base_offset, batch.position, batch.header.base_offset, batch.header.crc,
                     batch.header.size, tuple(ongoing.items()))
    return cursor, reached


def _result(
    first_base: int, end: int, ongoing: dict[int, int], aborted: dict[tuple[int, int], AbortedTxn]
) -> PartitionTransactions:
    lso = max(min(ongoing.values(), default=end), first_base)
    return PartitionTransactions(end, min(lso, end), tuple(sorted(aborted.values(), key=lambda t: t.last_offset)),
                                 dict(ongoing))
