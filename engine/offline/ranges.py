"""Read-only, synchronous planning and scanning of a log directory, for bulk readers (the Spark source).

Owns: turning offset and timestamp bounds into per-segment byte ranges, with
the segment indexes read raw (no ``Engine``, no lock, no event loop: a Spark
task or an export runs it in a plain process, beside a running engine or on a
copy of the directory); reading a range's batches with the segment reader
(every rule checked, the CRC before a body is decoded) into
:class:`~seglog.segments.columns.RecordColumns` chunks (or Arrow-ready
:class:`~seglog.segments.columns.ColumnBuffers`); and the current log start and
end offsets of each partition, for streaming.

The bounds are Kafka's: an offset range ``[start_offset, end_offset)`` and a
timestamp range ``[from_timestamp, until_timestamp)`` meaning offsets, as in
``offsetsForTimes`` and Spark's Kafka source (``startingTimestamp``): the read
starts at the earliest offset whose timestamp is ``>= from_timestamp`` and
ends before the earliest offset whose timestamp is ``>= until_timestamp``.
Both are answered from the indexes (``docs/FORMAT.md`` §3): a closed segment's
last time-index entry is its largest timestamp, so whole segments are skipped
without opening their ``.log``; inside a segment, the index entries give the
byte where the walk starts, and batches are skipped by their header's
``max_timestamp`` without reading their bodies.

What a read sees: the batches present when it was planned. The end of the
active (last) segment is found by walking its batches from its last offset
index entry (at most ``index_interval_bytes`` plus one batch), CRCs verified,
so a batch being written while the plan is made is never read half written;
a torn tail is simply the end. In a sealed segment, and before that end, a
batch that fails a check is a ``CorruptRecordError``, never the end.

Indexes are hints (FORMAT.md §1): one that cannot be read or whose entries
do not fit the segment is ignored, and so is an entry that does not place a
plausible batch of the segment: the scan falls back to position 0 (or, for a
segment's largest timestamp, to a walk of its batch headers).

Must not import: ``tools``. Synchronous: no asyncio, no executor.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, TypeVar

from seglog.engine.errors import CorruptRecordError, InvalidRecordError, SeglogError
from seglog.engine.offline.indexes import dump_index
from seglog.engine.offline.listing import (
    SegmentInfo,
    list_segments,
    open_log,
    partition_path,
    read_topic_file,
)
from seglog.engine.offline.segment_scan import LogEnd, batch_at, log_end_offset_of, time_entry_holds
from seglog.engine.offline.transactions import partition_transactions
from seglog.engine.results import ISOLATION_LEVELS, Isolation
from seglog.segments.batch import BatchHeader, ScanStop
from seglog.segments.columns import ColumnBuffers, RecordColumns, decode_buffers, decode_columns
from seglog.segments.fileio import default_ops
from seglog.segments.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from seglog.segments.reader import BatchReader

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_ROWS_PER_CHUNK",
    "NO_END",
    "Bounds",
    "ColumnBuffers",
    "PartitionPlan",
    "RecordColumns",
    "SegmentRange",
    "TraceHook",
    "append_trace",
    "log_end_offset",
    "plan_partition",
    "scan_range",
    "scan_range_buffers",
]

DEFAULT_ROWS_PER_CHUNK: Final = 65_536  # rows per chunk for library callers (the Spark source passes rowsPerBatch)
DEFAULT_CHUNK_BYTES: Final = 64 << 20  # key + value bytes per ColumnBuffers chunk (docs/SPARK.md, bytesPerBatch)
NO_END: Final = 2**63 - 1  # an open end offset
_BODY_READAHEAD: Final = 1 << 20
_BOUNDED_READAHEAD: Final = 64 << 10  # when the read may end soon (a timestamp end): overshoot at most this

TraceHook = Callable[[dict[str, object]], None]
"""Called once per ``.log`` a planner or reader opened: ``{"event", "path", "bytes_read"}``."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What to read from one partition: offsets ``[start_offset, end_offset)`` and Kafka-style timestamp bounds."""

    start_offset: int = 0
    end_offset: int = NO_END
    from_timestamp: int | None = None
    until_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """A unit of work: the batches of one segment to read, with the bounds that trim them.

    Small and picklable (a Spark input partition carries one or more). The walk starts
    at ``start_position`` (a batch start) and never reads at or past
    ``end_position``; rows outside ``[start_offset, end_offset)`` are dropped.
    ``from_timestamp`` is set only on the segment where a timestamp-bounded
    read starts, ``until_timestamp`` only on the one where it may end.
    """

    topic: str
    partition: int
    path: str
    base_offset: int
    start_position: int
    end_position: int
    start_offset: int
    end_offset: int
    from_timestamp: int | None = None
    until_timestamp: int | None = None
    max_batch_bytes: int | None = None  # the topic's largest batch (None: bounded by the range only)
    # read_committed: (producer id, first offset, last offset) of the aborted transactions overlapping the
    # range; a transactional batch of that producer inside that range is not returned.
    aborted: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionPlan:
    """The ranges to read from one partition, and its log start and end offsets when planned."""

    topic: str
    partition: int
    ranges: list[SegmentRange]
    log_start_offset: int
    log_end_offset: int | None  # None when the read ends before the active segment (its tail is not walked)


