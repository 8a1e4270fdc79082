"""RecordBatch v2: decoding what clients send and encoding what Fetch returns, checked against kafka-python."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.engine import Record
from seglog.segments import batch as seglog_batch
from seglog.server.errors import (
    BatchTimestampError,
    BatchTooLargeError,
    CorruptBatchError,
    InvalidBatchError,
    UnsupportedCompressionError,
)
from seglog.server.records import crc32c, decode_batch, decompress, encode_batch, encode_batches, fetch_payload

kafka_records = pytest.importorskip("kafka.record.default_records", reason="kafka-python is the reference codec")
LIMIT = 1 << 20
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]], *, codec: int = 0,
          producer_id: int = -1, transactional: bool = False) -> bytes:
    """A batch from kafka-python's reference builder: (timestamp, key, value, headers) per record."""
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1, batch_size=1 << 24,
    )
    for i, (timestamp, key, value, headers) in enumerate(records):
        builder.append(i, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


SAMPLE = [
    (1000, b"k", b"v", [("h", b"x"), ("h", b"y")]),
    (900, None, b"", []),  # an earlier timestamp: deltas may be negative
    (1100, b"", None, []),
    (1050, b"key" * 100, b"\x00" * 70000, [("empty", b"")]),
]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_decode_reads_what_the_reference_builder_writes(codec: str) -> None:
    batch = decode_batch(build(SAMPLE, codec=CODEC_IDS[codec]))
    assert [(r.timestamp, r.key, r.value, list(r.headers), r.offset) for r in batch.records] == [
        (t, k, v, h, -1) for t, k, v, h in SAMPLE
    ]
    assert batch.compression == CODEC_IDS[codec] and batch.max_timestamp == 1100


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_decode_inflates_every_codec(codec: str) -> None:
    plain = build(SAMPLE)
    body = plain[61:]
    packed = {
        "snappy": lambda b: bytes(cramjam.snappy.compress_raw(b)),
        "lz4": lambda b: bytes(cramjam.lz4.compress(b)),
        "zstd": lambda b: bytes(cramjam.zstd.compress(b)),
    }[codec](body)
    batch = _rebuild(plain, attributes=CODEC_IDS[codec], body=packed)
    assert [r.value for r in decode_batch(batch).records] == [v for _, _, v, _ in SAMPLE]


def test_decode_reads_snappy_java_framing() -> None:
    plain = build(SAMPLE)
    body = plain[61:]
    blocks = [body[i : i + 32768] for i in range(0, len(body), 32768)]
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + b"".join(
        struct.pack(">i", len(c)) + c for c in (bytes(cramjam.snappy.compress_raw(b)) for b in blocks)
    )
    batch = _rebuild(plain, attributes=2, body=framed)
    assert len(decode_batch(batch).records) == len(SAMPLE)


def _rebuild(batch: bytes, *, attributes: int | None = None, body: bytes | None = None, **fields: int) -> bytes:
    """``batch`` with header fields or body replaced, and its length and CRC made right again."""
    header = bytearray(batch[:61])
    body = batch[61:] if body is None else body
    offsets = {"last_offset_delta": (23, ">i"), "base_timestamp": (27, ">q"), "max_timestamp": (35, ">q"),
               "record_count": (57, ">i"), "magic": (16, ">b")}
    if attributes is not None:
        struct.pack_into(">h", header, 21, attributes)
    for name, value in fields.items():
        position, fmt = offsets[name]
        struct.pack_into(fmt, header, position, value)
    struct.pack_into(">i", header, 8, 49 + len(body))
    data = bytes(header) + body
    return data[:17] + struct.pack(">I", crc32c(data[21:])) + data[21:]


def test_a_flipped_bit_fails_the_crc() -> None:
    batch = bytearray(build(SAMPLE))
    batch[70] ^= 0x01
    with pytest.raises(CorruptBatchError, match="CRC-32C"):
        decode_batch(bytes(batch))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"record_count": 5}, CorruptBatchError, "last_offset_delta"),
        ({"record_count": 3, "last_offset_delta": 2}, CorruptBatchError, "left over|follow"),
        ({"record_count": 0, "last_offset_delta": -1}, CorruptBatchError, "at least one record"),
        ({"record_count": 1_000_000_000, "last_offset_delta": 999_999_999}, CorruptBatchError, "cannot fit"),
        ({"magic": 1}, InvalidBatchError, "magic"),
    ],
)
def test_header_lies_are_refused(change: dict[str, int], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        decode_batch(_rebuild(build(SAMPLE), **change))


def test_lengths_that_do_not_match_are_refused() -> None:
    batch = build(SAMPLE)
    with pytest.raises(CorruptBatchError, match="batch_length"):
        decode_batch(batch[:-1])
    with pytest.raises(CorruptBatchError, match="shorter than"):
        decode_batch(batch[:60])
    with pytest.raises(InvalidBatchError, match="more than one batch"):
        decode_batch(batch + batch)


def test_offset_deltas_must_count_from_zero() -> None:
    builder = kafka_records.DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=1, key=None, value=b"a", headers=[])
    builder.append(2, timestamp=1, key=None, value=b"b", headers=[])  # a gap
    with pytest.raises(CorruptBatchError, match="offset delta 2"):
        decode_batch(_rebuild(bytes(builder.build()), last_offset_delta=1))


