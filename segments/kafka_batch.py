"""Kafka's RecordBatch v2 (magic 2) as a batch format of a ``.log``: header rules, record walk, codecs.

Owns the second batch format a segment holds (``docs/FORMAT.md`` §2.5): the
batches Kafka clients produce, stored as they arrived by the wire server. Its
61-byte header has the same layout as seglog's own (``seglog.segments.batch``:
same fields, same CRC-32C range), so the segment, its indexes, recovery and the
segment reader handle both alike; what differs is the magic byte (2), the
body (Kafka's records, one after another, optionally compressed as a whole)
and the rules here.

Three users:

* the writer (:func:`check_produced`): everything a reader will check, and
  more (dense offset deltas, the true maximum timestamp), before a produced
  batch is stored: a batch that passes is never refused by a reader later;
* the readers (:func:`header_problem` for the header walks and the segment
  reader, :func:`decode_records`, :func:`record_columns` and
  :func:`find_timestamp` for the bodies): ``seglog.segments.batch`` hands a
  magic-2 batch to them;
* :func:`stamp_log_append_time`: the one rewrite of a stored batch's
  CRC-covered bytes (a LogAppendTime topic).

The layout (all integers big-endian)::

    base_offset int64 | batch_length int32 | partition_leader_epoch int32 | magic int8 (=2)
    | crc uint32 (CRC-32C of every byte after it) | attributes int16 | last_offset_delta int32
    | base_timestamp int64 | max_timestamp int64 | producer_id int64 | producer_epoch int16
    | base_sequence int32 | record_count int32 | records (compressed as a whole when attributes say so)

    record: length varint | attributes int8 | timestamp_delta varlong | offset_delta varint
            | key_length varint | key | value_length varint | value
            | header_count varint | (header_key_length varint | key | header_value_length varint | value)*

Varints are zigzag-encoded (protobuf's ``sint``); a length of -1 is null.
Attributes: bits 0-2 the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4,
4 zstd), bit 3 the timestamp type (1 = LogAppendTime), bit 4 transactional,
bit 5 control.

Pure and synchronous: plain functions over bytes (no I/O, no event loop).
Must not import: ``engine``, ``server`` or ``tools``.
"""

from __future__ import annotations

import enum
import struct
import zlib
from types import ModuleType
from typing import TYPE_CHECKING, Final, NamedTuple

import cramjam
import google_crc32c

from seglog.segments._native import optional_c_module
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

if TYPE_CHECKING:
    from seglog.segments.batch import BatchHeader

# The writer's record walk in C (segments/_kafka_speedups.c); optional, _walk_records is the reference.
_fast: ModuleType | None = optional_c_module("_kafka_speedups")

__all__ = [
    "CODEC_NAMES",
    "KAFKA_MAGIC",
    "MAX_UNCOMPRESSED_BYTES",
    "KafkaBatchError",
    "ProducedBatch",
    "Refusal",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "ControlRecord",
    "check_produced",
    "clear_leader_epoch",
    "control_record",
    "encode_control_batch",
    "decode_produced",
    "decode_records",
    "decompress",
    "find_timestamp",
    "header_problem",
    "record_columns",
    "stamp_log_append_time",
]

# --- Part of the format (Kafka's DefaultRecordBatch) ---
KAFKA_MAGIC: Final = 2
HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12
CRC_START: Final = 21
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
TRANSACTIONAL_BIT: Final = 0x10
CONTROL_BIT: Final = 0x20
CODEC_NAMES: Final = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# The smallest record: length, attributes, timestamp delta, offset delta, key length (-1), value
# length (-1) and header count, one byte each.
MIN_RECORD_BYTES: Final = 7
NO_TIMESTAMP: Final = -1
# --- seglog's rules for the magic-2 batches it stores ---
# The records of a compressed batch may be at most this large uncompressed: every reader decompresses
# a whole batch into memory, so the bound is part of what makes a stored batch readable, and the
# writer refuses a batch that exceeds it (a small payload must not claim gigabytes).
MAX_UNCOMPRESSED_BYTES: Final = 64 << 20
# Attribute bits a stored batch may have: the codec, the timestamp type, transactional and control
# (a transaction marker, which the partition writes itself); any bit Kafka does not define is refused.
_STORED_ATTRIBUTES: Final = COMPRESSION_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT
# A control batch's one record (Kafka's EndTransactionMarker): key = int16 version 0, int16 type;
# value = int16 version 0, int32 coordinator epoch.
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
_CONTROL_KEY: Final = struct.Struct(">hh")
_CONTROL_VALUE: Final = struct.Struct(">hi")
INT64_MAX: Final = 2**63 - 1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_ATTRIBUTES: Final = struct.Struct(">h")
_TIMESTAMP: Final = struct.Struct(">q")
_CRC: Final = struct.Struct(">I")
_LEADER_EPOCH: Final = struct.Struct(">i")
# snappy-java's stream format, which Kafka's Java client writes: this magic, two version ints,
# then blocks of (int32 length, raw snappy bytes).
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16
# The first output buffer tried for lz4/zstd; it doubles up to the limit.
_FIRST_OUTPUT_BYTES: Final = 64 * 1024


