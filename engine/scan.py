"""Read-only, synchronous planning and scanning of a log directory, for bulk readers.

Owns: listing partitions and segments straight from the files (no ``Engine``,
no lock, no event loop: a Spark task or an export runs it in a plain process,
beside a running engine or on a copy of the directory); turning offset and
timestamp bounds into per-segment byte ranges with the segment indexes opened
read-only; reading a range's batches (header checks and CRC verified) into
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
active (last) segment is found by walking batch headers from its last offset
index entry (at most ``index_interval_bytes`` plus one batch) and verifying
CRCs, so a batch being written while the plan is made is never read half
written; a torn tail is simply the end.

Indexes are hints (FORMAT.md §1): one that cannot be opened or whose entries
do not fit the segment is ignored, and the scan falls back to position 0 (or,
for a segment's largest timestamp, to a walk of its batch headers).

Must not import: ``tools``. Synchronous: no asyncio, no executor.
"""

from __future__ import annotations

import bisect
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple, Protocol, TypeVar

from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, parse_checkpoint
from seglog.engine.errors import CorruptionError, CorruptRecordError, SeglogError, StorageError
from seglog.engine.names import parse_partition_dir
from seglog.indexes import OffsetIndex, TimeIndex
from seglog.segments.batch import (
    HEADER_SIZE,
    BatchHeader,
    ScanStop,
    check_header,
    read_header,
    scan_batches,
    verify_crc,
)
from seglog.segments.columns import ColumnBuffers, RecordColumns, decode_buffers, decode_columns

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_ROWS_PER_CHUNK",
    "Bounds",
    "ColumnBuffers",
    "PartitionPlan",
    "RecordColumns",
    "SegmentFile",
    "SegmentRange",
    "TraceHook",
    "append_trace",
    "list_partitions",
    "list_segments",
    "log_end_offset",
    "log_start_offsets",
    "plan_partition",
    "scan_range",
    "scan_range_buffers",
]

DEFAULT_ROWS_PER_CHUNK: Final = 65_536  # rows per chunk for library callers (the Spark source passes rowsPerBatch)
DEFAULT_CHUNK_BYTES: Final = 64 << 20  # key + value bytes per ColumnBuffers chunk (docs/SPARK.md, bytesPerBatch)
NO_END: Final = 2**63 - 1  # an open end offset
_LOG_NAME: Final = re.compile(r"(\d{20})\.log")  # part of the format: base offset, 20 digits, .log
# A header peek reads this much, so walking headers over skipped batches costs a few KiB per batch,
# while a decoding walk reads bodies in large chunks that also hold the next headers.
_HEADER_READAHEAD: Final = 4096
_BODY_READAHEAD: Final = 1 << 20
_BOUNDED_READAHEAD: Final = 64 << 10  # when the read may end soon (a timestamp end): overshoot at most this
_TAIL_CHUNK: Final = 1 << 20  # bytes read per step when walking the active segment's tail

TraceHook = Callable[[dict[str, object]], None]
"""Called once per ``.log`` a planner or reader opened: ``{"event", "path", "bytes_read"}``."""


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One ``.log`` file of a partition, as listed: its base offset and size at listing time."""

    topic: str
    partition: int
    base_offset: int
    path: str
    size_bytes: int
    next_base_offset: int | None  # the next segment's base offset; None for the last (active) segment

    @property
    def is_last(self) -> bool:
        """Whether this is the partition's last segment (the one an engine appends to)."""
        return self.next_base_offset is None


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
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of < 4 KiB to an O_APPEND file is not interleaved
        finally:
            os.close(fd)

    return hook


# --------------------------------------------------------------------------------------- listing


