"""Record-batch framing: encode, read a header, validate, decode, and the recovery scan.

Owns the byte layout of one record batch in a ``.log`` file (``docs/FORMAT.md``
is its specification): a 61-byte big-endian header modelled on Kafka's v2
``RecordBatch`` followed by one msgpack body holding the records as five
columns (offset deltas, timestamp deltas, keys, values, headers). Everything here is
pure and synchronous: plain functions over bytes and ints, tested without an
event loop, safe to call from any thread (msgpack and CRC calls hold the GIL).

Every malformed input raises :class:`~seglog.segments.errors.CorruptRecordError` and
nothing else; lengths read from a header are bounded by ``max_batch_bytes``
before anything is allocated, and msgpack limits are bounded by the body length.
Bad *caller* input to :func:`encode_batch` raises ``TypeError``/``ValueError``.

The per-record loops (encoding a body, checking and building the Records a
read returns) run in the optional C module ``seglog.segments._speedups`` when it is
built; this module is the reference it is tested against, and takes over for
anything the C code does not accept (``SEGLOG_PURE_PYTHON=1`` turns it off).

Must not import: ``engine`` or ``tools`` (and no I/O module: no ``aiofiles``, no ``os``).
"""

from __future__ import annotations

import enum
import struct
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import partial
from itertools import compress, islice, repeat
from operator import add, ge, lt, sub
from types import ModuleType
from typing import TYPE_CHECKING, Final, NamedTuple

import google_crc32c
import msgpack

from seglog.segments import kafka_batch
from seglog.segments._native import optional_c_module
from seglog.segments.errors import CorruptRecordError
from seglog.segments.kafka_batch import KAFKA_MAGIC
from seglog.segments.records import Record, text_problem

if TYPE_CHECKING:
    from seglog.segments._speedups import Plan as _Plan

# The per-record loops in C (segments/_speedups.c); optional, this module is the reference.
_fast: ModuleType | None = optional_c_module("_speedups")

__all__ = [
    "HEADER",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_V1",
    "MIN_BATCH_SIZE",
    "BatchHeader",
    "ScanResult",
    "ScanStop",
    "TimestampType",
    "check_header",
    "BodyColumns",
    "body_columns",
    "decode_batch",
    "decode_batches",
    "find_timestamp",
    "crc_matches",
    "index_entry_problem",
    "offset_problem",
    "time_entry_problem",
    "rebase_batch",
    "LateBody",
    "encode_batch",
    "encode_batch_parts",
    "encode_small_batch",
    "plan_batch_parts",
    "read_header",
    "scan_batches",
    "verify_crc",
    "whole_batches_length",
]

# --- On-disk constants: every value below is part of the .log format (docs/FORMAT.md). ---

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
"""The fixed batch header, big-endian, no padding (part of the format)."""
HEADER_SIZE: Final = 61  # part of the format: HEADER.size
LOG_OVERHEAD: Final = 12  # part of the format: base_offset (8) + batch_length (4) precede the counted bytes
CRC_OFFSET: Final = 17  # part of the format: where the uint32 CRC-32C sits in the header
CRC_START: Final = 21  # part of the format: the CRC covers [21, end of batch), i.e. attributes .. last body byte
MAGIC_OFFSET: Final = 16  # part of the format
MAGIC: Final = 0x54  # part of the format: 'T', seglog batch format v2 (columnar body; Kafka's magic is 0..2)
MAGIC_V1: Final = 0x53  # part of the format: 'S', format v1 (row body, seglog < 0.2): refused, never cut by recovery
NO_PARTITION_LEADER_EPOCH: Final = -1  # part of the format: reserved for replication
NO_PRODUCER_ID: Final = -1  # part of the format
NO_PRODUCER_EPOCH: Final = -1  # part of the format
NO_SEQUENCE: Final = -1  # part of the format
# Attributes (int16): bits 0-2 compression (only 0 = none is written or accepted), bit 3 timestamp
# type, bit 4 transactional, bit 5 control; bits 6-15 must be 0 (part of the format). A control batch
# (a transaction marker) is always written in Kafka's format (magic 2): bit 5 is refused in seglog's own.
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
TRANSACTIONAL_BIT: Final = 0x10
CONTROL_BIT: Final = 0x20
KNOWN_ATTRIBUTES: Final = 0x3F
_ATTRIBUTES_LOW: Final = 22  # the low byte of the big-endian attributes (bytes 21-22)
# The smallest body: fixarray(5) [nil, nil, fixarray(1) [nil], fixarray(1) [nil], nil] = 8 bytes, and
# every further record costs at least 2 more (its key and value, nil each); this bounds record_count
# by the body length: record_count * 2 + 6 <= len(body).
MIN_RECORD_BYTES: Final = 2
MIN_BODY_BYTES: Final = 8
_BODY_FIXED_BYTES: Final = MIN_BODY_BYTES - MIN_RECORD_BYTES  # 6
MIN_BATCH_SIZE: Final = HEADER_SIZE + MIN_BODY_BYTES  # 69 bytes
_MIN_BATCH_LENGTH: Final = MIN_BATCH_SIZE - 12  # batch_length of the smallest batch
_HEADER_BYTES_IN_LENGTH: Final = HEADER_SIZE - 12  # 49 header bytes counted by batch_length
_REFUSED_ATTRIBUTES: Final = ~0x3F | 0x07 | 0x20  # unknown bits, a codec, the control bit (Kafka format only)
INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1

_RECOVERY_HINT: Final = "recovery truncates the segment here on open ('seglog recover DIR')"

_NONE_TYPE = type(None)
_BIN_TYPES: Final = frozenset({bytes, _NONE_TYPE})
_INT_ONLY: Final = frozenset({int})
_NONE_ONLY: Final = frozenset({_NONE_TYPE})
_INT_OR_NONE: Final = frozenset({int, _NONE_TYPE})
_TUPLE_ONLY: Final = frozenset({tuple})

_new_record = partial(tuple.__new__, Record)  # skips NamedTuple.__new__'s Python frame
_tuple_new = tuple.__new__  # map(_tuple_new, repeat(Record), rows): no partial either, faster in bulk

_DEFAULT_PACKER = msgpack.Packer(use_bin_type=True)  # pack() holds the GIL, so sharing it is thread-safe


