"""One ``.log`` scanned offline with the segment reader: its batches, where they end, and what follows them.

Owns :func:`scan_segment` (every batch checked, counted, optionally kept as
columns; the tail after the last valid batch classified as preallocated
zeros, a torn write or bad bytes), the findings that tail makes, and the walk
that finds where a partition's log ends (from the last offset-index entry that
really points at a batch start, as the engine's open does).

The scan itself is ``seglog.segments.reader.BatchReader``: the rules are the
engine's own, a segment's size is taken once when its file is opened, and
every batch is bounded by the topic's largest batch size before anything is
allocated.

Must not import: ``tools``.
"""

from __future__ import annotations

import enum
import os
from array import array
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, NamedTuple

from seglog.engine.errors import StorageError
from seglog.engine.offline.findings import LOG_HINT, Check, Finding, Severity
from seglog.engine.offline.listing import SegmentInfo, open_log, segment_reader
from seglog.indexes.offset_index import OFFSET_ENTRY
from seglog.indexes.time_index import NO_TIMESTAMP
from seglog.segments.batch import HEADER_SIZE, BatchHeader, ScanStop, header_problem, read_header, time_entry_problem
from seglog.segments.errors import CorruptRecordError
from seglog.segments.fileio import SegmentFile, default_ops
from seglog.segments.files import INDEX_SUFFIX, base_offset_of
from seglog.segments.kafka_batch import ControlRecord, control_record
from seglog.segments.reader import CHUNK_BYTES, BatchReader, LocatedBatch

__all__ = [
    "LogEnd",
    "SegmentScan",
    "TailKind",
    "TxnBatch",
    "all_zero_from",
    "batch_at",
    "log_end_offset_of",
    "scan_segment",
    "tail_findings",
    "trusted_index_position",
]

# A verifier walking a 1 GiB segment reads it in chunks of this much and holds one, not the file.
SCAN_CHUNK_BYTES: Final = CHUNK_BYTES
# The walk to the log end covers about index_interval_bytes plus a batch: a smaller first read.
TAIL_CHUNK_BYTES: Final = 1 << 20


class TxnBatch(NamedTuple):
    """A transactional batch a scan found (:attr:`SegmentScan.txn_batches`); a control batch with its marker."""

    position: int
    header: BatchHeader
    marker: ControlRecord | None  # a control batch's record (commit or abort); None for a data batch
    problem: str | None = None  # a control batch whose record is not a transaction marker


class TailKind(enum.StrEnum):
    """What follows the last valid batch of a ``.log``, when something does."""

    ZEROS = "zeros"  # only zero bytes: a preallocated file (preallocate=true) or a sparse tail
    INCOMPLETE = "incomplete"  # a batch (or header) cut short: a torn write
    CORRUPT = "corrupt"  # bytes that are not a valid batch: bad magic, length, CRC or offsets


def all_zero_from(log: SegmentFile, position: int) -> bool:
    """Whether every byte of ``log`` from ``position`` to its end is zero (read in chunks)."""
    while position < log.size:
        chunk = log.pread(position, min(SCAN_CHUNK_BYTES, log.size - position))
        if not chunk:
            break
        if chunk.count(0) != len(chunk):
            return False
        position += len(chunk)
    return True


@dataclass(slots=True)
class SegmentScan:
    """What one pass over a ``.log`` found (headers and CRCs checked; bodies not decoded).

    ``next_offset`` is one past the last valid offset (the base offset when the
    segment holds no valid batch). ``stop`` and ``reason`` say why the scan
    ended (``ScanStop.END``: at the end of the file). When ``keep_batches`` was
    asked for, the per-batch columns (``positions``, ``base_offsets``,
    ``last_offsets``, ``max_timestamps``) are filled, 8 bytes per value, and
    ``txn_batches`` holds every transactional batch (markers decoded).
    """

    path: Path
    base_offset: int
    file_bytes: int
    valid_bytes: int
    batch_count: int
    record_count: int
    first_offset: int | None
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    tail: TailKind | None
    reason: str
    stop: ScanStop = ScanStop.END
    positions: array[int] = field(default_factory=lambda: array("q"))
    base_offsets: array[int] = field(default_factory=lambda: array("q"))
    last_offsets: array[int] = field(default_factory=lambda: array("q"))
    max_timestamps: array[int] = field(default_factory=lambda: array("q"))
    txn_batches: list[TxnBatch] = field(default_factory=list)

    @property
    def truncated_bytes(self) -> int:
        """Bytes after the last valid batch (what recovery would cut off)."""
        return self.file_bytes - self.valid_bytes

    def batch_holding(self, offset: int) -> int | None:
        """Index (into the columns) of the batch whose offsets include ``offset``, or ``None``."""
        i = bisect_left(self.last_offsets, offset)
        if i < len(self.last_offsets) and self.base_offsets[i] <= offset:
            return i
        return None