class Refusal(enum.Enum):
    """Why :func:`check_produced` refused a batch (the wire server answers each with Kafka's error)."""

    CORRUPT = "corrupt"  # lengths, CRC, counts, offset deltas or the compressed payload are wrong
    INVALID = "invalid"  # well-formed, but not storable (control/transactional, a null header value...)
    TIMESTAMP = "timestamp"  # a record timestamp below -1
    COMPRESSION = "compression"  # a codec outside 0-4
    TOO_LARGE = "too large"  # records over MAX_UNCOMPRESSED_BYTES uncompressed


class KafkaBatchError(CorruptRecordError):
    """A RecordBatch v2 that fails a check; ``refusal`` says which kind (the wire server maps it to Kafka's code)."""

    def __init__(self, message: str, refusal: Refusal = Refusal.CORRUPT) -> None:
        super().__init__(message)
        self.refusal = refusal


class ProducedBatch(NamedTuple):
    """A produced batch that passed :func:`check_produced`.

    ``needs_timestamps``: some record has no timestamp (-1) under CreateTime;
    such a batch is not stored as it is (a stored record always has a
    timestamp): the caller decodes it (:func:`decode_records` with
    ``keep_missing_timestamps``) and stores the records with the append time.
    """

    base_timestamp: int
    max_timestamp: int
    record_count: int
    uncompressed_bytes: int
    needs_timestamps: bool


# ------------------------------------------------------------------------------------------------ header


def header_problem(header: BatchHeader, max_batch_bytes: int) -> str | None:
    """What is wrong with a stored magic-2 batch ``header`` (without its body), or ``None`` (FORMAT.md §2.5).

    The size bounds (``max_batch_bytes``), the attribute bits (a codec 0-4, the
    timestamp type, transactional, control: a control batch is transactional,
    has a producer id and exactly one record), a record count that
    fits the offset span and the body (uncompressed: 7 bytes a record at least;
    compressed: within ``MAX_UNCOMPRESSED_BYTES``), the offset range, and the
    timestamps (``max_timestamp >= 0``; under CreateTime also
    ``max_timestamp >= base_timestamp >= 0``).
    """
    if header.magic != KAFKA_MAGIC:
        return f"magic byte {header.magic & 0xFF:#04x} is not Kafka's RecordBatch v2 ({KAFKA_MAGIC})"
    size = LOG_OVERHEAD + header.batch_length
    body = size - HEADER_SIZE
    if body < 1:
        return f"batch length {header.batch_length} leaves no room for records"
    if size > max_batch_bytes:
        return f"batch size {size} exceeds the maximum batch size {max_batch_bytes}"
    attributes = header.attributes
    if attributes & ~_STORED_ATTRIBUTES & 0xFFFF:
        return f"unknown attribute bits {attributes & 0xFFFF:#06x}"
    if attributes & CONTROL_BIT and (
        not attributes & TRANSACTIONAL_BIT or header.record_count != 1 or header.producer_id < 0
    ):
        return "a control batch must be transactional, carry a producer id and hold exactly one record"
    if attributes & TRANSACTIONAL_BIT and header.producer_id < 0:
        return "a transactional batch without a producer id"
    codec = attributes & COMPRESSION_MASK
    if codec not in CODEC_NAMES:
        return f"compression codec {codec} is unknown (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)"
    count = header.record_count
    room = body if codec == 0 else MAX_UNCOMPRESSED_BYTES
    if not 1 <= count <= header.last_offset_delta + 1 or count * MIN_RECORD_BYTES > room:
        kind = f"a {body}-byte body" if codec == 0 else f"{MAX_UNCOMPRESSED_BYTES} bytes uncompressed"
        return f"record count {count} does not fit last offset delta {header.last_offset_delta} and {kind}"
    if header.base_offset < 0 or header.base_offset + header.last_offset_delta > INT64_MAX:
        return f"base offset {header.base_offset} + delta {header.last_offset_delta} is outside [0, 2**63-1]"
    if header.max_timestamp < 0:
        return f"max timestamp {header.max_timestamp} is negative"
    if not attributes & TIMESTAMP_TYPE_BIT and not 0 <= header.base_timestamp <= header.max_timestamp:
        return (
            f"base timestamp {header.base_timestamp} is not in [0, max timestamp {header.max_timestamp}] "
            "(CreateTime)"
        )
    return None