def append_trace(path: str) -> TraceHook:
    """A :data:`TraceHook` that appends one JSON line per event to ``path`` (O_APPEND: safe across processes)."""

    def hook(event: dict[str, object]) -> None:
        line = (json.dumps(event, sort_keys=True) + "\n").encode()
        ops = default_ops()
        fd = ops.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            ops.write(fd, line)  # one write of < 4 KiB to an O_APPEND file is not interleaved
        finally:
            ops.close(fd)

    return hook


# --------------------------------------------------------------------------------------- indexes


@dataclass(slots=True)
class _SegmentIndexes:
    """The usable entries of one segment's indexes, read once (raw, never mapped)."""

    positions: list[tuple[int, int]]  # (offset, position) of the offset index
    times: list[tuple[int, int]]  # (timestamp, offset) of the time index

    def position_for_offset(self, offset: int) -> int:
        """A batch start at or before the batch holding ``offset`` (0 without an entry)."""
        i = bisect.bisect_right(self.positions, offset, key=lambda e: e[0]) - 1
        return self.positions[i][1] if i >= 0 else 0

    def time_entry_for(self, timestamp: int) -> tuple[int, int] | None:
        """The time-index entry ``(T, o)`` with the largest ``T <= timestamp``, or ``None``."""
        i = bisect.bisect_right(self.times, timestamp, key=lambda e: e[0]) - 1
        return self.times[i] if i >= 0 else None

    def position_for_timestamp(self, segment: SegmentInfo, timestamp: int, max_batch_bytes: int) -> int:
        """A batch start at or before the first batch whose ``max_timestamp >= timestamp``.

        Entry (T, o) with T <= timestamp: every batch before the one ending at o has timestamps
        below T, when the entry holds; it is checked against that batch (``time_entry_problem``),
        and one that lies places nothing (0: the walk starts at the segment's start).
        """
        entry = self.time_entry_for(timestamp)
        if entry is None:
            return 0
        return self.position_for_offset(entry[1]) if time_entry_holds(segment, entry, max_batch_bytes) else 0


def _read_indexes(segment: SegmentInfo) -> _SegmentIndexes:
    # Trailing zero slots (an active segment's preallocated index) are not entries (dump_index drops
    # them). Entries that point outside the segment are a stale index: ignored, the walk starts at 0.
    limit = segment.next_base_offset if segment.next_base_offset is not None else NO_END
    positions: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    if segment.index_bytes:
        try:
            positions = [(o, p) for o, p in dump_index(segment.sibling(INDEX_SUFFIX), base_offset=segment.base_offset)
                         .entries]
        except SeglogError:
            positions = []
    if positions and (positions[-1][0] >= limit or positions[-1][1] >= segment.size_bytes):
        positions = []
    if segment.time_index_bytes:
        try:
            times = [(t, o) for t, o in dump_index(segment.sibling(TIME_INDEX_SUFFIX), base_offset=segment.base_offset)
                     .entries]
        except SeglogError:
            times = []
    if times and times[-1][1] >= limit:
        times = []
    return _SegmentIndexes(positions, times)


def _trace(trace: TraceHook | None, event: str, path: Path, bytes_read: int, **more: object) -> None:
    if trace is not None:
        trace({"event": event, "path": str(path), "bytes_read": bytes_read, **more})


