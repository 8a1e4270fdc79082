"""Read-only inspection of a log directory: describe, dump, verify, lookup explanation.

Owns the logic behind ``seglog dump``, ``verify`` and ``explain`` (the command
line only prints what this module returns; ``recover --dry-run`` is
``engine.loader.dry_run_recovery``, the open's own rules), and the
segment listing a data source needs to split a partition into input ranges
(:func:`list_segments`: base offsets, sizes and each segment's successor).

Everything here is synchronous and works on files directly, never through an
``Engine``: it takes no lock, opens every file read-only, writes nothing, and
trusts no byte it reads. A damaged file is a :class:`Finding`, not an
exception; every scan is bounded by the file's size (taken once, when the file
is opened, so a file that grows meanwhile is read up to that size), and every
read of a batch is bounded by the topic's largest batch size before anything
is allocated. Files are read with ``pread`` in chunks of ``SCAN_CHUNK_BYTES``
rather than mmap'd: a live engine may truncate a file under us, which turns an
mmap access into SIGBUS but a ``pread`` only into a short read.

Inspecting a directory an engine has open is allowed and safe, but racy by
nature: the active segment may show a torn tail that is simply an append in
flight, and its indexes are preallocated (zero slots) until the engine closes.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log`` (it must work
on directories an engine would refuse, and without an event loop).
"""

from __future__ import annotations

import enum
import json
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from seglog.engine._fs import CLEAN_SHUTDOWN_FILE, TOPIC_FILE
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, parse_checkpoint
from seglog.engine.config import LogConfig
from seglog.engine.errors import CorruptionError, InvalidConfigError, StorageError, UnknownTopicOrPartitionError
from seglog.engine.groups import decode_group_file, group_from_file_name, is_group_file_name
from seglog.engine.names import parse_partition_dir, partition_dir_name, validate_topic
from seglog.indexes.offset_index import OFFSET_ENTRY, OffsetPosition
from seglog.indexes.search import largest_lower_bound
from seglog.indexes.time_index import NO_TIMESTAMP, TIME_ENTRY, TimestampOffset
from seglog.indexes.transaction_index import ABORTED_TXN, ABORTED_TXN_VERSION, AbortedTxn
from seglog.segments.batch import (
    HEADER_SIZE,
    BatchHeader,
    ScanStop,
    decode_batch,
    header_problem,
    read_header,
    scan_batches,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "BatchInfo",
    "Check",
    "Finding",
    "IndexDump",
    "IndexProbe",
    "LogDirInfo",
    "LookupExplanation",
    "PartitionInfo",
    "LEFTOVER_SUFFIXES",
    "ScannedBatch",
    "SegmentInfo",
    "SegmentScan",
    "Severity",
    "TailKind",
    "TxnIndexDump",
    "VerifyProgress",
    "VerifyReport",
    "base_offset_of",
    "describe_log_dir",
    "describe_partition",
    "dump_index",
    "dump_log",
    "dump_txn_index",
    "explain_offset",
    "explain_timestamp",
    "group_offsets",
    "index_sanity_check",
    "list_segments",
    "max_batch_bytes_for",
    "offset_for_timestamp",
    "partition_info",
    "read_records",
    "scan_segment",
    "segment_file_name",
    "verify",
    "verify_index_against_log",
]

# --- File names (part of the on-disk layout, docs/FORMAT.md and docs/OPERATIONS.md §1) ---
LOG_SUFFIX: Final = ".log"
INDEX_SUFFIX: Final = ".index"
TIME_INDEX_SUFFIX: Final = ".timeindex"
TXN_INDEX_SUFFIX: Final = ".txnindex"
INDEX_SUFFIXES: Final = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
FILE_NAME_DIGITS: Final = 20  # base offset, zero-padded (Kafka's LogFileUtils)
# Suffixes a segment file carries while it waits for deletion or a swap (Kafka's).
PENDING_SUFFIXES: Final = (".deleted", ".cleaned", ".swap")
GROUPS_DIR: Final = "consumer-offsets"

# 8 MiB per pread: the copy dwarfs the syscall's cost,
# while a verifier walking a 1 GiB segment holds one chunk, not the file.
SCAN_CHUNK_BYTES: Final = 8 << 20
# An index larger than this is not one seglog wrote (segment.index.bytes is an
# int32 config; Kafka's default is 10 MiB); it is reported, not read.
MAX_INDEX_FILE_BYTES: Final = 1 << 30
INT32_MAX: Final = 2**31 - 1
_INDEX_HINT: Final = "indexes are rebuilt from the .log on open, or run 'seglog recover DIR'"
_LOG_HINT: Final = "recovery truncates the segment here ('seglog recover DIR')"


# =============================================================================================
# Findings
# =============================================================================================


class Severity(enum.StrEnum):
    """How bad a :class:`Finding` is. ``verify`` fails (exit 1) on errors and warnings."""

    ERROR = "error"  # bytes are wrong or inconsistent: recovery would cut or rebuild something
    WARNING = "warning"  # consistent but not what seglog leaves behind (stray files, gaps, stale checkpoints)
    INFO = "info"  # normal for a running or crashed engine (preallocated index slots of the active segment)


class Check(enum.StrEnum):
    """What a finding is about: stable names for scripts and ``--json`` output."""

    DIRECTORY = "directory"  # the log directory or a partition directory itself
    FILE_NAME = "file-name"  # a segment file whose name is not a 20-digit base offset
    TOPIC_FILE = "topic-file"  # <topic>-<p>/topic.json
    CHECKPOINT = "checkpoint"  # recovery-point / log-start-offset checkpoint files
    GROUP_FILE = "group-file"  # consumer-offsets/<group>.json
    BATCH = "batch"  # an invalid batch (magic, length, CRC, offsets): it and all after it would be cut
    TORN_TAIL = "torn-tail"  # the last batch (or its header) is cut short: a torn write
    ZERO_TAIL = "zero-tail"  # preallocated zero bytes after the last batch
    OFFSETS = "offsets"  # offsets out of order, overlapping or missing between segments
    RECORDS = "records"  # record-level problems found by deep iteration
    OFFSET_INDEX = "offset-index"
    TIME_INDEX = "time-index"
    TXN_INDEX = "txn-index"
    INDEX_SIZE = "index-size"  # index length not a whole number of entries, or untrimmed slots
    ORPHAN = "orphan"  # an index file without its .log
    MISSING_INDEX = "missing-index"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or note) found in one file: where it is, which offsets, what is wrong."""

    severity: Severity
    check: Check
    path: Path
    message: str
    position: int | None = None  # byte position in ``path`` (a batch start, an index slot's byte)
    offset: int | None = None  # the offset involved, when there is one

    def __str__(self) -> str:
        where = f"{self.path}" if self.position is None else f"{self.path} @{self.position}"
        at = "" if self.offset is None else f" (offset {self.offset})"
        return f"{self.severity.value} [{self.check.value}] {where}{at}: {self.message}"


# =============================================================================================
# Segment files
# =============================================================================================


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:0{FILE_NAME_DIGITS}d}{suffix}"


def base_offset_of(path: str | os.PathLike[str]) -> int | None:
    """The base offset a segment file's name stands for, or ``None`` if it is not a 20-digit name."""
    stem = Path(path).name.split(".", 1)[0]
    if len(stem) != FILE_NAME_DIGITS or not stem.isdigit():
        return None
    return int(stem)


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """One segment as the directory listing shows it (no file is read, only ``stat``).

    ``next_base_offset`` is the following segment's base offset (``None`` for the
    last, active segment): the segment holds offsets in
    ``[base_offset, next_base_offset)``. Index sizes are ``None`` when the file
    does not exist.
    """

    base_offset: int
    log_path: Path
    size_bytes: int
    next_base_offset: int | None
    index_bytes: int | None
    time_index_bytes: int | None
    txn_index_bytes: int | None

    @property
    def is_active(self) -> bool:
        """Whether this is the partition's last segment (the one appends go to)."""
        return self.next_base_offset is None

    def sibling(self, suffix: str) -> Path:
        """The path of this segment's file with ``suffix`` (``.index``, ``.timeindex``, ``.txnindex``)."""
        return self.log_path.with_suffix(suffix)