def scan_segment(
    log_path: str | os.PathLike[str],
    *,
    max_batch_bytes: int,
    base_offset: int | None = None,
    keep_batches: bool = False,
    on_bytes: Callable[[int], None] | None = None,
) -> SegmentScan:
    """Scan a whole ``.log``: count its valid batches and records and classify what follows them.

    ``base_offset`` defaults to the one in the file name (0 if the name has none):
    the first batch must have it. ``on_bytes(n)`` is called as the scan
    advances (for progress bars).

    Raises:
        StorageError: the file cannot be opened or read.
    """
    path = Path(log_path)
    base = base_offset if base_offset is not None else (base_offset_of(path) or 0)
    out = SegmentScan(path, base, 0, 0, 0, 0, None, base, NO_TIMESTAMP, -1, None, "")
    reported = 0

    def progress(position: int) -> None:
        nonlocal reported
        if on_bytes is not None and position > reported:
            on_bytes(position - reported)
            reported = position

    with open_log(path) as log:
        reader = segment_reader(log, base, max_batch_bytes, progress=progress)
        for position, h in reader:
            if out.first_offset is None:
                out.first_offset = h.base_offset
            out.batch_count += 1
            out.record_count += h.record_count
            if h.max_timestamp > out.max_timestamp:
                out.max_timestamp, out.offset_of_max_timestamp = h.max_timestamp, h.last_offset
            if keep_batches:
                out.positions.append(position)
                out.base_offsets.append(h.base_offset)
                out.last_offsets.append(h.last_offset)
                out.max_timestamps.append(h.max_timestamp)
                if h.is_transactional:
                    out.txn_batches.append(_txn_batch(reader, LocatedBatch(position, h)))
        out.file_bytes, out.valid_bytes = reader.end, reader.position
        out.next_offset = base if reader.next_offset is None else reader.next_offset
        out.stop = reader.stop or ScanStop.END
        if out.stop is not ScanStop.END:
            out.reason = reader.reason
            if all_zero_from(log, reader.position):
                out.tail = TailKind.ZEROS
            else:
                out.tail = TailKind.INCOMPLETE if out.stop is ScanStop.INCOMPLETE else TailKind.CORRUPT
    if on_bytes is not None and out.file_bytes > reported:
        on_bytes(out.file_bytes - reported)
    return out


def _txn_batch(reader: BatchReader, batch: LocatedBatch) -> TxnBatch:
    """A transactional batch of a scan, its marker read when it is a control batch."""
    if not batch.header.is_control:
        return TxnBatch(batch.position, batch.header, None)
    try:
        buf, at = reader.batch_bytes(batch)
        return TxnBatch(batch.position, batch.header, control_record(buf, at, batch.header))
    except CorruptRecordError as exc:
        return TxnBatch(batch.position, batch.header, None, str(exc))


def tail_findings(scan: SegmentScan, *, active: bool) -> list[Finding]:
    """What follows the last valid batch: preallocated zeros (info while active) or a torn/invalid tail."""
    if scan.tail is None:
        return []
    path, valid_end = scan.path, scan.valid_bytes
    cut, reason, next_offset = scan.file_bytes - valid_end, scan.reason, scan.next_offset
    if scan.tail is TailKind.ZEROS:
        return [Finding(Severity.INFO if active else Severity.WARNING, Check.ZERO_TAIL, path,
                        f"{cut} zero byte(s) after the last batch (preallocated, not trimmed); {LOG_HINT}",
                        valid_end, next_offset)]
    incomplete = scan.tail is TailKind.INCOMPLETE
    check = Check.TORN_TAIL if incomplete else Check.BATCH
    what = "torn write" if incomplete else "invalid batch"
    if scan.stop is ScanStop.UNSUPPORTED:
        return [Finding(Severity.ERROR, check, path,
                        f"{reason}; this version cannot read the segment from position {valid_end} on",
                        valid_end, next_offset)]
    return [Finding(Severity.ERROR, check, path,
                    f"{what} at position {valid_end}: {reason}; {cut} byte(s) after the last valid batch; {LOG_HINT}",
                    valid_end, next_offset)]


def batch_at(seg: SegmentInfo, position: int, max_batch_bytes: int) -> BatchHeader | None:
    """The header of the batch an index places at ``position`` of ``seg``, if a plausible one starts there.

    Plausible: inside the file, its header passes the format's checks, and its
    offsets are the segment's and not its first batch's (no index entry names
    the first batch). ``None`` otherwise: the caller then starts at position 0.
    """
    if not 0 < position < seg.size_bytes:
        return None
    try:
        with open_log(seg.log_path) as log:
            header = read_header(log.pread(position, HEADER_SIZE))
    except (StorageError, CorruptRecordError):
        return None
    if (
        header_problem(header, max_batch_bytes) is not None
        or header.base_offset <= seg.base_offset
        or position + header.size > seg.size_bytes
    ):
        return None
    return header


