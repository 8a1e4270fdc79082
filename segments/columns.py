"""Columnar decode of batch bodies, for bulk readers (the Spark source, exports).

Owns: :class:`RecordColumns` (records of one partition as parallel column
lists) and :func:`decode_columns`, which decodes one batch body straight into
those lists with no per-record ``Record`` object; :class:`ColumnBuffers` (the
same records as raw column buffers, the layout Arrow uses) and
:func:`decode_buffers`, which fills them with no per-record Python object at
all when the C module ``seglog.segments._speedups`` is built. ``seglog.segments.batch`` stays the
owner of the format and of the body checks (``docs/FORMAT.md`` §2.3, rule 8):
:func:`seglog.segments.batch.body_columns` unpacks and checks a body as five columns,
and this module trims and appends them; with the C module,
``_speedups.arrow_batch`` reads dense bodies without a timestamp bound directly
(the same rule-8 checks, compared by ``tests/segments/test_column_buffers.py``).

Why columns: a bulk reader hands rows to Arrow column by column, and building
a ``Record`` per row only to take it apart again cost about a third of the
decode time, and decoding dominates a Spark scan of seglog (docs/SPARK.md). The
body already is columns (format v2), so here every step is a C-level
``map``/``list.extend`` over a whole batch.

Why buffers too: the Spark source spent most of its Python time creating a
``bytes`` object per key and value (msgpack) and then copying each into Arrow
(``pa.array``); the C reader copies each key and value once, straight from the
body into the buffer Arrow wraps (docs/PERFORMANCE.md, "The C fast path").

Must not import: ``engine`` or ``tools``, and no I/O module (plain functions over bytes).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate, groupby, repeat
from operator import add
from typing import Final

from seglog.segments import batch as _batch
from seglog.segments.batch import CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_BIT, BatchHeader, body_columns
from seglog.segments.records import Header

__all__ = ["BinaryBuffers", "ColumnBuffers", "RecordColumns", "decode_buffers", "decode_columns"]

# What _speedups.arrow_batch returns: timestamps, then (ends, data, valid) of keys and of values, headers.
_ArrowBatch = tuple[
    bytes, bytes, bytes, "bytes | None", bytes, bytes, "bytes | None", "list[tuple[Header, ...]] | None"
]

_INT64_MAX: Final = 2**63 - 1
_INT32_MAX: Final = 2**31 - 1  # Arrow's binary offsets are int32: a chunk's keys (or values) stay below this
# A chunk of ColumnBuffers is handed on once its key and value bytes reach this (a cap on memory);
# a batch can hold up to 2 GiB, so the int32 limit is kept by ColumnBuffers.room_for, not by this.
MAX_CHUNK_DATA_BYTES: Final = 512 << 20


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

    def full(self, rows_per_chunk: int) -> bool:
        """Whether a reader should hand this chunk on (it holds ``rows_per_chunk`` rows)."""
        return len(self.offsets) >= rows_per_chunk

    def room_for(self, batch_size: int) -> bool:
        """Whether a batch of ``batch_size`` bytes can be added (always: lists have no size limit)."""
        return True


@dataclass(slots=True)
class BinaryBuffers:
    """A binary column as Arrow lays it out, in pieces: int32 end offsets, bytes, validity bytes.

    ``offsets`` pieces hold each row's end offset (native-endian int32) counted
    from the start of the chunk's data; ``valid`` pieces hold one byte per row
    (1: a value, 0: null) or ``None`` for a piece without nulls.
    """

    offsets: list[bytes] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    valid: list[bytes | None] = field(default_factory=list)
    nbytes: int = 0
    null_count: int = 0

    def flags(self) -> bytes:
        """One byte per row of the whole column: 1 for a value, 0 for null."""
        pieces = zip(self.valid, self.offsets, strict=True)
        return b"".join(v if v is not None else b"\x01" * (len(ends) // 4) for v, ends in pieces)

    def append_buffers(self, ends: bytes, data: bytes, valid: bytes | None) -> None:
        """Append rows already in this layout (``ends`` counted from the chunk's data start)."""
        self.offsets.append(ends)
        self.data.append(data)
        self.valid.append(valid)
        self.nbytes += len(data)
        self.null_count += 0 if valid is None else valid.count(0)

    def append_values(self, values: list[bytes | None]) -> None:
        """Append a column of Python values (the path without the C module, and its fallback)."""
        lengths = [0 if v is None else len(v) for v in values]
        self.offsets.append(array("i", accumulate(lengths, initial=self.nbytes))[1:].tobytes())
        nulls = values.count(None)
        self.data.append(b"".join([v for v in values if v is not None]) if nulls else b"".join(values))  # type: ignore[arg-type]
        self.valid.append(bytes([v is not None for v in values]) if nulls else None)
        self.nbytes += sum(lengths)
        self.null_count += nulls


@dataclass(slots=True)
class ColumnBuffers:
    """Records of one topic-partition as column buffers, in offset order (for Arrow, without Python rows).

    ``offset_runs`` are ``(first offset, count)`` runs of consecutive offsets;
    ``timestamps`` pieces are native-endian int64 milliseconds (with
    LogAppendTime, the batch's max timestamp); ``timestamp_types`` are
    ``(type, count)`` runs of Kafka's ``timestampType`` (0 CreateTime, 1
    LogAppendTime); ``headers`` is one tuple per row, or ``None`` while no row
    read so far has a header. Not thread-safe: one reader fills it, then hands it on.
    """

    rows: int = 0
    offset_runs: list[tuple[int, int]] = field(default_factory=list)
    timestamps: list[bytes] = field(default_factory=list)
    timestamp_types: list[tuple[int, int]] = field(default_factory=list)
    keys: BinaryBuffers = field(default_factory=BinaryBuffers)
    values: BinaryBuffers = field(default_factory=BinaryBuffers)
    headers: list[tuple[Header, ...]] | None = None
    max_data_bytes: int = MAX_CHUNK_DATA_BYTES  # key + value bytes at which a reader hands the chunk on

    def __len__(self) -> int:
        return self.rows

    def full(self, rows_per_chunk: int) -> bool:
        """Whether a reader should hand this chunk on: ``rows_per_chunk`` rows or ``max_data_bytes`` of keys and values.

        Never later than :data:`MAX_CHUNK_DATA_BYTES` (Arrow's int32 offsets are kept by :meth:`room_for`).
        """
        data = self.keys.nbytes + self.values.nbytes
        return self.rows >= rows_per_chunk or data >= min(self.max_data_bytes, MAX_CHUNK_DATA_BYTES)

    def room_for(self, batch_size: int) -> bool:
        """Whether a batch of ``batch_size`` bytes surely fits: its keys or values cannot push a column past 2 GiB.

        An empty chunk takes any batch (a batch is at most 2 GiB, header included). A
        reader hands a chunk on before a batch it has no room for: :func:`decode_buffers`
        cannot split a batch between chunks.
        """
        return self.rows == 0 or max(self.keys.nbytes, self.values.nbytes) + batch_size <= _INT32_MAX

    def _add_types(self, timestamp_type: int, n: int) -> None:
        runs = self.timestamp_types
        if runs and runs[-1][0] == timestamp_type:
            runs[-1] = (timestamp_type, runs[-1][1] + n)
        else:
            runs.append((timestamp_type, n))

    def _add_run(self, first: int, n: int) -> None:
        runs = self.offset_runs
        if runs and runs[-1][0] + runs[-1][1] == first:
            runs[-1] = (runs[-1][0], runs[-1][1] + n)
        else:
            runs.append((first, n))

    def _add_headers(self, headers: list[tuple[Header, ...]] | None, n: int) -> None:
        if headers is not None and self.headers is None and any(headers):
            self.headers = [()] * self.rows  # the first row with headers: the rows before have none
        if self.headers is not None:
            self.headers.extend(headers if headers is not None else repeat((), n))

    def append_batch(self, first_offset: int, n: int, timestamp_type: int, buffers: _ArrowBatch) -> None:
        """Append ``n`` consecutive rows from ``first_offset`` that ``_speedups.arrow_batch`` read."""
        timestamps, key_ends, key_data, key_valid, value_ends, value_data, value_valid, headers = buffers
        self._add_headers(headers, n)
        self.timestamps.append(timestamps)
        self.keys.append_buffers(key_ends, key_data, key_valid)
        self.values.append_buffers(value_ends, value_data, value_valid)
        self._add_types(timestamp_type, n)
        self._add_run(first_offset, n)
        self.rows += n

    def append_columns(self, cols: RecordColumns) -> None:
        """Append the rows of ``cols`` (the Python path)."""
        n = len(cols)
        if n == 0:
            return
        self._add_headers(cols.headers, n)
        self.timestamps.append(array("q", cols.timestamps).tobytes())
        self.keys.append_values(cols.keys)
        self.values.append_values(cols.values)
        for kind, group in groupby(cols.timestamp_types):
            self._add_types(kind, sum(1 for _ in group))
        if cols.offsets[-1] - cols.offsets[0] == n - 1:  # consecutive (offsets only increase)
            self._add_run(cols.offsets[0], n)
        else:
            for offset in cols.offsets:
                self._add_run(offset, 1)
        self.rows += n

    def to_columns(self) -> RecordColumns:
        """The same rows as a :class:`RecordColumns` (tests and small readers)."""
        out = RecordColumns()
        for first, n in self.offset_runs:
            out.offsets.extend(range(first, first + n))
        out.timestamps.extend(array("q", b"".join(self.timestamps)))
        for kind, n in self.timestamp_types:
            out.timestamp_types.extend(repeat(kind, n))
        for column, target in ((self.keys, out.keys), (self.values, out.values)):
            ends = array("i", b"".join(column.offsets))
            data = b"".join(column.data)
            valid = column.flags()
            start = 0
            for i, end in enumerate(ends):
                target.append(data[start:end] if valid[i] else None)
                start = end
        out.headers.extend(self.headers if self.headers is not None else repeat((), self.rows))
        return out


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

    ``header`` must have passed :func:`~seglog.segments.batch.check_header` and
    :func:`~seglog.segments.batch.verify_crc`. Only records with
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
    if header.attributes & CONTROL_BIT:
        return False  # a transaction marker (checked above): never a record to a reader
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


def decode_buffers(
    buf: bytes | bytearray | memoryview,
    position: int,
    header: BatchHeader,
    out: ColumnBuffers,
    *,
    start_offset: int = 0,
    end_offset: int = _INT64_MAX,
    from_timestamp: int | None = None,
    until_timestamp: int | None = None,
) -> bool:
    """:func:`decode_columns` into :class:`ColumnBuffers`: the same rows, checks, bounds and result.

    With the C module, a batch with dense offsets and no timestamp bound is
    read straight into the buffers; every other batch (and every batch
    without the C module, and every Kafka batch) goes through :func:`decode_columns`.

    Raises:
        CorruptRecordError: as :func:`decode_columns`.
        OverflowError: ``out`` has no room for the batch's keys or values (check
            :meth:`ColumnBuffers.room_for` first).
    """
    fast = _batch._fast
    if fast is not None and from_timestamp is None and until_timestamp is None and header.magic == _batch.MAGIC:
        base, count = header.base_offset, header.record_count
        lo = max(0, start_offset - base)  # dense offsets (the C reader checks): offset = base + index
        hi = min(count, end_offset - base)
        if lo < hi:
            log_append = bool(header.attributes & TIMESTAMP_TYPE_BIT)
            got = fast.arrow_batch(
                buf, position + HEADER_SIZE, position + LOG_OVERHEAD + header.batch_length, count,
                header.last_offset_delta, header.base_timestamp, header.max_timestamp, log_append, lo, hi,
                out.keys.nbytes, out.values.nbytes,
            )
            if got is not None:
                out.append_batch(base + lo, hi - lo, 1 if log_append else 0, got)
                return False
    cols = RecordColumns()
    reached = decode_columns(
        buf, position, header, cols, start_offset=start_offset, end_offset=end_offset,
        from_timestamp=from_timestamp, until_timestamp=until_timestamp,
    )
    out.append_columns(cols)
    return reached
