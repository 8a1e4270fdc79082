"""Columnar decode of batch bodies, for bulk readers (the Spark source, exports).

Owns: :class:`RecordColumns` (records of one partition as parallel column
lists) and :func:`decode_columns`, which decodes one batch body straight into
those lists with no per-record ``Record`` object. ``segments.batch`` stays the
owner of the format and of the body checks (``docs/FORMAT.md`` §2.3, rule 8):
:func:`segments.batch.body_columns` unpacks and checks a body as five columns,
and this module trims and appends them.

Why columns: a bulk reader hands rows to Arrow column by column, and building
a ``Record`` per row only to take it apart again cost about a third of the
decode time (``research/spark.md`` §3: decoding dominates a Spark scan of
seglog). The body already is columns (format v2), so here every step is a
C-level ``map``/``list.extend`` over a whole batch.

Must not import: ``engine`` or ``tools``, and no I/O module (plain functions over bytes).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import repeat
from operator import add
from typing import Final

from segments.batch import TIMESTAMP_TYPE_BIT, BatchHeader, body_columns
from segments.records import Header

__all__ = ["RecordColumns", "decode_columns"]

_INT64_MAX: Final = 2**63 - 1


@dataclass(slots=True)
class RecordColumns:
    """Records of one topic-partition as parallel lists, in offset order.

    ``timestamps`` are milliseconds since the epoch (with LogAppendTime, the
    batch's max timestamp, as Kafka reports it); ``timestamp_types`` holds
    Kafka's ``timestampType`` per record (0 CreateTime, 1 LogAppendTime).
    Not thread-safe: one reader fills it, then hands it on.
    """

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[tuple[Header, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def decode_columns(
    buf: bytes | bytearray | memoryview,
    position: int,
    header: BatchHeader,
    out: RecordColumns,
    *,
    start_offset: int = 0,
    end_offset: int = _INT64_MAX,
    from_timestamp: int | None = None,
    until_timestamp: int | None = None,
) -> bool:
    """Append the records of the batch at ``position`` to ``out``; return whether ``until_timestamp`` was reached.

    ``header`` must have passed :func:`~segments.batch.check_header` and
    :func:`~segments.batch.verify_crc`. Only records with
    ``start_offset <= offset < end_offset`` are kept. The timestamp bounds are
    Kafka's offsets-for-times: ``from_timestamp`` drops the records before the
    first one of the batch whose timestamp is at least it (pass it to the batch
    where a timestamp-bounded read starts: the first with ``max_timestamp >=``
    it); ``until_timestamp`` keeps only the records before the first one whose
    timestamp is at least it, and the return value says such a record was
    found, i.e. the read ends in this batch.

    Raises:
        CorruptRecordError: the body is not the five columns of FORMAT.md §2.2
            holding ``record_count`` records, or fails a check of §2.3 rule 8.
    """
    columns = body_columns(buf, position, header)
    offset_deltas, timestamp_deltas, keys, values, headers = columns
    count = len(offset_deltas)

    base = header.base_offset
    lo = bisect_left(offset_deltas, start_offset - base) if start_offset > base else 0
    hi = bisect_left(offset_deltas, end_offset - base) if end_offset <= header.last_offset else count
    log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
    # Timestamp bounds are offsets in disguise (Kafka's offsetsForTimes): the first record of the
    # batch whose timestamp reaches the bound, searched over the whole batch, not just [lo, hi).
    record_ts: tuple[int, ...] | None = None  # built only when a timestamp bound needs it
    if not log_append and (from_timestamp is not None or until_timestamp is not None):
        record_ts = tuple(map(add, timestamp_deltas, repeat(header.base_timestamp)))
    if from_timestamp is not None:
        lo = max(lo, _first_at_least(header, record_ts, from_timestamp))
    reached = False
    if until_timestamp is not None:
        cut = _first_at_least(header, record_ts, until_timestamp)
        reached = cut < count
        hi = min(hi, cut)
    if lo >= hi:
        return reached
    n = hi - lo
    whole = lo == 0 and hi == count
    if whole:
        if offset_deltas[-1] == count - 1:  # dense (what seglog writes): checked increasing ints 0..count-1
            out.offsets.extend(range(base, base + count))
        else:
            out.offsets.extend(map(add, offset_deltas, repeat(base)))
        out.keys.extend(keys)
        out.values.extend(values)
        out.headers.extend(headers)
    else:
        out.offsets.extend(map(add, offset_deltas[lo:hi], repeat(base)))
        out.keys.extend(keys[lo:hi])
        out.values.extend(values[lo:hi])
        out.headers.extend(headers[lo:hi])
    if log_append:
        out.timestamps.extend(repeat(header.max_timestamp, n))
    elif record_ts is None:
        deltas = timestamp_deltas if whole else timestamp_deltas[lo:hi]
        out.timestamps.extend(map(add, deltas, repeat(header.base_timestamp)))
    else:
        out.timestamps.extend(record_ts if whole else record_ts[lo:hi])
    out.timestamp_types.extend(repeat(1 if log_append else 0, n))
    return reached


def _first_at_least(header: BatchHeader, record_ts: tuple[int, ...] | None, bound: int) -> int:
    """Index of the first record whose timestamp is ``>= bound``, else the record count.

    ``record_ts`` is ``None`` for LogAppendTime, where every record carries the
    batch's max timestamp. Timestamps need not be sorted, hence the linear walk
    (only the one or two batches where a bounded read starts or ends get here).
    """
    if record_ts is None:
        return 0 if header.max_timestamp >= bound else header.record_count
    if header.max_timestamp < bound:
        return header.record_count
    for i, ts in enumerate(record_ts):
        if ts >= bound:
            return i
    return header.record_count  # pragma: no cover - max_timestamp >= bound guarantees a hit
