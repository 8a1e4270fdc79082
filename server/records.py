"""Kafka's RecordBatch v2 (magic 2) at the wire server: produced batches checked, fetched batches built.

The record format itself (header rules, the record walk, the codecs, the
check a produced batch gets before it is stored) is the segment layer's,
``seglog.segments.kafka_batch``: a produced batch is stored as it arrived
(``PartitionLog.append_kafka_batch``) and Fetch sends a stored magic-2 batch
as it is on disk. This module holds what is the wire server's own: Kafka's
error for each refusal (:func:`batch_error`), the conversion of seglog's own
batches (records appended natively) into uncompressed RecordBatch v2 for a
fetch (:func:`encode_batch`, :func:`fetch_payload`), and :func:`decode_batch`,
the records of a produced batch for callers that want records (tests, tools).

Must not import: ``tools``; nothing of the protocol codec (kio).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import google_crc32c

from seglog.engine import Record
from seglog.engine.producer_state import increment_sequence
from seglog.segments.batch import TRANSACTIONAL_BIT, BatchHeader
from seglog.segments.batch import decode_batch as decode_stored_batch
from seglog.segments.kafka_batch import (
    CODEC_NAMES,
    KAFKA_MAGIC,
    KafkaBatchError,
    Refusal,
    check_produced,
    decode_produced,
)
from seglog.segments.kafka_batch import decompress as _decompress
from seglog.server.errors import (
    BatchTimestampError,
    BatchTooLargeError,
    CorruptBatchError,
    InvalidBatchError,
    KafkaProtocolError,
    UnsupportedCompressionError,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "COMPRESSION_NAMES",
    "MAGIC",
    "KafkaBatch",
    "Producer",
    "batch_error",
    "crc32c",
    "decode_batch",
    "decompress",
    "encode_batch",
    "encode_batches",
    "fetch_payload",
    "transactional_producer",
]

# Part of Kafka's record format (DefaultRecordBatch).
MAGIC: Final = KAFKA_MAGIC
BATCH_HEADER_SIZE: Final = 61
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
NO_TIMESTAMP: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
COMPRESSION_NAMES: Final = CODEC_NAMES
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_AFTER_CRC: Final = struct.Struct(">hiqqqhii")  # attributes .. record_count: what the CRC starts with
_BEFORE_CRC: Final = struct.Struct(">qiibI")  # base offset, batch length, leader epoch, magic, crc

_ERRORS: Final[dict[Refusal, type[KafkaProtocolError]]] = {
    Refusal.CORRUPT: CorruptBatchError,
    Refusal.INVALID: InvalidBatchError,
    Refusal.TIMESTAMP: BatchTimestampError,
    Refusal.COMPRESSION: UnsupportedCompressionError,
    Refusal.TOO_LARGE: BatchTooLargeError,
}


def batch_error(exc: KafkaBatchError) -> KafkaProtocolError:
    """The wire server's error (and so Kafka's error code) for a batch the segment layer refused."""
    return _ERRORS[exc.refusal](str(exc))


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli) of ``data``, as Kafka computes it over a batch."""
    return int(google_crc32c.value(bytes(data)))


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    """One decoded RecordBatch v2: its header fields and its records (offsets not yet assigned).

    ``records`` hold key, value, headers and timestamp (``None`` where the
    producer sent none, i.e. -1: the log's append time is used); their
    ``offset`` is -1.
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


def transactional_producer(data: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """``(producer id, epoch)`` of a produced batch whose transactional bit is set; ``None`` otherwise.

    Reads the header fields only, without checking anything (the append
    checks the whole batch): a batch too short to hold a header is ``None``.
    """
    if len(data) < _HEADER.size:
        return None
    fields = _HEADER.unpack_from(data, 0)
    attributes, producer_id, producer_epoch = fields[5], fields[9], fields[10]
    return (producer_id, producer_epoch) if attributes & TRANSACTIONAL_BIT else None


def decode_batch(data: bytes | bytearray | memoryview) -> KafkaBatch:
    """Check and decode the one RecordBatch v2 that ``data`` must hold exactly (a Produce partition's records).

    The checks are those a produced batch gets before it is stored
    (``seglog.segments.kafka_batch.check_produced``).

    Raises:
        CorruptBatchError: lengths, CRC, counts, offset deltas or the compressed payload are wrong.
        InvalidBatchError: a magic other than 2, a control batch, a transactional
            one without a producer id, a LogAppendTime batch, several batches, or a header with a null value
            or a key that is not UTF-8 (seglog stores ``(str, bytes)`` headers).
        BatchTimestampError: a record timestamp below -1.
        UnsupportedCompressionError: a codec other than none/gzip/snappy/lz4/zstd.
        BatchTooLargeError: the records exceed 64 MiB uncompressed.
    """
    try:
        check_produced(data, max_batch_bytes=len(data))
        records = decode_produced(data)
    except KafkaBatchError as exc:
        raise batch_error(exc) from exc
    (base_offset, _, leader_epoch, _, _, attributes, last_offset_delta, base_timestamp, max_timestamp,
     producer_id, producer_epoch, base_sequence, _) = _HEADER.unpack_from(data, 0)
    return KafkaBatch(
        base_offset, leader_epoch, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, records,
    )


def decompress(codec: int, payload: bytes | memoryview, limit: int) -> bytes:
    """The records of a batch compressed with ``codec``, at most ``limit`` bytes (``kafka_batch.decompress``).

    Raises:
        UnsupportedCompressionError: ``codec`` is not 1 to 4.
        CorruptBatchError: the payload does not decompress.
        BatchTooLargeError: it holds more than ``limit`` bytes.
    """
    try:
        return _decompress(codec, payload, limit)
    except KafkaBatchError as exc:
        raise batch_error(exc) from exc


def fetch_payload(
    batches: Sequence[tuple[BatchHeader, bytes | bytearray | memoryview]],
    start_offset: int,
    *,
    log_append_time: bool = False,
    leader_epoch: int = 0,
) -> bytes:
    """The records field of a Fetch answer for ``batches`` (``PartitionLog.read_batches``), back to back.

    A stored Kafka batch (magic 2) goes as it is on disk, compressed or not
    (it may start before ``start_offset``: consumers skip what they did not
    ask for, as from Kafka); a seglog batch becomes uncompressed RecordBatch v2
    of its records from ``start_offset`` on (:func:`encode_batches`).

    Raises:
        CorruptRecordError: a seglog batch's body fails its checks.
    """
    parts: list[bytes | bytearray | memoryview] = []
    for header, raw in batches:
        if header.magic == KAFKA_MAGIC:
            parts.append(raw)
            continue
        records = decode_stored_batch(raw, 0, header, start_offset=start_offset)
        if records:
            producer = None
            if header.producer_id >= 0:
                producer = Producer(header.producer_id, header.producer_epoch, header.base_sequence,
                                    header.is_transactional).after(records[0].offset - header.base_offset)
            parts.append(encode_batches(records, log_append_time=log_append_time, leader_epoch=leader_epoch,
                                        producer=producer))
    return parts[0] if len(parts) == 1 and type(parts[0]) is bytes else b"".join(parts)


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


# ------------------------------------------------------------------------------------------------ encoding


@dataclass(frozen=True, slots=True)
class Producer:
    """The producer fields a converted batch carries: those of the stored batch its records came from."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool

    def after(self, count: int) -> Producer:
        """The same producer ``count`` records later (sequences wrap as Kafka's do)."""
        if self.base_sequence < 0 or count == 0:
            return self
        return Producer(self.producer_id, self.producer_epoch, increment_sequence(self.base_sequence, count),
                        self.transactional)


NO_PRODUCER: Final = None  # a batch without a producer (ids -1)


def encode_batch(
    records: Sequence[Record], *, log_append_time: bool = False, leader_epoch: int = 0,
    producer: Producer | None = NO_PRODUCER,
) -> bytes:
    """An uncompressed RecordBatch v2 of ``records`` (read from the engine: offsets and timestamps set).

    The base offset is the first record's offset and offset deltas follow the
    records' offsets. With ``log_append_time`` the batch says LogAppendTime and
    its ``max_timestamp`` is what a consumer reports for every record, so all
    ``records`` must share one timestamp (see :func:`encode_batches`).
    ``producer`` gives the batch a producer id, epoch, first sequence and the
    transactional bit (a read_committed consumer drops an aborted
    transaction's batches by their producer id).
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
    attributes = 0 if not log_append_time else TIMESTAMP_TYPE_BIT
    if producer is None:
        producer_id, producer_epoch, sequence = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
    else:
        producer_id, producer_epoch, sequence = producer.producer_id, producer.producer_epoch, producer.base_sequence
        if producer.transactional:
            attributes |= TRANSACTIONAL_BIT
    tail = _AFTER_CRC.pack(
        attributes, records[-1].offset - base_offset, base_timestamp, max_timestamp, producer_id, producer_epoch,
        sequence, len(records),
    ) + out
    crc = crc32c(tail)
    return _BEFORE_CRC.pack(base_offset, len(tail) + 9, leader_epoch, MAGIC, crc) + tail


def encode_batches(
    records: Sequence[Record], *, log_append_time: bool = False, leader_epoch: int = 0,
    producer: Producer | None = NO_PRODUCER,
) -> bytes:
    """``records`` as back-to-back batches: one batch, or under LogAppendTime one per run of equal timestamps.

    (A LogAppendTime batch gives all its records one timestamp, its
    ``max_timestamp``; records appended at different times need different batches.)
    """
    if not records:
        return b""
    if not log_append_time:
        return encode_batch(records, leader_epoch=leader_epoch, producer=producer)
    out: list[bytes] = []
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i].timestamp != records[start].timestamp:
            part = producer.after(start) if producer is not None else None
            out.append(encode_batch(records[start:i], log_append_time=True, leader_epoch=leader_epoch,
                                    producer=part))
            start = i
    return b"".join(out)