def _segment_max_timestamp(
    segment: SegmentInfo, indexes: _SegmentIndexes, max_batch_bytes: int, trace: TraceHook | None
) -> int:
    """A sealed segment's largest timestamp: its last time-index entry, or a walk of its batch headers.

    Raises:
        CorruptRecordError: the walk met a batch that fails its checks (a sealed segment has no torn tail).
    """
    if indexes.times:
        # The roll/close entry (FORMAT.md §3.2), when the batch it names has that timestamp.
        last = indexes.times[-1]
        if time_entry_holds(segment, last, max_batch_bytes):
            return last[0]
    largest = -1
    with open_log(segment.log_path) as log:
        reader = BatchReader(log.pread, end=log.size, base_offset=segment.base_offset,
                             max_batch_bytes=max_batch_bytes, verify=False, path=segment.log_path)
        try:
            for _, header in reader:
                largest = max(largest, header.max_timestamp)
            reader.raise_unless_complete()
        finally:
            _trace(trace, "plan", segment.log_path, reader.bytes_read)
    return largest


# --------------------------------------------------------------------------------------- planning


def log_end_offset(
    log_dir: str | os.PathLike[str], topic: str, partition: int, *, trace: TraceHook | None = None
) -> int:
    """The next offset the partition will assign (its last complete batch's last offset + 1).

    Raises:
        StorageError: the partition directory or its last segment cannot be read.
    """
    directory = partition_path(log_dir, topic, partition)
    segments = list_segments(directory)
    if not segments:
        return 0
    end = log_end_offset_of(segments[-1], read_topic_file(directory).max_batch_bytes)
    _trace(trace, "plan", segments[-1].log_path, end.bytes_read)
    return end.next_offset


def plan_partition(
    log_dir: str | os.PathLike[str],
    topic: str,
    partition: int,
    bounds: Bounds = Bounds(),
    *,
    log_start_offset: int = 0,
    trace: TraceHook | None = None,
    isolation: Isolation = "read_uncommitted",
) -> PartitionPlan:
    """The segment ranges holding the records of one partition within ``bounds``.

    ``isolation`` is Kafka's ``isolation.level``: ``"read_uncommitted"``
    returns every data record; ``"read_committed"`` ends the read at the last
    stable offset and leaves out the records of aborted transactions
    (:func:`~seglog.engine.offline.transactions.partition_transactions`; each
    range carries the aborted transactions it overlaps). Control batches
    (transaction markers) are never records.

    ``log_start_offset`` is the engine's (from :func:`log_start_offsets`):
    records below it are deleted even if their segment still exists. Segments
    outside the offset bounds are skipped by their base offsets; a closed
    segment whose largest timestamp is below ``from_timestamp`` is skipped, and
    so is every segment after the first one whose largest timestamp reaches
    ``until_timestamp``, neither opening its ``.log``. When the bounds reach
    the active (last) segment, its tail is walked from its last offset-index
    entry (a few KiB) to find the log end offset and its largest timestamp;
    otherwise ``log_end_offset`` of the plan is ``None``.

    Raises:
        StorageError: a directory or file cannot be read.
        CorruptRecordError: a segment without a usable time index has a corrupt batch header (or, under
            read_committed, a control batch is not a transaction marker).
        InvalidRecordError: ``isolation`` is neither of the two.
    """
    if isolation not in ISOLATION_LEVELS:
        raise InvalidRecordError(f"isolation {isolation!r} is neither of {', '.join(ISOLATION_LEVELS)}")
    if isolation == "read_uncommitted":
        return _plan_partition(log_dir, topic, partition, bounds, log_start_offset, trace)
    txns = partition_transactions(log_dir, topic, partition)
    bounds = dataclasses.replace(bounds, end_offset=min(bounds.end_offset, txns.last_stable_offset))
    plan = _plan_partition(log_dir, topic, partition, bounds, log_start_offset, trace)
    ranges = [dataclasses.replace(r, aborted=txns.aborted_between(r.start_offset, r.end_offset)) for r in plan.ranges]
    return dataclasses.replace(plan, ranges=ranges)