def test_a_producers_transactional_batch_is_accepted_and_a_control_batch_refused() -> None:
    batch = decode_batch(build(SAMPLE, producer_id=7, transactional=True))
    assert batch.attributes & 0x10 and batch.producer_id == 7
    with pytest.raises(InvalidBatchError, match="transactional batch without a producer id"):
        decode_batch(_rebuild(build(SAMPLE), attributes=0x10))
    with pytest.raises(InvalidBatchError, match="control"):
        decode_batch(_rebuild(build(SAMPLE), attributes=0x20))


@pytest.mark.parametrize("log_append_time", [False, True])
def test_a_converted_batch_keeps_its_producer_fields_and_sequences_from_the_first_record_served(
    log_append_time: bool,
) -> None:
    records = [Record(b"a", timestamp=5), Record(b"b", timestamp=5), Record(b"c", timestamp=9)]
    stored = seglog_batch.encode_batch(
        40, records, timestamp_type=seglog_batch.TimestampType.CREATE_TIME, now_ms=0, producer_id=7,
        producer_epoch=3, base_sequence=100, transactional=True,
    )
    header = seglog_batch.read_header(stored)
    payload = fetch_payload([(header, stored)], 41, log_append_time=log_append_time)
    served = []
    while payload:
        one = seglog_batch.read_header(payload)
        served.append((one.base_offset, one.producer_id, one.producer_epoch, one.base_sequence,
                       one.is_transactional))
        payload = payload[one.size:]
    # From offset 41 on: the second record's sequence is 101; under LogAppendTime one batch per timestamp.
    expected = [(41, 7, 3, 101, True)] if not log_append_time else [(41, 7, 3, 101, True), (42, 7, 3, 102, True)]
    assert served == expected


def test_an_idempotent_batch_is_accepted() -> None:
    batch = decode_batch(build(SAMPLE, producer_id=7))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 0, 0)


def test_a_null_header_value_or_non_utf8_key_is_refused_not_altered() -> None:
    with pytest.raises(InvalidBatchError, match="null value"):
        decode_batch(build([(1, None, b"v", [("h", None)])]))  # type: ignore[list-item]
    raw = build([(1, None, b"v", [("h", b"x")])])
    bad_key = raw.replace(b"\x02h\x02x", b"\x02\xff\x02x")
    with pytest.raises(InvalidBatchError, match="UTF-8"):
        decode_batch(_rebuild(bad_key))


def test_no_timestamp_means_the_append_time_and_negative_ones_are_refused() -> None:
    batch = decode_batch(build([(-1, None, b"v", [])]))
    assert batch.records[0].timestamp is None
    with pytest.raises(BatchTimestampError, match="-5"):
        decode_batch(_rebuild(build([(5, None, b"v", [])]), base_timestamp=-5, max_timestamp=-5))


def test_a_produced_batch_saying_log_append_time_is_refused() -> None:
    # Producers send CreateTime; the topic's message.timestamp.type decides what is stored.
    with pytest.raises(InvalidBatchError, match="LogAppendTime"):
        decode_batch(_rebuild(build(SAMPLE), attributes=0x08))


