"""``dump`` of a ``.log``: its batches in file order, like ``kafka-dump-log``, read with the segment reader.

Must not import: ``tools``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from seglog.engine.offline.findings import Check, Finding, Severity
from seglog.engine.offline.listing import open_log, read_topic_file, segment_reader
from seglog.engine.offline.segment_scan import SegmentScan, TailKind, all_zero_from, tail_findings
from seglog.indexes.time_index import NO_TIMESTAMP
from seglog.segments.batch import BatchHeader, ScanStop, decode_batch
from seglog.segments.errors import CorruptRecordError
from seglog.segments.files import base_offset_of
from seglog.segments.kafka_batch import ControlRecord, control_record
from seglog.segments.records import Record

__all__ = ["BatchInfo", "dump_log"]


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """One batch as ``dump`` shows it: position, header fields, (on request) its records, and a marker's content.

    ``marker`` is what a control batch says (commit or abort, the
    coordinator's epoch); ``None`` for a data batch, or a control batch whose
    record is not a transaction marker (a finding says so).
    """

    position: int
    header: BatchHeader
    records: list[Record] | None = None
    marker: ControlRecord | None = None


def dump_log(
    path: str | os.PathLike[str],
    *,
    records: bool = False,
    max_bytes: int | None = None,
    max_batch_bytes: int | None = None,
    findings: list[Finding] | None = None,
) -> Iterator[BatchInfo]:
    """Yield the batches of a ``.log`` in file order, like ``kafka-dump-log``.

    Every batch is checked as the engine checks it (header, CRC-32C, offsets
    following on from the base offset in the file name); a control batch's
    record is decoded as a transaction marker (:attr:`BatchInfo.marker`). With ``records``
    every batch's records are decoded and offsets are checked record by record
    (Kafka's ``--deep-iteration``: non-consecutive offsets are reported). Stops
    before the first batch that starts at or beyond ``max_bytes``. Problems (a
    corrupt tail, an undecodable body, an offset gap) are appended to
    ``findings`` when given, never raised.

    Raises:
        StorageError: the file cannot be opened or read.
    """
    p = Path(path)
    base = base_offset_of(p) or 0
    limit = max_batch_bytes if max_batch_bytes is not None else read_topic_file(p.parent).max_batch_bytes
    expected: int | None = None
    sink = findings if findings is not None else []
    with open_log(p) as log:
        reader = segment_reader(log, base, limit, limit=max_bytes)
        for batch in reader:
            recs: list[Record] | None = None
            marker: ControlRecord | None = None
            if batch.header.is_control:
                buf, at = reader.batch_bytes(batch)
                try:
                    marker = control_record(buf, at, batch.header)
                except CorruptRecordError as exc:
                    sink.append(Finding(Severity.ERROR, Check.RECORDS, p, f"control batch: {exc}", batch.position,
                                        batch.header.base_offset))
            if records:
                buf, at = reader.batch_bytes(batch)
                try:
                    recs = decode_batch(buf, at, batch.header)
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
                    if batch.header.is_control:
                        # A marker's offset holds no record a reader sees (decoding returns none): not a gap.
                        expected = batch.header.last_offset + 1
            yield BatchInfo(batch.position, batch.header, recs, marker)
        if reader.stop not in (ScanStop.END, ScanStop.LIMIT, None):
            zeros = all_zero_from(log, reader.position)
            tail = TailKind.ZEROS if zeros else (
                TailKind.INCOMPLETE if reader.stop is ScanStop.INCOMPLETE else TailKind.CORRUPT
            )
            next_offset = base if reader.next_offset is None else reader.next_offset
            scan = SegmentScan(p, base, reader.end, reader.position, 0, 0, None, next_offset, NO_TIMESTAMP, -1, tail,
                               reader.reason, reader.stop)
            sink.extend(tail_findings(scan, active=True))