class TimestampType(enum.IntEnum):
    """Which timestamp a batch stores (attribute bit 3), as Kafka's ``message.timestamp.type``."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of one batch, field by field (layout in ``docs/FORMAT.md``)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch in the file: ``12 + batch_length``."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record: ``base_offset + last_offset_delta``."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch: ``last_offset + 1``."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def timestamp_type(self) -> TimestampType:
        """``CREATE_TIME`` or ``LOG_APPEND_TIME`` (attribute bit 3)."""
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4: a batch of a producer's transaction (data or marker)."""
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: a control batch (a transaction marker; only in Kafka's format), never data."""
        return bool(self.attributes & CONTROL_BIT)


# base_offset, batch_length, (partition_leader_epoch, magic, crc, attributes skipped), last_offset_delta:
# where a batch's offsets are, read without building a BatchHeader (FORMAT.md §2.1).
_LOCATE: Final = struct.Struct(">qi11xi")
_make_header = partial(tuple.__new__, BatchHeader)  # BatchHeader._make without its Python frame (every header)
_unpack_header = HEADER.unpack_from
_PREFIX = struct.Struct(">qiibI")  # base_offset .. crc: the 21 bytes before the CRC'd range
_CRC_RANGE_HEADER = struct.Struct(">hiqqqhii")  # attributes .. record_count: the 40 CRC'd header bytes
_BATCH_LENGTH_BASE: Final = HEADER_SIZE - LOG_OVERHEAD  # 49 header bytes counted by batch_length
_MAX_TIMESTAMP: Final = struct.Struct(">q")
_MAX_TIMESTAMP_OFFSET: Final = 35  # part of the format: where the header's max timestamp sits


# --------------------------------------------------------------------------------------- encode


def encode_batch(
    base_offset: int,
    records: Sequence[Record],
    *,
    timestamp_type: TimestampType,
    now_ms: int,
    packer: msgpack.Packer | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> bytes:
    """Encode ``records`` as one batch whose first record gets ``base_offset``; see :func:`encode_batch_parts`."""
    head, body = encode_batch_parts(
        base_offset, records, timestamp_type=timestamp_type, now_ms=now_ms, packer=packer,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        transactional=transactional,
    )
    return b"".join((head, body))


def encode_batch_parts(
    base_offset: int,
    records: Sequence[Record],
    *,
    timestamp_type: TimestampType,
    now_ms: int,
    packer: msgpack.Packer | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
) -> tuple[bytearray, bytes]:
    """Encode ``records`` as one batch whose first record gets ``base_offset``: ``(header, body)``.

    The batch is the 61 header bytes followed by the body; they are returned
    apart so that a writer can hand both to ``pwritev`` and patch the base
    offset in the (mutable) header with :func:`rebase_batch`, without copying
    the body: the page faults of a fresh buffer of a megabyte cost more than
    packing it.

    Records get consecutive offsets (offset delta = index in ``records``; their
    ``offset`` field is ignored). A ``None`` timestamp becomes ``now_ms``; with
    ``LOG_APPEND_TIME`` every timestamp becomes ``now_ms``. ``transactional``
    sets attribute bit 4 (a batch of a producer's open transaction, which
    needs a producer id). ``packer`` is the
    writer's reused ``msgpack.Packer(use_bin_type=True)`` (one per writer; a
    shared module default otherwise), used on the Python path only: the C
    encoder writes the same bytes itself.

    Raises:
        ValueError: no records, an offset or timestamp outside int64 / below 0,
            a batch whose last offset overflows int64, or a header key that is
            not valid UTF-8 or holds NUL (:func:`~segments.records.text_problem`).
        TypeError: a record that is not a 5-field ``Record``, a key/value that is not
            ``bytes``/``None``, a non-int timestamp, headers not ``(str, bytes)`` pairs.
    """
    count = len(records)
    if count == 0:
        raise ValueError("a batch needs at least one record")
    if type(base_offset) is not int or base_offset < 0 or base_offset + count - 1 > INT64_MAX:
        raise ValueError(f"base offset {base_offset!r} with {count} records is outside [0, 2**63-1]")
    log_append_time = timestamp_type is TimestampType.LOG_APPEND_TIME
    # The C encoder (segments/_speedups.c) writes the body of valid records in two passes over
    # them, byte for byte what the column path below packs; for anything else it returns None and
    # the Python path decides, with its errors.
    encoded = (
        _fast.encode_body(records, log_append_time, now_ms)
        if _fast is not None and type(now_ms) is int and 0 <= now_ms <= INT64_MAX
        else None
    )
    if encoded is not None:
        body, base_timestamp, max_timestamp = encoded
    else:
        if count == 1:  # one record per append is common; the column machinery costs more than it
            keys, values, headers_column, deltas, base_timestamp, max_timestamp = _columns_of_one(
                records[0], timestamp_type, now_ms
            )
        else:
            keys, values, headers_column, deltas, base_timestamp, max_timestamp = _columns_of(
                records, count, timestamp_type, now_ms
            )
        # Offsets are dense (delta = index), which the nil offset column says.
        body = (packer or _DEFAULT_PACKER).pack((None, deltas, keys, values, headers_column))
    if transactional and producer_id < 0:
        raise ValueError("a transactional batch needs a producer id")
    attributes = (TIMESTAMP_TYPE_BIT if log_append_time else 0) | (TRANSACTIONAL_BIT if transactional else 0)
    crc_header = _CRC_RANGE_HEADER.pack(
        attributes, count - 1, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count
    )
    crc = google_crc32c.extend(google_crc32c.value(crc_header), body)
    # _batch_head, inline: every append
    head = bytearray(_PREFIX.pack(base_offset, _BATCH_LENGTH_BASE + len(body), NO_PARTITION_LEADER_EPOCH, MAGIC, crc))
    head += crc_header
    return head, body


def _encode_small_batch_py(
    records: Sequence[Record], log_append_time: bool, now_ms: int, max_bytes: int
) -> tuple[bytearray, int] | None:
    """The batch :func:`encode_batch_parts` makes of ``records`` (base offset 0, no producer), whole, or ``None``.

    :data:`encode_small_batch` without the C module (and the reference its C
    twin is tested against). Returns the header and body joined in one
    ``bytearray`` (the writer patches the base offset in with
    :func:`rebase_batch`) and the batch's max timestamp. ``None`` when the
    batch would be larger than ``max_bytes``, or the records are not the plain
    valid case: :func:`encode_batch_parts` then decides, with its errors.
    """
    timestamp_type = TimestampType.LOG_APPEND_TIME if log_append_time else TimestampType.CREATE_TIME
    try:
        head, body = encode_batch_parts(0, records, timestamp_type=timestamp_type, now_ms=now_ms)
    except (TypeError, ValueError):
        return None
    if len(head) + len(body) > max_bytes:
        return None
    max_timestamp = _MAX_TIMESTAMP.unpack_from(head, _MAX_TIMESTAMP_OFFSET)[0]
    head += body
    return head, max_timestamp


def _batch_head(base_offset: int, body_size: int, crc: int, crc_header: bytes) -> bytearray:
    """The 61 header bytes of a batch: the 21 before the CRC'd range, then ``crc_header``."""
    head = bytearray(_PREFIX.pack(base_offset, _BATCH_LENGTH_BASE + body_size, NO_PARTITION_LEADER_EPOCH, MAGIC, crc))
    head += crc_header
    return head


_CRC: Final = struct.Struct(">I")


class LateBody:
    """The body of a planned batch, written by :meth:`materialize` where it is needed (see :func:`plan_batch_parts`).

    ``len()`` is the body's exact size from the moment it is planned. The
    first :meth:`materialize` writes the body (the C encoder's second pass),
    sets the CRC-32C in the batch's header and returns the body; later calls
    return the same bytes. Not thread-safe: one thread materializes it (the
    append's worker thread).
    """

    __slots__ = ("_body", "_crc_header", "_head", "_plan", "_size")

    def __init__(self, plan: _Plan, head: bytearray, crc_header: bytes) -> None:
        self._plan: _Plan | None = plan
        self._size = plan.size
        self._head = head
        self._crc_header = crc_header
        self._body: bytes | None = None

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"LateBody({self._size} bytes, {'planned' if self._body is None else 'materialized'})"

    def materialize(self) -> bytes:
        """The body (written now if it was not yet), with the CRC-32C set in the batch's header."""
        body = self._body
        if body is None:
            assert self._plan is not None
            body = self._plan.write()
            _CRC.pack_into(self._head, CRC_OFFSET, google_crc32c.extend(google_crc32c.value(self._crc_header), body))
            self._body, self._plan = body, None
        return body


def plan_batch_parts(
    base_offset: int,
    records: Sequence[Record],
    *,
    timestamp_type: TimestampType,
    now_ms: int,
    producer: tuple[int, int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE),
    transactional: bool = False,
) -> tuple[bytearray, LateBody] | None:
    """:func:`encode_batch_parts` with the body left to be written later: ``(header, body)``, or None.

    Checks and sizes ``records`` as the encoder would (the C module's first
    pass: it reads the records, not the bytes of their keys and values) and
    returns the batch's header, exact but for its CRC, and a :class:`LateBody`
    whose ``materialize()`` writes the body and sets the CRC. The engine plans
    a large batch on the event loop and materializes it in the thread that
    writes it to the file, so the ~1 MB body is written where it is encoded
    (docs/PERFORMANCE.md, "Bodies are written where they are encoded").

    None when the C module is not built, ``records`` is not a list or tuple, or
    the records are not the plain valid case: :func:`encode_batch_parts` then
    encodes them (or raises the documented error). The records are copied
    into a tuple, so a caller changing its list meanwhile changes nothing.
    ``producer`` is the header's producer id, epoch and base sequence;
    ``transactional`` sets attribute bit 4.
    """
    if _fast is None or type(now_ms) is not int or not 0 <= now_ms <= INT64_MAX:
        return None
    if type(records) is list:
        records = tuple(records)
    elif type(records) is not tuple:
        return None
    count = len(records)
    if count == 0 or type(base_offset) is not int or base_offset < 0 or base_offset + count - 1 > INT64_MAX:
        return None
    log_append_time = timestamp_type is TimestampType.LOG_APPEND_TIME
    plan = _fast.body_plan(records, log_append_time, now_ms)
    if plan is None or plan.size > INT32_MAX - _BATCH_LENGTH_BASE:  # too large: encode_batch_parts decides
        return None
    if transactional and producer[0] < 0:
        return None  # encode_batch_parts raises the error
    attributes = (TIMESTAMP_TYPE_BIT if log_append_time else 0) | (TRANSACTIONAL_BIT if transactional else 0)
    crc_header = _CRC_RANGE_HEADER.pack(attributes, count - 1, plan.base_ts, plan.max_ts, *producer, count)
    head = _batch_head(base_offset, plan.size, 0, crc_header)  # the CRC is set when the body is written
    return head, LateBody(plan, head, crc_header)


_Columns = tuple[
    tuple[bytes | None, ...],  # keys
    tuple[bytes | None, ...],  # values
    "tuple[tuple[tuple[str, bytes], ...], ...] | None",  # headers column (None: no record has any)
    "list[int] | None",  # timestamp deltas (None: all 0)
    int,  # base timestamp
    int,  # max timestamp
]

_NOT_RECORDS: Final = "records must be segments.records.Record values (value, key, timestamp, headers, offset)"


def _columns_of(records: Sequence[Record], count: int, timestamp_type: TimestampType, now_ms: int) -> _Columns:
    # Validation is column-wise at C speed: the transposition checks the record shape,
    # set(map(type, ...)) the types; a Python loop runs only over records that have headers. The
    # body is the columns themselves (FORMAT.md §2.2), so nothing is transposed back into rows.
    try:
        values, keys, timestamps, headers, _ = zip(*records, strict=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(_NOT_RECORDS) from exc
    if not _BIN_TYPES.issuperset(map(type, values)) or not _BIN_TYPES.issuperset(map(type, keys)):
        raise TypeError("record keys and values must be bytes or None")
    if headers.count(()) == count:  # the common case: no record has headers, the column is nil
        headers_column: tuple[tuple[tuple[str, bytes], ...], ...] | None = None
    else:
        if not _TUPLE_ONLY.issuperset(map(type, headers)):
            raise TypeError("record headers must be a tuple of (str, bytes) pairs")
        _check_headers(headers)
        headers_column = headers
    timestamp_types = set(map(type, timestamps))  # one pass tells "all None", "all int" and "mixed"
    deltas: list[int] | None = None  # nil: every record has the base timestamp
    if timestamp_type is TimestampType.LOG_APPEND_TIME or timestamp_types == _NONE_ONLY:
        _check_timestamp(now_ms)
        base_timestamp = max_timestamp = now_ms
    else:
        if timestamp_types != _INT_ONLY:
            if not _INT_OR_NONE.issuperset(timestamp_types):
                raise TypeError("record timestamps must be int milliseconds or None")
            timestamps = tuple(now_ms if t is None else t for t in timestamps)
        max_timestamp = max(timestamps)
        min_timestamp = min(timestamps)
        _check_timestamp(min_timestamp)
        _check_timestamp(max_timestamp)
        base_timestamp = timestamps[0]
        if min_timestamp != max_timestamp:
            deltas = list(map(sub, timestamps, repeat(base_timestamp)))
    return keys, values, headers_column, deltas, base_timestamp, max_timestamp


def _columns_of_one(record: Record, timestamp_type: TimestampType, now_ms: int) -> _Columns:
    # _columns_of for a single record, with the same checks and errors, without the transposition.
    try:
        value, key, timestamp, headers, _ = record
    except (TypeError, ValueError) as exc:
        raise TypeError(_NOT_RECORDS) from exc
    if type(value) not in _BIN_TYPES or type(key) not in _BIN_TYPES:
        raise TypeError("record keys and values must be bytes or None")
    headers_column: tuple[tuple[tuple[str, bytes], ...], ...] | None = None
    if headers != ():
        if type(headers) is not tuple:
            raise TypeError("record headers must be a tuple of (str, bytes) pairs")
        _check_headers((headers,))
        headers_column = (headers,)
    if timestamp_type is TimestampType.LOG_APPEND_TIME or timestamp is None:
        timestamp = now_ms
    elif type(timestamp) is not int:
        raise TypeError("record timestamps must be int milliseconds or None")
    _check_timestamp(timestamp)
    return (key,), (value,), headers_column, None, timestamp, timestamp


def _check_timestamp(timestamp: int) -> None:
    if type(timestamp) is not int or not 0 <= timestamp <= INT64_MAX:
        raise ValueError(f"timestamp {timestamp!r} is outside [0, 2**63-1] milliseconds")


def _check_headers(headers: tuple[tuple[object, ...], ...]) -> None:
    for record_headers in headers:
        for pair in record_headers:
            if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not bytes:
                raise TypeError(f"a record header must be a (str, bytes) pair, got {pair!r}")
            problem = text_problem(pair[0])
            if problem is not None:
                raise ValueError(f"header key {pair[0]!r} {problem}")


# --------------------------------------------------------------------------------------- headers


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Unpack the header of the batch at ``position`` without touching its body.

    Only the 61 header bytes are read; nothing is checked (see :func:`check_header`).

    Raises:
        CorruptRecordError: fewer than 61 bytes remain at ``position``.
    """
    if position < 0 or len(buf) - position < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at position {position}: only {max(len(buf) - position, 0)} bytes left, "
            f"a header needs {HEADER_SIZE}"
        )
    return _make_header(_unpack_header(buf, position))


def header_problem(header: BatchHeader, max_batch_bytes: int) -> str | None:
    """Say what is wrong with ``header`` (without its body), or ``None`` when it is plausible.

    Checks magic, the length bounds (at least 69 bytes, at most ``max_batch_bytes``),
    attribute bits, compression, the record count against the offset span and
    the body length, the offset range and ``max_timestamp >= base_timestamp >= 0``.
    A Kafka RecordBatch v2 (magic 2, stored by the wire server) gets its own
    rules (:func:`seglog.segments.kafka_batch.header_problem`).
    """
    if header.magic == KAFKA_MAGIC:
        return kafka_batch.header_problem(header, max_batch_bytes)
    if header.magic == MAGIC_V1:
        return f"batch format v1 (magic {MAGIC_V1:#04x}, written by seglog < 0.2) is not readable by this version"
    if header.magic != MAGIC:
        return f"magic byte {header.magic & 0xFF:#04x} is not seglog's {MAGIC:#04x} (foreign or garbage bytes)"
    size = LOG_OVERHEAD + header.batch_length
    if size < MIN_BATCH_SIZE:
        return f"batch length {header.batch_length} is below the minimum {MIN_BATCH_SIZE - LOG_OVERHEAD}"
    if size > max_batch_bytes:
        return f"batch size {size} exceeds the maximum batch size {max_batch_bytes}"
    if header.attributes & ~KNOWN_ATTRIBUTES:
        return f"unknown attribute bits {header.attributes & 0xFFFF:#06x}"
    if header.attributes & CONTROL_BIT:
        return "the control bit is set: control batches are written in Kafka's format (magic 2), never seglog's"
    if header.attributes & TRANSACTIONAL_BIT and header.producer_id < 0:
        return "a transactional batch without a producer id"
    if header.attributes & COMPRESSION_MASK:
        return f"compression codec {header.attributes & COMPRESSION_MASK} is not supported (only 0 = none)"
    count = header.record_count
    body_bytes = size - HEADER_SIZE
    if not 1 <= count <= header.last_offset_delta + 1 or count * MIN_RECORD_BYTES + _BODY_FIXED_BYTES > body_bytes:
        return (
            f"record count {count} does not fit last offset delta {header.last_offset_delta} "
            f"and a {body_bytes}-byte body"
        )
    if header.base_offset < 0 or header.base_offset + header.last_offset_delta > INT64_MAX:
        return f"base offset {header.base_offset} + delta {header.last_offset_delta} is outside [0, 2**63-1]"
    if header.max_timestamp < header.base_timestamp:
        return f"max timestamp {header.max_timestamp} is below the first timestamp {header.base_timestamp}"
    if header.base_timestamp < 0:
        return f"base timestamp {header.base_timestamp} is negative (timestamps are never below 0)"
    return None


def check_header(header: BatchHeader, max_batch_bytes: int, position: int = 0) -> None:
    """Validate ``header`` (see :func:`header_problem`) before its body is read or allocated.

    Raises:
        CorruptRecordError: the header is not a plausible seglog batch header.
    """
    problem = header_problem(header, max_batch_bytes)
    if problem is not None:
        raise CorruptRecordError(f"batch at position {position}: {problem}; {_RECOVERY_HINT}")


_crc_value = google_crc32c.value  # the C reader calls it on a bytes copy of the covered range


def _use_native_crc32c(fast: ModuleType) -> bool:
    # The fetch loop in C (batches_records) computes each batch's CRC with google-crc32c's own C
    # function, looked up in its already loaded extension, rather than calling google_crc32c.value
    # on a copy per batch (most of the time of a fetch of one-record batches). The C side checks the
    # function against google_crc32c.value before using it; anything unusual keeps the Python call.
    if google_crc32c.implementation != "c":
        return False
    try:
        from google_crc32c import _crc32c
    except ImportError:  # pragma: no cover - implementation "c" is this module
        return False
    path = getattr(_crc32c, "__file__", None)
    check = bytes(range(256)) * 5
    return type(path) is str and bool(fast.use_native_crc32c(path, check, google_crc32c.value(check)))


# encode_small_batch's C twin computes the CRC with google-crc32c's C function, so it needs it.
_small_batch_in_c: Final = _fast is not None and _use_native_crc32c(_fast)

# encode_small_batch(records, log_append_time, now_ms, max_bytes) -> (batch, max timestamp) | None:
# _encode_small_batch_py, or its C twin (the same bytes, the CRC-32C computed in the same call) bound
# directly, without a Python frame: the leading append of every loop turn calls it.
encode_small_batch: Final[Callable[[Sequence[Record], bool, int, int], tuple[bytearray, int] | None]] = (
    _fast.encode_small_batch if _fast is not None and _small_batch_in_c else _encode_small_batch_py
)


def _crc_of(buf: bytes | bytearray | memoryview, start: int, end: int) -> int:
    # google_crc32c accepts only read-only bytes-like objects that are not memoryviews:
    # slice bytes directly, copy other buffers once (a copy costs about as much as the CRC itself).
    if type(buf) is bytes:
        return google_crc32c.value(buf[start:end])  # type: ignore[no-any-return]
    return google_crc32c.value(bytes(memoryview(buf)[start:end]))  # type: ignore[no-any-return]


def verify_crc(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> None:
    """Check the CRC-32C of the batch at ``position`` whose (checked) header is ``header``.

    Raises:
        CorruptRecordError: the batch runs past the end of ``buf`` or its CRC does not match.
    """
    end = position + LOG_OVERHEAD + header.batch_length
    if end > len(buf):
        raise CorruptRecordError(
            f"batch at position {position}: {header.size} bytes announced, only {len(buf) - position} "
            f"present (torn write); {_RECOVERY_HINT}"
        )
    computed = _crc_of(buf, position + CRC_START, end)
    if computed != header.crc:
        raise CorruptRecordError(
            f"batch at position {position} (offsets {header.base_offset}..{header.last_offset}): CRC-32C "
            f"mismatch, stored {header.crc:#010x}, computed {computed:#010x}; {_RECOVERY_HINT}"
        )


# --------------------------------------------------------------------------------------- decode


def _unpack_limits(body_len: int) -> dict[str, int]:
    # msgpack length limits bounded by the body: no decoded length can exceed the bytes present.
    return {
        "max_bin_len": body_len,
        "max_str_len": body_len,
        "max_array_len": body_len,
        "max_map_len": 0,  # maps never occur in a batch body
        "max_ext_len": 0,  # nor do ext types
    }


def _c_readable(buf: bytes | bytearray | memoryview) -> bool:
    # The C readers take a buffer as one contiguous block (a strided memoryview is Python's to read).
    return not isinstance(buf, memoryview) or buf.c_contiguous


def _body_span(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> tuple[int, int]:
    body_start = position + HEADER_SIZE
    body_end = position + LOG_OVERHEAD + header.batch_length
    if body_end > len(buf) or body_end - body_start < MIN_BODY_BYTES:
        raise CorruptRecordError(f"batch at position {position}: body runs past the end of the buffer")
    return body_start, body_end


def _decode_single(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> Record | None:
    # One-record batches (a producer appending one record at a time) are common; the column
    # machinery's fixed overhead per batch is about twice this path's. It accepts only the exact
    # shape seglog writes ([nil, nil, [key], [value], nil]) and returns None for anything else, which
    # then gets the full checks.
    body_start = position + HEADER_SIZE
    body_end = position + LOG_OVERHEAD + header.batch_length
    if body_end > len(buf) or body_end - body_start < MIN_BODY_BYTES or header.last_offset_delta != 0:
        return None
    try:
        body = msgpack.unpackb(
            memoryview(buf)[body_start:body_end], use_list=False, raw=False, max_map_len=0, max_ext_len=0,
            max_bin_len=body_end - body_start, max_str_len=body_end - body_start, max_array_len=8,
        )
    except Exception:  # the full path reports it
        return None
    if body.__class__ is not tuple or len(body) != 5:
        return None
    offset_deltas, timestamp_deltas, keys, values, headers = body
    if (
        offset_deltas is not None
        or timestamp_deltas is not None
        or headers is not None
        or keys.__class__ is not tuple
        or values.__class__ is not tuple
        or len(keys) != 1
        or len(values) != 1
        or keys[0].__class__ not in _BIN_TYPES
        or values[0].__class__ not in _BIN_TYPES
        or header.max_timestamp != header.base_timestamp
        or header.base_timestamp < 0
    ):
        return None
    return _new_record((values[0], keys[0], header.max_timestamp, (), header.base_offset))


def _unpack_body(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> object:
    body_start, body_end = _body_span(buf, position, header)
    try:
        return msgpack.unpackb(
            memoryview(buf)[body_start:body_end], use_list=False, raw=False, **_unpack_limits(body_end - body_start)
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, FormatError, StackError, UnicodeDecodeError...
        raise CorruptRecordError(f"batch at position {position}: body is not valid msgpack ({exc})") from exc


BodyColumns = tuple[
    Sequence[int],  # offset deltas (a range for a dense batch)
    Sequence[int],  # timestamp deltas
    tuple[bytes | None, ...],  # keys
    tuple[bytes | None, ...],  # values
    tuple[tuple[tuple[str, bytes], ...], ...],  # headers
]
"""A checked batch body as five columns of ``record_count`` entries (see :func:`body_columns`)."""


def body_columns(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> BodyColumns:
    """Unpack and check the body of the batch at ``position``: its records as five columns.

    The columns are ``(offset_deltas, timestamp_deltas, keys, values, headers)``,
    ``record_count`` entries each, all checks of ``docs/FORMAT.md`` §2.3 rule 8
    applied, the nil shorthands of §2.2 expanded (a dense batch's offset deltas
    are a ``range``). For bulk readers that want columns rather than ``Record``
    objects; :func:`decode_batch` builds Records from them. ``header`` must have
    passed :func:`check_header` and the CRC :func:`verify_crc`.

    A Kafka batch (magic 2) gives the same five columns, decompressed and
    checked by the rules of FORMAT.md §2.5.

    Raises:
        CorruptRecordError: the body is not the five columns of §2.2 holding
            ``record_count`` records with increasing offset deltas in
            ``[0, last_offset_delta]``.
    """
    if header.magic == KAFKA_MAGIC:
        offsets, deltas, keys, values, headers = kafka_batch.record_columns(buf, position, header)
        return tuple(offsets), tuple(deltas), tuple(keys), tuple(values), tuple(headers)
    body = _unpack_body(buf, position, header)
    columns = _body_columns(body, header)
    if isinstance(columns, str):
        raise CorruptRecordError(f"batch at position {position}: {columns}")
    return columns


def decode_batch(
    buf: bytes | bytearray | memoryview,
    position: int,
    header: BatchHeader,
    *,
    start_offset: int = 0,
    max_bytes: int | None = None,
) -> list[Record]:
    """Decode the body of the batch at ``position`` into Records with absolute offsets and timestamps.

    ``header`` must have passed :func:`check_header` and the CRC :func:`verify_crc`.
    Records below ``start_offset`` are skipped (found by bisection, not built).
    With ``LOG_APPEND_TIME`` every record carries the batch's max timestamp (Kafka).
    With ``max_bytes``, Records are built from ``start_offset`` up to the first
    one whose key and value bytes bring the total to ``max_bytes`` (at least
    one record); the rest of the batch is not built.

    A Kafka batch (magic 2) is decompressed and checked whole, and the same
    records are returned (:func:`seglog.segments.kafka_batch.decode_records`).

    Raises:
        CorruptRecordError: as :func:`body_columns`.
    """
    if header.magic == KAFKA_MAGIC:
        return kafka_batch.decode_records(buf, position, header, start_offset=start_offset, max_bytes=max_bytes)
    if header.record_count == 1:
        record = _decode_single(buf, position, header)
        if record is not None:
            return [record] if record.offset >= start_offset else []
    skip = start_offset - header.base_offset
    if (
        _fast is not None
        and skip < header.record_count
        and (max_bytes is None or type(max_bytes) is int)
        and _c_readable(buf)
    ):
        # A dense body read straight into Records (the entries before `skip` are checked, not built).
        # -1 is "no limit" to the C reader; any max_bytes <= 0 takes one record (_records_within).
        body_start, body_end = _body_span(buf, position, header)
        built: list[Record] | None = _fast.decode_records(
            Record, buf, body_start, body_end, header.record_count, header.last_offset_delta, header.base_offset,
            header.base_timestamp, header.max_timestamp, header.attributes & TIMESTAMP_TYPE_BIT, max(skip, 0),
            -1 if max_bytes is None else min(max(max_bytes, 0), INT64_MAX),
        )
        if built is not None:
            return built
    shape = _body_shape(_unpack_body(buf, position, header), header)
    if isinstance(shape, str):
        raise CorruptRecordError(f"batch at position {position}: {shape}")
    offset_deltas, timestamp_deltas, keys, values, headers = shape
    count = header.record_count
    skip = 0
    if start_offset > header.base_offset:
        skip = bisect_left(offset_deltas, start_offset - header.base_offset)
    end = count
    if max_bytes is not None and skip < count:
        try:
            end = skip + _records_within(keys, values, skip, max_bytes)
        except TypeError:  # a key or value that is neither bytes nor None: reported just below
            end = count
    # Only the records returned are checked (all of them, and the whole-batch rules, for a whole batch).
    problem = _range_problem(shape, header, skip, end)
    if problem is not None:
        raise CorruptRecordError(f"batch at position {position}: {problem}")
    if _fast is not None and header.max_timestamp >= header.base_timestamp >= 0:  # else -1 below is ambiguous
        fixed_timestamp = (
            header.max_timestamp if header.attributes & TIMESTAMP_TYPE_BIT
            else header.base_timestamp if timestamp_deltas is None
            else -1
        )
        built = _fast.build_records(
            Record, values, keys, timestamp_deltas, headers, None if type(offset_deltas) is range else offset_deltas,
            skip, end, header.base_offset, header.base_timestamp, fixed_timestamp,
        )
        if built is not None:
            return built
    whole = skip == 0 and end == count
    if header.attributes & TIMESTAMP_TYPE_BIT:
        timestamps: object = repeat(header.max_timestamp)
    elif timestamp_deltas is None:
        timestamps = repeat(header.base_timestamp)
    else:
        timestamps = map(add, timestamp_deltas if whole else timestamp_deltas[skip:end], repeat(header.base_timestamp))
    if type(offset_deltas) is range:  # dense: the offsets are a range too
        offsets: object = range(header.base_offset + skip, header.base_offset + end)
    else:
        offsets = map(add, offset_deltas[skip:end], repeat(header.base_offset))
    if not whole:
        keys, values = keys[skip:end], values[skip:end]
    header_column: object = repeat(()) if headers is None else headers if whole else headers[skip:end]
    rows = zip(values, keys, timestamps, header_column, offsets, strict=False)  # type: ignore[call-overload]
    return list(map(_tuple_new, repeat(Record), rows))


def _records_within(keys: tuple[bytes | None, ...], values: tuple[bytes | None, ...], skip: int, max_bytes: int) -> int:
    # How many records from `skip` on a read of at most `max_bytes` key+value bytes takes: up to and
    # including the one that reaches the limit, and always at least one (Kafka's min_one_message).
    total = 0
    taken = 0
    for key, value in zip(islice(keys, skip, None), islice(values, skip, None), strict=False):
        taken += 1
        total += (0 if key is None else len(key)) + (0 if value is None else len(value))
        if total >= max_bytes:
            break
    return taken


def find_timestamp(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, timestamp: int, *, start_offset: int = 0
) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the first record at or after ``start_offset`` with a timestamp ≥ ``timestamp``.

    ``None`` when no record of the batch qualifies. ``header`` must have passed
    :func:`check_header` and the CRC :func:`verify_crc`. Only the offset and
    timestamp columns are unpacked and checked (the key and value columns that
    follow them are never read); the search is a C-level scan of the
    timestamp column.

    Raises:
        CorruptRecordError: the body does not start with the two columns of
            FORMAT.md §2.2, or they fail its checks.
    """
    if header.max_timestamp < timestamp or header.last_offset < start_offset:
        return None
    if header.magic == KAFKA_MAGIC:
        return kafka_batch.find_timestamp(buf, position, header, timestamp, start_offset=start_offset)
    body_start, body_end = _body_span(buf, position, header)
    skip = start_offset - header.base_offset
    if _fast is not None and skip < header.record_count and type(timestamp) is int and _c_readable(buf):
        # Any target below int64 matches like its smallest value (the deltas keep timestamps >= 0).
        hit: tuple[int, int] | None = _fast.find_timestamp(
            buf, body_start, body_end, header.record_count, header.last_offset_delta, header.base_timestamp,
            header.max_timestamp, header.attributes & TIMESTAMP_TYPE_BIT, max(skip, 0), max(timestamp, -INT64_MAX - 1),
        )
        if hit is not None:  # a dense body: the entry's offset is base + index
            at_index, found_timestamp = hit
            return None if at_index < 0 else (found_timestamp, header.base_offset + at_index)
    try:
        unpacker = msgpack.Unpacker(
            use_list=False, raw=False, max_buffer_size=body_end - body_start, **_unpack_limits(body_end - body_start)
        )
        unpacker.feed(memoryview(buf)[body_start:body_end])
        if unpacker.read_array_header() != 5:
            raise ValueError("the body is not an array of 5 columns")
        offset_column, timestamp_column = unpacker.unpack(), unpacker.unpack()
    except Exception as exc:  # msgpack's errors
        raise CorruptRecordError(f"batch at position {position}: body is not valid ({exc})") from exc
    offset_deltas = _offset_column(offset_column, header)
    timestamp_deltas = _timestamp_column(timestamp_column, header)
    if isinstance(offset_deltas, str) or isinstance(timestamp_deltas, str):
        problem = offset_deltas if isinstance(offset_deltas, str) else timestamp_deltas
        raise CorruptRecordError(f"batch at position {position}: {problem}")
    skip = bisect_left(offset_deltas, start_offset - header.base_offset) if start_offset > header.base_offset else 0
    if skip >= header.record_count:
        return None  # pragma: no cover - last_offset >= start_offset and the last delta is last_offset_delta
    if header.attributes & TIMESTAMP_TYPE_BIT:  # every record carries the batch's max timestamp
        return header.max_timestamp, header.base_offset + offset_deltas[skip]
    target = timestamp - header.base_timestamp
    hits = compress(range(skip, header.record_count), map(ge, islice(timestamp_deltas, skip, None), repeat(target)))
    index = next(hits, None)
    if index is None:
        return None
    return header.base_timestamp + timestamp_deltas[index], header.base_offset + offset_deltas[index]


def _offset_column(column: object, header: BatchHeader) -> Sequence[int] | str:
    # The offset deltas (nil: dense, 0..count-1), or what is wrong with them.
    count = header.record_count
    if column is None:
        if header.last_offset_delta != count - 1:
            return f"dense offsets (nil column) need last offset delta {count - 1}, not {header.last_offset_delta}"
        return range(count)
    if type(column) is not tuple or len(column) != count or not _INT_ONLY.issuperset(map(type, column)):
        return f"the offset column is not nil or an array of {count} integers"
    if column[0] < 0 or column[-1] > header.last_offset_delta or not all(map(lt, column, column[1:])):
        return f"offset deltas are not increasing within [0, {header.last_offset_delta}]"
    return column


def _timestamp_column(column: object, header: BatchHeader) -> Sequence[int] | str:
    # The timestamp deltas (nil: all 0), or what is wrong with them (find_timestamp's whole-column check).
    count = header.record_count
    if column is not None and (type(column) is not tuple or len(column) != count):
        return f"the timestamp column is not nil or an array of {count} integers"
    problem = _timestamps_problem(column, header, whole=True)
    if problem is not None:
        return problem
    return (0,) * count if column is None else column


def _timestamps_problem(deltas: tuple[object, ...] | None, header: BatchHeader, *, whole: bool) -> str | None:
    # What is wrong with the timestamp deltas of some records (None: the nil column), or None. With
    # LogAppendTime the values are not used (every record reports max_timestamp), only their type.
    # "The largest delta reaches max_timestamp" needs every record, so it is checked only when whole.
    log_append_time = header.attributes & TIMESTAMP_TYPE_BIT
    if deltas is None:
        if not log_append_time and (header.max_timestamp != header.base_timestamp or header.base_timestamp < 0):
            return (
                f"a nil timestamp column needs max timestamp {header.max_timestamp} == base timestamp "
                f"{header.base_timestamp} >= 0"
            )
        return None
    if not _INT_ONLY.issuperset(map(type, deltas)):
        return f"the timestamp column is not nil or an array of {header.record_count} integers"
    if not log_append_time and deltas:
        top = header.max_timestamp - header.base_timestamp
        highest = max(deltas)  # type: ignore[type-var]
        if min(deltas) < -header.base_timestamp or highest > top or (whole and highest != top):  # type: ignore[type-var,operator]
            return (
                "the record timestamps are below 0 or do not reach the header's max timestamp "
                f"{header.max_timestamp}"
            )
    return None


_BodyShape = tuple[
    Sequence[int],  # offset deltas, checked (a range for a dense batch)
    "tuple[int, ...] | None",  # timestamp deltas, nil or the right length
    "tuple[bytes | None, ...]",  # keys, the right length
    "tuple[bytes | None, ...]",  # values, the right length
    "tuple[tuple[tuple[str, bytes], ...], ...] | None",  # headers, nil or the right length
]


def _body_shape(body: object, header: BatchHeader) -> _BodyShape | str:
    # The five columns with their lengths checked (O(1) but for an explicit offset column, which is
    # checked whole), or what is wrong with them; the entries are checked by _range_problem.
    count = header.record_count
    if type(body) is not tuple or len(body) != 5:
        return "body is not an array of 5 columns"
    offset_column, timestamp_column, keys, values, headers = body
    offset_deltas = _offset_column(offset_column, header)
    if isinstance(offset_deltas, str):
        return offset_deltas
    if timestamp_column is not None and (type(timestamp_column) is not tuple or len(timestamp_column) != count):
        return f"the timestamp column is not nil or an array of {count} integers"
    for name, column in (("key", keys), ("value", values)):
        if type(column) is not tuple or len(column) != count:
            return f"the {name} column is not an array of {count} bin or nil"
    if headers is not None and (type(headers) is not tuple or len(headers) != count):
        return f"the headers column is not nil or an array of {count} arrays"
    return offset_deltas, timestamp_column, keys, values, headers


def _range_problem(shape: _BodyShape, header: BatchHeader, lo: int, hi: int) -> str | None:
    # What is wrong with the entries of records [lo, hi), or None. For the whole batch this is all of
    # FORMAT.md §2.3 rule 8; for part of it (a read that starts or stops inside the batch) the records
    # it returns get every check but "the largest timestamp is the header's max" (which needs them all).
    # Column-wise at C speed (set(map(type, ...)), min, max); headers one by one only when not nil.
    if lo >= hi:
        return None
    _, timestamp_column, keys, values, headers = shape
    whole = lo == 0 and hi == header.record_count
    if _fast is not None and (timestamp_column is not None or _timestamps_problem(None, header, whole=whole) is None):
        # The C loop says "all good" in one pass; anything else is decided (and described) below.
        try:
            if _fast.range_ok(
                timestamp_column, keys, values, headers, lo, hi, -header.base_timestamp,
                header.max_timestamp - header.base_timestamp, not header.attributes & TIMESTAMP_TYPE_BIT, whole,
            ):
                return None
        except OverflowError:  # a header that check_header would refuse: let the Python path say why
            pass
    problem = _timestamps_problem(
        timestamp_column if whole or timestamp_column is None else timestamp_column[lo:hi], header, whole=whole
    )
    if problem is not None:
        return problem
    for name, column in (("key", keys), ("value", values)):
        if not _BIN_TYPES.issuperset(map(type, column if whole else column[lo:hi])):
            return f"the {name} column is not an array of {header.record_count} bin or nil"
    if headers is not None:
        for record_headers in headers if whole else headers[lo:hi]:
            if type(record_headers) is not tuple:
                return "record headers are not an array"
            for pair in record_headers:
                if type(pair) is not tuple or len(pair) != 2 or type(pair[0]) is not str or type(pair[1]) is not bytes:
                    return "a record header is not a [str, bin] pair"
    return None


def _body_columns(body: object, header: BatchHeader) -> BodyColumns | str:
    # The five checked columns, nil shorthands expanded, or what is wrong with them.
    shape = _body_shape(body, header)
    if isinstance(shape, str):
        return shape
    count = header.record_count
    problem = _range_problem(shape, header, 0, count)
    if problem is not None:
        return problem
    offset_deltas, timestamp_deltas, keys, values, headers = shape
    return (
        offset_deltas,
        (0,) * count if timestamp_deltas is None else timestamp_deltas,
        keys,
        values,
        ((),) * count if headers is None else headers,
    )


def first_batch_records(buf: bytes | bytearray, start_offset: int, max_bytes: int | None) -> list[Record] | None:
    """:func:`decode_first_batch` on its C path alone: the Records when it takes the batch, else ``None``.

    For a caller with a slower path of its own (the point read): ``None`` when
    the C module is absent, or anything is unusual or wrong (the slower path
    then decodes, or raises :class:`CorruptRecordError`). ``start_offset`` and
    ``max_bytes`` must be ints in [0, 2**63-1]; ``buf`` must start with the batch.
    """
    fast = _fast
    if fast is None:
        return None
    got: list[Record] | None = fast.batch_records(
        Record, _crc_value, buf, start_offset, -1 if max_bytes is None else max_bytes
    )
    return got


def kafka_record_at_time(buf: bytes | bytearray, start_offset: int, timestamp: int) -> list[Record] | None:
    """The first record of the Kafka batch at ``buf``'s start at or after ``start_offset`` reaching ``timestamp``.

    On the C path alone, for a time lookup with a slower path of its own: the
    batch's header is checked, its CRC verified and every record walked with
    the reader's rules, and only that record is built: ``[record]``, or ``[]``
    when none qualifies. ``None`` when the C module is absent, the batch is not
    a plain Kafka batch (compressed, a marker, seglog's format: searched by
    ``record_at_time``), or anything is wrong: the slower path then decides.
    ``start_offset`` must be an int in [0, 2**63-1], ``timestamp`` an int.
    """
    fast = _fast
    if fast is None or len(buf) <= MAGIC_OFFSET or buf[MAGIC_OFFSET] != KAFKA_MAGIC:
        return None
    got: list[Record] | None = fast.batch_records(
        Record, _crc_value, buf, start_offset, 0, min(max(timestamp, -INT64_MAX), INT64_MAX)
    )
    return got


def record_at_time_py(
    buf: bytes | bytearray, base_offset: int, last_offset: int, timestamp: int, start_offset: int
) -> Record | None:
    """A time lookup's one Record of the batch a batch table placed: :data:`record_at_time`'s Python twin.

    ``buf`` must be exactly that batch: its base offset ``base_offset``, its
    last offset ``last_offset`` and its length ``len(buf)``, as the table
    says. The header is checked against those and as a read checks it, the
    CRC verified, the body decoded (from ``start_offset``), and the first
    record at or after ``start_offset`` whose timestamp is >= ``timestamp``
    returned. ``None`` when no record qualifies, the batch is not a plain
    seglog data batch (a Kafka or control batch), or any check fails: the
    caller's slower path then decides (and says what is wrong). The ints
    must lie in [0, 2**63-1].
    """
    if len(buf) < HEADER_SIZE or buf[MAGIC_OFFSET] != MAGIC or buf[_ATTRIBUTES_LOW] & CONTROL_BIT:
        return None
    found_base, batch_length, last_offset_delta = _LOCATE.unpack_from(buf)
    if (
        found_base != base_offset
        or LOG_OVERHEAD + batch_length != len(buf)
        or found_base + last_offset_delta != last_offset
        or start_offset > last_offset
    ):
        return None
    try:
        records = decode_first_batch(buf, start_offset=start_offset)
    except CorruptRecordError:
        return None
    for record in records:
        if record.timestamp >= timestamp:  # type: ignore[operator]
            return record
    return None


# The C routine (one call: header against the table entry, CRC, timestamp search, one Record), else its twin.
record_at_time: Final[Callable[[bytes | bytearray, int, int, int, int], Record | None]] = (
    record_at_time_py if _fast is None else partial(_fast.record_at_time, Record, _crc_value)
)


def decode_first_batch(
    buf: bytes | bytearray | memoryview, *, start_offset: int = 0, max_bytes: int | None = None
) -> list[Record]:
    """Decode the batch at the start of ``buf`` (which must hold it whole): a one-batch read.

    Its header is checked (``max_batch_bytes``: ``len(buf)``), its CRC
    verified, then its records from ``start_offset`` on are built, up to
    ``max_bytes`` of keys and values as :func:`decode_batch` counts them.
    With the C module a valid batch is read in one call (a point read's
    check, CRC and decode).

    Raises:
        CorruptRecordError: the header, the CRC or the body fails its checks.
    """
    if (
        _fast is not None
        and type(start_offset) is int
        and 0 <= start_offset <= INT64_MAX
        and (max_bytes is None or (type(max_bytes) is int and 0 <= max_bytes <= INT64_MAX))
        and (not isinstance(buf, memoryview) or buf.c_contiguous)
    ):
        got: list[Record] | None = _fast.batch_records(
            Record, _crc_value, buf, start_offset, -1 if max_bytes is None else max_bytes
        )
        if got is not None:
            return got
    header = read_header(buf)
    check_header(header, len(buf))
    verify_crc(buf, 0, header)
    return decode_batch(buf, 0, header, start_offset=start_offset, max_bytes=max_bytes)


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    start_offset: int = 0,
    max_batch_bytes: int,
) -> list[Record]:
    """Decode every batch in ``buf`` (whole batches back to back, as a segment read returns them).

    Each batch's header is checked, its base offset must follow on from the
    previous batch's last offset (:func:`offset_problem`), and its CRC is
    verified before its body is decoded; records below ``start_offset`` are skipped.

    Raises:
        CorruptRecordError: a header, CRC or body check fails, or ``buf`` ends inside a batch.
    """
    records: list[Record] = []
    position, end = 0, len(buf)
    expected: int | None = None
    # The C loop takes the plain valid seglog batches, many per call (a fetch of one-record batches
    # holds thousands); it stops before any other batch, which the Python loop below reads or refuses
    # (a Kafka batch, a corrupt one), then hands back to it.
    fast = (
        _fast
        if _fast is not None
        and type(start_offset) is int
        and 0 <= start_offset <= INT64_MAX
        and type(max_batch_bytes) is int
        and _c_readable(buf)
        else None
    )
    limit = min(max_batch_bytes, INT64_MAX) if fast is not None else 0
    while position < end:
        if fast is not None and (expected is None or expected <= INT64_MAX):
            position, after = fast.batches_records(
                Record, _crc_value, buf, position, start_offset, limit, -1 if expected is None else expected, records
            )
            expected = None if after < 0 else after
            if position >= end:
                break
        header = read_header(buf, position)
        check_header(header, max_batch_bytes, position)
        if expected is not None and header.base_offset != expected:
            # The offset rule (a base offset is outside the CRC): a batch that does not follow on
            # would serve its records at offsets that are not theirs.
            problem = offset_problem(header.base_offset, expected)
            raise CorruptRecordError(f"batch at position {position}: {problem}; {_RECOVERY_HINT}")
        expected = header.base_offset + header.last_offset_delta + 1
        verify_crc(buf, position, header)
        if header.last_offset >= start_offset:
            records.extend(decode_batch(buf, position, header, start_offset=start_offset))
        position += LOG_OVERHEAD + header.batch_length
    return records


def whole_batches_length(buf: bytes | bytearray | memoryview, first_size: int) -> int:
    """The length of the longest prefix of ``buf`` made of whole batches whose offsets follow on.

    The first batch is ``first_size`` bytes long (its header was checked by
    the caller; ``0`` when it does not fit in ``buf``); each later one counts
    while its base offset is the previous batch's last offset + 1 (outside
    the CRC, ``docs/FORMAT.md`` §2.3 rule 7) and it lies whole in ``buf``. A
    segment read returns this prefix: a batch that does not follow on ends
    the read there, and a read starting at it refuses it. Only the 27 bytes
    of each header that place the batch are read (nothing is checked here:
    the decode checks every batch it returns).
    """
    if _fast is not None and type(first_size) is int and _c_readable(buf):
        got: int | None = _fast.whole_batches_length(buf, first_size)
        if got is not None:
            return got
    length = first_size if first_size <= len(buf) else 0
    if length == 0:
        return 0
    size = len(buf)
    base_offset, _, last_offset_delta = _LOCATE.unpack_from(buf, 0)
    expected = base_offset + last_offset_delta + 1
    while length + HEADER_SIZE <= size:
        base_offset, batch_length, last_offset_delta = _LOCATE.unpack_from(buf, length)
        if base_offset != expected or batch_length <= 0 or length + LOG_OVERHEAD + batch_length > size:
            break
        expected = base_offset + last_offset_delta + 1
        length += LOG_OVERHEAD + batch_length
    return length


# --------------------------------------------------------------------------------------- scan


class ScanStop(enum.Enum):
    """Why :func:`scan_batches` (or the segment reader, ``seglog.segments.reader``) stopped."""

    END = "end"  # the buffer ends exactly after a valid batch (or is empty)
    INCOMPLETE = "incomplete"  # the last batch (or its header) runs past the end of the buffer
    CORRUPT = "corrupt"  # a header, CRC or offset check failed
    # The reader's only (scan_batches never returns them):
    UNSUPPORTED = "unsupported"  # a whole, CRC-valid batch of a format this version cannot read (seglog v1)
    OVERFLOW = "overflow"  # a valid batch whose offsets are not storable relative to the segment's base offset
    LIMIT = "limit"  # the reader reached the byte limit it was given (more batches may follow)


class ScanResult(NamedTuple):
    """What :func:`scan_batches` found: valid batches up to ``valid_end``, then ``stop``."""

    valid_end: int  # position just after the last valid batch
    batches: list[tuple[int, BatchHeader]]  # (position, header) of each valid batch, in order
    stop: ScanStop
    reason: str  # empty unless stop is CORRUPT or INCOMPLETE
    next_offset: int | None  # the base offset the next batch must have (None: no batch was found, none given)


def offset_problem(base_offset: int, expected: int) -> str | None:
    """What is wrong with a batch whose base offset is ``base_offset`` where ``expected`` belongs, or ``None``.

    The offset rule of ``docs/FORMAT.md`` §2.3 (rule 7): inside a segment the
    offsets follow on from batch to batch, so ``expected`` is the previous
    batch's last offset + 1, and for the segment's first batch the base offset
    its file name says. A batch's base offset is not covered by its CRC (as in
    Kafka), so this is what catches one that changed on disk: a value above
    ``expected`` would skip offsets, one below would serve them twice.
    """
    if base_offset == expected:
        return None
    if base_offset < expected:
        return f"base offset {base_offset} is below the expected {expected} (offsets must follow on)"
    return f"base offset {base_offset} is above the expected {expected}: offsets {expected}..{base_offset - 1} missing"


def index_entry_problem(header: BatchHeader, entry_offset: int, span: int = 0) -> str | None:
    """What is wrong with the batch an offset-index entry ``(entry_offset, position)`` leads to, or ``None``.

    The rule of an index entry at use (``docs/FORMAT.md`` §3.1): the batch at
    the entry's position (its ``header``, already checked by
    :func:`header_problem`) is the one whose **last** offset the entry holds,
    and it ends no later than the next entry's position (``span``: the bytes
    from this entry's position to the next one's; ``0`` when unknown, the
    last entry). A batch's base offset is not covered by its CRC, so this is
    also what catches a flipped base offset in an indexed batch (its last
    offset moves with it). The point read checks the same two comparisons
    inline on the fields it unpacked (``LogSegment.read_records_cached``) and
    calls this only to say what is wrong.
    """
    last = header.base_offset + header.last_offset_delta
    if last != entry_offset:
        return f"the batch there holds offsets {header.base_offset}..{last}, not one ending at {entry_offset}"
    if span and LOG_OVERHEAD + header.batch_length > span:
        return (
            f"the batch there ({LOG_OVERHEAD + header.batch_length} bytes) runs past the next entry "
            f"({span} bytes on)"
        )
    return None


def time_entry_problem(header: BatchHeader, entry_timestamp: int, entry_offset: int) -> str | None:
    """What is wrong with a time-index entry ``(entry_timestamp, entry_offset)`` given the batch it names.

    ``header`` is the batch whose last offset is ``entry_offset`` (a time
    entry names the batch holding the largest timestamp so far, by that
    batch's last offset): that batch's largest timestamp must be the entry's.
    ``None`` when it is (``docs/FORMAT.md`` §3.2).
    """
    if header.last_offset != entry_offset:
        return (
            f"no batch ends at offset {entry_offset} (the batch there holds "
            f"{header.base_offset}..{header.last_offset})"
        )
    if header.max_timestamp != entry_timestamp:
        return (
            f"the batch ending at offset {entry_offset} has largest timestamp {header.max_timestamp}, "
            f"not {entry_timestamp}"
        )
    return None


def scan_batches(
    buf: bytes | bytearray | memoryview,
    position: int = 0,
    *,
    max_batch_bytes: int,
    next_offset: int | None = None,
) -> ScanResult:
    """How many leading bytes of ``buf`` (from ``position``) are valid batches: the validation inside every scan.

    Checks each header (:func:`header_problem`), the CRC of each batch (the body
    is not decoded: the CRC covers it) and the offset rule (:func:`offset_problem`):
    the first batch's base offset is ``next_offset`` (any, when ``None``), each
    later one's is the previous batch's last offset + 1. Never raises for bad
    bytes; the verdict is in the result. Pure: reading a file in chunks, and
    what to make of the verdict, is the segment reader's (``seglog.segments.reader``).
    """
    batches: list[tuple[int, BatchHeader]] = []
    append = batches.append
    end = len(buf)
    is_bytes = type(buf) is bytes
    view = buf if is_bytes else memoryview(buf)
    crc32c = google_crc32c.value
    unpack, make = _unpack_header, _make_header
    max_length = max_batch_bytes - LOG_OVERHEAD
    while position < end:
        if end - position < HEADER_SIZE:
            return ScanResult(position, batches, ScanStop.INCOMPLETE, "a header is cut short", next_offset)
        fields = unpack(buf, position)
        base_offset, batch_length, _, magic, crc, attributes, last_delta, base_ts, max_ts, pid, _, _, count = fields
        # One fused test of header_problem's rules for the common, valid case (a third of the cost
        # of the function call); header_problem says what is wrong otherwise.
        if (
            magic != MAGIC
            or not _MIN_BATCH_LENGTH <= batch_length <= max_length
            or attributes & _REFUSED_ATTRIBUTES
            or (attributes & TRANSACTIONAL_BIT and pid < 0)
            or not 0 < count <= last_delta + 1
            or count * MIN_RECORD_BYTES + _BODY_FIXED_BYTES + _HEADER_BYTES_IN_LENGTH > batch_length
            or base_offset < 0
            or base_offset + last_delta > INT64_MAX
            or max_ts < base_ts
            or base_ts < 0
        ):
            # Not a plausible seglog header: a Kafka batch (magic 2) with its own rules, or bad bytes.
            problem = header_problem(make(fields), max_batch_bytes)
            if problem is not None or magic != KAFKA_MAGIC:
                return ScanResult(position, batches, ScanStop.CORRUPT, problem or "implausible header", next_offset)
        batch_end = position + LOG_OVERHEAD + batch_length
        if batch_end > end:
            return ScanResult(
                position,
                batches,
                ScanStop.INCOMPLETE,
                f"a {LOG_OVERHEAD + batch_length}-byte batch is cut short",
                next_offset,
            )
        chunk = view[position + CRC_START : batch_end]
        if crc32c(chunk if is_bytes else bytes(chunk)) != crc:
            return ScanResult(
                position, batches, ScanStop.CORRUPT, f"CRC-32C mismatch at offsets {base_offset}..", next_offset
            )
        if base_offset != next_offset and next_offset is not None:
            problem = offset_problem(base_offset, next_offset) or "offsets do not follow on"
            return ScanResult(position, batches, ScanStop.CORRUPT, problem, next_offset)
        append((position, make(fields)))
        next_offset = base_offset + last_delta + 1
        position = batch_end
    return ScanResult(position, batches, ScanStop.END, "", next_offset)


_CRC_CHUNK: Final = 4 * 1024 * 1024


def crc_matches(read: Callable[[int, int], bytes | bytearray], position: int, header: BatchHeader) -> bool:
    """Whether the CRC-32C of the batch at ``position`` (whose header is ``header``) holds, read in bounded chunks.

    ``read(position, size)`` returns up to ``size`` bytes of the file (a
    ``pread``); the caller has checked that the batch lies inside the file.
    The CRC is computed over 4 MiB reads, so a batch of any announced size is
    checked in bounded memory (the segment reader asks this of a batch whose
    format it recognises but does not read).
    """
    if header.batch_length < _HEADER_BYTES_IN_LENGTH:
        return False
    stop = position + header.size
    crc, at = 0, position + CRC_START
    while at < stop:
        part = read(at, min(_CRC_CHUNK, stop - at))
        if not part:
            return False
        crc = google_crc32c.extend(crc, part if type(part) is bytes else bytes(part))
        at += len(part)
    return crc == header.crc


# --------------------------------------------------------------------------------------- rebase

_BASE_OFFSET: Final = struct.Struct(">q")  # part of the format: the header's first field


def rebase_batch(buf: bytearray, base_offset: int, position: int = 0) -> None:
    """Give the batch at ``position`` of ``buf`` a new base offset, in place.

    The CRC covers the bytes from the attributes on (Kafka's v2 design), not the
    base offset, so a batch encoded once (at base offset 0, by a producer task)
    is placed at any offset by rewriting 8 bytes: offsets are assigned under the
    partition's write lock without re-encoding or re-checksumming anything.

    Raises:
        ValueError: ``base_offset`` is outside [0, 2**63-1] or the batch's last
            offset would overflow int64.
    """
    last_offset_delta = struct.unpack_from(">i", buf, position + 23)[0]
    if not 0 <= base_offset <= INT64_MAX - max(last_offset_delta, 0):
        raise ValueError(f"base offset {base_offset} is outside [0, 2**63-1] for this batch")
    _BASE_OFFSET.pack_into(buf, position, base_offset)