def test_unknown_codecs_and_corrupt_payloads_are_refused() -> None:
    with pytest.raises(UnsupportedCompressionError, match="codec 5"):
        decode_batch(_rebuild(build(SAMPLE), attributes=5))
    for codec in (1, 2, 3, 4):
        with pytest.raises(CorruptBatchError, match=r"do not decompress|cut short"):
            decompress(codec, b"\x00not compressed at all", LIMIT)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_stops_at_the_limit(codec: str) -> None:
    bomb = b"\x00" * (4 << 20)
    packed = {
        "gzip": gzip.compress,
        "snappy": lambda b: bytes(cramjam.snappy.compress_raw(b)),
        "lz4": lambda b: bytes(cramjam.lz4.compress(b)),
        "zstd": lambda b: bytes(cramjam.zstd.compress(b)),
    }[codec](bomb)
    with pytest.raises(BatchTooLargeError, match="more than 1048576 bytes"):
        decompress(CODEC_IDS[codec], packed, 1 << 20)
    assert decompress(CODEC_IDS[codec], packed, 4 << 20) == bomb


def test_encode_is_read_back_by_the_reference_reader() -> None:
    records = [Record(v, key=k, timestamp=t, headers=tuple(h), offset=40 + i)
               for i, (t, k, v, h) in enumerate(SAMPLE)]
    data = encode_batch(records)
    reader = kafka_records.DefaultRecordBatch(data)
    assert reader.validate_crc() and reader.base_offset == 40 and reader.last_offset_delta == 3
    assert reader.max_timestamp == 1100 and not reader.is_transactional
    got = list(reader)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in got] == [
        (40 + i, t, k, v, h) for i, (t, k, v, h) in enumerate(SAMPLE)
    ]


def test_log_append_time_records_are_encoded_one_batch_per_append_time() -> None:
    records = [Record(b"a", timestamp=5, offset=0), Record(b"b", timestamp=5, offset=1),
               Record(b"c", timestamp=9, offset=2)]
    data = encode_batches(records, log_append_time=True)
    size = kafka_records.DefaultRecordBatch(data).size_in_bytes
    first = kafka_records.DefaultRecordBatch(data[:size])
    second = kafka_records.DefaultRecordBatch(data[size:])
    assert first.timestamp_type == second.timestamp_type == 1
    assert [(r.offset, r.timestamp) for r in first] == [(0, 5), (1, 5)]
    assert [(r.offset, r.timestamp) for r in second] == [(2, 9)]


_records = st.lists(
    st.tuples(
        st.integers(0, 2**45),
        st.none() | st.binary(max_size=40),
        st.none() | st.binary(max_size=300),
        # Header keys as seglog stores them: UTF-8 text without NUL (a NUL key is refused, as natively).
        st.lists(
            st.tuples(st.text(st.characters(exclude_characters="\x00", codec="utf-8"), max_size=8),
                      st.binary(max_size=8)),
            max_size=3,
        ),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(records=_records, base=st.integers(0, 2**40))
def test_encode_then_decode_round_trips(records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]],
                                        base: int) -> None:
    values = [
        Record(v, key=k, timestamp=t, headers=tuple(h), offset=base + i) for i, (t, k, v, h) in enumerate(records)
    ]
    data = encode_batch(values)
    decoded = decode_batch(_rebuild(data))  # as a producer would send it
    assert [r._replace(offset=base + i) for i, r in enumerate(decoded.records)] == values
    assert decode_batch(build(records)).records == [r._replace(offset=-1) for r in values]


@pytest.mark.parametrize("value", [0, -1, 1, 63, -64, 64, 8191, -8192, 8192, 2**31 - 1, -(2**31), 2**62, -(2**63)])
def test_varints_round_trip_at_every_length(value: int) -> None:
    from seglog.segments.kafka_batch import _read_varint
    from seglog.server.records import _zigzag_varint

    encoded = _zigzag_varint(value) + b"\x00\x7f"  # trailing bytes must not be read into the value
    assert _read_varint(encoded, 0, len(encoded), 10) == (value, len(encoded) - 2)