def _file_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"{path}: cannot stat: {exc}") from exc


def _list_dir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except FileNotFoundError as exc:
        raise StorageError(f"{path}: no such directory") from exc
    except NotADirectoryError as exc:
        raise StorageError(f"{path}: not a directory") from exc
    except OSError as exc:
        raise StorageError(f"{path}: cannot list: {exc}") from exc


def list_segments(partition_dir: str | os.PathLike[str]) -> list[SegmentInfo]:
    """The segments of one partition directory, in base-offset order.

    Only ``.log`` files with a 20-digit name count; files pending deletion
    (``.deleted`` etc.) and stray files are ignored here (``verify`` reports them).

    Raises:
        StorageError: the directory is missing or unreadable.
    """
    directory = Path(partition_dir)
    bases = sorted(
        base
        for name in _list_dir(directory)
        if name.endswith(LOG_SUFFIX) and (base := base_offset_of(name)) is not None
        and name == segment_file_name(base)
    )
    out: list[SegmentInfo] = []
    for i, base in enumerate(bases):
        log_path = directory / segment_file_name(base)
        out.append(
            SegmentInfo(
                base_offset=base,
                log_path=log_path,
                size_bytes=_file_size(log_path) or 0,
                next_base_offset=bases[i + 1] if i + 1 < len(bases) else None,
                index_bytes=_file_size(log_path.with_suffix(INDEX_SUFFIX)),
                time_index_bytes=_file_size(log_path.with_suffix(TIME_INDEX_SUFFIX)),
                txn_index_bytes=_file_size(log_path.with_suffix(TXN_INDEX_SUFFIX)),
            )
        )
    return out


# =============================================================================================
# Reading a .log: a bounded, chunked, read-only scan
# =============================================================================================


class TailKind(enum.StrEnum):
    """What follows the last valid batch of a ``.log``, when something does."""

    ZEROS = "zeros"  # only zero bytes: a preallocated file (preallocate=true) or a sparse tail
    INCOMPLETE = "incomplete"  # a batch (or header) cut short: a torn write
    CORRUPT = "corrupt"  # bytes that are not a valid batch: bad magic, length, CRC or offsets


class ScannedBatch(NamedTuple):
    """A batch found by a scan: its position in the file and its header; ``buf[at:]`` holds its bytes."""

    position: int
    header: BatchHeader
    buf: bytes
    at: int

    def records(self, start_offset: int = 0) -> list[Record]:
        """Decode the batch's records (its CRC has been checked).

        Raises:
            CorruptRecordError: the body does not decode (the CRC matched, so the writer wrote it so).
        """
        return decode_batch(self.buf, self.at, self.header, start_offset=start_offset)


