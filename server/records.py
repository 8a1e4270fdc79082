"""Kafka's RecordBatch v2 (magic 2): checked and decoded into engine records, and encoded from them.

The one place where Kafka's record format meets the engine: ``produce`` turns
the batch a client sent into ``Record`` values with :func:`decode_batch`,
``fetch`` turns what the engine read back into a batch with :func:`encode_batch`.
Everything here is a plain function over bytes (no event loop, no protocol
library), so it is tested on its own and against kafka-python's reference
reader and builder.

The layout (Kafka's ``DefaultRecordBatch``; all integers big-endian)::

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

The engine stores records (not Kafka's batches) for now: a produced batch is
decoded and appended as one engine batch, and a fetch re-encodes records as an
uncompressed batch. What a record carries survives that trip: key, value (both
may be null), headers, timestamp and offset.

Must not import: ``tools``; nothing of the protocol codec (kio).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import cramjam
import google_crc32c

from seglog.engine import Record
from seglog.server.errors import (
    BatchTimestampError,
    CorruptBatchError,
    InvalidBatchError,
    UnsupportedCompressionError,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "MAGIC",
    "KafkaBatch",
    "crc32c",
    "decode_batch",
    "decompress",
    "encode_batch",
]

# Part of Kafka's record format (DefaultRecordBatch).
MAGIC: Final = 2
BATCH_HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12  # base offset + batch length: the bytes batch_length does not count
CRC_START: Final = 21  # the CRC covers the batch from the attributes on
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_AFTER_CRC: Final = struct.Struct(">hiqqqhii")  # attributes .. record_count: what the CRC starts with
_BEFORE_CRC: Final = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
TRANSACTIONAL_BIT: Final = 0x10
CONTROL_BIT: Final = 0x20
NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
COMPRESSION_NAMES: Final = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# snappy-java's stream format, which Kafka's Java client writes: this magic, two version ints,
# then blocks of (int32 length, raw snappy bytes).
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE: Final = 16
# The first output buffer tried for lz4/zstd; it doubles up to the caller's limit.
_FIRST_OUTPUT_BYTES: Final = 64 * 1024


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, as Kafka computes it over a batch."""
    return int(google_crc32c.value(bytes(data)))


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    """One decoded RecordBatch v2: its header fields and its records (offsets not yet assigned).

    ``records`` hold key, value, headers and timestamp (``None`` where the
    producer sent none, i.e. -1: the log's append time is used); their
    ``offset`` is -1. Under a LogAppendTime batch every record has the batch's
    ``max_timestamp``, as Kafka's consumers read it.
    """

    base_offset: int
    partition_leader_epoch: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def size_hint(self) -> int:
        """Bytes of keys, values and headers: what a fetch of these records roughly costs."""
        return sum(
            len(r.key or b"") + len(r.value or b"") + sum(len(k) + len(v) for k, v in r.headers) for r in self.records
        )


# ------------------------------------------------------------------------------------------------ varints