# ------------------------------------------------------------------------------------------------ codecs


def decompress(codec: int, payload: bytes | bytearray | memoryview, limit: int = MAX_UNCOMPRESSED_BYTES) -> bytes:
    """The records of a batch compressed with ``codec`` (Kafka's numbering), at most ``limit`` bytes of them.

    gzip is the standard library's zlib; snappy (raw, or snappy-java's stream
    format that Kafka's Java client writes), lz4 (frame format) and zstd come
    from cramjam.

    Raises:
        KafkaBatchError: ``codec`` is not 1 to 4 (``COMPRESSION``), the payload
            does not decompress (``CORRUPT``) or holds more than ``limit``
            bytes (``TOO_LARGE``).
    """
    name = CODEC_NAMES.get(codec)
    if name is None or codec == 0:
        raise KafkaBatchError(
            f"compression codec {codec} is unknown; Kafka's codecs are 1 gzip, 2 snappy, 3 lz4, 4 zstd",
            Refusal.COMPRESSION,
        )
    try:
        if codec == 1:
            return _gunzip(payload, limit)
        if codec == 2:
            return _unsnappy(payload, limit)
        return _into_growing_buffer(name, cramjam.lz4 if codec == 3 else cramjam.zstd, payload, limit)
    except (cramjam.DecompressionError, zlib.error, ValueError) as exc:
        raise KafkaBatchError(f"the {name}-compressed records do not decompress: {exc}") from exc


def _too_large(name: str, limit: int) -> KafkaBatchError:
    return KafkaBatchError(
        f"the {name}-compressed records hold more than {limit} bytes uncompressed; send smaller batches "
        "(the producer's batch size)",
        Refusal.TOO_LARGE,
    )