class _LogScan:
    """Iterate the valid batches of one ``.log`` from ``start``; afterwards say why it stopped.

    After iteration: ``valid_end`` (position after the last valid batch),
    ``stop`` (``ScanStop``), ``reason`` and ``next_offset``.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_batch_bytes: int,
        next_offset: int,
        start: int = 0,
        chunk_bytes: int = SCAN_CHUNK_BYTES,
    ) -> None:
        self.path = path
        self.max_batch_bytes = max_batch_bytes
        self.next_offset = next_offset
        self.start = start
        self.chunk_bytes = chunk_bytes
        self.valid_end = start
        self.stop = ScanStop.END
        self.reason = ""
        self.file_bytes = 0

    def __iter__(self) -> Iterator[ScannedBatch]:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot open: {exc}") from exc
        try:
            yield from self._scan(fd)
        finally:
            os.close(fd)

    def _scan(self, fd: int) -> Iterator[ScannedBatch]:
        try:
            end = self.file_bytes = os.fstat(fd).st_size
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot stat: {exc}") from exc
        pos, chunk = self.start, self.chunk_bytes
        while pos < end:
            want = min(chunk, end - pos)
            try:
                buf = os.pread(fd, want, pos)
            except OSError as exc:
                raise StorageError(f"{self.path}: cannot read {want} bytes at {pos}: {exc}") from exc
            if len(buf) < want:  # the file shrank under us (a live engine truncated it)
                end = self.file_bytes = pos + len(buf)
                if not buf:
                    break
            res = scan_batches(buf, 0, max_batch_bytes=self.max_batch_bytes, next_offset=self.next_offset)
            for at, header in res.batches:
                yield ScannedBatch(pos + at, header, buf, at)
            self.next_offset = res.next_offset
            if res.stop is ScanStop.END:
                pos, chunk = pos + res.valid_end, self.chunk_bytes
                continue
            if res.stop is ScanStop.INCOMPLETE and pos + len(buf) < end:
                # The batch runs on past this chunk, not past the file: read from its start,
                # a chunk big enough for it (its header passed the size check, so it is bounded).
                if res.valid_end == 0:
                    # Only the header fits, or not even that: grow the chunk to the whole batch.
                    need = read_header(buf, 0).size if len(buf) >= HEADER_SIZE else HEADER_SIZE
                    chunk = max(self.chunk_bytes, need)
                pos += res.valid_end
                continue
            self.valid_end, self.stop, self.reason = pos + res.valid_end, res.stop, res.reason
            return
        self.valid_end, self.stop, self.reason = pos, ScanStop.END, ""


def _all_zero_from(path: Path, position: int) -> bool:
    """Whether every byte of ``path`` from ``position`` to the end is zero (read in chunks)."""
    try:
        with open(path, "rb") as f:
            f.seek(position)
            while chunk := f.read(SCAN_CHUNK_BYTES):
                if chunk.count(0) != len(chunk):
                    return False
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc}") from exc
    return True


@dataclass(slots=True)
class SegmentScan:
    """What one pass over a ``.log`` found (headers and CRCs checked; bodies not decoded).

    ``next_offset`` is one past the last valid offset (the base offset when the
    segment holds no valid batch). When ``keep_batches`` was asked for, the
    per-batch columns (``positions``, ``base_offsets``, ``last_offsets``,
    ``max_timestamps``) are filled, 8 bytes per value.
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
    positions: array[int] = field(default_factory=lambda: array("q"))
    base_offsets: array[int] = field(default_factory=lambda: array("q"))
    last_offsets: array[int] = field(default_factory=lambda: array("q"))
    max_timestamps: array[int] = field(default_factory=lambda: array("q"))

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

    ``base_offset`` defaults to the one in the file name (0 if the name has none).
    ``on_bytes(n)`` is called as the scan advances (for progress bars).

    Raises:
        StorageError: the file cannot be opened or read.
    """
    path = Path(log_path)
    base = base_offset if base_offset is not None else (base_offset_of(path) or 0)
    scan = _LogScan(path, max_batch_bytes=max_batch_bytes, next_offset=base)
    out = SegmentScan(path, base, 0, 0, 0, 0, None, base, NO_TIMESTAMP, -1, None, "")
    reported = 0
    for batch in scan:
        h = batch.header
        if out.first_offset is None:
            out.first_offset = h.base_offset
        out.batch_count += 1
        out.record_count += h.record_count
        if h.max_timestamp > out.max_timestamp:
            out.max_timestamp, out.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        if keep_batches:
            out.positions.append(batch.position)
            out.base_offsets.append(h.base_offset)
            out.last_offsets.append(h.last_offset)
            out.max_timestamps.append(h.max_timestamp)
        if on_bytes is not None and batch.position - reported >= SCAN_CHUNK_BYTES:
            on_bytes(batch.position - reported)
            reported = batch.position
    out.file_bytes, out.valid_bytes, out.next_offset = scan.file_bytes, scan.valid_end, scan.next_offset
    if on_bytes is not None and out.file_bytes > reported:
        on_bytes(out.file_bytes - reported)
    if scan.stop is not ScanStop.END:
        out.reason = scan.reason
        if _all_zero_from(path, scan.valid_end):
            out.tail = TailKind.ZEROS
        else:
            out.tail = TailKind.INCOMPLETE if scan.stop is ScanStop.INCOMPLETE else TailKind.CORRUPT
    return out


# =============================================================================================
# Index files
# =============================================================================================


def _read_index_bytes(path: Path) -> bytes:
    size = _file_size(path)
    if size is None:
        raise StorageError(f"{path}: no such file")
    if size > MAX_INDEX_FILE_BYTES:
        raise StorageError(f"{path}: {size} bytes, larger than any index seglog writes ({MAX_INDEX_FILE_BYTES})")
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError as exc:
        raise StorageError(f"{path}: cannot read: {exc}") from exc


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
    is_time = p.name.split(".", 1)[-1].startswith("timeindex")
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
        return _txn_index_findings(dump_txn_index(p), None)
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
                f"({dump.partial_bytes} stray bytes); {_INDEX_HINT}",
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
                   else f"although the segment is not active (an unclean stop); {_INDEX_HINT}"),
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
                Finding(Severity.ERROR, check, p, f"slot {slot}: {problem}; {_INDEX_HINT}",
                        position=slot * dump.entry_size, offset=offset)
            )
            break  # one out-of-order entry makes every later comparison noise
        previous = (a, b)
    return out


def _txn_index_findings(dump: TxnIndexDump, next_offset: int | None) -> list[Finding]:
    out: list[Finding] = []
    p = dump.path
    if dump.partial_bytes:
        out.append(
            Finding(Severity.ERROR, Check.INDEX_SIZE, p,
                    f"{dump.partial_bytes} trailing byte(s) after {len(dump.entries)} whole "
                    f"{ABORTED_TXN.size}-byte entries (a torn write); {_INDEX_HINT}",
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
            out.append(Finding(Severity.ERROR, Check.TXN_INDEX, p, f"slot {slot}: {problem}; {_INDEX_HINT}",
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
        Finding(Severity.ERROR, check, p, f"{mismatches[0]}{more}; {_INDEX_HINT}",
                position=first[0] * index.entry_size, offset=first[1])
    ]


# =============================================================================================
# Dumping a .log
# =============================================================================================


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """One batch as ``dump`` shows it: position, header fields and (on request) its records."""

    position: int
    header: BatchHeader
    records: list[Record] | None = None


def dump_log(
    path: str | os.PathLike[str],
    *,
    records: bool = False,
    max_bytes: int | None = None,
    max_batch_bytes: int | None = None,
    findings: list[Finding] | None = None,
) -> Iterator[BatchInfo]:
    """Yield the batches of a ``.log`` in file order, like ``kafka-dump-log``.

    With ``records`` every batch's records are decoded and offsets are checked
    record by record (Kafka's ``--deep-iteration``: non-consecutive offsets are
    reported). Stops before the first batch that starts at or beyond
    ``max_bytes``. Problems (a corrupt tail, an undecodable body, an offset gap)
    are appended to ``findings`` when given, never raised.

    Raises:
        StorageError: the file cannot be opened or read.
    """
    p = Path(path)
    base = base_offset_of(p) or 0
    limit = max_batch_bytes if max_batch_bytes is not None else _read_topic_file(p.parent).max_batch_bytes
    scan = _LogScan(p, max_batch_bytes=limit, next_offset=base)
    expected: int | None = None
    sink = findings if findings is not None else []
    for batch in scan:
        if max_bytes is not None and batch.position >= max_bytes:
            return
        recs: list[Record] | None = None
        if records:
            try:
                recs = batch.records()
            except CorruptRecordError as exc:
                sink.append(Finding(Severity.ERROR, Check.RECORDS, p, str(exc), batch.position,
                                    batch.header.base_offset))
            else:
                for rec in recs:
                    if expected is not None and rec.offset != expected:
                        sink.append(Finding(Severity.WARNING, Check.RECORDS, p,
                                            f"non-consecutive offsets: {expected - 1} is followed by {rec.offset}",
                                            batch.position, rec.offset))
                    expected = rec.offset + 1
        yield BatchInfo(batch.position, batch.header, recs)
    if scan.stop is not ScanStop.END and (max_bytes is None or scan.valid_end < max_bytes):
        sink.extend(_tail_findings(p, scan, active=True))


def _tail_findings(path: Path, scan: _LogScan | SegmentScan, *, active: bool) -> list[Finding]:
    """What follows the last valid batch: preallocated zeros (info while active) or a torn/invalid tail."""
    if isinstance(scan, _LogScan):
        valid_end, incomplete = scan.valid_end, scan.stop is ScanStop.INCOMPLETE
        zeros = _all_zero_from(path, valid_end)
    else:
        valid_end, incomplete, zeros = scan.valid_bytes, scan.tail is TailKind.INCOMPLETE, scan.tail is TailKind.ZEROS
    cut, reason, next_offset = scan.file_bytes - valid_end, scan.reason, scan.next_offset
    if zeros:
        return [Finding(Severity.INFO if active else Severity.WARNING, Check.ZERO_TAIL, path,
                        f"{cut} zero byte(s) after the last batch (preallocated, not trimmed); {_LOG_HINT}",
                        valid_end, next_offset)]
    check = Check.TORN_TAIL if incomplete else Check.BATCH
    what = "torn write" if incomplete else "invalid batch"
    return [Finding(Severity.ERROR, check, path,
                    f"{what} at position {valid_end}: {reason}; {cut} byte(s) after the last valid batch; {_LOG_HINT}",
                    valid_end, next_offset)]


# =============================================================================================
# Describing a directory
# =============================================================================================


@dataclass(frozen=True, slots=True)
class _TopicMeta:
    partitions: int | None
    overrides: dict[str, Any]
    config: LogConfig
    problem: str | None

    @property
    def max_batch_bytes(self) -> int:
        # The bound the engine's recovery uses: no valid batch is larger.
        return max(self.config.max_message_bytes, self.config.segment_bytes)


def _read_topic_file(partition_dir: Path) -> _TopicMeta:
    path = partition_dir / TOPIC_FILE
    try:
        raw = path.read_bytes() if path.stat().st_size <= 1 << 20 else None
    except FileNotFoundError:
        return _TopicMeta(None, {}, LogConfig(), None)
    except OSError as exc:
        return _TopicMeta(None, {}, LogConfig(), f"cannot read: {exc}")
    if raw is None:
        return _TopicMeta(None, {}, LogConfig(), "larger than 1 MiB; not a topic file")
    try:
        meta = json.loads(raw)
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
        overrides = meta.get("config", {})
        if not isinstance(overrides, dict):
            raise ValueError("'config' is not an object")
        partitions = meta.get("partitions")
        if partitions is not None and (not isinstance(partitions, int) or partitions < 1):
            raise ValueError(f"'partitions' is {partitions!r}")
        config = LogConfig.from_properties(overrides)
    except (ValueError, InvalidConfigError) as exc:
        return _TopicMeta(None, {}, LogConfig(), f"unreadable ({exc}); the engine uses its default config")
    return _TopicMeta(partitions, dict(overrides), config, None)


def max_batch_bytes_for(partition_dir: str | os.PathLike[str]) -> int:
    """The largest batch a partition's config allows: the bound every scan puts on a batch length.

    From the partition's ``topic.json`` overrides over Kafka's defaults (the
    engine's recovery uses the same bound); the defaults when it is unreadable.
    """
    return _read_topic_file(Path(partition_dir)).max_batch_bytes


def _read_checkpoint(log_dir: Path, name: str) -> tuple[dict[tuple[str, int], int] | None, str | None]:
    """(offsets, problem): offsets is ``None`` when the file is missing or unreadable."""
    path = log_dir / name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read: {exc}"
    try:
        return parse_checkpoint(data, name=name), None
    except CorruptionError as exc:
        return None, str(exc)


def _trusted_index_position(seg: SegmentInfo, target: int | None, max_batch_bytes: int) -> tuple[int, int]:
    """(position, base offset of the batch there) to start a scan for ``target`` (``None``: the last entry).

    The offset index's floor entry is used only when a plausible batch holding
    its offset starts at its position; otherwise (no index, a garbage index)
    the scan starts at the segment's beginning. Never trusts the index blindly:
    a wrong position would make a scan stop early and hide records.
    """
    if not seg.index_bytes:
        return 0, seg.base_offset
    try:
        entries = dump_index(seg.sibling(INDEX_SUFFIX), base_offset=seg.base_offset).entries
    except StorageError:
        return 0, seg.base_offset
    keys = [e[0] for e in entries]
    slot = len(entries) - 1 if target is None else bisect_right(keys, target) - 1
    if slot < 0:
        return 0, seg.base_offset
    offset, position = entries[slot]
    try:
        with open(seg.log_path, "rb") as f:
            f.seek(position)
            header = read_header(f.read(HEADER_SIZE))
    except (OSError, CorruptRecordError):
        return 0, seg.base_offset
    if header_problem(header, max_batch_bytes) is None and header.base_offset <= offset <= header.last_offset:
        return position, header.base_offset
    return 0, seg.base_offset


def _last_segment_next_offset(seg: SegmentInfo, max_batch_bytes: int) -> int:
    """The next offset after the last batch of ``seg``, scanning from its last offset-index entry."""
    start, next_offset = _trusted_index_position(seg, None, max_batch_bytes)
    scan = _LogScan(seg.log_path, max_batch_bytes=max_batch_bytes, next_offset=next_offset, start=start)
    for _ in scan:
        pass
    return scan.next_offset


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition: its segments, offsets and what the checkpoints say about it.

    ``log_end_offset`` is found by scanning the last segment from its last
    offset-index entry (the engine does the same at open); ``log_start_offset``
    is the checkpointed value, or the first segment's base offset.
    """

    topic: str
    partition: int
    directory: Path
    segments: list[SegmentInfo]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int | None
    size_bytes: int
    overrides: dict[str, Any]


def describe_partition(
    partition_dir: str | os.PathLike[str],
    *,
    log_start_offsets: dict[tuple[str, int], int] | None = None,
    recovery_points: dict[tuple[str, int], int] | None = None,
) -> PartitionInfo:
    """Describe one ``<topic>-<partition>`` directory.

    Raises:
        StorageError: the directory (or a segment) cannot be read, or its name is
            not ``<topic>-<partition>``.
    """
    directory = Path(partition_dir)
    parsed = parse_partition_dir(directory.name)
    if parsed is None:
        raise StorageError(f"{directory}: not a partition directory (expected <topic>-<partition>)")
    meta = _read_topic_file(directory)
    segments = list_segments(directory)
    if segments:
        first_base = segments[0].base_offset
        end = _last_segment_next_offset(segments[-1], meta.max_batch_bytes)
    else:
        first_base = end = 0
    start = (log_start_offsets or {}).get(parsed, first_base)
    return PartitionInfo(
        topic=parsed[0],
        partition=parsed[1],
        directory=directory,
        segments=segments,
        log_start_offset=min(max(start, first_base), end),
        log_end_offset=end,
        recovery_point=(recovery_points or {}).get(parsed),
        size_bytes=sum(s.size_bytes for s in segments),
        overrides=meta.overrides,
    )


@dataclass(frozen=True, slots=True)
class LogDirInfo:
    """A log directory: its partitions (by topic) and the state files next to them."""

    path: Path
    clean_shutdown: bool
    partitions: list[PartitionInfo]
    recovery_points: dict[tuple[str, int], int] | None
    log_start_offsets: dict[tuple[str, int], int] | None
    groups: list[str]

    def topics(self) -> list[str]:
        """Topic names, sorted."""
        return sorted({p.topic for p in self.partitions})


def _partition_dirs(log_dir: Path) -> list[tuple[tuple[str, int], Path]]:
    out = []
    for name in _list_dir(log_dir):
        parsed = parse_partition_dir(name)
        if parsed is not None and (log_dir / name).is_dir():
            out.append((parsed, log_dir / name))
    return sorted(out)


def _groups(log_dir: Path) -> list[str]:
    gdir = log_dir / GROUPS_DIR
    if not gdir.is_dir():
        return []
    groups = []
    for name in _list_dir(gdir):
        if not is_group_file_name(name):
            continue
        try:
            groups.append(decode_group_file((gdir / name).read_bytes())[0])
        except (OSError, ValueError, TypeError, KeyError):
            # Unreadable (verify reports it; the engine skips it): name it from its file name if it can.
            fallback = group_from_file_name(name)
            if fallback is not None:
                groups.append(fallback)
    return sorted(groups)


def describe_log_dir(log_dir: str | os.PathLike[str], *, topic: str | None = None) -> LogDirInfo:
    """Describe a log directory: every partition (or only ``topic``'s) with its segments and offsets.

    Raises:
        StorageError: the directory is missing or unreadable.
        InvalidTopicError: ``topic`` is not a legal topic name.
    """
    path = Path(log_dir)
    if topic is not None:
        validate_topic(topic)
    if not path.is_dir():
        raise StorageError(f"{path}: no such log directory")
    recovery_points, _ = _read_checkpoint(path, RECOVERY_POINT_CHECKPOINT)
    start_offsets, _ = _read_checkpoint(path, LOG_START_OFFSET_CHECKPOINT)
    partitions = [
        describe_partition(d, log_start_offsets=start_offsets, recovery_points=recovery_points)
        for (t, _p), d in _partition_dirs(path)
        if topic is None or t == topic
    ]
    return LogDirInfo(
        path=path,
        clean_shutdown=(path / CLEAN_SHUTDOWN_FILE).exists(),
        partitions=partitions,
        recovery_points=recovery_points,
        log_start_offsets=start_offsets,
        groups=_groups(path),
    )


# =============================================================================================
# Verify
# =============================================================================================


@dataclass(frozen=True, slots=True)
class VerifyProgress:
    """Reported to ``verify(on_progress=...)`` as the scan advances through the ``.log`` bytes."""

    bytes_done: int
    bytes_total: int
    path: Path


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` checked and found. ``ok`` when no finding is an error or a warning."""

    path: Path
    findings: list[Finding]
    partitions: int
    segments: int
    batches: int
    records: int
    bytes_checked: int
    indexes_checked: int
    segments_skipped: int = 0  # not modified since ``since_ms``

    @property
    def ok(self) -> bool:
        return not any(f.severity is not Severity.INFO for f in self.findings)

    @property
    def bad_files(self) -> list[Path]:
        """Files with an error or a warning, each once, in the order found."""
        seen: dict[Path, None] = {}
        for f in self.findings:
            if f.severity is not Severity.INFO:
                seen.setdefault(f.path)
        return list(seen)


class _Verifier:
    def __init__(self, on_progress: Callable[[VerifyProgress], None] | None, deep: bool,
                 since_ms: int | None) -> None:
        self.findings: list[Finding] = []
        self.on_progress = on_progress
        self.total = 0
        self.done = 0
        self.deep = deep
        self.since_ms = since_ms
        self.segments = self.batches = self.records = self.indexes = self.skipped = 0

    def selected(self, seg: SegmentInfo) -> bool:
        """Whether ``seg`` is checked: always, or (``since_ms``) when one of its files changed since then."""
        if self.since_ms is None:
            return True
        newest = 0
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            try:
                newest = max(newest, seg.sibling(suffix).stat().st_mtime_ns // 1_000_000)
            except OSError:
                continue
        return newest >= self.since_ms

    def add(self, severity: Severity, check: Check, path: Path, message: str, *,
            position: int | None = None, offset: int | None = None) -> None:
        self.findings.append(Finding(severity, check, path, message, position, offset))

    def advance(self, n: int, path: Path) -> None:
        self.done += n
        if self.on_progress is not None:
            self.on_progress(VerifyProgress(self.done, self.total, path))

    def partition(self, directory: Path, *, clean_shutdown: bool) -> tuple[int, int] | None:
        """Verify one partition directory; returns (first base offset, log end offset) or None if empty."""
        meta = _read_topic_file(directory)
        if meta.problem is not None:
            self.add(Severity.WARNING, Check.TOPIC_FILE, directory / TOPIC_FILE, meta.problem)
        names = _list_dir(directory)
        self._stray_files(directory, names)
        segments = list_segments(directory)
        previous_next: int | None = None
        for seg in segments:
            if not self.selected(seg):
                self.skipped += 1
                # Not scanned: its successor's base offset cannot be checked against it.
                previous_next = None if seg.next_base_offset is not None else _last_segment_next_offset(
                    seg, meta.max_batch_bytes)
                continue
            self.segments += 1
            try:
                next_offset = self.segment(seg, meta, clean_shutdown=clean_shutdown)
            except StorageError as exc:  # unreadable, not inconsistent: name it and go on
                self.add(Severity.ERROR, Check.DIRECTORY, seg.log_path, str(exc))
                previous_next = None
                continue
            if previous_next is not None:
                if seg.base_offset < previous_next:
                    self.add(Severity.ERROR, Check.OFFSETS, seg.log_path,
                             f"base offset {seg.base_offset} is below the previous segment's next offset "
                             f"{previous_next}: the segments overlap", position=0, offset=seg.base_offset)
                elif seg.base_offset > previous_next:
                    self.add(Severity.WARNING, Check.OFFSETS, seg.log_path,
                             f"offsets {previous_next}..{seg.base_offset - 1} are missing between this segment "
                             "and the previous one", position=0, offset=previous_next)
            previous_next = next_offset
        if not segments:
            self.add(Severity.WARNING, Check.DIRECTORY, directory, "partition directory holds no segment")
            return None
        assert previous_next is not None
        return segments[0].base_offset, previous_next

    def _stray_files(self, directory: Path, names: Sequence[str]) -> None:
        logs = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        for name in names:
            path = directory / name
            stem, _, suffix = name.partition(".")
            if name.endswith(LEFTOVER_SUFFIXES):
                self.add(Severity.INFO, Check.FILE_NAME, path,
                         "a leftover of an interrupted deletion, swap or write; the engine removes it at open")
            elif "." + suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
                if base_offset_of(name) is None or name != segment_file_name(int(stem), "." + suffix):
                    self.add(Severity.WARNING, Check.FILE_NAME, path,
                             f"not a segment file name (a {FILE_NAME_DIGITS}-digit base offset is expected); ignored")
                elif "." + suffix != LOG_SUFFIX and stem not in logs:
                    self.add(Severity.WARNING, Check.ORPHAN, path,
                             f"index file without {stem}{LOG_SUFFIX}; the engine removes it at open")

    def segment(self, seg: SegmentInfo, meta: _TopicMeta, *, clean_shutdown: bool) -> int:
        """Verify one segment and its indexes; returns its next offset."""
        active = seg.is_active and not clean_shutdown
        scan = scan_segment(seg.log_path, max_batch_bytes=meta.max_batch_bytes, base_offset=seg.base_offset,
                            keep_batches=True, on_bytes=lambda n: self.advance(n, seg.log_path))
        self.batches += scan.batch_count
        self.records += scan.record_count
        if scan.tail is not None:
            self.findings.extend(_tail_findings(seg.log_path, scan, active=active))
        if scan.batch_count and scan.next_offset - 1 - seg.base_offset > INT32_MAX:
            self.add(Severity.ERROR, Check.OFFSETS, seg.log_path,
                     f"last offset {scan.next_offset - 1} cannot be stored relative to base offset "
                     f"{seg.base_offset} (more than 2**31-1 above it)", offset=scan.next_offset - 1)
        if not seg.is_active and scan.batch_count == 0 and scan.tail is None:
            self.add(Severity.INFO, Check.OFFSETS, seg.log_path, "an empty segment that is not the last one")
        if self.deep:
            deep: list[Finding] = []
            for _ in dump_log(seg.log_path, records=True, max_batch_bytes=meta.max_batch_bytes, findings=deep):
                pass
            self.findings.extend(f for f in deep if f.check is Check.RECORDS)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = seg.sibling(suffix)
            size = seg.index_bytes if suffix == INDEX_SUFFIX else seg.time_index_bytes
            if size is None:
                self.add(Severity.INFO, Check.MISSING_INDEX, path,
                         "missing; the engine rebuilds it from the .log at open")
                continue
            self.indexes += 1
            try:
                sane = index_sanity_check(path, active=seg.is_active and not clean_shutdown)
                self.findings.extend(sane)
                if not any(f.severity is Severity.ERROR for f in sane):
                    dump = dump_index(path, base_offset=seg.base_offset)
                    self.findings.extend(verify_index_against_log(dump, scan, active=seg.is_active))
            except StorageError as exc:
                self.add(Severity.ERROR, Check.INDEX_SIZE, path, str(exc))
        if seg.txn_index_bytes is not None:
            self.indexes += 1
            try:
                dump_txn = dump_txn_index(seg.sibling(TXN_INDEX_SUFFIX), base_offset=seg.base_offset)
                self.findings.extend(_txn_index_findings(dump_txn, scan.next_offset))
            except StorageError as exc:
                self.add(Severity.ERROR, Check.TXN_INDEX, seg.sibling(TXN_INDEX_SUFFIX), str(exc))
        return scan.next_offset


def _total_log_bytes(dirs: Sequence[Path], keep: Callable[[SegmentInfo], bool] = lambda s: True) -> int:
    return sum(s.size_bytes for d in dirs for s in list_segments(d) if keep(s))


def verify(
    path: str | os.PathLike[str],
    *,
    deep: bool = False,
    since_ms: int | None = None,
    on_progress: Callable[[VerifyProgress], None] | None = None,
) -> VerifyReport:
    """Check every segment and index under ``path`` (a log directory or one partition directory).

    Checks: batch headers and CRCs; offsets increasing within a segment and
    contiguous across segments; the tail of each ``.log`` (torn write, garbage,
    preallocated zeros); every offset-index entry points at the start of the
    batch holding its offset; the time index is monotonic and each entry
    carries the largest timestamp up to its offset; index lengths are whole
    entries and untrimmed slots are reported; orphan index files; the
    transaction index; ``topic.json`` files; the checkpoint files parse and do
    not point beyond a partition's log end; consumer-group files parse.
    ``deep`` also decodes every record (Kafka's ``--deep-iteration``);
    ``since_ms`` checks only the segments with a file modified at or after that
    time (epoch ms; the others count as ``segments_skipped``). Opens every file
    read-only and changes nothing.

    Raises:
        StorageError: ``path`` is not a directory or cannot be listed.
    """
    root = Path(path)
    if not root.is_dir():
        raise StorageError(f"{root}: no such directory")
    single = parse_partition_dir(root.name) is not None and not (root / RECOVERY_POINT_CHECKPOINT).exists() and any(
        n.endswith(LOG_SUFFIX) for n in _list_dir(root)
    )
    dirs = [root] if single else [d for _, d in _partition_dirs(root)]
    verifier = _Verifier(on_progress, deep, since_ms)
    verifier.total = _total_log_bytes(dirs, verifier.selected)
    log_dir = root.parent if single else root
    clean_shutdown = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    for d in dirs:
        parsed = parse_partition_dir(d.name)
        result = verifier.partition(d, clean_shutdown=clean_shutdown)
        if parsed is not None and result is not None:
            ranges[parsed] = result
    if not single:
        _verify_checkpoints(verifier, root, ranges)
        _verify_groups(verifier, root)
    return VerifyReport(root, verifier.findings, len(dirs), verifier.segments, verifier.batches,
                        verifier.records, verifier.done, verifier.indexes, verifier.skipped)


def _verify_checkpoints(v: _Verifier, root: Path, ranges: dict[tuple[str, int], tuple[int, int]]) -> None:
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        offsets, problem = _read_checkpoint(root, name)
        path = root / name
        if problem is not None:
            v.add(Severity.ERROR, Check.CHECKPOINT, path,
                  f"{problem}; the engine ignores it and recovers every partition from offset 0")
            continue
        if offsets is None:
            continue
        for (topic, partition), offset in sorted(offsets.items()):
            where = f"{topic} {partition}"
            span = ranges.get((topic, partition))
            if span is None:
                v.add(Severity.WARNING, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' names a partition with no segments here", offset=offset)
            elif offset > span[1]:
                v.add(Severity.ERROR, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' is beyond the partition's log end offset {span[1]}", offset=offset)
            elif name == LOG_START_OFFSET_CHECKPOINT and offset < span[0]:
                v.add(Severity.INFO, Check.CHECKPOINT, path,
                      f"entry '{where} {offset}' is below the first segment's base offset {span[0]} (stale)",
                      offset=offset)


def _verify_groups(v: _Verifier, root: Path) -> None:
    gdir = root / GROUPS_DIR
    if not gdir.is_dir():
        return
    for name in _list_dir(gdir):
        path = gdir / name
        if not is_group_file_name(name):
            continue
        try:
            decode_group_file(path.read_bytes())
        except (OSError, ValueError, TypeError, KeyError) as exc:
            v.add(Severity.WARNING, Check.GROUP_FILE, path,
                  f"unreadable group offsets file ({exc}); the engine skips it and the group starts over")


# Files an engine removes when it loads a partition: leftovers of interrupted deletions, swaps
# and atomic writes (the recovery plan is engine.loader's: plan_recovery, dry_run_recovery).
LEFTOVER_SUFFIXES: Final = (*PENDING_SUFFIXES, ".tmp")


# =============================================================================================
# Lookup explanation
# =============================================================================================


class IndexProbe(NamedTuple):
    """One slot an index search read: the slot number and its key (offset or timestamp)."""

    slot: int
    key: int


class _RecordingKey:
    """A stand-in for an index's key ``struct.Struct`` that records every slot the search reads."""

    def __init__(self, fmt: str, stride: int, field_at: int) -> None:
        self._struct = struct.Struct(fmt)
        self._stride = stride
        self._field = field_at
        self.probes: list[IndexProbe] = []

    def unpack_from(self, buf: bytes, offset: int = 0) -> tuple[int]:
        (value,) = self._struct.unpack_from(buf, offset)
        self.probes.append(IndexProbe((offset - self._field) // self._stride, value))
        return (value,)


def _search(
    data: bytes, entries: int, target: int, column: tuple[str, int, int], *, bias: int
) -> tuple[int | None, list[IndexProbe]]:
    """Run the index layer's own warm-section search over raw slots, recording its probes.

    ``column`` is (struct format of the key, entry size, key's byte offset in the
    entry); ``bias`` is added to each recorded key (the base offset for relative offsets).
    """
    fmt, stride, field_at = column
    key = _RecordingKey(fmt, stride, field_at)
    slot = largest_lower_bound(data, entries, target, key=key, stride=stride, field=field_at)  # type: ignore[arg-type]
    return slot, [IndexProbe(p.slot, p.key + bias) for p in key.probes]


@dataclass(slots=True)
class LookupExplanation:
    """How a lookup by offset or by timestamp finds its answer, step by step.

    ``segment_base_offset``: the segment chosen (``None``: the target is out of
    range). For a timestamp, ``segments_considered`` lists each segment tried
    with its largest timestamp, and ``time_index_*`` describe the time-index
    search (the floor entry and the slots it probed), whose offset then feeds
    the offset-index search; ``offset_index_*`` describe that search (its floor
    entry gives the position the scan starts at). ``batches_scanned`` lists each
    batch read as ``(position, base offset, last offset, max timestamp)``;
    ``bytes_scanned`` counts their bytes. The result is ``result_offset``
    (``None``: no such record) with its timestamp and its batch's position.
    """

    topic: str
    partition: int
    target: str  # "offset" or "timestamp"
    value: int
    log_start_offset: int
    log_end_offset: int
    message: str = ""
    segments_considered: list[tuple[int, int]] = field(default_factory=list)
    segment_base_offset: int | None = None
    segment_path: Path | None = None
    time_index_entry: TimestampOffset | None = None
    time_index_probes: list[IndexProbe] = field(default_factory=list)
    offset_index_target: int | None = None
    offset_index_entry: OffsetPosition | None = None
    offset_index_probes: list[IndexProbe] = field(default_factory=list)
    index_entries: int = 0
    scan_start_position: int | None = None
    batches_scanned: list[tuple[int, int, int, int]] = field(default_factory=list)
    bytes_scanned: int = 0
    result_offset: int | None = None
    result_timestamp: int | None = None
    result_position: int | None = None


def _partition_view(log_dir: Path, topic: str, partition: int) -> tuple[PartitionInfo, _TopicMeta]:
    directory = log_dir / partition_dir_name(topic, partition)
    if not log_dir.is_dir():
        raise StorageError(f"{log_dir}: no such log directory")
    if not directory.is_dir():
        raise UnknownTopicOrPartitionError(f"{directory}: no such partition directory")
    start_offsets, _ = _read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
    return describe_partition(directory, log_start_offsets=start_offsets), _read_topic_file(directory)


def _search_offset_index(out: LookupExplanation, seg: SegmentInfo, target: int) -> OffsetPosition:
    """Floor lookup of ``target`` in ``seg``'s offset index, recorded in ``out``."""
    entry = OffsetPosition(seg.base_offset, 0)
    out.offset_index_target = target
    if seg.index_bytes:
        dump = dump_index(seg.sibling(INDEX_SUFFIX), base_offset=seg.base_offset)
        # The search runs on raw slots, exactly as the index layer's lookup does.
        data = b"".join(OFFSET_ENTRY.pack(o - seg.base_offset, p) for o, p in dump.entries)
        slot, out.offset_index_probes = _search(data, len(dump.entries), target - seg.base_offset,
                                                (">i", OFFSET_ENTRY.size, 0), bias=seg.base_offset)
        out.index_entries = len(dump.entries)
        if slot is not None:
            entry = OffsetPosition(*dump.entries[slot])
    out.offset_index_entry = entry
    return entry


def _scan_until(
    out: LookupExplanation, seg: SegmentInfo, start: int, meta: _TopicMeta, done: Callable[[ScannedBatch], bool]
) -> ScannedBatch | None:
    """Scan ``seg`` from ``start`` until ``done(batch)``, recording each batch read in ``out``."""
    out.scan_start_position = start
    scan = _LogScan(seg.log_path, max_batch_bytes=meta.max_batch_bytes, next_offset=seg.base_offset, start=start)
    for batch in scan:
        h = batch.header
        out.batches_scanned.append((batch.position, h.base_offset, h.last_offset, h.max_timestamp))
        out.bytes_scanned += h.size
        if done(batch):
            out.result_position = batch.position
            return batch
    return None


def explain_offset(log_dir: str | os.PathLike[str], topic: str, partition: int, offset: int) -> LookupExplanation:
    """Explain how a read at ``offset`` finds its batch: segment, offset-index search, scan.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    info, meta = _partition_view(Path(log_dir), topic, partition)
    out = LookupExplanation(topic, partition, "offset", offset, info.log_start_offset, info.log_end_offset)
    if not info.log_start_offset <= offset < info.log_end_offset or not info.segments:
        why = "below the log start offset" if offset < info.log_start_offset else "at or beyond the log end offset"
        out.message = (f"offset {offset} is {why} (log {info.log_start_offset}..{info.log_end_offset}); "
                       "a read there raises OffsetOutOfRangeError")
        return out
    bases = [s.base_offset for s in info.segments]
    seg = info.segments[max(0, bisect_right(bases, offset) - 1)]
    out.segment_base_offset, out.segment_path = seg.base_offset, seg.log_path
    entry = _search_offset_index(out, seg, offset)
    hit = _scan_until(out, seg, entry.position, meta, lambda b: b.header.last_offset >= offset)
    if hit is not None:
        try:
            recs = hit.records(start_offset=offset)
        except CorruptRecordError:
            recs = []
        if recs:
            out.result_offset, out.result_timestamp = recs[0].offset, recs[0].timestamp
    out.message = (
        f"offset {offset}: segment {seg.base_offset}, offset-index entry {tuple(entry)} after "
        f"{len(out.offset_index_probes)} probe(s) of {out.index_entries} entries, {len(out.batches_scanned)} "
        f"batch(es) / {out.bytes_scanned} bytes scanned from position {entry.position} -> "
        + ("no record" if out.result_offset is None else f"offset {out.result_offset} in the batch at position "
           f"{out.result_position}")
    )
    return out


def _largest_timestamp(seg: SegmentInfo, meta: _TopicMeta) -> int:
    """A segment's largest timestamp: its time index's last entry, or a scan when that may be stale."""
    if seg.time_index_bytes and not seg.is_active:
        try:
            entries = dump_index(seg.sibling(TIME_INDEX_SUFFIX), base_offset=seg.base_offset).entries
        except StorageError:
            entries = []
        if entries:
            return entries[-1][0]
    return scan_segment(seg.log_path, max_batch_bytes=meta.max_batch_bytes, base_offset=seg.base_offset).max_timestamp


def explain_timestamp(
    log_dir: str | os.PathLike[str], topic: str, partition: int, timestamp: int
) -> LookupExplanation:
    """Explain how ``offset_for_timestamp(timestamp)`` finds the earliest offset whose timestamp is >= it.

    Segments are tried in order; the first whose largest timestamp is ``>=
    timestamp`` is searched: time index (floor entry), then the offset index at
    that entry's offset, then a scan for the first batch whose max timestamp is
    ``>= timestamp`` and the first record in it at or above the timestamp.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    info, meta = _partition_view(Path(log_dir), topic, partition)
    out = LookupExplanation(topic, partition, "timestamp", timestamp, info.log_start_offset, info.log_end_offset)
    chosen: SegmentInfo | None = None
    for seg in info.segments:
        largest = _largest_timestamp(seg, meta)
        out.segments_considered.append((seg.base_offset, largest))
        if largest >= timestamp:
            chosen = seg
            break
    if chosen is None:
        out.message = f"no record has a timestamp >= {timestamp}: offset_for_timestamp returns None"
        return out
    out.segment_base_offset, out.segment_path = chosen.base_offset, chosen.log_path
    tentry = TimestampOffset(NO_TIMESTAMP, chosen.base_offset)
    if chosen.time_index_bytes:
        tdump = dump_index(chosen.sibling(TIME_INDEX_SUFFIX), base_offset=chosen.base_offset)
        data = b"".join(TIME_ENTRY.pack(t, o - chosen.base_offset) for t, o in tdump.entries)
        slot, out.time_index_probes = _search(data, len(tdump.entries), timestamp, (">q", TIME_ENTRY.size, 0), bias=0)
        if slot is not None:
            tentry = TimestampOffset(*tdump.entries[slot])
    out.time_index_entry = tentry
    start_offset = max(tentry.offset, info.log_start_offset)
    entry = _search_offset_index(out, chosen, start_offset)
    hit = _scan_until(out, chosen, entry.position, meta,
                      lambda b: b.header.max_timestamp >= timestamp and b.header.last_offset >= start_offset)
    if hit is not None:
        try:
            recs = hit.records(start_offset=start_offset)
        except CorruptRecordError:
            recs = []
        for rec in recs:
            if rec.timestamp is not None and rec.timestamp >= timestamp:
                out.result_offset, out.result_timestamp = rec.offset, rec.timestamp
                break
    out.message = (
        f"timestamp {timestamp}: segment {chosen.base_offset}, time-index entry {tuple(tentry)}, offset-index "
        f"entry {tuple(entry)}, {len(out.batches_scanned)} batch(es) / {out.bytes_scanned} bytes scanned -> "
        + ("no record" if out.result_offset is None
           else f"offset {out.result_offset} (timestamp {out.result_timestamp})")
    )
    return out


# =============================================================================================
# Reading records and offsets without an Engine
# =============================================================================================


def partition_info(log_dir: str | os.PathLike[str], topic: str, partition: int) -> PartitionInfo:
    """Describe one partition of a log directory (its segments, log start and end offsets).

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    return _partition_view(Path(log_dir), topic, partition)[0]


def read_records(
    log_dir: str | os.PathLike[str],
    topic: str,
    partition: int,
    start_offset: int,
    *,
    end_offset: int | None = None,
) -> Iterator[Record]:
    """Yield the records of a partition from ``start_offset`` (at least the log start) up to ``end_offset``.

    Reads the files with ``pread`` (never mmap), so it is safe next to a live
    engine that truncates or trims files; it stops at the log end offset found
    when it starts (or ``end_offset``, exclusive), and at a torn tail.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
        CorruptRecordError: a batch whose CRC matches has a body that does not decode.
    """
    info, meta = _partition_view(Path(log_dir), topic, partition)
    start = max(start_offset, info.log_start_offset)
    end = info.log_end_offset if end_offset is None else min(end_offset, info.log_end_offset)
    if start >= end or not info.segments:
        return
    bases = [s.base_offset for s in info.segments]
    for seg in info.segments[max(0, bisect_right(bases, start) - 1):]:
        if seg.base_offset >= end:
            return
        position, next_offset = _trusted_index_position(seg, start, meta.max_batch_bytes)
        scan = _LogScan(seg.log_path, max_batch_bytes=meta.max_batch_bytes, next_offset=next_offset, start=position)
        for batch in scan:
            if batch.header.last_offset < start:
                continue
            if batch.header.base_offset >= end:
                return
            for rec in batch.records(start_offset=start):
                if rec.offset >= end:
                    return
                yield rec


def offset_for_timestamp(
    log_dir: str | os.PathLike[str], topic: str, partition: int, timestamp: int
) -> TimestampOffset | None:
    """What ``PartitionLog.offset_for_timestamp`` answers, computed from the files: ``(timestamp, offset)``.

    ``timestamp`` is epoch ms (the earliest offset whose record timestamp is
    ``>=`` it, ``None`` when there is none) or one of Kafka's sentinels:
    ``-2`` earliest (the log start offset), ``-1`` latest (the log end offset),
    both with timestamp -1; ``-3`` the first record with the largest timestamp.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    if timestamp in (-1, -2):
        info = partition_info(log_dir, topic, partition)
        return TimestampOffset(NO_TIMESTAMP, info.log_end_offset if timestamp == -1 else info.log_start_offset)
    if timestamp == -3:
        info, meta = _partition_view(Path(log_dir), topic, partition)
        largest = max((_largest_timestamp(s, meta) for s in info.segments), default=NO_TIMESTAMP)
        if largest < 0:
            return None
        timestamp = largest
    elif timestamp < 0:
        raise ValueError(f"timestamp {timestamp} is negative and not one of Kafka's sentinels -1, -2, -3")
    ex = explain_timestamp(log_dir, topic, partition, timestamp)
    if ex.result_offset is None or ex.result_timestamp is None:
        return None
    return TimestampOffset(ex.result_timestamp, ex.result_offset)


def group_offsets(log_dir: str | os.PathLike[str]) -> dict[str, dict[tuple[str, int], int]]:
    """Every consumer group's committed offsets, read from ``consumer-offsets/`` (unreadable files skipped).

    Raises:
        StorageError: the log directory is missing or unreadable.
    """
    root = Path(log_dir)
    if not root.is_dir():
        raise StorageError(f"{root}: no such log directory")
    out: dict[str, dict[tuple[str, int], int]] = {}
    gdir = root / GROUPS_DIR
    if not gdir.is_dir():
        return out
    for name in _list_dir(gdir):
        if not is_group_file_name(name):
            continue
        try:
            group, offsets = decode_group_file((gdir / name).read_bytes())
        except (OSError, ValueError, TypeError, KeyError):
            continue
        out[group] = offsets
    return out