def _zigzag_varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeVarlong``: zigzag, then 7 bits a byte, low bits first."""
    z = (value << 1) ^ (value >> 63)
    if 0 <= z < _TABLE_SIZE:
        return _VARINTS[z]
    return _unsigned_varint(z)


def _unsigned_varint(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Every one- and two-byte varint, by zigzag value: magnitudes up to 8191 (lengths, offset and time
# deltas of most records) are one tuple look-up instead of a loop.
_TABLE_SIZE: Final = 1 << 14
_VARINTS: Final = tuple(_unsigned_varint(z) for z in range(_TABLE_SIZE))
_LENGTHS: Final = _VARINTS[::2]  # zigzag of a non-negative n is 2n: the varint of length n is _LENGTHS[n]
_MAX_TABLED: Final = _TABLE_SIZE // 2


def _read_varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint at ``pos`` (at most ``max_bytes`` long, 5 for varint, 10 for varlong)."""
    if pos + 1 < end:  # one or two bytes (magnitudes up to 8191): the common cases, without the loop
        first, second = buf[pos], buf[pos + 1]
        if first < 0x80:
            return (first >> 1) ^ -(first & 1), pos + 1
        if second < 0x80:
            raw = (first & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    raw = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            raise CorruptBatchError("a record ends inside a varint; the batch is cut short")
        byte = buf[pos + i]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos + i + 1
        shift += 7
    raise CorruptBatchError(f"a varint is longer than {max_bytes} bytes")


# ------------------------------------------------------------------------------------------------ decoding


def decode_batch(data: bytes | bytearray | memoryview, *, max_uncompressed_bytes: int) -> KafkaBatch:
    """Check and decode the one RecordBatch v2 that ``data`` must hold exactly (a Produce partition's records).

    Checked, as Kafka's broker does before it appends: the header's lengths,
    magic 2, the CRC-32C, a known compression codec (the records are
    decompressed, to at most ``max_uncompressed_bytes``), the record count,
    each record's length, offset deltas ``0, 1, ... count-1`` and
    ``last_offset_delta = count - 1``, no bytes left over.

    Raises:
        CorruptBatchError: lengths, CRC, counts or offset deltas are wrong, or
            the records do not decompress (or exceed ``max_uncompressed_bytes``).
        InvalidBatchError: a magic other than 2, a control batch, a
            transactional batch, several batches, or a header with a null value
            or a key that is not UTF-8 (seglog stores ``(str, bytes)`` headers).
        BatchTimestampError: a record timestamp below -1.
        UnsupportedCompressionError: a codec other than none/gzip/snappy/lz4/zstd.
    """
    view = memoryview(data)
    size = len(view)
    if size < BATCH_HEADER_SIZE:
        raise CorruptBatchError(f"a record batch is {size} bytes, shorter than the {BATCH_HEADER_SIZE}-byte header")
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, count) = _HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise InvalidBatchError(
            f"record batch magic {magic} is not supported; Produce v3 and later carry RecordBatch v2 (magic 2)"
        )
    if batch_length + LOG_OVERHEAD != size:
        if batch_length + LOG_OVERHEAD < size and batch_length >= BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatchError(
                "the records of one partition hold more than one batch; Produce v3 and later send exactly one"
            )
        raise CorruptBatchError(
            f"batch_length {batch_length} does not match the {size - LOG_OVERHEAD} bytes that follow it"
        )
    actual = crc32c(view[CRC_START:])
    if actual != crc:
        raise CorruptBatchError(f"record batch CRC-32C is {actual:#010x}, the header says {crc:#010x}")
    if attributes & CONTROL_BIT:
        raise InvalidBatchError("control batches (transaction markers) are not accepted: seglog has no transactions")
    if attributes & TRANSACTIONAL_BIT:
        raise InvalidBatchError("transactional batches are not accepted yet: seglog has no transactions")
    if count < 1:
        raise CorruptBatchError(f"record count is {count}; a batch holds at least one record")
    if last_offset_delta != count - 1:
        raise CorruptBatchError(f"last_offset_delta is {last_offset_delta} for {count} records; it must be count - 1")
    body: bytes | memoryview = view[BATCH_HEADER_SIZE:]
    codec = attributes & COMPRESSION_MASK
    if codec:
        body = decompress(codec, body, max_uncompressed_bytes)
    log_append_time = max_timestamp if attributes & TIMESTAMP_TYPE_BIT else None
    records = _decode_records(body, count, base_timestamp, log_append_time)
    return KafkaBatch(
        base_offset, leader_epoch, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, records,
    )