def trusted_index_position(seg: SegmentInfo, target: int | None, max_batch_bytes: int) -> tuple[int, int | None]:
    """``(position, base offset of the batch there)`` to start a walk for ``target`` (``None``: the last entry).

    The offset index's floor entry is used only when a plausible batch holding
    its offset starts at its position (:func:`batch_at`); otherwise (no index,
    a garbage index) the walk starts at the segment's beginning, whose batch
    must have the segment's base offset. Never trusts the index blindly: a
    wrong position would make a walk stop early and hide records, or read
    from the wrong place.
    """
    if not seg.index_bytes:
        return 0, seg.base_offset
    try:
        entry = _index_floor(seg.sibling(INDEX_SUFFIX), seg.base_offset, target)
    except OSError:
        return 0, seg.base_offset
    if entry is None:
        return 0, seg.base_offset
    offset, position = entry
    header = batch_at(seg, position, max_batch_bytes)
    if header is not None and header.base_offset <= offset <= header.last_offset:
        return position, header.base_offset
    return 0, seg.base_offset


def _index_floor(path: Path, base_offset: int, target: int | None) -> tuple[int, int] | None:
    """The offset index's last entry at or below ``target`` (``None``: its last entry), by binary search.

    Reads a few slots with ``pread`` (about 2 log2(slots)), never the whole
    file: a live segment's index is preallocated (10 MiB by default) and an
    offline reader looks at it at every plan. The written entries are the
    slots before the first all-zero one (the first batch of a segment is never
    indexed, so no real entry is ``(0, 0)``). An index that breaks that rule
    gives some entry, which the caller checks against the batch it names.

    Raises:
        OSError: the file cannot be opened or read.
    """
    ops = default_ops()
    fd = ops.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        slots = ops.fstat_size(fd) // OFFSET_ENTRY.size

        def slot(i: int) -> tuple[int, int] | None:
            data = ops.pread(fd, OFFSET_ENTRY.size, i * OFFSET_ENTRY.size)
            if len(data) < OFFSET_ENTRY.size:  # cut under us (a writer trimming it at close)
                return None
            relative, position = OFFSET_ENTRY.unpack(data)
            return None if relative == position == 0 else (base_offset + relative, position)

        lo, hi = 0, slots  # the first empty slot
        while lo < hi:
            mid = (lo + hi) // 2
            if slot(mid) is None:
                hi = mid
            else:
                lo = mid + 1
        written = lo
        if target is None:
            return slot(written - 1) if written else None
        lo, hi = 0, written  # the first entry above target
        while lo < hi:
            mid = (lo + hi) // 2
            entry = slot(mid)
            if entry is None or entry[0] > target:
                hi = mid
            else:
                lo = mid + 1
        return slot(lo - 1) if lo else None
    finally:
        ops.close(fd)


def time_entry_holds(seg: SegmentInfo, entry: tuple[int, int], max_batch_bytes: int) -> bool:
    """Whether a time-index entry ``(T, o)`` holds: the batch ending at offset ``o`` has largest timestamp ``T``.

    The engine's rule at use (``seglog.segments.batch.time_entry_problem``):
    a time lookup that starts from an entry that lies would skip records, and
    a segment's last entry is its largest timestamp, which decides whether a
    lookup looks in it at all. The walk starts at the offset index's entry for
    ``o`` (:func:`trusted_index_position`).
    """
    timestamp, offset = entry
    position, first = trusted_index_position(seg, offset, max_batch_bytes)
    try:
        with open_log(seg.log_path) as log:
            reader = BatchReader(log.pread, end=log.size, base_offset=seg.base_offset, start=position,
                                 first_offset=first, max_batch_bytes=max_batch_bytes, verify=False,
                                 path=seg.log_path)
            for _, header in reader:
                if header.last_offset >= offset:
                    return time_entry_problem(header, timestamp, offset) is None
    except (StorageError, CorruptRecordError):
        return False
    return False


class LogEnd(NamedTuple):
    """Where a partition's last segment ends (:func:`log_end_offset_of`)."""

    next_offset: int  # the log end offset: the last complete, valid batch's last offset + 1
    end_position: int  # just after that batch
    max_timestamp: int  # the largest max_timestamp of the batches walked (-1: none)
    bytes_read: int  # how much of the .log the walk read


def log_end_offset_of(seg: SegmentInfo, max_batch_bytes: int) -> LogEnd:
    """Where the last segment ``seg`` ends, walking from its last trusted offset-index entry.

    Every batch on the way is checked (CRC included), and the walk stops at the
    first that is cut short or bad: for the active segment of a running engine
    that is the batch being written, never read half written (the engine's
    open walks the same way).

    Raises:
        StorageError: the file cannot be opened or read.
    """
    start, first_offset = trusted_index_position(seg, None, max_batch_bytes)
    largest = NO_TIMESTAMP
    with open_log(seg.log_path) as log:
        reader = segment_reader(
            log, seg.base_offset, max_batch_bytes, start=start, first_offset=first_offset, chunk_bytes=TAIL_CHUNK_BYTES
        )
        for _, header in reader:
            largest = max(largest, header.max_timestamp)
    next_offset = reader.next_offset if reader.next_offset is not None else seg.base_offset
    return LogEnd(next_offset, reader.position, largest, reader.bytes_read)