def list_partitions(log_dir: str | os.PathLike[str]) -> list[tuple[str, int]]:
    """Every ``(topic, partition)`` with a directory in ``log_dir``, sorted.

    Raises:
        StorageError: ``log_dir`` is missing or unreadable.
    """
    try:
        with os.scandir(log_dir) as entries:
            found = [parse_partition_dir(e.name) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError as exc:
        raise StorageError(f"{log_dir}: cannot list the log directory: {exc}") from exc
    return sorted(p for p in found if p is not None)


def list_segments(log_dir: str | os.PathLike[str], topic: str, partition: int) -> list[SegmentFile]:
    """The ``.log`` files of one partition in base-offset order (files marked ``.deleted`` are not listed).

    Raises:
        StorageError: the partition directory is missing or unreadable.
    """
    directory = Path(log_dir) / f"{topic}-{partition}"
    found: list[tuple[int, str, int]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                match = _LOG_NAME.fullmatch(entry.name)
                if match is not None:
                    found.append((int(match.group(1)), entry.path, entry.stat().st_size))
    except OSError as exc:
        raise StorageError(f"{directory}: cannot list the partition directory: {exc}") from exc
    found.sort()
    return [
        SegmentFile(topic, partition, base, path, size, found[i + 1][0] if i + 1 < len(found) else None)
        for i, (base, path, size) in enumerate(found)
    ]


def log_start_offsets(log_dir: str | os.PathLike[str]) -> dict[tuple[str, int], int]:
    """The engine's ``log-start-offset-checkpoint`` (records below are deleted); empty when absent or unreadable."""
    try:
        data = (Path(log_dir) / LOG_START_OFFSET_CHECKPOINT).read_bytes()
    except OSError:
        return {}
    try:
        return parse_checkpoint(data, name=LOG_START_OFFSET_CHECKPOINT)
    except CorruptionError:
        return {}  # the safe choice, as the engine makes it: keep every record


# --------------------------------------------------------------------------------------- indexes


def _valid_entries(index: OffsetIndex | TimeIndex) -> int:
    """How many leading slots hold entries (an active segment's index is preallocated with zeros).

    A zero slot reads as ``(base_offset, 0)`` / ``(0, base_offset)``; a real
    entry after slot 0 can never look like that because relative offsets
    (offset index) and timestamps (time index) strictly increase from slot 0.
    A real slot 0 that looks like that (a 1-record first batch; timestamp 0)
    is dropped too, which only costs a less precise start position.
    """
    n = index.entries
    if n == 0:
        return 0
    base = index.base_offset

    def is_zero(slot: int) -> bool:
        a, b = index.entry(slot)
        return (a, b) == ((base, 0) if isinstance(index, OffsetIndex) else (0, base))

    return bisect.bisect_left(range(n), True, key=is_zero)


@dataclass(slots=True)
class _SegmentIndexes:
    """The usable entries of one segment's indexes, read once and closed."""

    positions: list[tuple[int, int]]  # (offset, position) of the offset index
    times: list[tuple[int, int]]  # (timestamp, offset) of the time index

    def position_for_offset(self, offset: int) -> int:
        """A batch start at or before the batch holding ``offset`` (0 without an entry)."""
        i = bisect.bisect_right(self.positions, offset, key=lambda e: e[0]) - 1
        return self.positions[i][1] if i >= 0 else 0

    def position_for_timestamp(self, timestamp: int) -> int:
        """A batch start at or before the first batch whose ``max_timestamp >= timestamp``."""
        i = bisect.bisect_right(self.times, timestamp, key=lambda e: e[0]) - 1
        # Entry (T, o) with T <= timestamp: every batch before the one ending at o has timestamps < T.
        return self.position_for_offset(self.times[i][1]) if i >= 0 else 0


def _read_indexes(segment: SegmentFile) -> _SegmentIndexes:
    stem = segment.path[: -len(".log")]
    positions: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    limit = segment.next_base_offset if segment.next_base_offset is not None else NO_END
    try:
        with OffsetIndex(stem + ".index", segment.base_offset, writable=False) as oix:
            positions = [tuple(oix.entry(i)) for i in range(_valid_entries(oix))]  # type: ignore[misc]
    except SeglogError:
        positions = []
    if positions and (positions[-1][0] >= limit or positions[-1][1] >= segment.size_bytes):
        positions = []  # entries that point outside the segment: a stale index, ignore it
    try:
        with TimeIndex(stem + ".timeindex", segment.base_offset, writable=False) as tix:
            times = [tuple(tix.entry(i)) for i in range(_valid_entries(tix))]  # type: ignore[misc]
    except SeglogError:
        times = []
    if times and times[-1][1] >= limit:
        times = []
    return _SegmentIndexes(positions, times)


# --------------------------------------------------------------------------------------- file reads


class _LogFile:
    """Positional reads of one ``.log`` through a window buffer, counting the bytes read."""

    def __init__(self, path: str, end: int) -> None:
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise StorageError(f"{path}: cannot open segment: {exc}") from exc
        self.path = path
        self._end = end
        self._buf = b""
        self._buf_start = 0
        self.bytes_read = 0

    def view(self, position: int, size: int, readahead: int) -> tuple[bytes, int] | None:
        """``(buffer, index of position in it)`` holding ``size`` bytes at ``position``; None past the end.

        Bytes already in the window are kept, not read again, so ``bytes_read``
        counts each byte of the file at most once on a forward walk.
        """
        start, buf = self._buf_start, self._buf
        buf_end = start + len(buf)
        if start <= position and position + size <= buf_end:
            return buf, position - start
        want = min(max(size, readahead), self._end - position)
        if want < size:
            return None
        keep = buf[position - start :] if start <= position < buf_end else b""
        at = position + len(keep)
        try:
            data = os.pread(self._fd, want - len(keep), at)
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read {want - len(keep)} bytes at {at}: {exc}") from exc
        self.bytes_read += len(data)
        self._buf, self._buf_start = (keep + data if keep else data), position
        return (self._buf, 0) if len(self._buf) >= size else None

    def close(self) -> None:
        os.close(self._fd)


def _corrupt(path: str, position: int, exc: SeglogError) -> CorruptRecordError:
    return CorruptRecordError(f"{path}: at position {position}: {exc}")


class _Tail(NamedTuple):
    next_offset: int  # the log end offset (when the segment is the last)
    end_position: int  # just after the last complete, CRC-valid batch
    max_timestamp: int  # the largest max_timestamp of the batches walked (-1: none)


def _walk_tail(segment: SegmentFile, start_position: int, trace: TraceHook | None) -> _Tail:
    """Where the readable batches of ``segment`` end, walking from ``start_position``.

    ``start_position`` must be a batch start (the last offset index entry's).
    Stops at the first batch that is cut short, corrupt or zero-filled
    (preallocated): for the active segment of a running engine that is the
    batch being written.
    """
    size = segment.size_bytes
    log = _LogFile(segment.path, size)
    next_offset, position, largest = segment.base_offset, start_position, -1
    try:
        chunk = _TAIL_CHUNK
        while position < size:
            got = log.view(position, min(chunk, size - position), 0)
            if got is None:
                break
            buf = got[0]
            result = scan_batches(buf, max_batch_bytes=size, next_offset=next_offset)
            next_offset = result.next_offset
            largest = max(largest, *(h.max_timestamp for _, h in result.batches), -1)
            position += result.valid_end
            if result.stop is not ScanStop.INCOMPLETE or len(buf) == size - (position - result.valid_end):
                if result.stop is not ScanStop.END:
                    break  # corrupt, zero-filled or torn: the end of what is readable
                continue
            # A batch cut by the chunk, not by the file: read again from its start, large enough to hold it.
            header = read_header(buf, result.valid_end) if len(buf) - result.valid_end >= HEADER_SIZE else None
            chunk = max(_TAIL_CHUNK, header.size if header is not None else 0)
    finally:
        log.close()
        if trace is not None:
            trace({"event": "plan", "path": segment.path, "bytes_read": log.bytes_read})
    return _Tail(next_offset, position, largest)


def _segment_max_timestamp(segment: SegmentFile, indexes: _SegmentIndexes, trace: TraceHook | None) -> int:
    """A closed segment's largest timestamp: its last time-index entry, or a walk of its batch headers."""
    if indexes.times:
        return indexes.times[-1][0]  # the roll/close entry (FORMAT.md §3.2)
    largest = -1
    log = _LogFile(segment.path, segment.size_bytes)
    try:
        position = 0
        while True:
            got = log.view(position, HEADER_SIZE, _HEADER_READAHEAD)
            if got is None:
                break
            header = read_header(*got)
            check_header(header, segment.size_bytes, position)
            largest = max(largest, header.max_timestamp)
            position += header.size
    except CorruptRecordError as exc:
        raise _corrupt(segment.path, position, exc) from exc
    finally:
        log.close()
        if trace is not None:
            trace({"event": "plan", "path": segment.path, "bytes_read": log.bytes_read})
    return largest


# --------------------------------------------------------------------------------------- planning


def log_end_offset(
    log_dir: str | os.PathLike[str], topic: str, partition: int, *, trace: TraceHook | None = None
) -> int:
    """The next offset the partition will assign (its last complete batch's last offset + 1).

    Raises:
        StorageError: the partition directory or its last segment cannot be read.
    """
    segments = list_segments(log_dir, topic, partition)
    if not segments:
        return 0
    last = segments[-1]
    return _walk_tail(last, _read_indexes(last).position_for_offset(NO_END), trace).next_offset


def plan_partition(
    log_dir: str | os.PathLike[str],
    topic: str,
    partition: int,
    bounds: Bounds = Bounds(),
    *,
    log_start_offset: int = 0,
    trace: TraceHook | None = None,
) -> PartitionPlan:
    """The segment ranges holding the records of one partition within ``bounds``.

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
        CorruptRecordError: a segment without a usable time index has a corrupt batch header.
    """
    segments = list_segments(log_dir, topic, partition)
    if not segments:
        return PartitionPlan(topic, partition, [], 0, 0)
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
    tail: _Tail | None = None
    if stop == last_i:
        tail = _walk_tail(segments[last_i], idx(last_i).position_for_offset(NO_END), trace)
    log_end = tail.next_offset if tail is not None else None
    end = min(bounds.end_offset, log_end if log_end is not None else NO_END)
    if start >= end or first > stop:
        return PartitionPlan(topic, partition, [], log_start, log_end)

    def max_timestamp(i: int) -> int | None:
        if i != last_i:
            return _segment_max_timestamp(segments[i], idx(i), trace)
        if tail is None:
            return None  # not walked: unknown
        # Up to its last offset-index entry the time index knows the maximum; the walk saw the rest.
        if idx(i).positions and not idx(i).times:
            return None
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
            position = idx(i).position_for_timestamp(bounds.from_timestamp)
        if i == until_i:
            assert bounds.until_timestamp is not None
            position = min(position, idx(i).position_for_timestamp(bounds.until_timestamp))
        end_position = tail.end_position if tail is not None and i == last_i else segment.size_bytes
        ranges.append(
            SegmentRange(
                topic,
                partition,
                segment.path,
                segment.base_offset,
                position,
                end_position,
                start,
                end,
                bounds.from_timestamp if i == from_i else None,
                bounds.until_timestamp if i == until_i else None,
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
    log = _LogFile(r.path, r.end_position)
    from_ts, until_ts = r.from_timestamp, r.until_timestamp
    out = new_chunk()
    position = r.start_position
    next_offset = 0  # the lowest base offset the next batch may have
    readahead = _BODY_READAHEAD if until_ts is None else _BOUNDED_READAHEAD
    try:
        while position < r.end_position:
            got = log.view(position, HEADER_SIZE, _HEADER_READAHEAD)
            if got is None:
                raise CorruptRecordError(f"batch header cut short (planned end {r.end_position})")
            header: BatchHeader = read_header(*got)
            check_header(header, r.end_position, position)
            if header.base_offset < next_offset:
                # Offsets only increase along a log (FORMAT.md §2.3 rule 7); the readers rely on it.
                raise CorruptRecordError(
                    f"batch at offset {header.base_offset} follows offset {next_offset - 1}; offsets must increase"
                )
            next_offset = header.next_offset
            if header.base_offset >= r.end_offset:
                break
            skip = header.last_offset < r.start_offset
            if from_ts is not None:
                if header.max_timestamp < from_ts:
                    skip = True
                elif skip:
                    from_ts = None  # the timestamp bound starts below the start offset: offsets decide
            if skip:
                if until_ts is not None and header.max_timestamp >= until_ts:
                    break  # the read ends in a batch before its start: nothing (more) to return
            else:
                got = log.view(position, header.size, readahead)
                if got is None:
                    raise CorruptRecordError(f"a {header.size}-byte batch is cut short by the planned end")
                buf, at = got
                verify_crc(buf, at, header)
                if len(out) and not out.room_for(header.size):
                    yield out  # a batch is never split: it starts the next chunk (Arrow's int32 offsets)
                    out = new_chunk()
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
                from_ts = None
                if out.full(rows_per_chunk):
                    yield out
                    out = new_chunk()
                if reached:
                    break
            position += header.size
            if header.last_offset >= r.end_offset - 1:
                break
        if len(out):
            yield out
    except CorruptRecordError as exc:
        raise _corrupt(r.path, position, exc) from exc
    finally:
        log.close()
        if trace is not None:
            trace({"event": "read", "path": r.path, "start_position": r.start_position, "bytes_read": log.bytes_read})