def _decode_records(
    body: bytes | memoryview, count: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    buf = bytes(body)  # indexing bytes is several times faster than indexing a memoryview
    end = len(buf)
    if count > end // 7:  # the smallest record (all null, no headers) is 7 bytes: bound before looping
        raise CorruptBatchError(f"record count {count} cannot fit in {end} bytes of records")
    records: list[Record] = []
    append = records.append
    new_record = Record.__new__
    pos = 0
    # The hot loop reads one- and two-byte varints inline (lengths and deltas up to 8191, the common
    # case) and leaves longer ones to _read_varint; every length is checked against the record's end.
    for index in range(count):
        if pos >= end:
            raise CorruptBatchError(f"the batch ends before record {index} of {count}")
        byte = buf[pos]
        if byte < 0x80:
            length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < end and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            length, pos = _read_varint(buf, pos, end, 5)
        stop = pos + length
        if length < 6 or stop > end:
            raise CorruptBatchError(f"record {index} claims {length} bytes; {end - pos} remain in the batch")
        pos += 1  # record attributes: unused
        byte = buf[pos]
        if byte < 0x80:
            timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < stop and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            timestamp_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            timestamp_delta, pos = _read_varint(buf, pos, stop, 10)
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < stop and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            offset_delta, pos = _read_varint(buf, pos, stop, 5)
        if offset_delta != index:
            raise CorruptBatchError(f"record {index} has offset delta {offset_delta}; deltas must be 0, 1, 2, ...")
        # key and value: _read_bytes, inline
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < stop and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            size, pos = _read_varint(buf, pos, stop, 5)
        if size >= 0 and pos + size <= stop:
            key, pos = buf[pos : pos + size], pos + size
        elif size == -1:
            key = None
        else:
            raise CorruptBatchError(f"record {index} has a key of {size} bytes in {stop - pos}")
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < stop and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            size, pos = _read_varint(buf, pos, stop, 5)
        if size >= 0 and pos + size <= stop:
            value, pos = buf[pos : pos + size], pos + size
        elif size == -1:
            value = None
        else:
            raise CorruptBatchError(f"record {index} has a value of {size} bytes in {stop - pos}")
        byte = buf[pos] if pos < stop else 0x80
        if byte < 0x80:
            header_count, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        elif pos + 1 < stop and buf[pos + 1] < 0x80:
            raw = (byte & 0x7F) | (buf[pos + 1] << 7)
            header_count, pos = (raw >> 1) ^ -(raw & 1), pos + 2
        else:
            header_count, pos = _read_varint(buf, pos, stop, 5)
        headers: tuple[tuple[str, bytes], ...] = ()
        if header_count:
            headers = _read_headers(buf, pos, stop, header_count, index)
            pos = stop
        elif pos != stop:
            raise CorruptBatchError(f"record {index} has {stop - pos} bytes left over after its headers")
        if log_append_time is not None:
            timestamp: int | None = log_append_time
        else:
            timestamp = base_timestamp + timestamp_delta
            if timestamp == NO_TIMESTAMP:  # the producer set none: the log's append time is used
                timestamp = None
            elif timestamp < 0:
                raise BatchTimestampError(
                    f"record {index} has timestamp {timestamp}; timestamps are ms since the epoch, or -1 for none"
                )
        append(new_record(Record, value, key, timestamp, headers, -1))
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes follow the last of the {count} records")
    return records


def _read_headers(buf: bytes, pos: int, stop: int, count: int, index: int) -> tuple[tuple[str, bytes], ...]:
    """``count`` headers of record ``index`` from ``pos``; they must end exactly at ``stop``."""
    if count < 0 or count > (stop - pos) // 2:
        raise CorruptBatchError(f"record {index} claims {count} headers in {stop - pos} bytes")
    pairs = []
    for _ in range(count):
        raw_key, pos = _read_bytes(buf, pos, stop)
        header_value, pos = _read_bytes(buf, pos, stop)
        if raw_key is None:
            raise InvalidBatchError(f"record {index} has a header with a null key")
        if header_value is None:
            raise InvalidBatchError(
                f"record {index} has a header with a null value; seglog stores header values as bytes "
                "(send b'' instead of null)"
            )
        try:
            pairs.append((raw_key.decode("utf-8"), header_value))
        except UnicodeDecodeError as exc:
            raise InvalidBatchError(f"record {index} has a header key that is not UTF-8") from exc
    if pos != stop:
        raise CorruptBatchError(f"record {index} has {stop - pos} bytes left over after its headers")
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
        raise CorruptBatchError(f"a field of {length} bytes does not fit in the {end - pos} bytes left of its record")
    return buf[pos:stop], stop


def decompress(codec: int, payload: bytes | memoryview, limit: int) -> bytes:
    """The records of a batch compressed with ``codec`` (Kafka's numbering), at most ``limit`` bytes of them.

    gzip is the standard library's zlib; snappy (raw, or snappy-java's stream
    format that Kafka's Java client writes), lz4 (frame format) and zstd come
    from cramjam, the codec library aiokafka uses too.

    Raises:
        UnsupportedCompressionError: ``codec`` is not 1 to 4.
        CorruptBatchError: the payload does not decompress, or holds more than ``limit`` bytes.
    """
    name = COMPRESSION_NAMES.get(codec)
    if name is None or codec == 0:
        raise UnsupportedCompressionError(
            f"compression codec {codec} is unknown; Kafka's codecs are 1 gzip, 2 snappy, 3 lz4, 4 zstd"
        )
    try:
        if codec == 1:
            return _gunzip(payload, limit)
        if codec == 2:
            return _unsnappy(payload, limit)
        return _into_growing_buffer(cramjam.lz4 if codec == 3 else cramjam.zstd, payload, limit)
    except (cramjam.DecompressionError, zlib.error, ValueError) as exc:
        raise CorruptBatchError(f"the {name}-compressed records do not decompress: {exc}") from exc


def _too_large(name: str, limit: int) -> CorruptBatchError:
    return CorruptBatchError(
        f"the {name}-compressed records hold more than {limit} bytes uncompressed; "
        "send smaller batches (the producer's batch size) or raise the topic's max.message.bytes"
    )


def _gunzip(payload: bytes | memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)  # 16+: the gzip wrapper, as Kafka writes it
    out = inflater.decompress(payload, limit + 1)
    if len(out) > limit or inflater.unconsumed_tail:
        raise _too_large("gzip", limit)
    if not inflater.eof:
        raise CorruptBatchError("the gzip-compressed records are cut short")
    return out


def _unsnappy(payload: bytes | memoryview, limit: int) -> bytes:
    data = bytes(payload)
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    parts = []
    total = 0
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptBatchError("a snappy-java block length is cut short")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptBatchError(f"a snappy-java block of {length} bytes does not fit in the payload")
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


def _into_growing_buffer(module: object, payload: bytes | memoryview, limit: int) -> bytes:
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
                raise _too_large(getattr(module, "__name__", "").rsplit(".", 1)[-1], limit) from exc
            size = min(limit, size * 2)
            continue
        del out[written:]
        return bytes(out)


# ------------------------------------------------------------------------------------------------ encoding


def encode_batch(records: Sequence[Record], *, log_append_time: bool = False, leader_epoch: int = 0) -> bytes:
    """An uncompressed RecordBatch v2 of ``records`` (read from the engine: offsets and timestamps set).

    The base offset is the first record's offset and offset deltas follow the
    records' offsets. With ``log_append_time`` the batch says LogAppendTime and
    its ``max_timestamp`` is what a consumer reports for every record, so all
    ``records`` must share one timestamp (see :func:`encode_batches`).
    """
    first = records[0]
    base_offset = first.offset
    base_timestamp = first.timestamp if first.timestamp is not None else NO_TIMESTAMP
    max_timestamp = base_timestamp
    out = bytearray()
    varint = _zigzag_varint
    lengths = _LENGTHS
    tabled = _MAX_TABLED
    for value, key, record_timestamp, headers, offset in records:
        timestamp = NO_TIMESTAMP if record_timestamp is None else record_timestamp
        if timestamp > max_timestamp:  # noqa: PLR1730 - a comparison is cheaper than a max() call here
            max_timestamp = timestamp
        # Each record's parts are written straight into the batch (a value is copied once), after the
        # record's length, which is the sum of the parts' lengths. Small varints come from the tables.
        delta_t = timestamp - base_timestamp
        delta_o = offset - base_offset
        time_part = lengths[delta_t] if 0 <= delta_t < tabled else varint(delta_t)
        offset_part = lengths[delta_o] if 0 <= delta_o < tabled else varint(delta_o)
        size = 2 + len(time_part) + len(offset_part)  # + attributes byte + header count byte (if no headers)
        if key is None:
            key_length = b"\x01"  # zigzag(-1): null
        else:
            key_length = lengths[len(key)] if len(key) < tabled else varint(len(key))
            size += len(key)
        if value is None:
            value_length = b"\x01"
        else:
            value_length = lengths[len(value)] if len(value) < tabled else varint(len(value))
            size += len(value)
        header_part = b"\x00"
        if headers:
            parts = [varint(len(headers))]
            for name, header_value in headers:
                raw = name.encode("utf-8")
                parts += (varint(len(raw)), raw, varint(len(header_value)), header_value)
            header_part = b"".join(parts)
            size += len(header_part) - 1
        size += len(key_length) + len(value_length)
        out += lengths[size] if size < tabled else varint(size)
        out += b"\x00"
        out += time_part
        out += offset_part
        out += key_length
        if key is not None:
            out += key
        out += value_length
        if value is not None:
            out += value
        out += header_part
    # google-crc32c takes only bytes: the records are copied once into the CRC-covered tail.
    tail = _AFTER_CRC.pack(
        0 if not log_append_time else TIMESTAMP_TYPE_BIT, records[-1].offset - base_offset, base_timestamp,
        max_timestamp, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, len(records),
    ) + out
    crc = crc32c(tail)
    return _BEFORE_CRC.pack(base_offset, len(tail) + 9, leader_epoch, MAGIC, crc) + tail


def encode_batches(records: Sequence[Record], *, log_append_time: bool = False, leader_epoch: int = 0) -> bytes:
    """``records`` as back-to-back batches: one batch, or under LogAppendTime one per run of equal timestamps.

    (A LogAppendTime batch gives all its records one timestamp, its
    ``max_timestamp``; records appended at different times need different batches.)
    """
    if not records:
        return b""
    if not log_append_time:
        return encode_batch(records, leader_epoch=leader_epoch)
    out: list[bytes] = []
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].timestamp != records[start].timestamp:
            out.append(encode_batch(records[start:i], log_append_time=True, leader_epoch=leader_epoch))
            start = i
    return b"".join(out)
