"""How a lookup finds its answer, step by step (``seglog explain``), and the offline lookup by timestamp.

Each explanation follows the engine's path: the segment, the time-index
search, the offset-index search (its probes recorded by running the index
layer's own search over the raw slots), then the header walk from the entry's
position with the segment reader; an index entry that does not point at the
batch it names is not followed (the walk starts at the segment's beginning,
as the engine's read does).

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from seglog.engine.errors import StorageError
from seglog.engine.offline.describe import partition_info, partition_view
from seglog.engine.offline.indexes import dump_index
from seglog.engine.offline.listing import SegmentInfo, TopicMeta, open_log, segment_reader
from seglog.engine.offline.segment_scan import scan_segment, time_entry_holds, trusted_index_position
from seglog.indexes.offset_index import OFFSET_ENTRY, OffsetPosition
from seglog.indexes.search import largest_lower_bound
from seglog.indexes.time_index import NO_TIMESTAMP, TIME_ENTRY, TimestampOffset
from seglog.segments.batch import ScanStop, decode_batch, find_timestamp
from seglog.segments.errors import CorruptRecordError
from seglog.segments.files import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from seglog.segments.reader import LocatedBatch

__all__ = ["IndexProbe", "LookupExplanation", "explain_offset", "explain_timestamp", "offset_for_timestamp"]


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
    index_entry_ignored: bool = False  # the offset-index entry did not point at its batch: walked from the start
    problem: str = ""  # the walk stopped at a batch that failed its checks


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


def _walk_until(
    out: LookupExplanation,
    seg: SegmentInfo,
    target: int,
    meta: TopicMeta,
    done: Callable[[LocatedBatch], bool],
    decode: Callable[[bytes | bytearray, int, LocatedBatch], None],
) -> None:
    """Walk ``seg``'s batch headers from the offset index's entry for ``target`` until ``done(batch)``.

    Records each batch read in ``out``; ``decode(buf, at, batch)`` gets the bytes
    (CRC-checked) of the batch that is done. Like the engine's read, the walk
    starts at the segment's beginning when the entry does not point at the
    start of the batch it names.
    """
    entry = _search_offset_index(out, seg, target)
    start, first_offset = trusted_index_position(seg, target, meta.max_batch_bytes)
    if start != entry.position:
        out.index_entry_ignored = True
    out.scan_start_position = start
    with open_log(seg.log_path) as log:
        reader = segment_reader(log, seg.base_offset, meta.max_batch_bytes, start=start, first_offset=first_offset,
                                verify=False)
        for batch in reader:
            h = batch.header
            out.batches_scanned.append((batch.position, h.base_offset, h.last_offset, h.max_timestamp))
            out.bytes_scanned += h.size
            if done(batch):
                out.result_position = batch.position
                try:
                    decode(*reader.batch_bytes(batch), batch)
                except CorruptRecordError as exc:
                    out.problem = str(exc)
                return
        # A sealed segment ends at its end; the active one at the log end offset found when the walk
        # began (past it, a batch being written). Any other stop is damage, never the answer "none".
        next_offset = reader.next_offset if reader.next_offset is not None else seg.base_offset
        if reader.stop is not ScanStop.END and (not seg.is_active or next_offset < out.log_end_offset):
            out.problem = f"{seg.log_path}: batch at position {reader.position}: {reader.reason}"


def _summary(out: LookupExplanation) -> str:
    found = "no record" if out.result_offset is None else f"offset {out.result_offset}"
    ignored = " (it does not point at its batch: walked from the segment's start)" if out.index_entry_ignored else ""
    problem = f"; stopped: {out.problem}" if out.problem else ""
    return (
        f"offset-index entry {tuple(out.offset_index_entry or ())}{ignored} after {len(out.offset_index_probes)} "
        f"probe(s) of {out.index_entries} entries, {len(out.batches_scanned)} batch(es) / {out.bytes_scanned} bytes "
        f"scanned from position {out.scan_start_position} -> {found}{problem}"
    )


def explain_offset(log_dir: str | os.PathLike[str], topic: str, partition: int, offset: int) -> LookupExplanation:
    """Explain how a read at ``offset`` finds its batch: segment, offset-index search, header walk.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    info, meta = partition_view(Path(log_dir), topic, partition)
    out = LookupExplanation(topic, partition, "offset", offset, info.log_start_offset, info.log_end_offset)
    if not info.log_start_offset <= offset < info.log_end_offset or not info.segments:
        why = "below the log start offset" if offset < info.log_start_offset else "at or beyond the log end offset"
        out.message = (f"offset {offset} is {why} (log {info.log_start_offset}..{info.log_end_offset}); "
                       "a read there raises OffsetOutOfRangeError")
        return out
    bases = [s.base_offset for s in info.segments]
    seg = info.segments[max(0, bisect_right(bases, offset) - 1)]
    out.segment_base_offset, out.segment_path = seg.base_offset, seg.log_path

    def decode(buf: bytes | bytearray, at: int, batch: LocatedBatch) -> None:
        recs = decode_batch(buf, at, batch.header, start_offset=offset, max_bytes=1)
        if recs:
            out.result_offset, out.result_timestamp = recs[0].offset, recs[0].timestamp

    _walk_until(out, seg, offset, meta, lambda b: b.header.last_offset >= offset, decode)
    out.message = f"offset {offset}: segment {seg.base_offset}, " + _summary(out)
    if out.result_offset is not None:
        out.message += f" in the batch at position {out.result_position}"
    return out


