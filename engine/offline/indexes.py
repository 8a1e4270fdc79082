"""Index files read raw: dumps of ``.index``, ``.timeindex`` and ``.txnindex``, and their checks.

Owns reading an index file without mapping it (``pread``-sized reads of the
whole file, bounded by ``MAX_INDEX_FILE_BYTES``), the checks an index gets on
its own (Kafka's ``--index-sanity-check``), the check of every entry against
the batches of its ``.log`` (``--verify-index-only``), and the entries a
planner may use to place a read (:func:`usable_entries`).

Must not import: ``tools``.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from seglog.engine.errors import StorageError
from seglog.engine.offline.findings import INDEX_HINT, Check, Finding, Severity
from seglog.engine.offline.listing import file_size
from seglog.indexes.offset_index import OFFSET_ENTRY, OffsetPosition
from seglog.indexes.time_index import NO_TIMESTAMP, TIME_ENTRY, TimestampOffset
from seglog.indexes.transaction_index import ABORTED_TXN, ABORTED_TXN_VERSION, AbortedTxn
from seglog.segments.batch import INT32_MAX
from seglog.segments.fileio import read_small_file_sync
from seglog.segments.files import TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, base_offset_of

if TYPE_CHECKING:
    from seglog.engine.offline.segment_scan import SegmentScan

__all__ = [
    "MAX_INDEX_FILE_BYTES",
    "IndexDump",
    "TxnIndexDump",
    "dump_index",
    "dump_txn_index",
    "index_sanity_check",
    "txn_index_findings",
    "verify_index_against_log",
]

# An index larger than this is not one seglog wrote (segment.index.bytes is an
# int32 config; Kafka's default is 10 MiB); it is reported, not read.
MAX_INDEX_FILE_BYTES: Final = 1 << 30


def _read_index_bytes(path: Path) -> bytes:
    size = file_size(path)
    if size is None:
        raise StorageError(f"{path}: no such file")
    if size > MAX_INDEX_FILE_BYTES:
        raise StorageError(f"{path}: {size} bytes, larger than any index seglog writes ({MAX_INDEX_FILE_BYTES})")
    data = read_small_file_sync(path, max_bytes=size)
    if data is None:
        raise StorageError(f"{path}: no such file")
    return data


@dataclass(frozen=True, slots=True)
class IndexDump:
    """The entries of an ``.index`` or ``.timeindex`` file, read raw.

    ``entries`` are the slots before the trailing run of all-zero slots
    (preallocated and never written: a slot holding ``(0, 0)`` is never a real
    entry, as the first batch of a segment is never indexed); ``zero_slots``
    counts that run and ``partial_bytes`` the bytes past the last whole slot.
    """

    path: Path
    kind: str  # "offset" or "time"
    base_offset: int
    file_bytes: int
    entry_size: int
    entries: list[OffsetPosition] | list[TimestampOffset]
    zero_slots: int
    partial_bytes: int


def dump_index(path: str | os.PathLike[str], *, base_offset: int | None = None) -> IndexDump:
    """Read every entry of an offset (``.index``) or time (``.timeindex``) index file.

    The kind comes from the suffix (``.timeindex`` is a time index, anything
    else an offset index); ``base_offset`` from the name unless given.

    Raises:
        StorageError: the file is missing, unreadable or implausibly large.
    """
    p = Path(path)
    is_time = p.name.split(".", 1)[-1].startswith(TIME_INDEX_SUFFIX[1:])
    base = base_offset if base_offset is not None else (base_offset_of(p) or 0)
    data = _read_index_bytes(p)
    fmt = TIME_ENTRY if is_time else OFFSET_ENTRY
    size = fmt.size
    usable = len(data) - len(data) % size
    written = len(data[:usable].rstrip(b"\0"))
    valid = -(-written // size) * size  # round the written bytes up to whole entries
    entries: list[OffsetPosition] | list[TimestampOffset]
    if is_time:
        entries = [TimestampOffset(ts, base + rel) for ts, rel in TIME_ENTRY.iter_unpack(data[:valid])]
    else:
        entries = [OffsetPosition(base + rel, pos) for rel, pos in OFFSET_ENTRY.iter_unpack(data[:valid])]
    return IndexDump(
        path=p,
        kind="time" if is_time else "offset",
        base_offset=base,
        file_bytes=len(data),
        entry_size=size,
        entries=entries,
        zero_slots=(usable - valid) // size,
        partial_bytes=len(data) - usable,
    )


@dataclass(frozen=True, slots=True)
class TxnIndexDump:
    """The entries of a ``.txnindex`` file; ``bad_versions`` lists (slot, version) of unknown versions."""

    path: Path
    base_offset: int
    file_bytes: int
    entries: list[AbortedTxn]
    partial_bytes: int
    bad_versions: list[tuple[int, int]]


def dump_txn_index(path: str | os.PathLike[str], *, base_offset: int | None = None) -> TxnIndexDump:
    """Read every entry of an aborted-transaction index (``.txnindex``).

    Raises:
        StorageError: the file is missing, unreadable or implausibly large.
    """
    p = Path(path)
    data = _read_index_bytes(p)
    usable = len(data) - len(data) % ABORTED_TXN.size
    entries: list[AbortedTxn] = []
    bad: list[tuple[int, int]] = []
    for slot, (version, *fields) in enumerate(ABORTED_TXN.iter_unpack(data[:usable])):
        if version != ABORTED_TXN_VERSION:
            bad.append((slot, version))
        entries.append(AbortedTxn(*fields))
    base = base_offset if base_offset is not None else (base_offset_of(p) or 0)
    return TxnIndexDump(p, base, len(data), entries, len(data) - usable, bad)


def index_sanity_check(path: str | os.PathLike[str], *, active: bool = False) -> list[Finding]:
    """The checks an index gets without its ``.log``: size, order, base offset, zero slots.

    Kafka's ``--index-sanity-check`` (the O(1) startup check: last offset not
    below the base, length a whole number of entries) plus the order of every
    entry. ``active`` marks the index of the segment an engine appends to,
    whose preallocated zero slots are normal while it runs (``info``).

    Raises:
        StorageError: the file cannot be read.
    """
    p = Path(path)
    if p.suffix == TXN_INDEX_SUFFIX:
        return txn_index_findings(dump_txn_index(p), None)
    dump = dump_index(p)
    check = Check.TIME_INDEX if dump.kind == "time" else Check.OFFSET_INDEX
    out: list[Finding] = []
    if dump.partial_bytes:
        out.append(
            Finding(
                Severity.ERROR,
                Check.INDEX_SIZE,
                p,
                f"length {dump.file_bytes} is not a multiple of the {dump.entry_size}-byte entry size "
                f"({dump.partial_bytes} stray bytes); {INDEX_HINT}",
                position=dump.file_bytes - dump.partial_bytes,
            )
        )
    if dump.zero_slots:
        out.append(
            Finding(
                Severity.INFO if active else Severity.WARNING,
                Check.INDEX_SIZE,
                p,
                f"{dump.zero_slots} preallocated zero slot(s) after {len(dump.entries)} entries: not trimmed "
                + ("(normal while an engine has the segment open, or after a crash)" if active
                   else f"although the segment is not active (an unclean stop); {INDEX_HINT}"),
                position=len(dump.entries) * dump.entry_size,
            )
        )
    previous: tuple[int, int] | None = None
    for slot, (a, b) in enumerate(dump.entries):
        # Offset index: (offset, position), offsets strictly increase, positions never decrease.
        # Time index: (timestamp, offset), timestamps strictly increase, offsets never decrease.
        offset = b if dump.kind == "time" else a
        problem = None
        if offset < dump.base_offset or offset - dump.base_offset > INT32_MAX:
            problem = f"offset {offset} is outside [{dump.base_offset}, {dump.base_offset + INT32_MAX}]"
        elif b < 0 and dump.kind == "offset":
            problem = f"position {b} is negative"
        elif previous is not None:
            if dump.kind == "offset" and (a <= previous[0] or b < previous[1]):
                problem = (
                    f"entry (offset {a}, position {b}) does not follow (offset {previous[0]}, position {previous[1]})"
                )
            if dump.kind == "time" and (a <= previous[0] or b < previous[1]):
                problem = (
                    f"entry (timestamp {a}, offset {b}) does not follow (timestamp {previous[0]}, offset {previous[1]})"
                )
        if problem is not None:
            out.append(
                Finding(Severity.ERROR, check, p, f"slot {slot}: {problem}; {INDEX_HINT}",
                        position=slot * dump.entry_size, offset=offset)
            )
            break  # one out-of-order entry makes every later comparison noise
        previous = (a, b)
    return out


def txn_index_findings(dump: TxnIndexDump, next_offset: int | None) -> list[Finding]:
    out: list[Finding] = []
    p = dump.path
    if dump.partial_bytes:
        out.append(
            Finding(Severity.ERROR, Check.INDEX_SIZE, p,
                    f"{dump.partial_bytes} trailing byte(s) after {len(dump.entries)} whole "
                    f"{ABORTED_TXN.size}-byte entries (a torn write); {INDEX_HINT}",
                    position=dump.file_bytes - dump.partial_bytes)
        )
    for slot, version in dump.bad_versions:
        out.append(Finding(Severity.ERROR, Check.TXN_INDEX, p, f"slot {slot}: unknown entry version {version}",
                           position=slot * ABORTED_TXN.size))
    last: int | None = None
    for slot, txn in enumerate(dump.entries):
        problem = None
        if txn.last_offset < dump.base_offset:
            problem = f"last offset {txn.last_offset} is below the segment's base offset {dump.base_offset}"
        elif txn.first_offset > txn.last_offset:
            problem = f"first offset {txn.first_offset} is above last offset {txn.last_offset}"
        elif last is not None and txn.last_offset <= last:
            problem = f"last offset {txn.last_offset} does not increase (previous {last})"
        elif next_offset is not None and txn.last_offset >= next_offset:
            problem = f"last offset {txn.last_offset} is beyond the segment's data (next offset {next_offset})"
        if problem is not None:
            out.append(Finding(Severity.ERROR, Check.TXN_INDEX, p, f"slot {slot}: {problem}; {INDEX_HINT}",
                               position=slot * ABORTED_TXN.size, offset=txn.last_offset))
            break
        last = txn.last_offset
    return out


def verify_index_against_log(index: IndexDump, scan: SegmentScan, *, active: bool) -> list[Finding]:
    """Check every entry of ``index`` against the batches ``scan`` found (``scan`` needs ``keep_batches``).

    Offset index: each entry's position is the start of a valid batch that holds
    its offset. Time index: each entry's offset lies in the segment and its
    timestamp is the largest timestamp of the batches up to the one holding that
    offset (the max-timestamp-so-far rule), and for a segment that is not
    active the last entry carries the segment's largest timestamp (written at
    roll). Like ``kafka-dump-log --verify-index-only``, reports the first
    mismatch per index (with the count of the rest).
    """
    p = index.path
    mismatches: list[str] = []
    first: tuple[int, int] | None = None  # (slot, offset) of the first mismatch
    if index.kind == "offset":
        for slot, (offset, position) in enumerate(index.entries):
            i = bisect_left(scan.positions, position)
            problem = None
            if position >= scan.valid_bytes:
                problem = f"points at position {position}, past the last valid batch (ends at {scan.valid_bytes})"
            elif i >= len(scan.positions) or scan.positions[i] != position:
                problem = f"points at position {position}, which is not the start of a batch"
            elif not scan.base_offsets[i] <= offset <= scan.last_offsets[i]:
                problem = (
                    f"says offset {offset} is in the batch at position {position}, which holds offsets "
                    f"{scan.base_offsets[i]}..{scan.last_offsets[i]}"
                )
            if problem is not None:
                mismatches.append(f"slot {slot} (offset {offset}) {problem}")
                first = first or (slot, offset)
    else:
        running = array("q", scan.max_timestamps)
        for i in range(1, len(running)):
            running[i] = max(running[i], running[i - 1])
        for slot, (timestamp, offset) in enumerate(index.entries):
            i2 = scan.batch_holding(offset)
            problem = None
            if i2 is None:
                problem = (
                    f"offset {offset} is not in any valid batch of the segment "
                    f"(offsets {scan.base_offset}..{scan.next_offset - 1})"
                )
            elif running[i2] != timestamp:
                problem = (
                    f"timestamp {timestamp} is not the largest timestamp up to offset {offset} "
                    f"({running[i2]}); time lookups " + ("may miss records" if running[i2] > timestamp else "skip")
                )
            if problem is not None:
                mismatches.append(f"slot {slot} (timestamp {timestamp}, offset {offset}): {problem}")
                first = first or (slot, offset)
        if not active and scan.batch_count and not mismatches:
            last_ts = index.entries[-1][0] if index.entries else NO_TIMESTAMP
            if last_ts != scan.max_timestamp:
                mismatches.append(
                    f"the last entry's timestamp {last_ts} is not the segment's largest timestamp "
                    f"{scan.max_timestamp} (the entry written at roll is missing); retention and max-timestamp "
                    "lookups see the wrong value"
                )
                first = (len(index.entries), scan.offset_of_max_timestamp)
    if not mismatches or first is None:
        return []
    more = f" (and {len(mismatches) - 1} more mismatching entries)" if len(mismatches) > 1 else ""
    check = Check.TIME_INDEX if index.kind == "time" else Check.OFFSET_INDEX
    return [
        Finding(Severity.ERROR, check, p, f"{mismatches[0]}{more}; {INDEX_HINT}",
                position=first[0] * index.entry_size, offset=first[1])
    ]