def _plan_partition(
    log_dir: str | os.PathLike[str],
    topic: str,
    partition: int,
    bounds: Bounds,
    log_start_offset: int,
    trace: TraceHook | None,
) -> PartitionPlan:
    directory = partition_path(log_dir, topic, partition)
    segments = list_segments(directory)
    if not segments:
        return PartitionPlan(topic, partition, [], 0, 0)
    max_batch_bytes = read_topic_file(directory).max_batch_bytes
    log_start = max(log_start_offset, segments[0].base_offset)
    last_i = len(segments) - 1
    indexes: dict[int, _SegmentIndexes] = {}

    def idx(i: int) -> _SegmentIndexes:
        if i not in indexes:
            indexes[i] = _read_indexes(segments[i])
        return indexes[i]

    start = max(bounds.start_offset, log_start)
    first = max(bisect.bisect_right(segments, start, key=lambda s: s.base_offset) - 1, 0)
    stop = bisect.bisect_left(segments, bounds.end_offset, key=lambda s: s.base_offset) - 1  # last below the end
    # The active segment is walked from its last index entry only when the read may reach it: its end
    # (the log end offset) and, with the time index, its largest timestamp come from that walk.
    tail: LogEnd | None = None
    if stop == last_i:
        tail = log_end_offset_of(segments[last_i], max_batch_bytes)
        _trace(trace, "plan", segments[last_i].log_path, tail.bytes_read)
    log_end = tail.next_offset if tail is not None else None
    end = min(bounds.end_offset, log_end if log_end is not None else NO_END)
    if start >= end or first > stop:
        return PartitionPlan(topic, partition, [], log_start, log_end)

    def max_timestamp(i: int) -> int | None:
        if i != last_i:
            return _segment_max_timestamp(segments[i], idx(i), max_batch_bytes, trace)
        if tail is None:
            return None  # not walked: unknown
        # Up to its last offset-index entry the time index knows the maximum; the walk saw the rest.
        if idx(i).positions and not idx(i).times:
            return None
        times = idx(i).times
        if times and not time_entry_holds(segments[i], times[-1], max_batch_bytes):
            return None  # a time index that lies: unknown
        return max(tail.max_timestamp, idx(i).times[-1][0] if idx(i).times else -1)

    def first_reaching(timestamp: int) -> int | None:
        for i in range(len(segments)):
            largest = max_timestamp(i)
            if largest is None or largest >= timestamp:
                return i
        return None

    from_i = until_i = None
    if bounds.from_timestamp is not None:
        from_i = first_reaching(bounds.from_timestamp)
        if from_i is None:
            return PartitionPlan(topic, partition, [], log_start, log_end)  # no record reaches the bound
        if from_i < first:
            from_i = None  # the timestamp bound starts below the offset bound: the offsets decide
        else:
            first = from_i
    if bounds.until_timestamp is not None:
        until_i = first_reaching(bounds.until_timestamp)
        if until_i is not None:
            stop = min(stop, until_i)
    ranges: list[SegmentRange] = []
    for i in range(first, stop + 1):
        segment = segments[i]
        position = idx(i).position_for_offset(start) if start > segment.base_offset else 0
        if i == from_i:
            assert bounds.from_timestamp is not None
            position = idx(i).position_for_timestamp(segment, bounds.from_timestamp, max_batch_bytes)
        if i == until_i:
            assert bounds.until_timestamp is not None
            position = min(position, idx(i).position_for_timestamp(segment, bounds.until_timestamp, max_batch_bytes))
        if position and batch_at(segment, position, max_batch_bytes) is None:
            position = 0  # the entry does not place a batch of this segment: walk from its start
        end_position = tail.end_position if tail is not None and i == last_i else segment.size_bytes
        ranges.append(
            SegmentRange(
                topic,
                partition,
                str(segment.log_path),
                segment.base_offset,
                position,
                end_position,
                start,
                end,
                bounds.from_timestamp if i == from_i else None,
                bounds.until_timestamp if i == until_i else None,
                max_batch_bytes,
            )
        )
    return PartitionPlan(topic, partition, ranges, log_start, log_end)


# --------------------------------------------------------------------------------------- scanning


def scan_range(
    segment_range: SegmentRange,
    *,
    rows_per_chunk: int = DEFAULT_ROWS_PER_CHUNK,
    trace: TraceHook | None = None,
) -> Iterator[RecordColumns]:
    """The records of ``segment_range`` as column chunks of at most about ``rows_per_chunk`` rows.

    Every batch that is decoded has its header checked and its CRC verified
    first; batches wholly below the start offset or (on the range's
    ``from_timestamp`` segment) with ``max_timestamp`` below the bound are
    skipped by their header alone.

    Raises:
        CorruptRecordError: a batch inside the range fails a check (naming file and position).
        StorageError: the file cannot be opened or read.
    """
    return _scan(segment_range, rows_per_chunk, trace, RecordColumns, decode_columns)


