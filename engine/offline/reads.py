"""Records read from the files, without an engine (``seglog consume`` on a directory, scripts, exports).

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from seglog.engine.offline.describe import partition_view
from seglog.engine.offline.listing import open_log, segment_reader
from seglog.engine.offline.segment_scan import trusted_index_position
from seglog.segments.batch import ScanStop, decode_batch
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

__all__ = ["read_records"]


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
    when it starts (or ``end_offset``, exclusive). Every batch is checked as the
    engine checks it, and the offsets must follow on across segments: a damaged
    batch, or a segment whose offsets do not continue the previous one's, is
    an error, never a silent jump to the records after it.

    Raises:
        StorageError: the log directory is missing or unreadable.
        UnknownTopicOrPartitionError: no such partition directory.
        CorruptRecordError: a batch fails its checks, or the segments do not follow on, before the end.
    """
    info, meta = partition_view(Path(log_dir), topic, partition)
    start = max(start_offset, info.log_start_offset)
    end = info.log_end_offset if end_offset is None else min(end_offset, info.log_end_offset)
    if start >= end or not info.segments:
        return
    bases = [s.base_offset for s in info.segments]
    expected: int | None = None  # where the next segment's offsets must begin
    for seg in info.segments[max(0, bisect_right(bases, start) - 1):]:
        if seg.base_offset >= end:
            return
        if expected is not None and seg.base_offset != expected:
            what = (f"offsets {expected}..{seg.base_offset - 1} are missing" if seg.base_offset > expected
                    else "the segments overlap")
            raise CorruptRecordError(
                f"{seg.log_path}: the segment begins at offset {seg.base_offset}, but the previous one ends before "
                f"{expected}: {what} ('seglog verify' reports the directory)"
            )
        position, first_offset = trusted_index_position(seg, start, meta.max_batch_bytes)
        with open_log(seg.log_path) as log:
            reader = segment_reader(log, seg.base_offset, meta.max_batch_bytes, start=position,
                                    first_offset=first_offset, verify=False)
            for batch in reader:
                if batch.header.last_offset < start:
                    continue
                if batch.header.base_offset >= end:
                    return
                buf, at = reader.batch_bytes(batch)
                for rec in decode_batch(buf, at, batch.header, start_offset=start):
                    if rec.offset >= end:
                        return
                    yield rec
            next_offset = reader.next_offset if reader.next_offset is not None else seg.base_offset
            if reader.stop is not ScanStop.END and next_offset < end:
                reader.raise_unless_complete()
        expected = next_offset
