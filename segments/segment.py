"""``LogSegment``: one ``.log`` file of record batches with its offset, time and transaction indexes.

Owns Kafka's ``LogSegment`` behaviour (append with the index-interval rule,
offset translation, reads of whole batches, lookup by timestamp, recovery,
truncation, roll decisions, suffix changes, deletion) and ``LogSegments``, the
ordered map of a partition's segments.

Synchronous: the async edge is the engine's ``PartitionLog``, which runs each
operation in ONE thread hop (aiosqlite's shape). The reads also have a
page-cache attempt (``nowait=True``: ``preadv`` with ``RWF_NOWAIT``, nothing
loaded, no wait), which answers from memory or says ``WOULD_BLOCK``; the
engine makes it on the event loop and, on a miss, runs the same read, blocking,
in its hop. An append is three calls: ``check_append`` (on the loop),
``write_append`` (the blocking write, in the engine's append threads) and
``publish_append`` (the bookkeeping, on the loop when the write returned). A
segment never reads a clock or knows a topic: ``now_ms``,
``index_interval_bytes``, ``max_index_size``, ``roll_jitter_ms`` and the
maximum batch size arrive as arguments. All file I/O goes through
``seglog.segments.fileio`` (``SegmentFile``, ``FileOps``). Index files are
opened lazily (``LazyIndex``), by a blocking call, never by a ``nowait`` one.

Must not import: ``engine`` or ``tools``.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import struct
import threading
import warnings
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final, Generic, NamedTuple, Protocol, TypeVar

from seglog.indexes import AbortedTxn, LazyIndex, OffsetIndex, TimeIndex, TimestampOffset, TransactionIndex
from seglog.indexes.errors import ClosedError, SeglogError, StorageError
from seglog.segments.batch import (
    CONTROL_BIT,
    HEADER,
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    BatchHeader,
    ScanStop,
    check_header,
    decode_batch,
    decode_batches,
    decode_first_batch,
    find_timestamp,
    first_batch_records,
    header_problem,
    index_entry_problem,
    kafka_record_at_time,
    offset_problem,
    read_header,
    record_at_time,
    time_entry_problem,
    verify_crc,
    whole_batches_length,
)
from seglog.segments.batch_table import (
    BYTES_PER_BATCH,
    WALK_MAX_BYTES,
    BatchTable,
    RecordTable,
    TableBudget,
    TableBuild,
    build_record_table,
    default_budget,
    walk_batch_table,
)
from seglog.segments.errors import CorruptRecordError, SegmentOffsetOverflowError, UnsupportedFormatError
from seglog.segments.fileio import (
    WOULD_BLOCK,
    FileOps,
    LateBuffer,
    PRead,
    SegmentFile,
    WouldBlock,
)
from seglog.segments.files import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from seglog.segments.kafka_batch import KAFKA_MAGIC
from seglog.segments.reader import BatchReader, LocatedBatch
from seglog.segments.records import Record

__all__ = [
    "NO_TIMESTAMP",
    "Appended",
    "FetchData",
    "FollowScan",
    "LocatedBatch",
    "LogOffsetMetadata",
    "LogSegment",
    "LogSegments",
    "RollParams",
    "batch_headers",
]

NO_TIMESTAMP: Final = -1  # Kafka's RecordBatch.NO_TIMESTAMP
FIRST_BATCH_TIMESTAMP_UNKNOWN: Final = 2**63 - 1  # Kafka's Long.MAX_VALUE for "no first batch timestamp"
# Reads that walk batch headers fetch this much at a time: between two offset-index entries there
# are about index_interval_bytes (4096 by default) of batches, so one 8 KiB read usually covers the walk.
_HEADER_WINDOW: Final = 8192
# A read by offset walks from its offset-index entry (up to index_interval_bytes before the batch it
# wants, plus the batch holding the entry) into that batch, then needs the batch itself: one 32 KiB
# window covers all of it for batches up to ~14 KB (100 records of 100 B) in one pread, where 8 KiB
# windows took three (walk, walk, batch). Wall time barely moves on a fast machine (the copy grows as
# the syscalls go), but it is one syscall instead of three when syscalls are dear.
_READ_WINDOW: Final = 32 * 1024
_log = logging.getLogger("seglog")
_T = TypeVar("_T")
_EMPTY: Final = memoryview(b"")
_RECOVERY_HINT: Final = "recovery truncates the segment here on open ('seglog recover DIR')"
# A batch at least this large gets a record table once read (RecordTable): a point read then copies
# one record's key and value, not the whole batch, and the CRC is verified once, not at every read.
# Below it, copying and checking the whole batch costs about what the extra reads of a record would.
_RECORD_TABLE_MIN_BYTES: Final = 32 * 1024
# A record-table read takes a batch's header and a record's key in one read when the key ends within this
# many bytes of the batch start: a page copied costs less than a second system call.
_NEAR_KEY_BYTES: Final = 4096
# A time lookup answered from the batch table gives up (the header walk takes over) after this many
# batches that reach the timestamp but hold no record at or after the starting offset.
_TIME_LOOKUP_TRIES: Final = 4
_new_record = partial(tuple.__new__, Record)
_new_timestamp_offset = partial(tuple.__new__, TimestampOffset)  # skips NamedTuple.__new__'s Python frame
_BASE_OFFSET_FIELD: Final = struct.Struct(">q")  # part of the format: a batch's first 8 bytes
_ATTRIBUTES_LOW: Final = 22  # part of the format: the low byte of a batch's big-endian attributes


class RollParams(NamedTuple):
    """What ``should_roll`` needs to know about the next append (Kafka's ``RollParams``)."""

    max_segment_ms: int
    max_segment_bytes: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now_ms: int


class LogOffsetMetadata(NamedTuple):
    """Where a read started: the requested offset, the segment, the batch position (Kafka)."""

    message_offset: int
    segment_base_offset: int
    relative_position: int


class FetchData(NamedTuple):
    """The result of :meth:`LogSegment.read`: whole batches, starting with the one holding the offset.

    ``data`` is a read-only ``memoryview`` of the bytes read (no copy: a page-cache
    read lands in a fresh buffer that nobody else holds); ``bytes(data)`` makes
    a ``bytes`` copy. ``first_entry_incomplete`` is true when the first batch did
    not fit in ``max_bytes`` and ``min_one_message`` was off (then ``data`` is empty).
    """

    offset_metadata: LogOffsetMetadata
    data: memoryview
    first_entry_incomplete: bool = False
    max_bytes: int | None = None  # set when ``data`` is one batch larger than the read's max_bytes

    def records(self, max_offset: int | None = None) -> list[Record]:
        """Decode ``data`` into Records from the requested offset on (CRC verified), below ``max_offset``.

        When the read's ``max_bytes`` was smaller than the first batch (so only
        that batch came back, Kafka's minOneMessage), only the records from the
        requested offset up to about ``max_bytes`` of them are built (at least
        one): a one-record read from a batch of 1000 does not build 1000 records.

        Raises:
            CorruptRecordError: a batch fails its checks (never returns garbage).
        """
        start_offset = self.offset_metadata.message_offset
        if self.max_bytes is not None and len(self.data) >= HEADER_SIZE:
            records = decode_first_batch(self.data, start_offset=start_offset, max_bytes=self.max_bytes)
        else:
            records = decode_batches(self.data, start_offset=start_offset, max_batch_bytes=len(self.data))
        if max_offset is not None and records and records[-1].offset >= max_offset:
            records = [r for r in records if r.offset < max_offset]
        return records


# base_offset, batch_length, (partition_leader_epoch, magic, crc, attributes skipped), last_offset_delta:
# where a batch's offsets are, read without building a BatchHeader (FORMAT.md §2.1).
_LOCATE: Final = struct.Struct(">qi11xi")
_new_fetch_data = partial(tuple.__new__, FetchData)
_new_offset_metadata = partial(tuple.__new__, LogOffsetMetadata)


class _HeaderWalk:
    """The checked header of each batch in ``[start, end)`` of a ``.log`` (iterate), read in windows.

    Keeps the last window it read, so a caller that found its batch can take
    the batch's bytes from it (:meth:`bytes_at`) instead of reading them again.

    Every header is checked (``header_problem``) and so are the offsets
    (``offset_problem``): the batch at position 0 has the segment's base
    offset ``base_offset``, and each batch starts at the previous one's last
    offset + 1. A violation is damage in the ``.log``: a
    :class:`CorruptRecordError`, never records from the wrong place.

    ``entry_offset``: the start came from an offset-index entry saying that
    the batch there ends at this offset (``index_entry_problem``), and
    ``target`` is the offset the caller looks for (the entry must not be past
    it). When the entry breaks either rule (a damaged index, which the open
    check does not read whole) the walk calls ``on_lie`` with the reason and
    walks from the file's start instead: a read must never skip records, nor
    fail, because an index lied.
    """

    __slots__ = (
        "_base_offset", "_end", "_entry_offset", "_on_lie", "_path", "_pread", "_start", "_target",
        "_window_bytes", "window", "window_start",
    )

    def __init__(
        self,
        pread: PRead,
        start: int,
        end: int,
        path: Path,
        base_offset: int,
        window_bytes: int = _HEADER_WINDOW,
        entry_offset: int | None = None,
        *,
        target: int | None = None,
        on_lie: Callable[[str], object] | None = None,
    ) -> None:
        self._pread, self._start, self._end, self._path = pread, start, end, path
        self._base_offset = base_offset
        self._window_bytes = window_bytes
        self._entry_offset = entry_offset if start != 0 else None
        self._target = target
        self._on_lie = on_lie
        self.window: bytes | bytearray = b""
        self.window_start = start

    def __iter__(self) -> Iterator[LocatedBatch]:
        pread, end = self._pread, self._end
        position = self._start
        entry = self._entry_offset
        # The base offset the next batch must have (None: not known, a start the caller placed itself).
        expected: int | None = self._base_offset if position == 0 else None
        if entry is not None:
            if not 0 <= position < end:
                position, entry, expected = self._distrust(position, "that is outside the .log")
            elif self._target is not None and entry > self._target:
                position, entry, expected = self._distrust(position, f"it was asked for offset {self._target}")
        while position < end:
            offset = position - self.window_start
            if offset < 0 or offset + HEADER_SIZE > len(self.window):
                self.window_start = position
                self.window = pread(position, min(self._window_bytes, end - position))
                offset = 0
            if len(self.window) - offset < HEADER_SIZE:
                problem: str | None = f"the file ends {len(self.window) - offset} bytes into a batch header"
            else:
                header = read_header(self.window, offset)
                problem = header_problem(header, end - position)
            if problem is None and entry is not None:
                problem = index_entry_problem(header, entry)
                if problem is not None:
                    position, entry, expected = self._distrust(position, problem)
                    continue
            if problem is None and expected is not None and header.base_offset != expected:
                problem = offset_problem(header.base_offset, expected)
            if problem is not None:
                if entry is not None:  # the index entry points at no batch start
                    position, entry, expected = self._distrust(position, problem)
                    continue
                raise CorruptRecordError(f"{self._path}: batch at position {position}: {problem}; {_RECOVERY_HINT}")
            entry = None
            expected = header.base_offset + header.last_offset_delta + 1
            yield LocatedBatch(position, header)
            position += LOG_OVERHEAD + header.batch_length

    def _distrust(self, position: int, why: str) -> tuple[int, None, int]:
        if self._on_lie is not None:
            self._on_lie(
                f"the offset index places the batch ending at offset {self._entry_offset} at position "
                f"{position}, but {why}"
            )
        return 0, None, self._base_offset

    def bytes_at(self, position: int, size: int) -> memoryview | None:
        """The ``size`` bytes at ``position`` if the last window holds all of them, else ``None``."""
        offset = position - self.window_start
        if offset < 0 or offset + size > len(self.window):
            return None
        return memoryview(self.window)[offset : offset + size]


def _walk_headers(
    pread: PRead,
    start: int,
    end: int,
    path: Path,
    base_offset: int,
    entry_offset: int | None = None,
    *,
    target: int | None = None,
    on_lie: Callable[[str], object] | None = None,
) -> Iterator[LocatedBatch]:
    """Yield the checked header of each batch in ``[start, end)`` of a ``.log``, reading 8 KiB windows."""
    return iter(_HeaderWalk(pread, start, end, path, base_offset, entry_offset=entry_offset, target=target,
                            on_lie=on_lie))


class _IndexLie(SeglogError):
    """An index entry caught lying while the indexes are checked (never escapes the segment)."""


def _raise_lie(why: str) -> None:
    raise _IndexLie(why)


def _final_time_entry(time_index: TimeIndex, max_timestamp: int, offset: int) -> None:
    # The entry written at roll, close and after recovery, into the reserved last slot. Only when it
    # adds something: a trimmed index has no free slot, and an equal timestamp is a no-op anyway.
    if max_timestamp > time_index.last_entry.timestamp:
        time_index.maybe_append(max_timestamp, offset, skip_full_check=True)


def _report_progress(progress: Callable[[int, int], object], total: int, done: int) -> None:
    progress(done, total)


def _probe_first_header(size: int, pread: PRead) -> BatchHeader | None:
    head = pread(0, HEADER_SIZE)
    header = read_header(head) if len(head) == HEADER_SIZE else None
    if header is not None and header_problem(header, len(head) + size) is not None:
        header = None  # garbage (a crash, a preallocated tail): recovery will say what
    return header


class FollowScan(NamedTuple):
    """What a follower found past its validated end of a segment (:meth:`LogSegment.follow`).

    Apply it with :meth:`LogSegment.apply_follow` (on the event loop). With
    ``restart`` nothing is applied: the file no longer holds what was
    validated (the writer cut or rewrote it), and the segment must be opened
    again and followed from its start.
    """

    restart: bool
    valid_end: int  # the new logical size: bytes of complete, CRC-valid batches from the start
    next_offset: int | None  # None: not known yet (a follow that began at an index entry validated nothing)
    max_ts: int
    max_ts_offset: int
    first: BatchHeader | None  # the segment's first batch, when this scan met it
    tail: tuple[int, int] | None  # (position, base offset) of the first batch this scan validated
    last: tuple[int, bytes] | None  # (position, header bytes) of the last batch validated so far
    entries: list[tuple[int, int, int, int]]  # (last offset, position, max ts, its offset), as an index would hold
    since: int  # bytes validated since the last entry
    more: bool  # stopped at the scan's byte limit: more complete batches may follow
    verified: bool  # the trusted time-index entry the follow started from was found where it says


_NO_SCAN: Final = FollowScan(True, 0, 0, NO_TIMESTAMP, 0, None, None, None, [], 0, False, False)


@dataclass(slots=True)
class _Followed:
    """A read-only segment followed while another process appends to it: what the follower validated.

    The writer's index files beyond what the follower checked are never used
    (the writer fills them through a mapping, after its ``.log`` write):
    entries for the batches the follower validated itself live here, in
    memory, and serve reads as index entries would (floor lookups), beside the
    index snapshot taken when the follow began (trusted up to ``start`` only).
    """

    verify: TimestampOffset | None  # the snapshot's last time entry, checked by the first scan
    offsets: array[int] = field(default_factory=lambda: array("q"))  # last offset of each indexed batch
    positions: array[int] = field(default_factory=lambda: array("q"))
    times: array[int] = field(default_factory=lambda: array("q"))  # largest timestamp so far ...
    time_offsets: array[int] = field(default_factory=lambda: array("q"))  # ... and the batch that has it
    since: int = 0
    last: tuple[int, bytes] | None = None


class Appended(NamedTuple):
    """What :meth:`LogSegment.write_append` wrote, for :meth:`LogSegment.publish_append` to make visible."""

    position: int  # of the first batch
    end: int  # the new logical size
    first: BatchHeader
    last: BatchHeader
    indexes: tuple[OffsetIndex, TimeIndex] | None  # loaded when entries are due
    entries: list[tuple[int, int, int, int]]  # (last offset, position, max ts, its offset) to add
    max_ts: int
    max_ts_offset: int
    since: int  # bytes appended since the last index entry


_new_appended = partial(tuple.__new__, Appended)  # skips NamedTuple.__new__'s Python frame (every append)


def batch_headers(batches: Sequence[bytes | bytearray | memoryview]) -> list[BatchHeader]:
    """The checked header of each buffer of ``batches``, each exactly one encoded batch (``encode_batch``).

    Raises:
        CorruptRecordError: a header fails its checks.
        ValueError: a buffer is not exactly one encoded batch.
    """
    headers = []
    for batch in batches:
        header = read_header(batch)
        check_header(header, len(batch))
        if header.size != len(batch):
            raise ValueError(f"a buffer of {len(batch)} bytes is not one encoded batch of {header.size} bytes")
        headers.append(header)
    return headers


class _ScanOutcome(NamedTuple):
    valid: int  # bytes of valid batches from the start
    last_entry: int  # position of the last index entry written
    max_ts: int
    max_ts_offset: int
    next_offset: int
    first: BatchHeader | None
    control: bool  # a control batch (a transaction marker) was among the valid batches


class LogSegment:
    """One segment: a ``.log`` of record batches plus ``.index``, ``.timeindex``, ``.txnindex``.

    On disk: ``<base_offset:020d>.log`` (batches, ``docs/FORMAT.md`` §2) and the
    three index files beside it (§3), all with an optional extra ``suffix``
    (``.deleted``). Offset-index entries carry a batch's **last** offset and its
    **start** position; one is written when more than ``index_interval_bytes``
    were appended since the previous one (checked before the batch is added, so
    the first batch never gets one) — Kafka's rule. The time index gets an
    entry at the same moments (when the largest timestamp grew) and a final one
    when the segment becomes inactive or closes.

    Concurrency contract: appends and the other mutations (``truncate_to``,
    ``recover``, ``on_become_inactive``, ``change_file_suffixes``, ``delete``)
    are serialised by the caller (one lock per partition); reads
    (``read``, ``translate_offset``, ``find_offset_by_timestamp``,
    ``read_next_offset``) may run concurrently with each other and with one
    append, on the loop (``nowait``) or in threads. Every method but the
    appends is blocking unless called with ``nowait=True``. The visible
    size grows only after an append's bytes are written, and index entries
    are added after that, so a reader never sees a half-written batch.
    ``recover`` must not run concurrently with anything.

    A read-only segment may be *followed* while another process appends to
    it (:meth:`begin_follow`, :meth:`follow`,
    :meth:`apply_follow`): its logical size is then what the follower
    validated (complete, CRC-valid batches), and the follower's own index
    entries beyond the writer's checked ones live in memory.
    """

    _walk_max_bytes: int = WALK_MAX_BYTES  # a class attribute: tests make walks short

    def __init__(
        self,
        *,
        log: SegmentFile,
        directory: Path,
        base_offset: int,
        suffix: str,
        max_index_size: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        now_ms: int,
        writable: bool,
        first_batch: BatchHeader | None,
        index_files_existed: tuple[bool, bool],
    ) -> None:
        # The three index objects are built on first use (functools.cached_property below): a
        # partition of many sealed segments opens without building ~3 objects and paths per segment.
        self._file_prefix = f"{directory}{os.sep}{base_offset:020d}"
        self._suffix = suffix
        self._log = log
        self._base_offset = base_offset
        self._max_index_size = max_index_size
        self._index_interval_bytes = index_interval_bytes
        self._roll_jitter_ms = roll_jitter_ms
        self._writable = writable
        self._index_files_existed = index_files_existed
        self._created_ms = now_ms
        self._rolling_based_timestamp: int | None = None if first_batch is None else first_batch.max_timestamp
        # None: not read from the time index yet. A brand-new segment has none to read.
        self._max_timestamp_so_far: int | None = NO_TIMESTAMP if log.size == 0 and not index_files_existed[1] else None
        self._offset_of_max_timestamp_so_far = base_offset
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None  # known from the last append or scan (read_next_offset)
        self._found_next_offset: tuple[int, int] | None = None  # (size, next offset) a read_next_offset found
        # (position, base offset) of the first batch of the last append: a reader following the log
        # (subscribe) starts its header walk there instead of at the offset-index entry, up to
        # index_interval_bytes back (about 20 one-record batches of 190 B, each header one step).
        self._tail: tuple[int, int] | None = None
        # Whether the last recovery scan found a control batch (a transaction marker): the scan emptied
        # the .txnindex, which then needs its entries back (the engine's producer-state replay).
        self.recovered_markers = False
        # Index files that existed at open are checked on first load; new ones have nothing to check.
        self._indexes_checked = not any(index_files_existed)
        self._trust_indexes = True  # False only for a read-only segment whose index files failed the check
        # Why a read caught an index entry lying (set from the loop or a reader thread): the next index
        # use rebuilds the indexes (read-only: stops using them), once, and logs it (_index_lied).
        self._index_lie: str | None = None
        self._rebuilt_at_use = False
        self._load_lock = threading.Lock()  # first index load and check: one executor thread at a time
        self._released = False  # the files were closed (once), see close
        self._closed = False
        self._followed: _Followed | None = None  # set by begin_follow (a follower's segment)
        # Where each batch lies (BatchTable) and each record of large batches (RecordTable, by batch
        # position): built on the first reads, charged to the process's TableBudget, dropped when the
        # .log is cut or closed. Mutated on the event loop only (a build runs in a thread and is
        # installed on the loop); the budget may evict them from any thread (it drops the reference).
        self._budget: TableBudget = default_budget()
        self._batch_table: BatchTable | None = None
        self._record_tables: dict[int, RecordTable] = {}
        self._table_epoch = 0  # bumped when the .log is cut: a build begun before is not installed
        self._table_building = False
        self._table_tried_size = -1  # the size at which a build covered no more (damage, budget)
        # (position, size, record) of the batch the last time lookup read and the one record it found
        # there: the read that usually follows (of the offset it found) takes it instead of reading
        # and decoding the batch again.
        self._verified: tuple[int, int, Record] | None = None

    @functools.cached_property
    def _offset_index(self) -> LazyIndex[OffsetIndex]:
        return LazyIndex.for_offset(
            f"{self._file_prefix}{INDEX_SUFFIX}{self._suffix}", self._base_offset, self._max_index_size,
            writable=self._writable, ops=self._log.ops,
        )

    @functools.cached_property
    def _time_index(self) -> LazyIndex[TimeIndex]:
        return LazyIndex.for_time(
            f"{self._file_prefix}{TIME_INDEX_SUFFIX}{self._suffix}", self._base_offset, self._max_index_size,
            writable=self._writable, ops=self._log.ops,
        )

    @functools.cached_property
    def _txn_index(self) -> TransactionIndex:
        return TransactionIndex(
            f"{self._file_prefix}{TXN_INDEX_SUFFIX}{self._suffix}", self._base_offset, ops=self._log.ops
        )

    # ------------------------------------------------------------------------------ lifecycle

    @classmethod
    def open(
        cls,
        directory: Path | str,
        base_offset: int,
        *,
        max_index_size: int,
        index_interval_bytes: int,
        roll_jitter_ms: int,
        now_ms: int,
        file_already_exists: bool = False,
        preallocate_bytes: int = 0,
        suffix: str = "",
        writable: bool = True,
        ops: FileOps | None = None,
        index_files_existed: tuple[bool, bool] | None = None,
        read_first_batch: bool = True,
        defer_open: bool = False,
    ) -> LogSegment:
        """Open the segment with ``base_offset`` in ``directory``, creating its ``.log`` unless it exists; blocking.

        Index files are not opened (nor created) until first needed. A new
        ``.log`` is preallocated to ``preallocate_bytes`` when that is positive.
        ``now_ms`` is the segment's creation time for time-based rolling.

        An existing segment (``file_already_exists``): reads the first batch
        header (for time-based rolling; not with ``read_first_batch=False``)
        and notes which index files exist (unless ``index_files_existed`` says
        it); maps nothing. With ``defer_open`` (sealed segments) the ``.log``
        is only ``stat``-ed and its descriptor opened by the first read (see
        ``SegmentFile.open``). The engine opens all segments of up to
        ``LOAD_CHUNK`` partitions in one thread hop (one hop per segment would
        make opening 10,000 segments cost ~1 s of hops alone).

        Raises:
            StorageError: the ``.log`` cannot be opened or created (with ``defer_open``: is not a regular file).
        """
        directory = directory if isinstance(directory, Path) else Path(directory)  # Path(a Path) re-parses it
        prefix = f"{directory}{os.sep}{base_offset:020d}"
        log_path = f"{prefix}{LOG_SUFFIX}{suffix}"
        first_batch: BatchHeader | None = None
        existed = (False, False)
        if not file_already_exists:
            log = SegmentFile.open(
                log_path, create=True, writable=writable, preallocate_bytes=preallocate_bytes, ops=ops
            )
        else:
            log = SegmentFile.open(log_path, create=False, writable=writable, ops=ops, defer=defer_open)
            try:
                # Only the active segment's first batch matters (time-based rolling); a caller that
                # opens sealed segments in bulk skips the read.
                first_batch = log.read(partial(_probe_first_header, log.size)) if read_first_batch else None
                existed = index_files_existed if index_files_existed is not None else (
                    log.ops.exists(f"{prefix}{INDEX_SUFFIX}{suffix}"),
                    log.ops.exists(f"{prefix}{TIME_INDEX_SUFFIX}{suffix}"),
                )
            except BaseException:
                log.close(trim=False)
                raise
        return cls(
            log=log,
            directory=directory,
            base_offset=base_offset,
            suffix=suffix,
            max_index_size=max_index_size,
            index_interval_bytes=index_interval_bytes,
            roll_jitter_ms=roll_jitter_ms,
            now_ms=now_ms,
            writable=writable,
            first_batch=first_batch,
            index_files_existed=existed,
        )

    def first_batch(self) -> BatchHeader | None:
        """The header at position 0 when it reads as a batch's, bounded by the file; else ``None``. Blocking.

        What recovery compares with the file name before it scans the segment
        (``engine.loader``): a segment whose first batch has another base
        offset is in the wrong place, and is set aside rather than cut.

        Raises:
            StorageError, ClosedError.
        """
        self._check_open()
        # Transient: a sealed segment's deferred descriptor stays unopened (as a clean open leaves it).
        return self._log.read(partial(_probe_first_header, self._log.size), transient=True)

    def __enter__(self) -> LogSegment:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def begin_close(self) -> None:
        """Refuse new operations from now on; call on the event loop before :meth:`close` runs in a thread.

        Reads run on the loop without a thread hop when the bytes are cached;
        marking the segment closed on the loop first keeps them from starting
        while a worker thread releases the files.
        """
        self._closed = True
        self._log.begin_close()

    def close(self) -> None:
        """Write the final time-index entry, trim and close the indexes, trim and close the ``.log``; blocking.

        Idempotent (the files are released once). The engine closes every
        segment of a partition in one thread hop.

        Raises:
            StorageError: trimming or closing a file failed (every file is released anyway).
        """
        with self._load_lock:
            if self._released:
                return
            self._released = True
        self._closed = True
        self._drop_tables()
        no_space: StorageError | None = None
        try:
            if self._writable and self._max_timestamp_so_far is not None and self._max_timestamp_so_far >= 0:
                # Kafka swallows errors of this last entry: an index is only a hint. But a clean close
                # makes the next open trust the time index for the segment's largest timestamp, so
                # an entry the disk had no room for is reported (after every file is released): the
                # engine then leaves no clean-shutdown marker and the next open rebuilds the index.
                try:
                    _final_time_entry(
                        self._time_index.get(), self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
                    )
                except StorageError as exc:
                    no_space = exc
                except (SeglogError, ValueError):
                    pass
            if self._writable and self._log.size > 0 and not self._index_files_existed[0]:
                # Leave both index files behind (Kafka's close loads and trims both): a segment too
                # small to have needed an offset-index entry would otherwise reopen "missing an
                # index" and be recovered at every open. An index file that existed at open is
                # still there (loaded or not): mapping it only to close it would cost a map per segment.
                with contextlib.suppress(SeglogError):
                    self._offset_index.get()
        finally:
            # Index objects never built (a sealed segment nobody read) have nothing to close; building
            # them here (paths, objects) only to close them would add up over thousands of segments.
            built = self.__dict__
            try:
                if "_offset_index" in built:
                    self._offset_index.close() if self._writable else self._offset_index.close_handler()
            finally:
                try:
                    if "_time_index" in built:
                        self._time_index.close() if self._writable else self._time_index.close_handler()
                finally:
                    try:
                        if "_txn_index" in built:
                            self._txn_index.close()
                    finally:
                        self._log.close(trim=self._writable)
        if no_space is not None:
            raise no_space

    def close_handlers(self) -> None:
        """Release the files without writing or trimming anything (Kafka's ``closeHandlers``); blocking.

        For a caller that opened segments and must give them up after a failure.
        """
        with self._load_lock:
            if self._released:
                return
            self._released = True
        self._closed = True
        self._drop_tables()
        built = self.__dict__  # as in close: unbuilt index objects hold nothing
        try:
            if "_offset_index" in built:
                self._offset_index.close_handler()
        finally:
            try:
                if "_time_index" in built:
                    self._time_index.close_handler()
            finally:
                try:
                    if "_txn_index" in built:
                        self._txn_index.close()
                finally:
                    self._log.close(trim=False)

    def delete(self) -> None:
        """Close without trimming and delete the ``.log`` and its three index files (those that exist); blocking.

        Raises:
            StorageError: a file exists but cannot be removed.
            ClosedError: the segment was opened read-only.
        """
        if not self._writable:
            raise ClosedError(f"{self._log.path}: segment was opened read-only; it cannot delete files")
        self._closed = self._released = True
        self._drop_tables()
        self._log.close(trim=False)
        self._offset_index.delete()
        self._time_index.delete()
        self._txn_index.delete()
        self._log.delete()

    def __del__(self) -> None:
        # The .log's SegmentFile and the mapped indexes warn (and release themselves) on their own.
        if not getattr(self, "_closed", True):
            warnings.warn(f"unclosed segment {self._log.path}", ResourceWarning, stacklevel=2, source=self)

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"{self._log.path}: segment is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if not self._writable:
            raise ClosedError(f"{self._log.path}: segment was opened read-only")

    # ------------------------------------------------------------------------------ properties

    @property
    def base_offset(self) -> int:
        """The offset of the first record this segment may hold (its file name)."""
        return self._base_offset

    @property
    def size(self) -> int:
        """Bytes of whole batches in the ``.log`` (the logical size, not a preallocated length)."""
        return self._log.size

    @property
    def log_path(self) -> Path:
        """Current path of the ``.log`` file."""
        return self._log.path

    @property
    def offset_index_path(self) -> Path:
        """Current path of the ``.index`` file (it may not exist yet)."""
        return self._offset_index.path

    @property
    def time_index_path(self) -> Path:
        """Current path of the ``.timeindex`` file (it may not exist yet)."""
        return self._time_index.path

    @property
    def txn_index_path(self) -> Path:
        """Current path of the ``.txnindex`` file (it exists only with aborted transactions)."""
        return self._txn_index.path

    def append_aborted_txns(self, txns: Sequence[AbortedTxn], *, fsync: bool = False) -> None:
        """Append ``txns`` (their markers are in this segment, in order) to the ``.txnindex``, creating it.

        With ``fsync`` the file is synced before this returns. Blocking.

        Raises:
            InvalidOffsetError: a last offset does not increase.
            StorageError, ClosedError.
        """
        self._check_writable()
        index = self._txn_index
        for txn in txns:
            index.append(txn)
        if fsync:
            index.flush()

    def reset_txn_index(self) -> None:
        """Empty the ``.txnindex`` (blocking; none is created): its entries are rebuilt from the log.

        Raises:
            StorageError.
        """
        self._check_writable()
        self._txn_index.reset()

    def aborted_txns(self) -> list[AbortedTxn]:
        """Every ``.txnindex`` entry, in file order (blocking; empty without the file).

        Raises:
            CorruptIndexError, StorageError.
        """
        return self._txn_index.all_aborted_txns()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`delete` was called."""
        return self._closed

    @property
    def index_interval_bytes(self) -> int:
        """Bytes of batches between two offset-index entries."""
        return self._index_interval_bytes

    @property
    def roll_jitter_ms(self) -> int:
        """Subtracted from ``max_segment_ms`` in the time-based roll check."""
        return self._roll_jitter_ms

    @property
    def created_ms(self) -> int:
        """``now_ms`` at open, or at the last truncation that emptied the segment."""
        return self._created_ms

    @property
    def max_timestamp_so_far(self) -> int | None:
        """The largest batch timestamp appended so far, ``-1`` if none, ``None`` if not loaded yet.

        See :meth:`read_max_timestamp_and_offset_so_far` to load it.
        """
        return self._max_timestamp_so_far

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch, or ``2**63-1`` when there is none (Kafka's Long.MAX)."""
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 and self._log.size > 0 else FIRST_BATCH_TIMESTAMP_UNKNOWN

    def has_suffix(self, suffix: str) -> bool:
        """Whether every file name of the segment ends with ``suffix``."""
        return all(
            str(p).endswith(suffix)
            for p in (self._log.path, self._offset_index.path, self._time_index.path, self._txn_index.path)
        )

    def __repr__(self) -> str:
        return f"<LogSegment {self._log.path} base={self._base_offset} size={self.size}>"

    # ------------------------------------------------------------------------------ indexes

    def _indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Both indexes, checked; blocking the first time (mapping a file, checking it, is disk I/O)."""
        return self._load_indexes(check=True)

    def _loaded_indexes(self, *, check: bool = True) -> tuple[OffsetIndex, TimeIndex] | None:
        # Both indexes when they are in memory already (and checked, with `check`): no I/O. Else None.
        if (
            self._offset_index.is_loaded
            and self._time_index.is_loaded
            and self._max_timestamp_so_far is not None
            and (self._indexes_checked or not check)
        ):
            return self._offset_index.get(), self._time_index.get()
        return None

    def _load_indexes(self, *, check: bool) -> tuple[OffsetIndex, TimeIndex]:
        loaded = self._loaded_indexes(check=check)
        if loaded is not None:
            return loaded
        # Serialised: two first loads racing (a read and an append, two reads) would otherwise both
        # check, and both rebuild, the same mapped index from two threads.
        with self._load_lock:
            return self._load_indexes_locked(check)

    def _load_indexes_locked(self, check: bool) -> tuple[OffsetIndex, TimeIndex]:
        offset_index, time_index = self._offset_index.get(), self._time_index.get()
        if check and not self._indexes_checked:
            problem = self._index_lie
            if problem is None:
                # Transient: checking a sealed segment's indexes (retention asks every segment for its
                # largest timestamp) must not leave its deferred .log descriptor open.
                problem = self._log.read(
                    partial(self._index_problem, offset_index, time_index), transient=True
                )
            if problem is not None:
                # An index is a hint, never trusted and never fatal: rebuild it from the .log
                # (without cutting anything: this is not crash recovery).
                if self._writable and not (self._index_lie is not None and self._rebuilt_at_use):
                    _log.warning("%s: %s; rebuilding the indexes from the .log", self._log.path, problem)
                    self._rebuilt_at_use = self._index_lie is not None
                    self._rebuild_in_place(offset_index, time_index)
                else:
                    # A read-only snapshot cannot be rewritten (nor is an index rebuilt twice): stop
                    # using it (lookups then scan from the start of the segment, always correct).
                    _log.warning("%s: %s; no longer using the indexes of this segment", self._log.path, problem)
                    self._distrust_indexes()
                self._index_lie = None
            self._indexes_checked = True
        if self._max_timestamp_so_far is None:
            last = time_index.last_entry
            best = (last.timestamp, last.offset)
            if check and self._trust_indexes and self._log.size:
                # Kafka's loadLargestTimestamp: the last time-index entry, then the batches after the last
                # offset-index entry, which no time-index entry covers (a segment whose final entry was
                # never written: the active one after an unclean stop, seen by a read-only engine).
                best = self._log.read(
                    partial(self._largest_after_last_entry, offset_index, best), transient=True
                )
            self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = best
        return offset_index, time_index

    def _largest_after_last_entry(
        self, offset_index: OffsetIndex, best: tuple[int, int], pread: PRead
    ) -> tuple[int, int]:
        entry = offset_index.lookup(offset_index.last_offset)
        try:
            for _, header in _walk_headers(pread, entry.position, self._log.size, self._log.path, self._base_offset,
                                           entry.offset, on_lie=self._index_lied):
                if header.max_timestamp > best[0]:
                    best = (header.max_timestamp, header.last_offset)
        except CorruptRecordError:
            pass  # a damaged tail: reads there refuse it; the batches before it counted
        return best

    def _rebuild_in_place(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        # A writable segment's indexes rebuilt from its .log (in a thread, under _load_lock). An append
        # may finish meanwhile (a rebuild caught at use, on the active segment): it skips its index
        # entries while the lock is held (_add_index_entries), and its largest timestamp is kept.
        total = self._log.size
        max_ts, max_ts_offset = self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
        outcome = self._log.read(
            partial(self._rebuild_indexes, offset_index, time_index, max(total, 1), total, None)
        )
        self._apply_scan(outcome)
        if self._log.size != total:
            self._bytes_since_last_index_entry = self._log.size - outcome.last_entry
            if max_ts is not None and max_ts > outcome.max_ts:
                self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = max_ts, max_ts_offset

    def _index_lied(self, why: str) -> None:
        """A read caught an index entry lying (any thread): the next use of the indexes rebuilds them."""
        if self._index_lie is None and self._trust_indexes:
            self._index_lie = why
            self._indexes_checked = False  # the next read loads them in a thread, which rebuilds them

    def _distrust_indexes(self) -> None:
        """Read-only and the indexes are missing or wrong: scan from the start, max timestamp from headers."""
        end = self._log.size

        def walk(pread: PRead) -> tuple[int, int]:
            best = (NO_TIMESTAMP, self._base_offset)
            for _, header in _walk_headers(pread, 0, end, self._log.path, self._base_offset):
                if header.max_timestamp > best[0]:
                    best = (header.max_timestamp, header.last_offset)
            return best

        # The walk first: when the .log is damaged it raises, and the next use tries (and raises) again.
        best = self._log.read(walk)
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = best
        self._trust_indexes = False

    def _read_indexes_ready(self) -> bool:
        # What a read needs of the indexes is in memory (checked, or known not to be trusted): no I/O.
        return self._indexes_checked and self._max_timestamp_so_far is not None and (
            not self._trust_indexes or (self._offset_index.is_loaded and self._time_index.is_loaded)
        )

    def _read_indexes(self) -> tuple[OffsetIndex, TimeIndex] | None:
        """The indexes for a read (blocking on first use), or ``None`` when a read must scan from the start.

        ``None`` only for a read-only segment whose index files are missing (a
        read-only index cannot be created) or failed their first-load check.
        """
        if self._read_indexes_ready():
            return (self._offset_index.get(), self._time_index.get()) if self._trust_indexes else None
        return self._load_read_indexes()

    def _load_read_indexes(self) -> tuple[OffsetIndex, TimeIndex] | None:
        with self._load_lock:
            if self._trust_indexes and not self._writable and not all(self._index_files_existed):
                self._distrust_indexes()
                self._indexes_checked = True
            if not self._trust_indexes:
                if self._max_timestamp_so_far is None:
                    self._distrust_indexes()
                return None
        indexes = self._load_indexes(check=True)
        return indexes if self._trust_indexes else None

    def _index_problem(self, offset_index: OffsetIndex, time_index: TimeIndex, pread: PRead) -> str | None:
        """Why the indexes cannot be trusted, or ``None``: Kafka's sanity checks, plus a look at the
        ``.log`` under the first and last offset-index entries and the last time-index entry (an
        entry must point at the start of the batch whose last offset it holds)."""
        try:
            offset_index.sanity_check()
            time_index.sanity_check()
        except SeglogError as exc:
            return str(exc)
        size = self._log.size
        entries = offset_index.entries
        for slot in {0, entries - 1} if entries else ():
            entry = offset_index.entry(slot)
            if entry.position < 0:  # a relative position is an int32 on disk: random bytes can make it negative
                return f"offset-index entry {slot} points at position {entry.position}, before the start"
            head = pread(entry.position, HEADER_SIZE) if entry.position < size else b""
            if len(head) < HEADER_SIZE:
                return f"offset-index entry {slot} points at position {entry.position}, outside the .log ({size})"
            header = read_header(head)
            if header_problem(header, size) is not None or index_entry_problem(header, entry.offset) is not None:
                return (
                    f"offset-index entry {slot} ({entry.offset} at position {entry.position}) does not point "
                    "at the start of the batch holding that offset"
                )
        if time_index.entries:
            # The last time entry is the segment's largest timestamp (a time lookup skips the whole
            # segment by it): the batch it names must have that timestamp.
            last = time_index.last_entry
            if not self._base_offset <= last.offset <= self._base_offset + INT32_MAX:
                return f"time-index entry {last} is outside the segment"
            floor = offset_index.lookup(last.offset)
            try:
                for _, header in _walk_headers(pread, floor.position, size, self._log.path, self._base_offset,
                                               floor.offset, target=last.offset, on_lie=_raise_lie):
                    if header.last_offset >= last.offset:
                        problem = time_entry_problem(header, last.timestamp, last.offset)
                        return None if problem is None else f"the last time-index entry {tuple(last)}: {problem}"
            except (_IndexLie, CorruptRecordError) as exc:
                return str(exc)
            return f"the last time-index entry {tuple(last)} names an offset past the end of the .log"
        return None

    def read_max_timestamp_and_offset_so_far(self, *, nowait: bool = False) -> TimestampOffset | WouldBlock:
        """The largest timestamp so far and the last offset of the batch that has it (loads the time index).

        Blocking the first time (the time index is loaded); with ``nowait``,
        :data:`WOULD_BLOCK` instead of loading.

        Raises:
            StorageError: the time index cannot be opened.
        """
        self._check_open()
        if self._max_timestamp_so_far is None:
            if nowait:
                return WOULD_BLOCK
            if self._writable:
                self._indexes()
            else:
                self._read_indexes()
        assert self._max_timestamp_so_far is not None
        return TimestampOffset(self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far)

    def largest_record_timestamp(self, *, nowait: bool = False) -> int | WouldBlock | None:
        """The largest record timestamp in the segment, or ``None`` when it has no timestamped batch.

        Blocking, or with ``nowait`` :data:`WOULD_BLOCK`, as :meth:`read_max_timestamp_and_offset_so_far`.
        """
        found = self.read_max_timestamp_and_offset_so_far(nowait=nowait)
        if found is WOULD_BLOCK:
            return WOULD_BLOCK
        return found.timestamp if found.timestamp >= 0 else None

    def largest_timestamp(self, *, nowait: bool = False) -> int | WouldBlock:
        """The largest record timestamp, or the ``.log``'s modification time in ms if there is none (Kafka).

        Blocking (the time index, a ``stat``), or with ``nowait`` :data:`WOULD_BLOCK` when either is needed.
        """
        ts = self.largest_record_timestamp(nowait=nowait)
        if ts is WOULD_BLOCK or (ts is None and nowait):
            return WOULD_BLOCK
        return ts if ts is not None else self._log.mtime_ms()

    def _index_is_full(self, lazy: LazyIndex[OffsetIndex] | LazyIndex[TimeIndex], existed: bool) -> bool:
        index = lazy.peek()
        if index is not None:
            return index.is_full
        # Not loaded: a new file would be created empty; an existing one is taken as full of valid
        # entries until resize_indexes() grows it again (Kafka's AbstractIndex rule).
        return existed

    def resize_indexes(self, size: int) -> None:
        """Resize both index files (preallocation) to ``size`` bytes, rounded down to whole entries.

        The engine calls this with ``segment_index_bytes`` on the segment it makes
        active after opening or recovering a log (Kafka's LogLoader does the same):
        a reopened index file is otherwise exactly as long as its entries, hence full.

        Raises:
            StorageError: a file cannot be resized.
        """
        self._check_writable()
        offset_index, time_index = self._indexes()
        offset_index.resize(size)
        time_index.resize(size)

    def sanity_check(self) -> None:
        """Load the three indexes and check them (Kafka's rules); corrupt ones must be rebuilt by ``recover``.

        Raises:
            CorruptIndexError: an index failed its check.
            StorageError: an index cannot be opened.
        """
        self._check_open()
        offset_index, time_index = self._indexes()
        offset_index.sanity_check()
        time_index.sanity_check()
        self._txn_index.sanity_check()

    # ------------------------------------------------------------------------------ append

    def check_append(
        self, parts: Sequence[bytes | bytearray | memoryview | LateBuffer], headers: Sequence[BatchHeader]
    ) -> None:
        """Check an append of the batches ``headers`` describe, whose bytes are ``parts``; no I/O.

        A batch may span parts (the engine writes each batch as its 61-byte
        header and its body, from :func:`~seglog.segments.batch.encode_batch_parts`,
        so that a large body is never copied). A part may be a
        :class:`~seglog.segments.fileio.LateBuffer` (a planned body,
        :func:`~seglog.segments.batch.plan_batch_parts`), made in the write's
        thread. ``headers`` must be those of the bytes written (with their
        final base offsets); each is checked, and the parts must add up to
        exactly the batches' sizes.

        Raises:
            SegmentOffsetOverflowError: a batch's offsets are below the base
                offset or more than 2**31-1 above it.
            ValueError: a header is not a valid batch's, the parts do not add
                up, or offsets do not increase (from batch to batch and from the
                segment's last offset).
            ClosedError: the segment is closed or read-only.
        """
        if self._closed or not self._writable:
            self._check_writable()
        total = 0
        expected = self._next_offset
        base_offset = self._base_offset
        for header in headers:
            size = LOG_OVERHEAD + header.batch_length
            problem = header_problem(header, size)
            if problem is not None:
                raise ValueError(f"{self._log.path}: not a valid batch header: {problem}")
            total += size
            first = header.base_offset
            if expected is not None and first < expected:
                raise ValueError(
                    f"{self._log.path}: a batch starting at offset {first} cannot follow offset "
                    f"{expected - 1}; offsets must increase"
                )
            last = first + header.last_offset_delta
            expected = last + 1
            if first < base_offset or last - base_offset > INT32_MAX:
                raise SegmentOffsetOverflowError(
                    f"{self._log.path}: batch with offsets {first}..{last} cannot be "
                    f"stored relative to base offset {base_offset} (allowed: up to "
                    f"{base_offset + INT32_MAX}); roll a new segment first"
                )
        if sum(map(len, parts)) != total:
            raise ValueError(f"{self._log.path}: the parts do not add up to the {total} bytes of the batches")

    def write_append(
        self,
        parts: Sequence[bytes | bytearray | memoryview | LateBuffer],
        headers: Sequence[BatchHeader],
        *,
        fsync: bool = False,
    ) -> Appended:
        """Write an append :meth:`check_append` accepted, with ONE ``pwritev``; blocking, publishes nothing.

        The engine runs it in its append threads (one hop per group of
        producers' batches: group commit) and then calls :meth:`publish_append`
        with the result on the event loop. Here: the indexes are loaded if the
        append needs them (the largest timestamp so far lives in the time
        index; index files are created when the first entry is due), Kafka's
        index rule plans an offset-index entry ``(batch last offset, batch
        start position)`` and a time-index entry for each batch that comes
        more than ``index_interval_bytes`` after the last entry, the index file
        space those entries need is allocated, and the batches are written
        (and ``fdatasync``'d with ``fsync``). Nothing is visible to readers
        before :meth:`publish_append`.

        Raises:
            StorageError: the write or sync failed (or no index space); the segment is as before.
            ClosedError: the segment is closed or read-only.
        """
        self._check_writable()
        if self._max_timestamp_so_far is None:
            self._indexes()  # the largest timestamp so far lives in the time index
        position, batch_position, entries, max_ts, max_ts_offset, since = self._plan_append(headers)
        indexes = self._indexes() if entries else None
        # The index space this append's entries need (and the time index's roll/close entry) is
        # allocated before the .log is written: a full disk fails the append with nothing written, and
        # the loop's mapped entry writes never fault on a hole.
        reserve = (
            partial(self._reserve_index_space, len(entries))
            if self._offset_index.is_loaded or self._time_index.is_loaded
            else None
        )
        end = self._log.write(parts, position, fsync=fsync, before=reserve)
        if end != batch_position:
            raise RuntimeError(f"{self._log.path}: the parts do not add up to the batches; call check_append first")
        return Appended(position, end, headers[0], headers[-1], indexes, entries, max_ts, max_ts_offset, since)

    def append_nowait(
        self, parts: Sequence[bytes | bytearray | memoryview], headers: Sequence[BatchHeader]
    ) -> int | WouldBlock:
        """:meth:`check_append`, :meth:`write_append` without fsync and :meth:`publish_append`, all here on the loop.

        Or :data:`WOULD_BLOCK` with nothing written, when the append needs
        more than its ``pwritev`` or the file layer keeps that off the loop
        (:meth:`SegmentFile.write_nowait`: only a small write, and none while
        writes are slow): the largest timestamp so far must be known, and the
        index entries due (planned here, as :meth:`write_append` does) must go
        to indexes already loaded whose slots are already allocated (loop
        writes never allocate, so the mapped entry writes never fault on a
        hole). Then the caller makes its hop and calls :meth:`write_append`.
        Returns the position of the first batch.

        Raises:
            As :meth:`check_append` and :meth:`write_append`.
        """
        self.check_append(parts, headers)
        if self._max_timestamp_so_far is None:
            return WOULD_BLOCK  # the time index must be loaded first
        position, batch_position, entries, max_ts, max_ts_offset, since = self._plan_append(headers)
        indexes = None
        if entries:
            indexes = self._loaded_indexes()
            if indexes is None:
                return WOULD_BLOCK
        offset_index, time_index = self._offset_index.peek(), self._time_index.peek()
        if (offset_index is not None and entries and not offset_index.reserved(len(entries))) or (
            time_index is not None and not time_index.reserved(len(entries) + 1)
        ):
            return WOULD_BLOCK
        end = self._log.write_nowait(parts, position)
        if end is WOULD_BLOCK:
            return WOULD_BLOCK
        if end != batch_position:
            raise RuntimeError(f"{self._log.path}: the parts do not add up to the batches; call check_append first")
        return self.publish_append(
            _new_appended((position, end, headers[0], headers[-1], indexes, entries, max_ts, max_ts_offset, since))
        )

    def append_lean(
        self,
        batch: bytearray,
        base_offset: int,
        records: int,
        max_timestamp: int,
        max_segment_ms: int,
        max_segment_bytes: int,
        now_ms: int,
    ) -> int | WouldBlock:
        """:meth:`append_nowait` of one batch this process encoded, in one call; or :data:`WOULD_BLOCK`.

        ``batch`` is a whole batch encoded at base offset 0 from checked
        Records (:func:`~seglog.segments.batch.encode_small_batch`): its header
        is not parsed back, nor checked (:meth:`check_append` exists for bytes
        from elsewhere); ``records`` and ``max_timestamp`` are its own. The
        base offset is written into it here. :data:`WOULD_BLOCK`, with nothing
        written, whenever the append is anything but the common case: a roll
        due (:meth:`should_roll`'s conditions, for ``max_segment_ms``,
        ``max_segment_bytes`` and ``now_ms``), ``base_offset`` not the next offset known, the
        largest timestamp so far unknown, an index entry due (Kafka's
        ``index.interval.bytes`` rule, as :meth:`_plan_append`) but the
        indexes not loaded or their slots not allocated, the time index's
        roll slot not allocated, or the file layer keeping the write off the
        loop (:meth:`SegmentFile.append_nowait`). The caller then takes the
        general path, which decides (and raises) as before; the file, the
        indexes and the bookkeeping end exactly as that path leaves them.
        Returns the position of the batch.

        Raises:
            StorageError: the write failed (cut back: the segment is as before).
            ClosedError: the segment is closed or read-only.
        """
        if self._closed or not self._writable:
            self._check_writable()
        max_ts_so_far = self._max_timestamp_so_far
        log = self._log
        size = log.size
        if max_ts_so_far is None or (
            base_offset != self._next_offset and (size != 0 or base_offset != self._base_offset)
        ):
            return WOULD_BLOCK  # (a new segment's next offset is its base offset, before it is known)
        batch_size = len(batch)
        if size > 0:  # should_roll's conditions, inline (its tests hold them)
            first = self._rolling_based_timestamp
            waited = max_timestamp - first if first is not None and first >= 0 else now_ms - self._created_ms
            if waited > max_segment_ms - self._roll_jitter_ms:
                return WOULD_BLOCK
        last_offset = base_offset + records - 1
        if size > max_segment_bytes - batch_size or last_offset - self._base_offset > INT32_MAX:
            return WOULD_BLOCK
        lazy_offsets, lazy_times = self._offset_index, self._time_index
        offset_index, time_index = lazy_offsets.peek(), lazy_times.peek()
        if offset_index.is_full if offset_index is not None else self._index_files_existed[0]:
            return WOULD_BLOCK
        if time_index is not None:
            if time_index.is_full:
                return WOULD_BLOCK
        elif self._index_files_existed[1]:
            return WOULD_BLOCK
        if max_timestamp > max_ts_so_far:
            max_ts_so_far, max_ts_offset = max_timestamp, last_offset
        else:
            max_ts_offset = self._offset_of_max_timestamp_so_far
        since = self._bytes_since_last_index_entry
        entry_due = since > self._index_interval_bytes
        if entry_due:
            # As append_nowait: the entries go to loaded indexes whose slots are allocated and mapped
            # (the time index's roll slot too), never loaded or allocated here.
            if (
                offset_index is None
                or time_index is None
                or not self._indexes_checked
                or not offset_index.reserved(1)
                or not time_index.reserved(2)
            ):
                return WOULD_BLOCK
        elif time_index is not None and not time_index.reserved(1):
            return WOULD_BLOCK
        _BASE_OFFSET_FIELD.pack_into(batch, 0, base_offset)
        position = log.append_nowait(batch)
        if position is WOULD_BLOCK:
            return WOULD_BLOCK
        # publish_append's bookkeeping, for one batch.
        if position == 0:
            self._rolling_based_timestamp = max_timestamp
        if entry_due:
            assert offset_index is not None and time_index is not None
            self._add_index_entries(
                (offset_index, time_index), [(last_offset, position, max_ts_so_far, max_ts_offset)]
            )
            since = 0
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = max_ts_so_far, max_ts_offset
        self._bytes_since_last_index_entry = since + batch_size
        self._next_offset = last_offset + 1
        self._tail = (position, base_offset)
        if self._batch_table is not None:
            self._table_add(position, read_header(batch))
        return position

    def _plan_append(
        self, headers: Sequence[BatchHeader]
    ) -> tuple[int, int, list[tuple[int, int, int, int]], int, int, int]:
        # The index entries of an append, planned before writing: the positions are known, the index rule
        # needs only sizes. (position, end, entries, max ts, its offset, bytes since the last entry.)
        assert self._max_timestamp_so_far is not None
        position = self._log.size
        since = self._bytes_since_last_index_entry
        max_ts, max_ts_offset = self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far
        entries: list[tuple[int, int, int, int]] = []
        batch_position = position
        interval = self._index_interval_bytes
        for header in headers:
            last_offset = header.base_offset + header.last_offset_delta
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, last_offset
            if since > interval:
                entries.append((last_offset, batch_position, max_ts, max_ts_offset))
                since = 0
            size = LOG_OVERHEAD + header.batch_length
            since += size
            batch_position += size
        return position, batch_position, entries, max_ts, max_ts_offset, since

    def publish_append(self, appended: Appended) -> int:
        """Make a completed :meth:`write_append` visible: the size first, then the bookkeeping; no I/O.

        On the event loop (or wherever the segment's readers cannot run
        meanwhile), once the write returned, also when the appending task was
        cancelled meanwhile: the size and the bookkeeping must follow the
        file, or the next append would reuse these offsets. Returns the
        position of the first batch.
        """
        position, first, last = appended.position, appended.first, appended.last
        self._log.advance(appended.end)
        if position == 0:
            self._rolling_based_timestamp = first.max_timestamp
        if appended.indexes is not None:
            self._add_index_entries(appended.indexes, appended.entries)
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = appended.max_ts, appended.max_ts_offset
        self._bytes_since_last_index_entry = appended.since
        self._next_offset = last.base_offset + last.last_offset_delta + 1
        self._tail = (position, first.base_offset)
        if self._batch_table is not None:
            if first is last:
                self._table_add(position, first)
            elif self._table_tried_size >= 0:
                self._table_tried_size = -1  # more batches to table: the next read's walk adds them
        return position

    def _reserve_index_space(self, entries: int) -> None:
        """Allocate the loaded indexes' file space for ``entries`` more entries (blocking, before the write).

        The time index also gets the slot after them, for the entry written at
        roll or close, which then never meets a full disk.

        Raises:
            StorageError: no space (``ENOSPC``); nothing was written.
            ClosedError: the segment was closed meanwhile.
        """
        offset_index, time_index = self._offset_index.peek(), self._time_index.peek()
        if offset_index is not None and entries:
            offset_index.reserve(entries)
        if time_index is not None:
            time_index.reserve(entries + 1)

    def _add_index_entries(
        self, indexes: tuple[OffsetIndex, TimeIndex], entries: list[tuple[int, int, int, int]]
    ) -> None:
        # The batches are written: whatever happens here, the caller's bookkeeping must follow them.
        offset_index, time_index = indexes
        lock = self._load_lock
        if not lock.acquire(blocking=False):
            # The indexes are being rebuilt from the .log (a lie caught at use) in a thread, up to the
            # size before this append: these entries are skipped (an index is sparse).
            return
        try:
            for last_offset, entry_position, entry_ts, entry_ts_offset in entries:
                if not offset_index.is_full:
                    offset_index.append(last_offset, entry_position)
                if not time_index.is_full:
                    time_index.maybe_append(entry_ts, entry_ts_offset)
        except StorageError as exc:
            # Only reachable when the reservation before the write was skipped or undone (the index
            # was resized meanwhile). An index is sparse: a missing entry makes a lookup scan a
            # little further, never answer wrong; the final time-index entry keeps the maximum.
            _log.warning("%s: index entries skipped: %s", self._log.path, exc)
        finally:
            lock.release()

    # ------------------------------------------------------------------------------ reads

    def _read_offset_index(self, nowait: bool) -> OffsetIndex | WouldBlock | None:
        # The offset index for a read (None: scan from the start), loaded on first use; with `nowait`
        # WOULD_BLOCK instead of loading it.
        if self._offset_index.is_loaded and self._indexes_checked:
            return self._offset_index.get() if self._trust_indexes else None
        if self._read_indexes_ready():
            return None  # ready and not loaded: not trusted
        if nowait:
            return WOULD_BLOCK
        indexes = self._read_indexes()
        return None if indexes is None else indexes[0]

    def _run_read(self, fn: Callable[[PRead], _T], nowait: bool) -> _T | WouldBlock:
        # `fn` over the .log: page cache only with `nowait` (WOULD_BLOCK when it misses), else blocking.
        return self._log.read_nowait(fn) if nowait else self._log.read(fn)

    def _locate(
        self, pread: PRead, offset: int, start: int, end: int, entry_offset: int | None = None
    ) -> LocatedBatch | None:
        walk = _walk_headers(pread, start, end, self._log.path, self._base_offset, entry_offset, target=offset,
                             on_lie=self._index_lied)
        for located in walk:
            if located.header.last_offset >= offset:
                return located
        return None

    def translate_offset(
        self, offset: int, starting_position: int = 0, *, nowait: bool = False
    ) -> LocatedBatch | WouldBlock | None:
        """The first batch whose last offset is ≥ ``offset``, from ``starting_position`` on; ``None`` past the end.

        Blocking; with ``nowait``, page cache only: :data:`WOULD_BLOCK` when it
        would wait for the disk (then call it again without, in a thread).

        Raises:
            CorruptRecordError: a batch header on the way is corrupt.
            StorageError, ClosedError.
        """
        self._check_open()
        offset_index = self._read_offset_index(nowait)
        if offset_index is WOULD_BLOCK:
            return WOULD_BLOCK
        entry = offset_index.lookup(offset) if offset_index else None
        if entry is not None and entry.position >= starting_position:
            start, entry_offset = entry.position, entry.offset
        else:
            start, entry_offset = starting_position, None
        end = self._log.size
        return self._run_read(lambda pread: self._locate(pread, offset, start, end, entry_offset), nowait)

    def visit_batch_headers(
        self, start_offset: int, end_offset: int, visit: Callable[[BatchHeader], None]
    ) -> None:
        """Call ``visit`` with the header of each batch holding offsets in ``[start_offset, end_offset)``, in order.

        Only headers are read (checked as a read checks them; bodies are
        skipped); blocking, ``visit`` runs in the caller's thread. For state
        kept per batch, such as an idempotent producer's, rebuilt without
        decoding records.

        Raises:
            CorruptRecordError: a batch header on the way is corrupt.
            StorageError, ClosedError.
        """
        self._check_open()
        offset_index = self._read_offset_index(False)
        assert offset_index is not WOULD_BLOCK
        entry = offset_index.lookup(start_offset) if offset_index else None
        start, entry_offset = (entry.position, entry.offset) if entry is not None and entry.position > 0 else (0, None)
        end = self._log.size

        def work(pread: PRead) -> None:
            walk = _walk_headers(pread, start, end, self._log.path, self._base_offset, entry_offset,
                                 target=start_offset, on_lie=self._index_lied)
            for _, header in walk:
                if header.base_offset >= end_offset:
                    return
                if header.last_offset >= start_offset:
                    visit(header)

        self._log.read(work)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        *,
        nowait: bool = False,
    ) -> FetchData | WouldBlock | None:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` (Kafka's ``read``).

        ``None`` when ``start_offset`` is beyond the last offset of the segment.
        With ``min_one_message`` the first batch is returned even if larger than
        ``max_bytes``; without it such a batch gives empty ``data`` and
        ``first_entry_incomplete``. Reading stops at ``max_position`` (default:
        the current size). Blocking; with ``nowait``, page cache only:
        :data:`WOULD_BLOCK` when it would wait for the disk (the engine then
        makes the same read in one thread hop). Decode with :meth:`FetchData.records`.

        Raises:
            ValueError: ``max_bytes`` is negative.
            CorruptRecordError: a batch header on the way is corrupt.
            StorageError, ClosedError.
        """
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self._check_open()
        offset_index = self._read_offset_index(nowait)
        if offset_index is WOULD_BLOCK:
            return WOULD_BLOCK
        span = offset_index.ceiling_span(start_offset) if offset_index else None
        followed = self._follow_floor(start_offset)  # a follower's own entry (taken on the loop)
        tail = self._tail
        end = self._log.size
        limit = end if max_position is None else min(max_position, end)
        path = self._log.path
        base_offset = self._base_offset

        def work(pread: PRead) -> FetchData | None:
            located: LocatedBatch | None = None
            if span is not None and 0 <= span[0] < end:
                # The first indexed batch reaching the offset usually holds it (every batch of
                # more than index.interval.bytes is indexed): one read of it, one header, checked
                # against the entry (its last offset) and the next entry (where it must end).
                position, spacing, ceiling_offset = span
                window: bytes | bytearray = pread(position, min(spacing or _READ_WINDOW, end - position))
                window_start = position
                if len(window) >= HEADER_SIZE:
                    header = read_header(window)
                    problem = header_problem(header, end - position) or index_entry_problem(
                        header, ceiling_offset, spacing
                    )
                    if problem is not None:
                        self._index_lied(
                            f"the offset index places the batch ending at offset {ceiling_offset} at position "
                            f"{position}, but {problem}"
                        )
                    elif header.base_offset <= start_offset:
                        located = LocatedBatch(position, header)
            if located is None:
                entry = offset_index.lookup(start_offset) if offset_index else None
                start, entry_offset = (entry.position, entry.offset) if entry is not None else (0, None)
                if followed is not None and followed[0] > start:
                    start, entry_offset = followed
                if tail is not None and tail[1] <= start_offset and tail[0] > start:
                    # The batch holding start_offset is at or after the last append's first.
                    start, entry_offset = tail[0], None
                walk = _HeaderWalk(pread, start, end, path, base_offset, _READ_WINDOW, entry_offset,
                                   target=start_offset, on_lie=self._index_lied)
                located = next((b for b in walk if b.header.last_offset >= start_offset), None)
                if located is None:
                    return None
                window, window_start = walk.window, walk.window_start
            metadata = LogOffsetMetadata(start_offset, self._base_offset, located.position)
            first_size = located.header.size
            adjusted = max(max_bytes, first_size) if min_one_message else max_bytes
            fetch_size = min(limit - located.position, adjusted)
            if fetch_size < first_size:
                return FetchData(metadata, _EMPTY, first_entry_incomplete=0 < adjusted < first_size)
            at = located.position - window_start
            if at >= 0 and at + fetch_size <= len(window):
                buf = memoryview(window)[at : at + fetch_size]
            else:
                buf = memoryview(pread(located.position, fetch_size))
            view = buf.toreadonly()[: whole_batches_length(buf, first_size)]
            return FetchData(metadata, view, max_bytes=max_bytes if first_size > max_bytes else None)

        return self._run_read(work, nowait)

    def _placed_window(
        self, start_offset: int, max_bytes: int, *, one_batch: bool
    ) -> tuple[int, bytes | bytearray, int, int] | None:
        # The position of the first indexed batch reaching start_offset, the cached bytes from there,
        # the bytes to the next entry and the entry's offset (which the caller checks against the
        # batch: index_entry_problem), when a synchronous read may use them: an open segment whose
        # offset index is loaded and checked (OffsetIndex.ceiling_span), bytes cached. `one_batch`: the
        # caller wants that batch only, so nothing is read when max_bytes says the read would take
        # more than its span.
        if self._closed or not (self._indexes_checked and self._trust_indexes) or max_bytes < 0:
            return None
        index = self._offset_index.peek()
        if index is None:
            return None
        span = index.ceiling_span(start_offset)
        end = self._log.size
        if span is None:
            return None
        position, spacing, entry_offset = span
        if not 0 <= position < end:
            return None  # a lying entry: read() finds the batch by the headers, and has the index rebuilt
        size = spacing or _READ_WINDOW
        if one_batch and max_bytes > size:
            return None  # a fetch of more than this batch: read_cached reads it, once
        want = size if size >= max_bytes else max_bytes  # min(max(...)) inlined: a point read's hot path
        if want > end - position:  # noqa: PLR1730 -- no min() call on this path
            want = end - position
        if want > size and not one_batch:
            # A fetch of small batches usually starts in an unindexed batch before this one: its
            # header says so in a 61-byte read, before a megabyte is copied out of the page cache
            # for nothing (read() then walks to the batch from the entry before).
            head = self._log.read_cached(position, HEADER_SIZE)
            if head is None or len(head) < HEADER_SIZE or _LOCATE.unpack_from(head)[0] > start_offset:
                return None
        window = self._log.read_cached(position, want)
        if window is None or len(window) < HEADER_SIZE:
            return None
        return position, window, spacing, entry_offset

    def read_records_cached(
        self, start_offset: int, max_bytes: int, max_position: int | None = None
    ) -> list[Record] | None:
        """The Records :meth:`read` would return from one batch, when it can be answered at once: else ``None``.

        A point read: the batch holding ``start_offset`` is placed by the
        offset index (as in :meth:`read_cached`), is at least ``max_bytes``
        long (so the read returns only it), and is in the page cache; it is
        checked, CRC-verified and decoded in one call of the C module
        (``first_batch_records``). ``None`` in any other case (also without
        the C module), and when the bytes at the indexed position fail their checks:
        the caller then reads with :meth:`read`, which decides (and raises
        :class:`CorruptRecordError` for a corrupt batch).

        Raises:
            StorageError, ClosedError.
        """
        verified = self._verified
        if verified is not None:
            # The record a time lookup has just found (the read that usually follows it), taken once: a
            # segment holds no record beyond the read it was kept for (a cut or close forgets it). It
            # is the whole read when it is the offset asked for, its batch lies below the read limit
            # and its key and value bytes reach max_bytes (decode_batch's rule).
            self._verified = None
            looked_up = verified[2]
            key, value = looked_up.key, looked_up.value
            if (
                looked_up.offset == start_offset
                and (max_position is None or verified[0] + verified[1] <= max_position)
                and max_bytes <= (0 if key is None else len(key)) + (0 if value is None else len(value))
            ):
                return [looked_up]
        if self._batch_table is not None:
            got = self._table_read(start_offset, max_bytes, max_position)
            if got is not None:
                return got
        placed = self._placed_window(start_offset, max_bytes, one_batch=True)
        if placed is None:
            return None
        position, window, spacing, entry_offset = placed
        base_offset, batch_length, last_offset_delta = _LOCATE.unpack_from(window)
        first_size = LOG_OVERHEAD + batch_length
        limit = self._log.size
        if max_position is not None and max_position < limit:
            limit = max_position
        if (
            # index_entry_problem's two rules, inline on the fields in hand: the batch ends at the
            # entry's offset, and before the next entry's position. read() says what is wrong.
            base_offset + last_offset_delta != entry_offset
            or (spacing and first_size > spacing)
            or base_offset > start_offset
            or max_bytes > first_size
            or first_size > min(len(window), limit - position)
            or first_size < HEADER_SIZE
        ):
            return None
        # The C reader checks the batch at the window's start (the bytes after it are not read).
        return first_batch_records(window, start_offset, max_bytes if max_bytes < first_size else None)

    # ------------------------------------------------------------------------------ batch tables

    def batch_table_job(self, offset: int, *, whole: bool = False) -> Callable[[], TableBuild | None] | None:
        """The blocking walk that tables this segment's batches up to its size, when a read of ``offset`` wants it.

        On the event loop: ``None`` when the batch table already places
        ``offset`` (with ``whole``: the whole segment, as a time lookup needs)
        or the walk tried at this size and covered no more, or another build
        is under way, or tables are off. Else a function to
        run in a thread (it reads only headers, from the table's end on);
        hand its result to :meth:`install_batch_table` on the loop.
        """
        if self._closed or self._followed is not None or self._table_building or self._budget.limit_bytes == 0:
            return None
        size = self._log.size
        table = self._batch_table
        if table is not None and (table.end >= size or (offset < table.next_offset and not whole)):
            return None
        if self._table_tried_size == size:
            return None
        start, expected = (0, self._base_offset) if table is None else (table.end, table.next_offset)
        held = 0 if table is None else len(table)
        max_entries = self._budget.limit_bytes // BYTES_PER_BATCH - held
        if max_entries <= 0:
            return None
        self._table_building = True
        epoch, log, walk_bytes = self._table_epoch, self._log, self._walk_max_bytes

        def walk() -> TableBuild | None:
            try:
                build = log.read(
                    lambda pread: walk_batch_table(pread, start, size, expected, max_entries, walk_bytes)
                )
            except SeglogError:
                return None  # the read that wanted it takes the header walk, which reports the problem
            return build if epoch == self._table_epoch else None

        return walk

    def install_batch_table(self, build: TableBuild | None) -> None:
        """Add what :meth:`batch_table_job`'s walk found to the batch table; on the event loop, no I/O."""
        self._table_building = False
        size = self._log.size
        table = self._batch_table
        if build is None or self._closed:
            self._table_tried_size = size
            return
        if table is None:
            table = BatchTable(self._base_offset)
        if build.start != table.end or not build.positions:
            self._table_tried_size = size
            return
        extra = len(build.positions) * BYTES_PER_BATCH
        if self._batch_table is None:
            charged = self._budget.charge(table, extra, self._table_evictor(table))
        else:
            charged = self._budget.grow(table, extra)
        if not charged:
            self._drop_tables()
            self._table_tried_size = size
            return
        table.extend(build)
        self._batch_table = table
        # A walk stopped by a failed header or the budget is not tried again at this size; one stopped
        # by its byte limit goes on at the next read past it.
        self._table_tried_size = -1 if build.complete else size

    def _table_evictor(self, table: BatchTable | RecordTable) -> Callable[[], None]:
        # Drops the segment's reference when the budget evicts `table` (any thread); no reference to
        # the segment is held, so a table never keeps a segment alive.
        ref = weakref.ref(self)

        def evict() -> None:
            segment = ref()
            if segment is None:
                return
            if segment._batch_table is table:
                segment._batch_table = None
            elif isinstance(table, RecordTable) and segment._record_tables.get(table.position) is table:
                del segment._record_tables[table.position]

        return evict

    def _drop_tables(self) -> None:
        """Forget every table of this segment (the .log was cut or closed): no read may use them again."""
        self._table_epoch += 1
        table, self._batch_table = self._batch_table, None
        records, self._record_tables = self._record_tables, {}
        self._verified = None
        self._table_tried_size = -1
        if table is not None:
            self._budget.release(table)
        for record_table in records.values():
            self._budget.release(record_table)

    def _table_add(self, position: int, header: BatchHeader) -> None:
        # One batch just published at the table's end: its entry, so that reads of it need no walk.
        table = self._batch_table
        if table is not None and table.end == position:
            if self._budget.grow(table, BYTES_PER_BATCH):
                table.add(position, header.size, header.last_offset, header.max_timestamp)
            else:
                self._drop_tables()

    def _record_table(self, position: int, window: bytes | bytearray, header: BatchHeader) -> RecordTable | None:
        # The record table of the whole batch in `window` (CRC verified, every record checked), kept
        # when the budget has room; None when the batch is not tabled or fails a check (the header
        # walk then reads it again and says what is wrong).
        try:
            table = build_record_table(window, position, header)
        except CorruptRecordError:
            return None
        if table is not None and self._budget.charge(table, table.cost_bytes(), self._table_evictor(table)):
            self._record_tables[position] = table
        return table

    def _checked_window(
        self, position: int, size: int, first: int, last: int
    ) -> tuple[bytes | bytearray, BatchHeader] | None:
        # The cached bytes of the batch the table places at `position`, when its header is a valid
        # batch's and says what the table says (offsets, size); else None (the header walk decides).
        window = self._log.read_cached(position, size)
        if window is None or len(window) < size or size < HEADER_SIZE:
            return None
        header = read_header(window)
        if (
            header.base_offset != first
            or header.last_offset != last
            or header.size != size
            or header_problem(header, size) is not None
        ):
            return None
        return window, header

    def _from_record_table(
        self, records: RecordTable, index: int, window: bytes | bytearray | None
    ) -> Record | None:
        # Record `index` of a record-table batch: its key and value bytes read alone (from `window`
        # when the caller holds the batch), after the header there is checked against the table.
        key_length, value_length = records.key_lengths[index], records.value_lengths[index]
        key = value = None
        if window is not None:
            at = records.position
            if key_length >= 0:
                start = records.key_positions[index] - at
                key = bytes(window[start : start + key_length])
            if value_length >= 0:
                start = records.value_positions[index] - at
                value = bytes(window[start : start + value_length])
        else:
            # One guarded access for the header (checked against the table: the CRC verified when the
            # table was built still holds for these bytes) and the record's key and value.
            key_at, value_at = records.key_positions[index], records.value_positions[index]
            near = key_at + key_length - records.position
            if key_length >= 0 and value_length >= 0 and near <= _NEAR_KEY_BYTES:
                # The key lies near the header (the first records' keys, or a batch of short keys): one
                # read of both costs less than a second system call.
                pieces = self._log.read_cached_spans(((records.position, near), (value_at, value_length)))
                if pieces is None:
                    return None
                head, got_value = pieces
                if len(head) != near or len(got_value) != value_length or head[:HEADER_SIZE] != records.header:
                    return None
                key, value = bytes(head[near - key_length :]), bytes(got_value)
            elif key_length >= 0 and value_length >= 0:
                pieces = self._log.read_cached_spans(
                    ((records.position, HEADER_SIZE), (key_at, key_length), (value_at, value_length))
                )
                if pieces is None:
                    return None
                head, got_key, got_value = pieces
                if len(got_key) != key_length or len(got_value) != value_length or head != records.header:
                    return None
                key, value = bytes(got_key), bytes(got_value)
            else:
                spans = [(records.position, HEADER_SIZE)]
                if key_length >= 0:
                    spans.append((key_at, key_length))
                if value_length >= 0:
                    spans.append((value_at, value_length))
                pieces = self._log.read_cached_spans(spans)
                if pieces is None or any(len(p) != n for p, (_, n) in zip(pieces, spans, strict=True)):
                    return None
                if pieces[0] != records.header:
                    return None
                if key_length >= 0:
                    key = bytes(pieces[1])
                if value_length >= 0:
                    value = bytes(pieces[-1])
            self._budget.touch(records)
        return _new_record((value, key, records.timestamps[index], (), records.base_offset + index))

    def _table_read(self, start_offset: int, max_bytes: int, max_position: int | None) -> list[Record] | None:
        """:meth:`read_records_cached` placed by the batch table: one bisect, one read (or a record's bytes)."""
        table = self._batch_table
        if table is None or self._closed:
            return None
        # BatchTable.find, __len__ and span and _placed_batch, inlined: a point read's hottest lines.
        slot = bisect.bisect_left(table.last_offsets, start_offset)
        positions = table.positions
        count = len(positions)
        if slot >= count:
            return None
        limit = self._log.size
        if max_position is not None and max_position < limit:
            limit = max_position
        position = positions[slot]
        size = (positions[slot + 1] if slot + 1 < count else table.end) - position
        if position + size > limit:
            return None
        first = table.last_offsets[slot - 1] + 1 if slot else table.base_offset
        if first > start_offset:
            return None
        records = self._record_tables.get(position) if size >= _RECORD_TABLE_MIN_BYTES else None
        index = start_offset - first
        if records is not None:
            wanted = max(records.key_lengths[index], 0) + max(records.value_lengths[index], 0)
            if max_bytes <= wanted:  # one record is the whole read (decode_batch's max_bytes rule)
                record = self._from_record_table(records, index, None)
                if record is not None:
                    return [record]
                # Not cached, or the header is not the one verified: forget the table (the file changed).
                self._record_tables.pop(position, None)
                self._budget.release(records)
                records = None
        if max_bytes > size:
            return None  # more than this batch: read_cached or read() take it
        if size >= _RECORD_TABLE_MIN_BYTES and records is None:
            checked = self._checked_window(position, size, first, table.last_offsets[slot])
            if checked is None:
                return None
            window, header = checked
            records = self._record_table(position, window, header)
            if records is not None:
                wanted = max(records.key_lengths[index], 0) + max(records.value_lengths[index], 0)
                if max_bytes <= wanted:
                    return [r for r in (self._from_record_table(records, index, window),) if r is not None] or None
        else:
            found = self._log.read_cached(position, size)
            if found is None or len(found) < size:
                return None
            window = found
            # What the table says of the batch (the C reader checks the rest of the header).
            base_offset, batch_length, last_offset_delta = _LOCATE.unpack_from(window)
            if base_offset != first or LOG_OVERHEAD + batch_length != size or (
                base_offset + last_offset_delta != table.last_offsets[slot]
            ):
                return None
        # The C reader checks the header and the CRC, and decodes. A Kafka batch (the wire server's), or any
        # batch without the C module: the same checks and decode, in Python. A control batch (a transaction
        # marker) holds no record: read() goes on to the batch after it.
        within = max_bytes if max_bytes < size else None
        got = first_batch_records(window, start_offset, within)
        magic = window[MAGIC_OFFSET]
        if got is None and (magic == MAGIC or (magic == KAFKA_MAGIC and not window[_ATTRIBUTES_LOW] & CONTROL_BIT)):
            try:
                got = decode_first_batch(window, start_offset=start_offset, max_bytes=within) or None
            except CorruptRecordError:
                return None  # read() reads it again, and says where
        return got

    def find_offset_by_timestamp_cached(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampOffset | WouldBlock | None:
        """:meth:`find_offset_by_timestamp` from the batch table and the page cache; :data:`WOULD_BLOCK` if not.

        On the event loop, no wait: the first batch whose largest timestamp
        reaches ``timestamp`` is found by a bisect of the table's running
        maximum; a large batch's record table answers without reading it (and
        the read that usually follows reads only that record); a smaller
        batch is read from the page cache, its CRC verified, its timestamp
        column searched. :data:`WOULD_BLOCK` whenever that cannot be done (no
        table covering the whole segment, bytes not cached, a check failed):
        the caller then makes the blocking lookup, which decides.
        """
        table = self._batch_table
        if table is None or self._closed:
            return WOULD_BLOCK
        # BatchTable.find, __len__ and first_reaching, inlined: a time lookup's hottest lines. A lookup from
        # the log start (the usual one) starts at the first batch: no bisect, whose cost grows with the table.
        slot = bisect.bisect_left(table.last_offsets, starting_offset) if starting_offset > table.base_offset else 0
        count = len(table.positions)
        running, own = table.running_max, table.max_timestamps
        for _ in range(_TIME_LOOKUP_TRIES):
            slot = bisect.bisect_left(running, timestamp, slot)
            while slot < count and own[slot] < timestamp:  # the running max came from an earlier batch
                slot += 1
            if slot >= count:
                # No tabled batch reaches the timestamp: none of the segment does, if it is tabled whole.
                return None if table.end == self._log.size else WOULD_BLOCK
            found = self._time_in_batch(table, slot, timestamp, starting_offset)
            if found is not None:
                return found
            slot += 1
        return WOULD_BLOCK

    def _time_in_batch(
        self, table: BatchTable, slot: int, timestamp: int, starting_offset: int
    ) -> TimestampOffset | WouldBlock | None:
        # The first record of batch `slot` at or after `starting_offset` with a timestamp >= `timestamp`.
        # _placed_batch and BatchTable.span, inlined: a time lookup's hottest lines.
        positions = table.positions
        position = positions[slot]
        size = (positions[slot + 1] if slot + 1 < len(positions) else table.end) - position
        if position + size > self._log.size:
            return WOULD_BLOCK
        first = table.last_offsets[slot - 1] + 1 if slot else table.base_offset
        records = self._record_tables.get(position) if size >= _RECORD_TABLE_MIN_BYTES else None
        skip = starting_offset - first if starting_offset > first else 0
        if records is not None:
            # RecordTable.first_at_or_after and __len__, inlined.
            stamps = records.timestamps
            count = len(stamps)
            if records.sorted:
                index = bisect.bisect_left(stamps, timestamp, skip)
            else:
                index = skip
                while index < count and stamps[index] < timestamp:
                    index += 1
            if index >= count:
                return None  # (the table was built from the CRC-verified batch; no byte is read)
            # The record itself, read now (its header checked against the table): the read that
            # usually follows takes it as it is.
            record = self._from_record_table(records, index, None)
            if record is not None:
                self._verified = (position, size, record)
                return _new_timestamp_offset((records.timestamps[index], first + index))
            self._record_tables.pop(position, None)
            self._budget.release(records)
        if size < _RECORD_TABLE_MIN_BYTES:
            # A batch read whole: checked against its table entry, CRC-verified, its timestamp column
            # searched and the one record found built, in one C call (record_at_time; its Python twin
            # without the C module). The read that usually follows takes that record.
            window = self._log.read_cached(position, size)
            if window is None or len(window) < size:
                return WOULD_BLOCK
            hit = record_at_time(window, first, table.last_offsets[slot], timestamp, starting_offset)
            if hit is not None:
                self._verified = (position, size, hit)
                return _new_timestamp_offset((hit.timestamp, hit.offset))
            if window[MAGIC_OFFSET] == KAFKA_MAGIC:
                # A Kafka batch (the wire server's; record_at_time reads seglog's format only): checked
                # against the table, then checked, CRC-verified and searched by the one-batch C reader,
                # which builds only the record found; it is kept for the read that follows.
                base_offset, batch_length, last_offset_delta = _LOCATE.unpack_from(window)
                if base_offset != first or LOG_OVERHEAD + batch_length != size or (
                    base_offset + last_offset_delta != table.last_offsets[slot]
                ):
                    return WOULD_BLOCK
                searched = kafka_record_at_time(window, first + skip, timestamp)
                if searched is not None:
                    if not searched:
                        return None
                    record = searched[0]
                    self._verified = (position, size, record)
                    return _new_timestamp_offset((record.timestamp, record.offset))
        checked = self._checked_window(position, size, first, table.last_offsets[slot])
        if checked is None:
            return WOULD_BLOCK
        window, header = checked
        if size >= _RECORD_TABLE_MIN_BYTES:
            records = self._record_table(position, window, header)
            if records is not None:
                index = records.first_at_or_after(timestamp, skip)
                return None if index >= len(records) else TimestampOffset(records.timestamps[index], first + index)
        try:
            verify_crc(window, 0, header)
            found = find_timestamp(window, 0, header, timestamp, start_offset=starting_offset)
        except CorruptRecordError:
            return WOULD_BLOCK  # the blocking lookup reads it again and says where
        if found is None:
            return None
        found_ts, found_offset = found
        if header.magic == MAGIC:
            # The record itself (the CRC is verified): the read that usually follows takes it as it is.
            try:
                one = decode_batch(window, 0, header, start_offset=found_offset, max_bytes=1)
            except CorruptRecordError:
                return WOULD_BLOCK
            if one and one[0].offset == found_offset:
                self._verified = (position, size, one[0])
        return TimestampOffset(found_ts, found_offset)

    def read_cached(self, start_offset: int, max_bytes: int, max_position: int | None = None) -> FetchData | None:
        """:meth:`read` with ``min_one_message``, when it can be answered at once: else ``None``.

        Answers when the offset index is loaded and checked, names the batch
        holding ``start_offset`` (see ``OffsetIndex.ceiling_span``), and the
        page cache holds the bytes to return; ``None`` otherwise (and for
        reads past this segment), and the caller awaits :meth:`read`. A point
        read (a consumer seeking to one offset) then costs no coroutine, no
        thread hop and one ``pread``.

        Raises:
            StorageError, ClosedError.
        """
        placed = self._placed_window(start_offset, max_bytes, one_batch=False)
        if placed is None:
            return None
        position, window, spacing, entry_offset = placed
        end = self._log.size
        header = read_header(window)
        first_size = header.size
        limit = end if max_position is None else min(max_position, end)
        fetch_size = min(limit - position, max(max_bytes, first_size))
        if (
            not header.base_offset <= start_offset <= header.last_offset
            or header_problem(header, end - position) is not None
            or index_entry_problem(header, entry_offset, spacing) is not None
            or fetch_size < first_size
            or fetch_size > len(window)
        ):
            return None
        view = memoryview(window).toreadonly()
        if fetch_size > first_size:
            view = view[: whole_batches_length(view[:fetch_size], first_size)]
        else:
            view = view[:first_size]
        # tuple.__new__: two NamedTuple constructors' Python frames are a noticeable part of a point read.
        return _new_fetch_data((
            _new_offset_metadata((start_offset, self._base_offset, position)),
            view,
            False,
            max_bytes if first_size > max_bytes else None,
        ))

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0, *, nowait: bool = False
    ) -> TimestampOffset | WouldBlock | None:
        """The earliest record with timestamp ≥ ``timestamp`` and offset ≥ ``starting_offset``, or ``None``.

        Correct with out-of-order timestamps: the time index gives a batch
        before which every timestamp is smaller; batches whose max timestamp
        is below the target are skipped by their header, without decoding.
        Blocking; with ``nowait``, page cache only (:data:`WOULD_BLOCK`).

        Raises:
            CorruptRecordError: a batch on the way fails its checks.
            StorageError, ClosedError.
        """
        self._check_open()
        if nowait and not self._read_indexes_ready():
            return WOULD_BLOCK
        indexes = self._read_indexes()
        target = starting_offset  # every record before target's batch has a smaller timestamp
        # The time-index entry the search starts from, checked when the walk meets the batch it names.
        time_entry: TimestampOffset | None = None
        if indexes is not None:
            time_entry = indexes[1].lookup(timestamp)
            if time_entry.timestamp == NO_TIMESTAMP:  # no entry at or below the timestamp: from the start
                time_entry = None
            elif time_entry.timestamp > timestamp:  # an index out of order
                self._index_lied(f"time-index entry {tuple(time_entry)} was found for timestamp {timestamp}")
                time_entry = None
            elif time_entry.offset > target:
                target = time_entry.offset
            else:
                time_entry = None
        followed_time = self._follow_time_floor(timestamp)
        if followed_time is not None and followed_time > target:
            target, time_entry = followed_time, None
        offset_index = None if indexes is None else indexes[0]
        start, entry_offset = 0, None
        if offset_index is not None:
            floor = offset_index.lookup(target)
            start, entry_offset = floor.position, floor.offset
        followed = self._follow_floor(target)
        if followed is not None and followed[0] > start:
            start, entry_offset = followed
        end = self._log.size
        path = self._log.path

        def search(
            pread: PRead, start: int, entry_offset: int | None, target: int, entry: TimestampOffset | None
        ) -> TimestampOffset | str | None:
            # The answer, or why the time-index entry the search started from lied.
            walk = _HeaderWalk(pread, start, end, path, self._base_offset, _READ_WINDOW, entry_offset,
                               target=target, on_lie=self._index_lied)
            for position, header in walk:
                # Time-index entry (T, O): the batch ending at O holds the largest timestamp, T, of every
                # record up to O, and T is not above the one asked for. Until the walk meets that
                # batch, no record qualifies.
                if entry is not None and (header.last_offset >= entry.offset or header.max_timestamp >= timestamp):
                    problem = time_entry_problem(header, entry.timestamp, entry.offset)
                    if problem is not None:
                        return f"time-index entry {tuple(entry)}: {problem}"
                    entry = None
                if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                    continue
                buf = walk.bytes_at(position, header.size) or pread(position, header.size)
                try:
                    verify_crc(buf, 0, header)
                    # Unpacks only the offset and timestamp columns; builds no Record.
                    found = find_timestamp(buf, 0, header, timestamp, start_offset=starting_offset)
                except CorruptRecordError as exc:
                    raise CorruptRecordError(f"{path}: at position {position}: {exc}") from exc
                if found is not None:
                    return TimestampOffset(*found)
            return None if entry is None else f"time-index entry {tuple(entry)} names an offset past the .log"

        def work(pread: PRead) -> TimestampOffset | None:
            found = search(pread, start, entry_offset, target, time_entry)
            if isinstance(found, str):
                # A lying time index: the search again without it (from the requested offset's batch,
                # which the offset index places), and the indexes are rebuilt on their next use.
                self._index_lied(found)
                floor = offset_index.lookup(starting_offset) if offset_index is not None else None
                again = (0, None) if floor is None else (floor.position, floor.offset)
                found = search(pread, again[0], again[1], starting_offset, None)
                assert not isinstance(found, str)
            return found

        return self._run_read(work, nowait)

    def read_next_offset(self, *, nowait: bool = False) -> int | WouldBlock:
        """The offset after the last batch (``base_offset`` when empty).

        Blocking; with ``nowait``, page cache only (:data:`WOULD_BLOCK`). An
        answer is kept for the size it was found at: an append (which knows
        its own next offset) finishing meanwhile is never undone by it.

        Raises:
            CorruptRecordError: a batch header on the way is corrupt.
            StorageError, ClosedError.
        """
        self._check_open()
        if self._next_offset is not None:
            return self._next_offset
        # Both bounds are taken together, before the walk: an append finishing while it runs must not
        # move the start (the last index entry) past the end.
        end = self._log.size
        found = self._found_next_offset
        if found is not None and found[0] == end:
            return found[1]
        offset_index = self._read_offset_index(nowait)
        if offset_index is WOULD_BLOCK:
            return WOULD_BLOCK
        start, entry_offset = 0, None
        if offset_index:
            # The last entry below `end`: an append published since `end` was taken (on the loop, while
            # this runs in a thread) may have added entries past it.
            slot = offset_index.entries - 1
            while slot >= 0 and (entry := offset_index.entry(slot)).position >= end:
                slot -= 1
            if slot >= 0:
                start, entry_offset = entry.position, entry.offset
        next_offset = self._run_read(partial(self._walk_to_end, start, end, entry_offset), nowait)
        if next_offset is not WOULD_BLOCK:
            # Keyed by the size it holds for (this may run in a thread while an append is published on
            # the loop): a stale answer is never taken for the current one.
            self._found_next_offset = (end, next_offset)
        return next_offset

    def _walk_to_end(self, start: int, end: int, entry_offset: int | None, pread: PRead) -> int:
        next_offset = self._base_offset
        for _, header in _walk_headers(pread, start, end, self._log.path, self._base_offset, entry_offset,
                                       on_lie=self._index_lied):
            next_offset = header.next_offset
        return next_offset

    def has_overflow(self) -> bool:
        """Whether the segment holds an offset not representable relative to its base (Kafka); blocking."""
        next_offset = self.read_next_offset()
        assert next_offset is not WOULD_BLOCK
        return next_offset > self._base_offset and next_offset - 1 - self._base_offset > INT32_MAX

    # ------------------------------------------------------------------------------ following

    @property
    def followed(self) -> bool:
        """Whether a follower tracks this read-only segment's growth (:meth:`begin_follow`)."""
        return self._followed is not None

    def begin_follow(self, *, trust_indexes: bool) -> None:
        """Start following this read-only segment, which another process may be appending to; blocking.

        The logical size drops to a point up to which the batches are trusted
        without a new scan; :meth:`follow` then validates (CRC-32C)
        everything after it. With ``trust_indexes`` and both index files
        present and passing their check, that point is the offset-index floor
        of the time index's last entry (where Kafka's ``loadLargestTimestamp``
        starts): the index snapshot serves lookups below it. Otherwise it is 0:
        the whole segment is validated and indexed in memory, and the writer's
        index files are never read.

        Raises:
            ValueError: the segment is writable.
            StorageError: a file cannot be read.
        """
        if self._writable:
            raise ValueError(f"{self._log.path}: only a read-only segment is followed")
        start, verify = 0, None
        with self._load_lock:
            if trust_indexes and all(self._index_files_existed):
                try:
                    offset_index, time_index = self._offset_index.get(), self._time_index.get()
                    problem = self._log.read(partial(self._index_problem, offset_index, time_index))
                except StorageError as exc:  # e.g. removed meanwhile: validate the .log alone
                    problem = str(exc)
                if problem is None and time_index.entries:
                    verify = time_index.last_entry
                    start = min(offset_index.lookup(verify.offset).position, self._log.size)
            # From 0: the follower indexes the whole segment itself; snapshots would only mislead.
            self._trust_indexes = start > 0
            self._indexes_checked = True
        self._drop_tables()
        self._followed = _Followed(verify if start > 0 else None)
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = (
            (verify.timestamp, verify.offset) if verify is not None and start > 0 else (NO_TIMESTAMP, self._base_offset)
        )
        self._next_offset = None if start > 0 else self._base_offset
        self._tail = None
        self._log.follow_size(start)

    def follow(self, max_batch_bytes: int, limit_bytes: int) -> FollowScan:
        """Validate the batches written after the logical end of a followed segment; blocking, changes nothing.

        Reads from the logical end up to the file's current length (at most
        ``limit_bytes``) and keeps the complete batches that pass their checks
        and CRC-32C, in order. Whatever follows them — a batch still being
        written, preallocated zeros, garbage — is "not written yet": it is never
        cut or repaired here (the writer, or its recovery, owns the file).
        Also checks that the file still holds what was validated before (its
        length, and the header of the last validated batch): if not,
        ``restart`` is set. Apply the result with :meth:`apply_follow`.

        Raises:
            ValueError: the segment is not followed.
            StorageError, ClosedError.
        """
        followed = self._followed
        if followed is None:
            raise ValueError(f"{self._log.path}: not followed; call begin_follow first")
        start = self._log.size
        # The offset the next batch must have: known once something was validated (or from the start of
        # the file); a follow that began at an index entry's batch only knows it is this segment's.
        first_offset = self._next_offset if self._next_offset is not None or start > 0 else self._base_offset
        known_max_ts = self._max_timestamp_so_far
        assert known_max_ts is not None  # set by begin_follow
        interval = self._index_interval_bytes
        base_offset = self._base_offset

        def work(pread: PRead, length: int) -> FollowScan:
            if length < start:
                return _NO_SCAN  # cut below what was validated
            last = followed.last
            if last is not None and pread(last[0], HEADER_SIZE) != last[1]:
                return _NO_SCAN  # the last validated batch was overwritten
            verify = followed.verify
            max_ts, max_ts_offset = known_max_ts, self._offset_of_max_timestamp_so_far
            entries: list[tuple[int, int, int, int]] = []
            since, first, tail = followed.since, None, None
            # Past the byte limit a batch that starts before it is still read whole (when its bytes are
            # in the file); whatever does not pass the reader's checks is "not written yet".
            reader = BatchReader(
                pread, end=length, base_offset=base_offset, max_batch_bytes=max_batch_bytes, start=start,
                first_offset=first_offset, limit=min(length, start + limit_bytes), path=self._log.path,
            )
            for at, header in reader:
                if at == 0:
                    first = header
                if tail is None:
                    tail = (at, header.base_offset)
                if verify is not None and header.last_offset >= verify.offset:
                    if header.last_offset != verify.offset or header.max_timestamp != verify.timestamp:
                        return _NO_SCAN  # the time-index snapshot does not describe this .log
                    verify = None
                if header.max_timestamp > max_ts:
                    max_ts, max_ts_offset = header.max_timestamp, header.last_offset
                if since > interval:
                    entries.append((header.last_offset, at, max_ts, max_ts_offset))
                    since = 0
                since += header.size
                last = (at, HEADER.pack(*header))
            limited = reader.stop is ScanStop.LIMIT  # more may be there already
            if verify is not None and not limited:
                return _NO_SCAN  # the batch the time-index snapshot names is not (or not yet) there
            return FollowScan(
                False, reader.position, reader.next_offset, max_ts, max_ts_offset, first, tail, last, entries, since,
                limited, followed.verify is not None and verify is None,
            )

        return self._log.read_unvalidated(work)

    def apply_follow(self, scan: FollowScan) -> None:
        """Make what :meth:`follow` validated visible to readers; no I/O.

        On the event loop (or before anyone else holds the segment): the index
        entries come first, the logical size last.

        Raises:
            ValueError: ``scan.restart`` is set, or the segment is not followed.
        """
        followed = self._followed
        if followed is None or scan.restart:
            raise ValueError(f"{self._log.path}: this scan cannot be applied; open the segment again")
        if scan.verified:
            followed.verify = None
        for last_offset, position, max_ts, max_ts_offset in scan.entries:
            followed.offsets.append(last_offset)
            followed.positions.append(position)
            if max_ts > (followed.times[-1] if followed.times else NO_TIMESTAMP):
                followed.times.append(max_ts)
                followed.time_offsets.append(max_ts_offset)
        followed.since = scan.since
        if scan.last is not None:
            followed.last = scan.last
        if scan.first is not None:
            self._rolling_based_timestamp = scan.first.max_timestamp
        if scan.tail is not None:
            self._tail = scan.tail
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = scan.max_ts, scan.max_ts_offset
        self._next_offset = scan.next_offset
        self._log.follow_size(scan.valid_end)

    def _follow_floor(self, offset: int) -> tuple[int, int] | None:
        # (position, last offset) of the follower's own entry with the largest last offset <= offset.
        followed = self._followed
        if followed is None:
            return None
        i = bisect.bisect_right(followed.offsets, offset) - 1
        return (followed.positions[i], followed.offsets[i]) if i >= 0 else None

    def _follow_time_floor(self, timestamp: int) -> int | None:
        # The offset of the follower's own time entry with the largest timestamp <= timestamp.
        followed = self._followed
        if followed is None:
            return None
        i = bisect.bisect_right(followed.times, timestamp) - 1
        return followed.time_offsets[i] if i >= 0 else None

    # ------------------------------------------------------------------------------ roll

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        """Milliseconds this segment has been "open" for time-based rolling (Kafka's rule).

        The incoming batch's timestamp minus the first batch's timestamp when the
        first batch has one; otherwise wall-clock time since the segment was created.
        """
        first = self._rolling_based_timestamp
        if first is not None and first >= 0 and self._log.size > 0:
            return max_timestamp_in_messages - first
        return now_ms - self._created_ms

    def should_roll(self, params: RollParams) -> bool:
        """Whether the next append (described by ``params``) must go to a new segment; pure.

        True when any of Kafka's five conditions holds: the segment would exceed
        ``max_segment_bytes``; it is non-empty and has waited more than
        ``max_segment_ms - roll_jitter_ms``; its offset index is full; its time
        index is full; or the incoming last offset is not representable relative
        to the base offset. An empty segment never rolls for time.
        """
        size = self._log.size
        if size > 0:  # time_waited_for_roll, inline: every append asks
            first = self._rolling_based_timestamp
            waited = (
                params.max_timestamp_in_messages - first
                if first is not None and first >= 0
                else params.now_ms - self._created_ms
            )
            if waited > params.max_segment_ms - self._roll_jitter_ms:
                return True
        if size > params.max_segment_bytes - params.messages_size:
            return True
        offset_index, time_index = self._offset_index.peek(), self._time_index.peek()
        # A loaded index says; one not loaded would be created empty, or (an existing file) is taken as
        # full of valid entries until resize_indexes() grows it again (Kafka's AbstractIndex rule).
        if offset_index.is_full if offset_index is not None else self._index_files_existed[0]:
            return True
        if time_index.is_full if time_index is not None else self._index_files_existed[1]:
            return True
        return not 0 <= params.max_offset_in_messages - self._base_offset <= INT32_MAX

    def on_become_inactive(self) -> None:
        """At roll: write the final time-index entry, trim both indexes and a preallocated ``.log``; blocking.

        Raises:
            StorageError: a trim failed.
        """
        self._check_writable()
        offset_index, time_index = self._indexes()
        assert self._max_timestamp_so_far is not None
        _final_time_entry(time_index, self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far)
        offset_index.trim_to_valid_size()
        time_index.trim_to_valid_size()
        self._log.trim()

    # ------------------------------------------------------------------------------ durability

    def flush(self) -> None:
        """``fdatasync`` the ``.log`` and flush the loaded indexes; blocking.

        Raises:
            StorageError: a sync failed.
        """
        self._check_open()
        self._log.fsync()
        for lazy in (self._offset_index, self._time_index):
            if lazy.is_loaded:
                lazy.get().flush()
        self._txn_index.flush()

    # ------------------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, *, now_ms: int) -> int:
        """Remove every batch whose last offset is ≥ ``offset``; returns the bytes removed.

        The cut is at the start of the batch holding ``offset`` (whole batches
        only, so a batch straddling ``offset`` goes entirely, as in Kafka). The
        indexes are truncated and grown back to ``max_index_size``; an emptied
        segment restarts its roll clock at ``now_ms``; the largest timestamp is
        re-derived from what remains. An offset beyond the segment changes
        nothing (returns 0). Blocking.

        Raises:
            StorageError, ClosedError, CorruptRecordError (a header on the way).
        """
        self._check_writable()
        self._drop_tables()  # first: a read on the loop meanwhile must not be placed by them
        offset_index, time_index = self._indexes()
        located = self.translate_offset(offset)
        assert located is not WOULD_BLOCK
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        offset_index.resize(self._max_index_size)
        time_index.resize(self._max_index_size)
        self._index_files_existed = (False, False)
        removed = 0
        if located is not None:
            removed = self._log.size - located.position
            self._log.truncate(located.position)
        self._drop_tables()  # and after: a table walked from the loop meanwhile saw the uncut file
        if self._log.size == 0:
            self._created_ms = now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._next_offset = None
        self._tail = None
        self._reload_largest_timestamp(offset_index, time_index)
        if self._log.size > 0 and self._rolling_based_timestamp is None:
            # Opened in bulk without its first header (only the active segment needed it then):
            # read it now that this segment may become the active one (Kafka loads it lazily).
            head = self._log.pread(0, HEADER_SIZE)
            if len(head) == HEADER_SIZE:
                self._rolling_based_timestamp = read_header(head).max_timestamp
        return removed

    def _reload_largest_timestamp(self, offset_index: OffsetIndex, time_index: TimeIndex) -> None:
        # Kafka's loadLargestTimestamp: the last time-index entry, then any larger batch after it.
        last = time_index.last_entry
        floor = offset_index.lookup(last.offset)
        end = self._log.size

        def work(pread: PRead) -> tuple[int, int]:
            max_ts, max_ts_offset = last.timestamp, last.offset
            walk = _walk_headers(pread, floor.position, end, self._log.path, self._base_offset, floor.offset,
                                 target=last.offset, on_lie=self._index_lied)
            for _, header in walk:
                if header.max_timestamp > max_ts:
                    max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            return max_ts, max_ts_offset

        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = self._log.read(work)

    # ------------------------------------------------------------------------------ recovery

    def recover(self, max_batch_bytes: int, progress: Callable[[int, int], object] | None = None) -> int:
        """Validate every batch, cut a torn or corrupt tail, rebuild the indexes; returns the bytes cut.

        Blocking: the engine runs it in a thread, which reads 4 MiB chunks, so
        the event loop keeps running meanwhile (it gets the GIL at least every 5 ms).
        Each batch is checked (header, length ≤ ``max_batch_bytes``, CRC-32C,
        increasing offsets from the base offset); the first bad or incomplete
        batch and everything after it is truncated: a torn tail is a crash, not
        an error. The offset and time indexes are rebuilt with the append rule;
        the transaction index is emptied (the engine writes its entries back
        from the producer-state replay that follows, when this scan met a
        marker: ``recovered_markers``). ``progress(bytes_done, bytes_total)``
        is called in the thread that recovers. The segment must not be used by
        anyone else meanwhile.

        Raises:
            SegmentOffsetOverflowError: a valid batch's offsets are out of the
                segment's int32 range (the file was not written by this segment).
            StorageError, ClosedError.
        """
        self._check_writable()
        if not self._offset_index.is_loaded and not self._time_index.is_loaded:
            # Rebuilt from scratch anyway: new files, rather than mapping the old ones. A crash leaves
            # the active segment's indexes preallocated and sparse, and a mapping touches every slot
            # of an existing file (it is all entries until rebuilt), so each would first have to be
            # allocated whole: 2 x segment_index_bytes of disk for nothing, maybe on a full disk.
            self._delete_index_files()
        offset_index, time_index = self._load_indexes(check=False)
        total = self._log.size
        report = None if progress is None else partial(_report_progress, progress, total)

        def scan(pread: PRead) -> _ScanOutcome:
            # Emptied here, not by every index rebuild: its entries come back only from the engine's
            # producer-state replay, which follows a recovery (not a rebuild of a lying offset index).
            self._txn_index.reset()
            return self._rebuild_indexes(offset_index, time_index, max_batch_bytes, total, report, pread)

        self._drop_tables()
        outcome = self._log.read(scan)
        truncated = self._log.size - outcome.valid
        if truncated:
            self._log.truncate(outcome.valid)
        self._drop_tables()
        self._apply_scan(outcome)
        return truncated

    def _delete_index_files(self) -> None:
        with self._load_lock:
            if not self._offset_index.is_loaded and not self._time_index.is_loaded:
                self._offset_index.delete()
                self._time_index.delete()

    def _apply_scan(self, outcome: _ScanOutcome) -> None:
        self._max_timestamp_so_far, self._offset_of_max_timestamp_so_far = outcome.max_ts, outcome.max_ts_offset
        self._bytes_since_last_index_entry = outcome.valid - outcome.last_entry
        self._next_offset = outcome.next_offset if outcome.valid == self._log.size else None
        self._tail = None
        self._rolling_based_timestamp = None if outcome.first is None else outcome.first.max_timestamp
        self._indexes_checked = True
        self.recovered_markers = outcome.control

    def _rebuild_indexes(
        self,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        max_batch_bytes: int,
        total: int,
        report: Callable[[int], None] | None,
        pread: PRead,
    ) -> _ScanOutcome:
        """Rebuild both indexes from the ``.log`` (blocking; in a thread): the recovery scan.

        The segment reader (``seglog.segments.reader``) checks every batch and
        stops at the first bad or incomplete one. Nothing is truncated here;
        ``recover`` does that with the result.

        Raises:
            SegmentOffsetOverflowError: a valid batch's offsets do not fit the segment.
            UnsupportedFormatError: the reader stopped at a whole batch of seglog's format v1.
        """
        base_offset = self._base_offset
        interval = self._index_interval_bytes
        path = self._log.path
        offset_index.reset()
        time_index.reset()
        last_entry = 0
        max_ts, max_ts_offset = NO_TIMESTAMP, base_offset
        first: BatchHeader | None = None
        reader = BatchReader(
            pread, end=total, base_offset=base_offset, max_batch_bytes=max_batch_bytes,
            path=path, progress=report,
        )
        control = False
        for position, header in reader:
            if first is None:
                first = header
            control = control or header.is_control
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.last_offset
            if position - last_entry > interval:
                # The same rule as append, including "a full index takes no more entries".
                if not offset_index.is_full:
                    offset_index.append(header.last_offset, position)
                if not time_index.is_full:
                    time_index.maybe_append(max_ts, max_ts_offset)
                last_entry = position
        if reader.stop is ScanStop.OVERFLOW:
            raise SegmentOffsetOverflowError(f"{path}: batch at position {reader.position}: {reader.reason}")
        if reader.stop is ScanStop.UNSUPPORTED:
            raise UnsupportedFormatError(
                f"{path}: batch at position {reader.position}: {reader.reason}; nothing was truncated"
            )
        _final_time_entry(time_index, max_ts, max_ts_offset)
        offset_index.trim_to_valid_size()
        time_index.trim_to_valid_size()
        next_offset = base_offset if reader.next_offset is None else reader.next_offset
        return _ScanOutcome(reader.position, last_entry, max_ts, max_ts_offset, next_offset, first, control)

    # ------------------------------------------------------------------------------ renames

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename all four files from ``<name><old_suffix>`` to ``<name><new_suffix>`` (e.g. ``""`` → ``".deleted"``).

        Index files that do not exist yet are not created; the segment follows
        the new names. The directory is fsynced after all four. Blocking.

        Raises:
            ValueError: a file name does not end with ``old_suffix``.
            StorageError: a rename failed.
        """
        self._check_writable()

        def renamed(path: Path) -> Path:
            name = str(path)
            if not name.endswith(old_suffix):
                raise ValueError(f"{path} does not end with {old_suffix!r}")
            return Path(name[: len(name) - len(old_suffix)] + new_suffix)

        targets = [
            renamed(p)
            for p in (self._log.path, self._offset_index.path, self._time_index.path, self._txn_index.path)
        ]
        self._log.rename(targets[0])
        self._offset_index.rename_to(targets[1])
        self._time_index.rename_to(targets[2])
        self._txn_index.rename_to(targets[3])
        self._log.sync_directory()

    def update_parent_dir(self, directory: Path | str) -> None:
        """Follow the files to ``directory`` after the whole directory was moved; no I/O."""
        directory = Path(directory)
        self._file_prefix = f"{directory}{os.sep}{self._base_offset:020d}"
        self._log.update_parent_dir(directory)
        self._offset_index.update_parent_dir(directory)
        self._time_index.update_parent_dir(directory)
        self._txn_index.update_parent_dir(directory)


# ------------------------------------------------------------------------------------ LogSegments


class _Segment(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...


SegmentT = TypeVar("SegmentT", bound=_Segment)


class LogSegments(Generic[SegmentT]):
    """The segments of one partition, ordered by base offset (Kafka's ``LogSegments``); pure, no I/O.

    Adding a segment whose base offset is already present replaces it. The
    active segment is the one with the highest base offset.
    Concurrency: plain data; the owner serialises changes.
    """

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._segments: dict[int, SegmentT] = {}

    def add(self, segment: SegmentT) -> SegmentT | None:
        """Insert (or replace) ``segment``; returns the segment it replaced."""
        base = segment.base_offset
        previous = self._segments.get(base)
        if previous is None:
            bisect.insort(self._bases, base)
        self._segments[base] = segment
        return previous

    def remove(self, base_offset: int) -> SegmentT | None:
        """Remove and return the segment with ``base_offset`` (``None`` if absent)."""
        segment = self._segments.pop(base_offset, None)
        if segment is not None:
            del self._bases[bisect.bisect_left(self._bases, base_offset)]
        return segment

    def clear(self) -> None:
        """Forget every segment."""
        self._bases.clear()
        self._segments.clear()

    def __len__(self) -> int:
        return len(self._bases)

    def __contains__(self, base_offset: object) -> bool:
        return base_offset in self._segments

    def __iter__(self) -> Iterator[SegmentT]:
        return iter(self.values())

    @property
    def is_empty(self) -> bool:
        """No segments."""
        return not self._bases

    def get(self, base_offset: int) -> SegmentT | None:
        """The segment with exactly ``base_offset``."""
        return self._segments.get(base_offset)

    def base_offsets(self) -> list[int]:
        """All base offsets, ascending."""
        return list(self._bases)

    def values(self, from_offset: int | None = None, to_offset: int | None = None) -> list[SegmentT]:
        """All segments, or those from the segment holding ``from_offset`` up to base offsets < ``to_offset``.

        Raises:
            ValueError: ``to_offset < from_offset``.
        """
        if from_offset is None and to_offset is None:
            return [self._segments[b] for b in self._bases]
        if from_offset is None or to_offset is None:
            raise ValueError("give both from_offset and to_offset, or neither")
        if to_offset < from_offset:
            raise ValueError(f"to_offset {to_offset} is below from_offset {from_offset}")
        if to_offset == from_offset:
            return []
        floor = bisect.bisect_right(self._bases, from_offset) - 1
        start = max(floor, 0)
        stop = bisect.bisect_left(self._bases, to_offset)
        return [self._segments[b] for b in self._bases[start:stop]]

    @property
    def first_segment(self) -> SegmentT | None:
        """The segment with the lowest base offset."""
        return self._segments[self._bases[0]] if self._bases else None

    @property
    def last_segment(self) -> SegmentT | None:
        """The segment with the highest base offset."""
        return self._segments[self._bases[-1]] if self._bases else None

    @property
    def active_segment(self) -> SegmentT | None:
        """The segment appended to: the one with the highest base offset."""
        return self.last_segment

    def non_active_from(self, from_offset: int) -> list[SegmentT]:
        """Segments from the one holding ``from_offset`` up to (excluding) the active one."""
        active = self.active_segment
        if active is None or from_offset > active.base_offset:
            return []
        return self.values(from_offset, active.base_offset)

    def live_from(self, offset: int) -> tuple[list[int], list[SegmentT]]:
        """Base offsets and segments from the one holding ``offset`` on (all when ``offset`` is below them all).

        Two new lists, in step: a caller that awaits while it walks them sees
        the segments as they were.
        """
        bases = self._bases[max(bisect.bisect_right(self._bases, offset) - 1, 0) :]
        return bases, list(map(self._segments.__getitem__, bases))

    def first_live(self, offset: int, default: int) -> tuple[int, SegmentT, int] | None:
        """The first segment of :meth:`live_from` with its base offset and where its offsets end.

        ``(base, segment, bound)``: ``bound`` is the next segment's base
        offset (``default`` for the last), as :meth:`following_base` gives it;
        ``None`` when there is no segment. One bisect, no list: a time
        lookup's usual case, answered by the first live segment.
        """
        bases = self._bases
        i = bisect.bisect_right(bases, offset)
        i = i - 1 if i else 0
        if i >= len(bases):
            return None
        base = bases[i]
        return base, self._segments[base], bases[i + 1] if i + 1 < len(bases) else default

    def following_base(self, base_offset: int, default: int) -> int:
        """The smallest base offset > ``base_offset`` (``default`` when none): where that segment's offsets end."""
        bases = self._bases
        i = bisect.bisect_right(bases, base_offset)
        return bases[i] if i < len(bases) else default

    def floor_segment(self, offset: int) -> SegmentT | None:
        """The segment with the largest base offset ≤ ``offset`` (the one that would hold it)."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i - 1]] if i else None

    def lower_segment(self, offset: int) -> SegmentT | None:
        """The segment with the largest base offset < ``offset``."""
        i = bisect.bisect_left(self._bases, offset)
        return self._segments[self._bases[i - 1]] if i else None

    def higher_segment(self, offset: int) -> SegmentT | None:
        """The segment with the smallest base offset > ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[self._bases[i]] if i < len(self._bases) else None

    def higher_segments(self, offset: int) -> list[SegmentT]:
        """All segments with a base offset > ``offset``, ascending."""
        i = bisect.bisect_right(self._bases, offset)
        return [self._segments[b] for b in self._bases[i:]]

    @property
    def size_bytes(self) -> int:
        """Total bytes of all segments (an unbounded int: no 32-bit overflow)."""
        return sum(s.size for s in self._segments.values())