def scan_range_buffers(
    segment_range: SegmentRange,
    *,
    rows_per_chunk: int = DEFAULT_ROWS_PER_CHUNK,
    max_chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    trace: TraceHook | None = None,
) -> Iterator[ColumnBuffers]:
    """:func:`scan_range` into :class:`~seglog.segments.columns.ColumnBuffers`: the same rows, as Arrow-ready buffers.

    For columnar consumers (the Spark source): with the C module built, keys
    and values are copied from the batch bodies straight into the buffers,
    with no Python object per row. A chunk is handed on at ``rows_per_chunk``
    rows or once its keys and values reach ``max_chunk_bytes`` (and always
    before Arrow's 2 GiB binary limit), so large records do not make huge chunks.

    Raises:
        CorruptRecordError, StorageError: as :func:`scan_range`.
    """
    return _scan(
        segment_range, rows_per_chunk, trace, lambda: ColumnBuffers(max_data_bytes=max_chunk_bytes), decode_buffers
    )


def _in_aborted(header: BatchHeader, aborted: tuple[tuple[int, int, int], ...]) -> bool:
    """Whether a transactional batch belongs to one of the ``aborted`` transactions (its producer, its range)."""
    pid, offset = header.producer_id, header.base_offset
    return any(p == pid and first <= offset <= last for p, first, last in aborted)


class _Chunk(Protocol):
    def __len__(self) -> int: ...
    def full(self, rows_per_chunk: int) -> bool: ...
    def room_for(self, batch_size: int) -> bool: ...


_C = TypeVar("_C", bound=_Chunk)


def _scan(
    segment_range: SegmentRange,
    rows_per_chunk: int,
    trace: TraceHook | None,
    new_chunk: Callable[[], _C],
    decode: Callable[..., bool],
) -> Iterator[_C]:
    r = segment_range
    from_ts, until_ts = r.from_timestamp, r.until_timestamp
    aborted = r.aborted
    out = new_chunk()
    readahead = _BODY_READAHEAD if until_ts is None else _BOUNDED_READAHEAD
    with open_log(r.path) as log:
        # Never past the planned end: the active segment's end is the last batch the plan saw whole.
        end = min(log.size, r.end_position)
        reader = BatchReader(
            log.pread, end=end, base_offset=r.base_offset, start=r.start_position,
            max_batch_bytes=r.max_batch_bytes or max(end - r.start_position, 1), verify=False, path=r.path,
        )
        try:
            for batch in reader:
                header = batch.header
                if header.base_offset >= r.end_offset:
                    break
                skip = header.last_offset < r.start_offset or (
                    header.is_transactional and bool(aborted) and _in_aborted(header, aborted)
                )
                if from_ts is not None:
                    if header.max_timestamp < from_ts:
                        skip = True
                    elif skip:
                        from_ts = None  # the timestamp bound starts below the start offset: offsets decide
                if skip:
                    if until_ts is not None and header.max_timestamp >= until_ts:
                        break  # the read ends in a batch before its start: nothing (more) to return
                else:
                    buf, at = reader.batch_bytes(batch, readahead)
                    if len(out) and not out.room_for(header.size):
                        yield out  # a batch is never split: it starts the next chunk (Arrow's int32 offsets)
                        out = new_chunk()
                    try:
                        reached = decode(
                            buf,
                            at,
                            header,
                            out,
                            start_offset=r.start_offset,
                            end_offset=r.end_offset,
                            from_timestamp=from_ts,
                            until_timestamp=until_ts,
                        )
                    except CorruptRecordError as exc:
                        raise CorruptRecordError(f"{r.path}: at position {batch.position}: {exc}") from exc
                    from_ts = None
                    if out.full(rows_per_chunk):
                        yield out
                        out = new_chunk()
                    if reached:
                        break
                if header.last_offset >= r.end_offset - 1:
                    break
            else:
                if reader.stop is not ScanStop.END:
                    reader.raise_unless_complete()  # before the planned end: damage, never the end of the data
            if len(out):
                yield out
        finally:
            _trace(trace, "read", Path(r.path), reader.bytes_read, start_position=r.start_position)