def _largest_timestamp(seg: SegmentInfo, meta: TopicMeta) -> int:
    """A segment's largest timestamp: a sealed one's time-index last entry (the one written at roll), else a scan.

    The entry is used only when its offset lies in the segment; a missing,
    unreadable or misplaced one costs a scan of the segment's batch headers.
    """
    if seg.time_index_bytes and not seg.is_active:
        try:
            entries = dump_index(seg.sibling(TIME_INDEX_SUFFIX), base_offset=seg.base_offset).entries
        except StorageError:
            entries = []
        if (
            entries
            and seg.base_offset <= entries[-1][1] < (seg.next_base_offset or 0)
            and time_entry_holds(seg, entries[-1], meta.max_batch_bytes)
        ):
            return entries[-1][0]
    return scan_segment(seg.log_path, max_batch_bytes=meta.max_batch_bytes, base_offset=seg.base_offset).max_timestamp


def explain_timestamp(
    log_dir: str | os.PathLike[str], topic: str, partition: int, timestamp: int
) -> LookupExplanation:
    """Explain how ``offset_for_timestamp(timestamp)`` finds the earliest offset whose timestamp is >= it.

    As the engine does: segments are tried in order; in the first whose largest
    timestamp is ``>= timestamp`` the time index gives a floor entry, the
    offset index the position of the batch holding that entry's offset, and a
    walk from there the first batch whose max timestamp is ``>= timestamp``,
    then the first record in it (at or above the log start) at or above the
    timestamp. A segment whose qualifying records all lie below the log start
    gives no answer, and the next one is tried.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
    """
    info, meta = partition_view(Path(log_dir), topic, partition)
    out = LookupExplanation(topic, partition, "timestamp", timestamp, info.log_start_offset, info.log_end_offset)
    start_offset = info.log_start_offset
    searched: SegmentInfo | None = None
    for seg in info.segments:
        if seg.next_base_offset is not None and seg.next_base_offset <= start_offset:
            continue  # wholly below the log start (the engine has deleted it, or will)
        largest = _largest_timestamp(seg, meta)
        out.segments_considered.append((seg.base_offset, largest))
        if largest < timestamp:
            continue
        searched = seg
        _search_segment_by_time(out, seg, meta, timestamp, start_offset)
        if out.result_offset is not None or out.problem:
            break
    if searched is None:
        out.message = f"no record has a timestamp >= {timestamp}: offset_for_timestamp returns None"
        return out
    out.message = (
        f"timestamp {timestamp}: segment {searched.base_offset}, time-index entry "
        f"{tuple(out.time_index_entry or ())}, " + _summary(out)
    )
    if out.result_timestamp is not None:
        out.message += f" (timestamp {out.result_timestamp})"
    return out


def _search_segment_by_time(
    out: LookupExplanation, seg: SegmentInfo, meta: TopicMeta, timestamp: int, start_offset: int
) -> None:
    out.segment_base_offset, out.segment_path = seg.base_offset, seg.log_path
    out.time_index_probes, out.offset_index_probes, out.batches_scanned, out.bytes_scanned = [], [], [], 0
    out.index_entry_ignored, out.result_position = False, None
    tentry = TimestampOffset(NO_TIMESTAMP, seg.base_offset)
    if seg.time_index_bytes:
        tdump = dump_index(seg.sibling(TIME_INDEX_SUFFIX), base_offset=seg.base_offset)
        data = b"".join(TIME_ENTRY.pack(t, o - seg.base_offset) for t, o in tdump.entries)
        slot, out.time_index_probes = _search(data, len(tdump.entries), timestamp, (">q", TIME_ENTRY.size, 0), bias=0)
        # Used only when it holds (the batch it names has its timestamp): one that lies would skip records.
        if slot is not None and time_entry_holds(seg, tdump.entries[slot], meta.max_batch_bytes):
            tentry = TimestampOffset(*tdump.entries[slot])
    out.time_index_entry = tentry

    def decode(buf: bytes | bytearray, at: int, batch: LocatedBatch) -> None:
        found = find_timestamp(buf, at, batch.header, timestamp, start_offset=start_offset)
        if found is not None:
            out.result_timestamp, out.result_offset = found

    # The entry's batch is where the walk starts; its records below the entry's offset may hold the
    # timestamp too, so records are looked for from the log start, not from the entry's offset.
    _walk_until(out, seg, max(tentry.offset, start_offset), meta,
                lambda b: b.header.max_timestamp >= timestamp and b.header.last_offset >= start_offset, decode)


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
        info, meta = partition_view(Path(log_dir), topic, partition)
        largest = max((_largest_timestamp(s, meta) for s in info.segments), default=NO_TIMESTAMP)
        if largest < 0:
            return None
        timestamp = largest
    elif timestamp < 0:
        raise ValueError(f"timestamp {timestamp} is negative and not one of Kafka's sentinels -1, -2, -3")
    ex = explain_timestamp(log_dir, topic, partition, timestamp)
    if ex.problem:
        raise CorruptRecordError(f"{ex.problem}; the records from there on cannot be searched")
    if ex.result_offset is None or ex.result_timestamp is None:
        return None
    return TimestampOffset(ex.result_timestamp, ex.result_offset)