def _gunzip(payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: the gzip wrapper, as Kafka writes it
    out = inflater.decompress(payload, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise _too_large("gzip", limit)
    if not inflater.eof:
        raise KafkaBatchError("the gzip-compressed records are cut short")
    if inflater.unused_data:
        raise KafkaBatchError(f"{len(inflater.unused_data)} bytes follow the gzip-compressed records")
    return out


def _unsnappy(payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    data = bytes(payload)
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    parts = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise KafkaBatchError("a snappy-java block length is cut short")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise KafkaBatchError(f"a snappy-java block of {length} bytes does not fit in the payload")
        block = _raw_snappy(data[pos : pos + length], limit - total)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _raw_snappy(data: bytes, limit: int) -> bytes:
    # Raw snappy starts with the uncompressed length: checked before anything is allocated.
    if cramjam.snappy.decompress_raw_len(data) > limit:
        raise _too_large("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(data))


def _into_growing_buffer(name: str, module: object, payload: bytes | bytearray | memoryview, limit: int) -> bytes:
    # lz4 and zstd frames need not declare their size: decompress into a buffer that doubles up to
    # the limit (cramjam refuses to write past a buffer's end rather than truncating).
    data = bytes(payload)
    size = min(limit, max(_FIRST_OUTPUT_BYTES, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)  # type: ignore[attr-defined]
        except cramjam.DecompressionError as exc:
            if "whole buffer" not in str(exc):
                raise
            if size >= limit:
                raise _too_large(name, limit) from exc
            size = min(limit, size * 2)
            continue
        del out[written:]
        return bytes(out)


def _records_section(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> bytes:
    """The records of the batch at ``position``: its body, decompressed when the batch is compressed."""
    start = position + HEADER_SIZE
    end = position + LOG_OVERHEAD + header.batch_length
    if end > len(buf) or end <= start:
        raise KafkaBatchError(f"batch at position {position}: body runs past the end of the buffer")
    body = memoryview(buf)[start:end]
    codec = header.attributes & COMPRESSION_MASK
    if codec == 0:
        return bytes(body)
    return decompress(codec, body)


# ------------------------------------------------------------------------------------------------ records


def _read_varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` (at most ``max_bytes`` long: 5 for a varint, 10 for a varlong)."""
    raw = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise KafkaBatchError("a record ends inside a varint")
        byte = buf[pos + i]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise KafkaBatchError(f"a varint is longer than {max_bytes} bytes")


class _Walk(NamedTuple):
    """What :func:`_walk_records` found: the five columns (when built), the timestamp span, missing timestamps."""

    offset_deltas: list[int]
    timestamp_deltas: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[tuple[tuple[str, bytes], ...]]
    min_delta: int
    max_delta: int
    missing_timestamps: bool


def _walk_records(
    buf: bytes, count: int, base_timestamp: int, *, build: bool, produced: bool
) -> _Walk:
    """Check every record of an uncompressed records section; build the columns when ``build``.

    ``produced``: the writer's rules (offset deltas exactly ``0..count-1``, a
    record timestamp of -1 flagged rather than refused); otherwise a reader's
    (offset deltas strictly increasing from ``>= 0``; every timestamp ``>= 0``
    unless the caller reports LogAppendTime, which it checks itself).

    Raises:
        KafkaBatchError: a record's framing, offset delta, header or timestamp is wrong.
    """
    end = len(buf)
    if count > end // MIN_RECORD_BYTES:  # bound before looping
        raise KafkaBatchError(f"record count {count} cannot fit in {end} bytes of records")
    offsets: list[int] = []
    deltas: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    header_column: list[tuple[tuple[str, bytes], ...]] = []
    min_delta = max_delta = 0
    missing = False
    previous = -1
    pos = 0
    # The hot loop reads one-byte varints inline (small lengths and deltas) and leaves longer ones to
    # _read_varint; every length is checked against the record's end. The key and the value are read
    # by the same lines, written twice on purpose: this loop is every reader's decode of a stored
    # Kafka batch, and a helper call per field is a noticeable part of its time per record.
    for index in range(count):
        if pos >= end:
            raise KafkaBatchError(f"the records end before record {index} of {count}")
        byte = buf[pos]
        if byte < 0x80:
            length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            length, pos = _read_varint(buf, pos, end, 5)
        stop = pos + length
        if length < MIN_RECORD_BYTES - 1 or stop > end:
            raise KafkaBatchError(f"record {index} claims {length} bytes; {end - pos} remain")
        pos += 1  # record attributes: unused by Kafka's v2 format
        byte = buf[pos]
        if byte < 0x80:
            timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            timestamp_delta, pos = _read_varint(buf, pos, stop, 10)
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            offset_delta, pos = _read_varint(buf, pos, stop, 5)
        if produced:
            if offset_delta != index:
                raise KafkaBatchError(f"record {index} has offset delta {offset_delta}; deltas must be 0, 1, 2, ...")
        elif offset_delta <= previous:
            raise KafkaBatchError(f"record {index} has offset delta {offset_delta}, not above {previous}")
        previous = offset_delta
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            size, pos = _read_varint(buf, pos, stop, 5)
        # The key and the value are read by two copies of the same lines, not one function: a call per
        # field per record showed in decode_batch's CPU per record (docs/PERFORMANCE.md, "Kafka record walk").
        key: bytes | None = None
        if size >= 0:
            if pos + size > stop:
                raise KafkaBatchError(f"record {index} has a key of {size} bytes in {stop - pos}")
            if build:
                key = buf[pos : pos + size]
            pos += size
        elif size != -1:
            raise KafkaBatchError(f"record {index} has a key length of {size}")
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            size, pos = _read_varint(buf, pos, stop, 5)
        value: bytes | None = None
        if size >= 0:
            if pos + size > stop:
                raise KafkaBatchError(f"record {index} has a value of {size} bytes in {stop - pos}")
            if build:
                value = buf[pos : pos + size]
            pos += size
        elif size != -1:
            raise KafkaBatchError(f"record {index} has a value length of {size}")
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            header_count, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            header_count, pos = _read_varint(buf, pos, stop, 5)
        headers: tuple[tuple[str, bytes], ...] = ()
        if header_count:
            headers = _read_headers(buf, pos, stop, header_count, index)
        elif pos != stop:
            raise KafkaBatchError(f"record {index} has {stop - pos} bytes left over after its headers")
        pos = stop
        if timestamp_delta < min_delta:  # noqa: PLR1730 - a comparison is cheaper than a min() call here
            min_delta = timestamp_delta
        if timestamp_delta > max_delta:  # noqa: PLR1730 - the same
            max_delta = timestamp_delta
        if base_timestamp + timestamp_delta < 0:
            if not produced or base_timestamp + timestamp_delta != NO_TIMESTAMP:
                raise KafkaBatchError(
                    f"record {index} has timestamp {base_timestamp + timestamp_delta}; timestamps are ms since "
                    "the epoch" + (", or -1 for none" if produced else ""),
                    Refusal.TIMESTAMP,
                )
            missing = True
        if build:
            offsets.append(offset_delta)
            deltas.append(timestamp_delta)
            keys.append(key)
            values.append(value)
            header_column.append(headers)
    if pos != end:
        raise KafkaBatchError(f"{end - pos} bytes follow the last of the {count} records")
    return _Walk(offsets, deltas, keys, values, header_column, min_delta, max_delta, missing)


def _read_headers(buf: bytes, pos: int, stop: int, count: int, index: int) -> tuple[tuple[str, bytes], ...]:
    """``count`` headers of record ``index`` from ``pos``; they must end exactly at ``stop``."""
    if count < 0 or count > (stop - pos) // 2:
        raise KafkaBatchError(f"record {index} claims {count} headers in {stop - pos} bytes")
    pairs = []
    for _ in range(count):
        raw_key, pos = _read_bytes(buf, pos, stop)
        header_value, pos = _read_bytes(buf, pos, stop)
        if raw_key is None:
            raise KafkaBatchError(f"record {index} has a header with a null key", Refusal.INVALID)
        if header_value is None:
            raise KafkaBatchError(
                f"record {index} has a header with a null value; seglog stores header values as bytes "
                "(send b'' instead of null)",
                Refusal.INVALID,
            )
        try:
            name = raw_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KafkaBatchError(f"record {index} has a header key that is not UTF-8", Refusal.INVALID) from exc
        if "\x00" in name:
            raise KafkaBatchError(f"record {index} has a header key holding a NUL character", Refusal.INVALID)
        pairs.append((name, header_value))
    if pos != stop:
        raise KafkaBatchError(f"record {index} has {stop - pos} bytes left over after its headers")
    return tuple(pairs)


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    byte = buf[pos] if pos < end else 0x80
    if byte < 0x80:
        length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        length, pos = _read_varint(buf, pos, end, 5)
    if length == -1:
        return None, pos
    stop = pos + length
    if length < -1 or stop > end:
        raise KafkaBatchError(f"a field of {length} bytes does not fit in the {end - pos} bytes left of its record")
    return buf[pos:stop], stop


# ------------------------------------------------------------------------------------------------ reading


def _walk_stored(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, *, build: bool) -> _Walk:
    """Decompress and walk the stored batch at ``position`` (header and CRC already checked): every reader rule.

    Raises:
        CorruptRecordError: the records break a rule of FORMAT.md §2.5 (a
            payload that does not decompress included).
    """
    try:
        section = _records_section(buf, position, header)
        walk = _walk_records(section, header.record_count, header.base_timestamp, build=build, produced=False)
    except KafkaBatchError as exc:
        raise CorruptRecordError(f"batch at position {position} (Kafka RecordBatch v2): {exc}") from exc
    problem = None
    if walk.offset_deltas and walk.offset_deltas[-1] > header.last_offset_delta:
        problem = f"offset delta {walk.offset_deltas[-1]} is above the last offset delta {header.last_offset_delta}"
    elif not header.attributes & TIMESTAMP_TYPE_BIT and header.base_timestamp + walk.max_delta != header.max_timestamp:
        problem = (
            f"the largest record timestamp {header.base_timestamp + walk.max_delta} is not the max timestamp "
            f"{header.max_timestamp}"
        )
    if problem is not None:
        raise CorruptRecordError(f"batch at position {position} (Kafka RecordBatch v2): {problem}")
    return walk


def record_columns(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[tuple[tuple[str, bytes], ...]]]:
    """The records of the magic-2 batch at ``position`` as five columns (``batch.body_columns``'s shape).

    Offset and timestamp deltas are relative to the header's base offset and
    base timestamp. ``header`` must have passed the header rules and the CRC.

    Raises:
        CorruptRecordError: the records break a rule of FORMAT.md §2.5.
    """
    walk = _walk_stored(buf, position, header, build=True)
    return walk.offset_deltas, walk.timestamp_deltas, walk.keys, walk.values, walk.headers


def decode_records(
    buf: bytes | bytearray | memoryview,
    position: int,
    header: BatchHeader,
    *,
    start_offset: int = 0,
    max_bytes: int | None = None,
) -> list[Record]:
    """The Records of the magic-2 batch at ``position`` from ``start_offset`` on (``batch.decode_batch``'s rules).

    The batch is decompressed and checked whole; only the records at or after
    ``start_offset`` are returned (a read into the middle of a compressed
    batch), and with ``max_bytes`` only up to the first whose key and value
    bytes bring the total to ``max_bytes`` (at least one). Under LogAppendTime
    every record carries the batch's max timestamp (Kafka).

    Raises:
        CorruptRecordError: the records break a rule of FORMAT.md §2.5.
    """
    if max_bytes is None or 0 <= max_bytes <= INT64_MAX:
        got = _c_records(buf, position, header, start_offset, -1 if max_bytes is None else max_bytes)
        if got is not None:
            return got
    offsets, deltas, keys, values, headers = record_columns(buf, position, header)
    if header.attributes & CONTROL_BIT:
        return []  # a transaction marker: never a record to a reader
    base = header.base_offset
    skip = 0
    while skip < len(offsets) and base + offsets[skip] < start_offset:
        skip += 1
    log_append = header.attributes & TIMESTAMP_TYPE_BIT
    out: list[Record] = []
    total = 0
    for i in range(skip, len(offsets)):
        key, value = keys[i], values[i]
        timestamp = header.max_timestamp if log_append else header.base_timestamp + deltas[i]
        out.append(Record(value, key, timestamp, headers[i], base + offsets[i]))
        if max_bytes is not None:
            total += (0 if key is None else len(key)) + (0 if value is None else len(value))
            if total >= max_bytes:
                break
    return out


def _c_records(
    buf: bytes | bytearray | memoryview,
    position: int,
    header: BatchHeader,
    start_offset: int,
    max_bytes: int,
    min_timestamp: int = -INT64_MAX - 1,
) -> list[Record] | None:
    # decode_records in one C call, straight from `buf` (from the first record at or after start_offset
    # reaching min_timestamp): the uncompressed section of a batch that is not a marker walked, checked
    # and built. None when the C module is absent or anything is unusual or wrong: the Python walk then
    # decides and says what. max_bytes -1: no limit.
    fast = _fast
    if fast is None or header.attributes & (CONTROL_BIT | COMPRESSION_MASK):
        return None
    start = position + HEADER_SIZE
    end = position + LOG_OVERHEAD + header.batch_length
    if not (start < end <= len(buf) and (not isinstance(buf, memoryview) or buf.c_contiguous)) or not (
        0 <= start_offset <= INT64_MAX
    ):
        return None
    got: list[Record] | None = fast.stored_records(
        Record, memoryview(buf)[start:end], header.record_count, header.base_offset, header.base_timestamp,
        header.max_timestamp, header.last_offset_delta, header.attributes & TIMESTAMP_TYPE_BIT, start_offset,
        max_bytes, min(max(min_timestamp, -INT64_MAX - 1), INT64_MAX),
    )
    return got


def find_timestamp(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, timestamp: int, *, start_offset: int = 0
) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the first record at or after ``start_offset`` whose timestamp is ≥ ``timestamp``.

    ``batch.find_timestamp`` for a magic-2 batch (decompressed and checked whole).

    Raises:
        CorruptRecordError: the records break a rule of FORMAT.md §2.5.
    """
    if header.max_timestamp < timestamp or header.last_offset < start_offset or header.attributes & CONTROL_BIT:
        return None
    # The C walk checks every record and builds only the one found (max_bytes 0: that one alone).
    searched = _c_records(buf, position, header, start_offset, 0, timestamp)
    if searched is not None:
        return (searched[0].timestamp, searched[0].offset) if searched else None  # type: ignore[return-value]
    offsets, deltas, _, _, _ = record_columns(buf, position, header)
    base = header.base_offset
    log_append = header.attributes & TIMESTAMP_TYPE_BIT
    for offset_delta, delta in zip(offsets, deltas, strict=True):
        if base + offset_delta < start_offset:
            continue
        found = header.max_timestamp if log_append else header.base_timestamp + delta
        if found >= timestamp:
            return found, base + offset_delta
    return None


# ------------------------------------------------------------------------------------------------ writing


def check_produced(data: bytes | bytearray | memoryview, *, max_batch_bytes: int) -> ProducedBatch:
    """Check the one RecordBatch v2 that ``data`` must hold exactly (a Produce partition's records), to store it.

    Everything a reader checks later (FORMAT.md §2.5), so that a stored batch
    is never refused: the lengths (``max_batch_bytes`` bounds the batch), magic 2, the CRC-32C,
    the attributes, a known codec, and then every record — a compressed batch
    is decompressed (at most ``MAX_UNCOMPRESSED_BYTES``) and walked like an
    uncompressed one: each record's framing, offset deltas exactly
    ``0..count-1`` with ``last_offset_delta = count - 1``, headers with a
    UTF-8 key and a non-null value, timestamps ≥ 0 (or -1: none, flagged in
    the result), the header's ``max_timestamp`` the largest of them under
    CreateTime, and no byte left over. Checking costs a walk over the
    records but builds nothing.

    Raises:
        KafkaBatchError: with the :class:`Refusal` that says why.
    """
    view = memoryview(data)
    size = len(view)
    if size < HEADER_SIZE:
        raise KafkaBatchError(f"a record batch is {size} bytes, shorter than the {HEADER_SIZE}-byte header")
    (_, batch_length, _, magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, _,
     _, count) = _HEADER.unpack_from(view, 0)
    if magic != KAFKA_MAGIC:
        raise KafkaBatchError(
            f"record batch magic {magic} is not supported; Produce v3 and later carry RecordBatch v2 (magic 2)",
            Refusal.INVALID,
        )
    if batch_length + LOG_OVERHEAD != size:
        if batch_length + LOG_OVERHEAD < size and batch_length >= HEADER_SIZE - LOG_OVERHEAD:
            raise KafkaBatchError(
                "the records of one partition hold more than one batch; Produce v3 and later send exactly one",
                Refusal.INVALID,
            )
        raise KafkaBatchError(f"batch_length {batch_length} does not match the {size - LOG_OVERHEAD} bytes after it")
    if size > max_batch_bytes:
        raise KafkaBatchError(f"the batch is {size} bytes, more than the {max_batch_bytes} allowed", Refusal.TOO_LARGE)
    actual = google_crc32c.value(bytes(view[CRC_START:]) if not isinstance(data, bytes) else data[CRC_START:])
    if actual != crc:
        raise KafkaBatchError(f"record batch CRC-32C is {actual:#010x}, the header says {crc:#010x}")
    if attributes & CONTROL_BIT:
        raise KafkaBatchError(
            "a producer sent a control batch (a transaction marker); only the transaction coordinator writes them",
            Refusal.INVALID,
        )
    if attributes & TRANSACTIONAL_BIT:
        if producer_id < 0:
            raise KafkaBatchError("a transactional batch without a producer id", Refusal.INVALID)
        attributes &= ~TRANSACTIONAL_BIT  # checked with the other bits below
    if attributes & ~COMPRESSION_MASK & 0xFFFF:
        if attributes & TIMESTAMP_TYPE_BIT:
            raise KafkaBatchError(
                "the batch says LogAppendTime; producers send CreateTime batches (the topic's "
                "message.timestamp.type decides which time is stored)",
                Refusal.INVALID,
            )
        raise KafkaBatchError(f"unknown attribute bits {attributes & 0xFFFF:#06x}", Refusal.INVALID)
    if count < 1:
        raise KafkaBatchError(f"record count is {count}; a batch holds at least one record")
    if last_offset_delta != count - 1:
        raise KafkaBatchError(f"last_offset_delta is {last_offset_delta} for {count} records; it must be count - 1")
    codec = attributes & COMPRESSION_MASK
    body = view[HEADER_SIZE:]
    if codec:
        if count * MIN_RECORD_BYTES > MAX_UNCOMPRESSED_BYTES:
            raise _too_large(CODEC_NAMES.get(codec, str(codec)), MAX_UNCOMPRESSED_BYTES)
        section = decompress(codec, body)
    else:
        section = bytes(body)
    fast = _fast.produced_records_ok(section, count, base_timestamp) if _fast is not None else None
    if fast is not None:
        max_delta, missing = fast
    else:  # no C module, or something is wrong: the reference walk says what
        walk = _walk_records(section, count, base_timestamp, build=False, produced=True)
        max_delta, missing = walk.max_delta, walk.missing_timestamps
    if not missing:
        largest = base_timestamp + max_delta
        if largest != max_timestamp:
            raise KafkaBatchError(f"max_timestamp is {max_timestamp}, but the largest record timestamp is {largest}")
        if base_timestamp < 0:
            raise KafkaBatchError(
                f"base_timestamp {base_timestamp} is negative while every record has a timestamp", Refusal.TIMESTAMP
            )
    return ProducedBatch(base_timestamp, max_timestamp, count, len(section), missing)


def decode_produced(data: bytes | bytearray | memoryview) -> list[Record]:
    """The records of a produced batch that passed :func:`check_produced`; a missing timestamp (-1) is ``None``.

    For a batch that is not stored as it is (``ProducedBatch.needs_timestamps``):
    its records are appended as seglog's own batch, each without a timestamp
    getting the append time. Offsets are -1 (the log assigns them).

    Raises:
        KafkaBatchError: as :func:`check_produced`.
    """
    view = memoryview(data)
    fields = _HEADER.unpack_from(view, 0)
    attributes, base_timestamp, count = fields[5], fields[7], fields[12]
    codec = attributes & COMPRESSION_MASK
    section = decompress(codec, view[HEADER_SIZE:]) if codec else bytes(view[HEADER_SIZE:])
    walk = _walk_records(section, count, base_timestamp, build=True, produced=True)
    records = []
    for i in range(count):
        timestamp: int | None = base_timestamp + walk.timestamp_deltas[i]
        if timestamp == NO_TIMESTAMP:
            timestamp = None
        records.append(Record(walk.values[i], walk.keys[i], timestamp, walk.headers[i], -1))
    return records


def stamp_log_append_time(head: bytearray, body: bytes | bytearray | memoryview, now_ms: int) -> None:
    """Make the stored batch whose 61-byte header is ``head`` a LogAppendTime batch appended at ``now_ms``, in place.

    Sets the timestamp-type attribute and ``max_timestamp`` (what a consumer
    reports for every record of the batch, as Kafka does) and the CRC-32C they
    are covered by; the records are not touched.
    """
    attributes = _ATTRIBUTES.unpack_from(head, 21)[0] | TIMESTAMP_TYPE_BIT
    _ATTRIBUTES.pack_into(head, 21, attributes)
    _TIMESTAMP.pack_into(head, 35, now_ms)
    crc = google_crc32c.extend(google_crc32c.value(bytes(head[CRC_START:HEADER_SIZE])), bytes(body))
    _CRC.pack_into(head, 17, crc)


def clear_leader_epoch(head: bytearray) -> None:
    """Set the partition leader epoch of the header ``head`` to -1, seglog's "no epoch" (outside the CRC)."""
    _LEADER_EPOCH.pack_into(head, 12, -1)



# ------------------------------------------------------------------------------------------------ control batches


class ControlRecord(NamedTuple):
    """The one record of a control batch (Kafka's ``EndTransactionMarker``): commit or abort, and by whom."""

    commit: bool
    coordinator_epoch: int


def encode_control_batch(
    producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytes:
    """A Kafka v2 control batch (a transaction marker) at base offset 0, as Kafka's ``MemoryRecords`` writes one.

    Attributes transactional | control, base sequence -1, one record whose key is
    ``int16 version 0, int16 type`` (0 abort, 1 commit) and whose value is
    ``int16 version 0, int32 coordinator_epoch``; CreateTime ``timestamp``.
    """
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    # attributes 0, timestamp delta 0, offset delta 0, key, value, no header: every varint fits one byte.
    fields = bytes((0, 0, 0, len(key) << 1)) + key + bytes((len(value) << 1,)) + value + b"\x00"
    record = bytes((len(fields) << 1,)) + fields
    attributes = TRANSACTIONAL_BIT | CONTROL_BIT
    crc_range = struct.pack(">hiqqqhii", attributes, 0, timestamp, timestamp, producer_id, producer_epoch, -1, 1)
    crc = google_crc32c.value(crc_range + record)
    length = HEADER_SIZE - LOG_OVERHEAD + len(record)
    return struct.pack(">qiibI", 0, length, -1, KAFKA_MAGIC, crc) + crc_range + record


def control_record(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> ControlRecord:
    """What the control batch at ``position`` says (its header and CRC already checked).

    Raises:
        CorruptRecordError: the batch is not a control batch, or its record is
            not an end-transaction marker of version 0 (abort or commit).
    """
    if not header.attributes & CONTROL_BIT:
        raise CorruptRecordError(f"batch at position {position} is not a control batch")
    walk = _walk_stored(buf, position, header, build=True)
    key, value = walk.keys[0], walk.values[0]
    if key is None or len(key) != _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch at position {position}: its key is not 4 bytes")
    version, kind = _CONTROL_KEY.unpack(key)
    if version != 0 or kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CorruptRecordError(
            f"control batch at position {position}: key version {version} type {kind} is not an end-transaction "
            "marker (version 0, type 0 abort or 1 commit)"
        )
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise CorruptRecordError(f"control batch at position {position}: its value is shorter than 6 bytes")
    value_version, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if value_version != 0:
        raise CorruptRecordError(f"control batch at position {position}: value version {value_version} is not 0")
    return ControlRecord(kind == CONTROL_COMMIT, coordinator_epoch)
