"""Columnar decode of batch bodies, for bulk readers (the Spark source, exports).

Owns: :class:`RecordColumns` (records of one partition as parallel column
lists) and :func:`decode_columns`, which decodes one batch body straight into
those lists with no per-record ``Record`` object. ``segments.batch`` stays the
owner of the format; this module reads what :func:`segments.batch.encode_batch`
writes and applies the same body checks (``docs/FORMAT.md`` §2.3, rule 8) to
the columns it builds.

Why columns: a bulk reader hands rows to Arrow column by column, and building
a ``Record`` per row only to take it apart again cost about a third of the
decode time (``research/spark.md`` §3: decoding dominates a Spark scan of
seglog). Here every step is a C-level ``zip``/``map``/``list.extend`` over a
whole batch.

Must not import: ``engine`` or ``tools``, and no I/O module (plain functions over bytes).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from operator import add, lt
from typing import Final

import msgpack

from segments.batch import HEADER_SIZE, LOG_OVERHEAD, MIN_BODY_BYTES, TIMESTAMP_TYPE_BIT, BatchHeader
from segments.errors import CorruptRecordError
from segments.records import Header

__all__ = ["RecordColumns", "decode_columns"]

_NONE_TYPE = type(None)
_BIN_TYPES: Final = frozenset({bytes, _NONE_TYPE})
_INT_ONLY: Final = frozenset({int})
_TUPLE_ONLY: Final = frozenset({tuple})
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
        CorruptRecordError: the body is not a msgpack array of ``record_count``
            ``[offset_delta, timestamp_delta, key, value, headers]`` records with
            increasing offset deltas in ``[0, last_offset_delta]`` (FORMAT.md §2.3).
    """
    body_start = position + HEADER_SIZE
    body_end = position + LOG_OVERHEAD + header.batch_length
    body_len = body_end - body_start
    if body_end > len(buf) or body_len < MIN_BODY_BYTES:
        raise CorruptRecordError(f"batch at position {position}: body runs past the end of the buffer")
    try:
        body = msgpack.unpackb(
            memoryview(buf)[body_start:body_end],
            use_list=False,
            raw=False,
            max_bin_len=body_len,
            max_str_len=body_len,
            max_array_len=body_len,
            max_map_len=0,  # maps never occur in a batch body
            max_ext_len=0,  # nor do ext types
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, FormatError, StackError, UnicodeDecodeError...
        raise CorruptRecordError(f"batch at position {position}: body is not valid msgpack ({exc})") from exc
    count = header.record_count
    if type(body) is not tuple or len(body) != count:
        raise CorruptRecordError(f"batch at position {position}: body is not an array of {count} records")
    if not _TUPLE_ONLY.issuperset(map(type, body)) or set(map(len, body)) != {5}:
        raise CorruptRecordError(f"batch at position {position}: a record is not a 5-element array")
    columns = tuple(zip(*body, strict=True))
    problem = _columns_problem(header, columns)
    if problem is not None:
        raise CorruptRecordError(f"batch at position {position}: {problem}")
    offset_deltas, timestamp_deltas, keys, values, headers = columns

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
        if offset_deltas == _dense(count):  # 9 ns a record; range() then beats map(add, ...) by 20
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


@lru_cache(maxsize=64)
def _dense(count: int) -> tuple[int, ...]:
    """``(0, 1, ..., count - 1)``: the offset deltas of a batch without gaps (cached per batch size)."""
    return tuple(range(count))


def _columns_problem(header: BatchHeader, columns: tuple[tuple[object, ...], ...]) -> str | None:
    # The checks of FORMAT.md §2.3 rule 8 on whole columns: C-level set(map(type, ...)) costs ~30 ns
    # a record; headers are looked at pair by pair only when a batch has any.
    offset_deltas, timestamp_deltas, keys, values, headers = columns
    # Dense deltas 0..n-1 (what seglog writes) pass the type and order checks in one C-level compare:
    # 9 ns a record instead of 60.
    if offset_deltas != _dense(len(offset_deltas)):
        if not _INT_ONLY.issuperset(map(type, offset_deltas)):
            return "an offset delta is not an integer"
        deltas: tuple[int, ...] = offset_deltas  # type: ignore[assignment]  # checked just above
        if deltas[0] < 0 or not all(map(lt, deltas, deltas[1:])):
            return f"offset deltas are not increasing within [0, {header.last_offset_delta}]"
    if offset_deltas[-1] > header.last_offset_delta:  # type: ignore[operator]  # ints, checked above
        return f"offset deltas are not increasing within [0, {header.last_offset_delta}]"
    if not _INT_ONLY.issuperset(map(type, timestamp_deltas)):
        return "a timestamp delta is not an integer"
    ts_deltas: tuple[int, ...] = timestamp_deltas  # type: ignore[assignment]  # checked above
    if not header.attributes & TIMESTAMP_TYPE_BIT and (
        min(ts_deltas) < -header.base_timestamp or max(ts_deltas) != header.max_timestamp - header.base_timestamp
    ):
        return f"record timestamps are below 0 or do not reach the header's max timestamp {header.max_timestamp}"
    if not _BIN_TYPES.issuperset(map(type, keys)) or not _BIN_TYPES.issuperset(map(type, values)):
        return "a key or value is neither bin nor nil"
    if not _TUPLE_ONLY.issuperset(map(type, headers)):
        return "record headers are not an array"
    if any(headers):
        for record_headers in headers:
            for pair in record_headers:  # type: ignore[attr-defined]  # a tuple, checked above
                if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not bytes:
                    return "a record header is not a [str, bin] pair"
    return None
