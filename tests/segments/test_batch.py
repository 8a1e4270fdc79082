"""The record-batch codec: layout, round trips, validation, the recovery scan (no event loop)."""

from __future__ import annotations

import struct

import google_crc32c
import msgpack
import pytest

from seglog.segments.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_SIZE,
    ScanStop,
    TimestampType,
    body_columns,
    check_header,
    decode_batch,
    decode_batches,
    encode_batch,
    header_problem,
    read_header,
    rebase_batch,
    scan_batches,
    verify_crc,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

CT = TimestampType.CREATE_TIME
MAX = 1 << 20


def enc(base: int, records: list[Record], now_ms: int = 1_000, tt: TimestampType = CT) -> bytes:
    return encode_batch(base, records, timestamp_type=tt, now_ms=now_ms)


def decode_one(buf: bytes, start_offset: int = 0) -> list[Record]:
    return decode_batches(buf, start_offset=start_offset, max_batch_bytes=MAX)


def craft(body: bytes, *, base_offset: int = 0, count: int = 1, last_delta: int = 0, base_ts: int = 0,
          max_ts: int = 0, attributes: int = 0, magic: int = MAGIC) -> bytes:
    """A batch with a correct CRC around an arbitrary body (to reach the body checks)."""
    tail = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, max_ts, -1, -1, -1, count) + body
    crc = google_crc32c.value(tail)
    return struct.pack(">qiibI", base_offset, 49 + len(body), -1, magic, crc) + tail


def test_header_layout_matches_format_md() -> None:
    records = [Record(b"value-0", b"key-0", 1_700_000_000_000), Record(None, None, 1_700_000_000_005)]
    buf = enc(42, records)
    assert HEADER.size == HEADER_SIZE == 61
    (base, length, epoch, magic, crc) = struct.unpack_from(">qiibI", buf, 0)
    assert (base, epoch, magic) == (42, -1, 0x54)
    assert length == len(buf) - LOG_OVERHEAD
    assert crc == google_crc32c.value(buf[CRC_START:])
    attrs, lod, base_ts, max_ts, pid, pepoch, seq, count = struct.unpack_from(">hiqqqhii", buf, 21)
    assert (attrs, lod, base_ts, max_ts, pid, pepoch, seq, count) == (
        0, 1, 1_700_000_000_000, 1_700_000_000_005, -1, -1, -1, 2
    )
    body = msgpack.unpackb(buf[61:], raw=False)
    assert body == [None, [0, 5], [b"key-0", None], [b"value-0", None], None]  # dense offsets, no headers
    assert b"value-0" in buf and b"key-0" in buf  # bin: the bytes appear unaltered in the file


def test_round_trip_with_headers_none_and_out_of_order_timestamps() -> None:
    records = [
        Record(b"a", b"k", 500, (("h1", b"x"), ("h2", b""))),
        Record(None, None, 100),
        Record(b"", b"", 900),
        Record(b"\x00" * 300, None, None),  # None -> now_ms
    ]
    out = decode_one(enc(7, records, now_ms=777))
    assert out == [
        Record(b"a", b"k", 500, (("h1", b"x"), ("h2", b"")), 7),
        Record(None, None, 100, (), 8),
        Record(b"", b"", 900, (), 9),
        Record(b"\x00" * 300, None, 777, (), 10),
    ]
    header = read_header(enc(7, records, now_ms=777))
    assert (header.base_timestamp, header.max_timestamp, header.last_offset, header.next_offset) == (500, 900, 10, 11)


def test_log_append_time_overwrites_timestamps() -> None:
    buf = enc(0, [Record(b"a", timestamp=5), Record(b"b", timestamp=9)], now_ms=1234, tt=TimestampType.LOG_APPEND_TIME)
    header = read_header(buf)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert (header.base_timestamp, header.max_timestamp) == (1234, 1234)
    assert [r.timestamp for r in decode_one(buf)] == [1234, 1234]
    assert not header.is_transactional and not header.is_control


def test_decode_skips_records_below_start_offset() -> None:
    buf = enc(100, [Record(bytes([i])) for i in range(10)])
    assert [r.offset for r in decode_one(buf, start_offset=104)] == list(range(104, 110))
    assert decode_one(buf, start_offset=110) == []
    two = buf + enc(110, [Record(b"x")])
    assert [r.offset for r in decode_one(two, start_offset=109)] == [109, 110]


@pytest.mark.parametrize(
    ("records", "error"),
    [
        ([], ValueError),
        ([Record("text")], TypeError),  # type: ignore[arg-type]
        ([Record(b"v", key=bytearray(b"k"))], TypeError),  # type: ignore[arg-type]
        ([Record(b"v", timestamp=-5)], ValueError),
        ([Record(b"v", timestamp=2**63)], ValueError),
        ([Record(b"v", timestamp=1.5)], TypeError),  # type: ignore[arg-type]
        ([Record(b"v", headers=(("k", "not bytes"),))], TypeError),  # type: ignore[arg-type]
        ([Record(b"v", headers=[("k", b"v")])], TypeError),  # type: ignore[arg-type]
        ([(b"v", None, None)], TypeError),  # not a 5-field record
        ([Record(b"v"), 7], TypeError),
    ],
)
def test_encode_refuses_bad_records(records: list[Record], error: type[Exception]) -> None:
    with pytest.raises(error):
        enc(0, records)


def test_encode_refuses_bad_base_offsets() -> None:
    with pytest.raises(ValueError, match="base offset"):
        enc(-1, [Record(b"v")])
    with pytest.raises(ValueError, match="base offset"):
        enc(2**63 - 1, [Record(b"v"), Record(b"w")])


@pytest.mark.parametrize(
    ("field_offset", "fmt", "value", "message"),
    [
        (16, ">b", 1, "magic byte 0x01"),
        (8, ">i", 10, "below the minimum"),
        (8, ">i", 2**31 - 1, "exceeds the maximum batch size"),
        (21, ">h", 0x40, "unknown attribute bits"),
        (21, ">h", 0x01, "compression codec 1"),
        (57, ">i", 0, "record count 0"),
        (57, ">i", 5, "record count 5"),
        (0, ">q", -3, "outside"),
        (35, ">q", 0, "max timestamp 0 is below"),
    ],
)
def test_check_header_names_the_problem(field_offset: int, fmt: str, value: int, message: str) -> None:
    buf = bytearray(enc(0, [Record(b"v", timestamp=10), Record(b"w", timestamp=20)]))
    struct.pack_into(fmt, buf, field_offset, value)
    with pytest.raises(CorruptRecordError, match=message):
        check_header(read_header(buf), MAX, 0)
    with pytest.raises(CorruptRecordError):
        decode_one(bytes(buf))
    assert scan_batches(bytes(buf), max_batch_bytes=MAX).stop is ScanStop.CORRUPT


def test_crc_detects_a_flipped_body_bit() -> None:
    buf = bytearray(enc(0, [Record(b"hello world")]))
    buf[-3] ^= 0x10
    header = read_header(buf)
    check_header(header, MAX)
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        verify_crc(buf, 0, header)


def test_read_header_needs_61_bytes() -> None:
    with pytest.raises(CorruptRecordError, match="a header needs 61"):
        read_header(b"\x00" * 60)
    with pytest.raises(CorruptRecordError):
        read_header(b"\x00" * 100, 50)


def body(*columns: object) -> bytes:
    return msgpack.packb(list(columns), use_bin_type=True)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("body", "kw", "message"),
    [
        (msgpack.packb({"a": 1}), {}, "not valid msgpack"),  # maps are refused by the unpack limits
        (body(None, None, [None], [None], None) + b"\x00", {}, "not valid msgpack"),  # trailing bytes
        (body(None, None, [None], [None]) + b"\x90" * 3, {}, "not valid msgpack"),
        (body(None, None, [b"abcd"], [None]), {}, "array of 5 columns"),
        (body(None, None, [None], [None], None, 1), {}, "array of 5 columns"),
        (body([[0, 0, None, None, []]]), {}, "array of 5 columns"),  # a v1 row body
        (body(None, None, [None, None], [None], None), {}, "key column"),
        (body(None, None, [None], [None, None], None), {}, "value column"),
        (body(None, None, ["str"], [None], None), {}, "key column"),
        (body(None, None, [None], [b"v"], [[], []]), {}, "headers column"),
        (body(None, [1.5], [None], [None], None), {}, "timestamp column"),
        (body(None, 7, [None], [None], None), {}, "timestamp column"),
        (body(["0"], None, [None], [None], None), {}, "offset column"),
        (body([1], None, [None], [None], None), {}, "offset deltas"),
        (body([0, 0], None, [None, None], [None, None], None), {"count": 2, "last_delta": 1}, "offset deltas"),
        (body([0, 5], None, [None, None], [None, None], None), {"count": 2, "last_delta": 4}, "offset deltas"),
        (body(None, None, [None, None], [None, None], None), {"count": 2, "last_delta": 4}, "dense offsets"),
        (body(None, [3], [None], [None], None), {}, "max timestamp"),
        (body(None, None, [None], [None], None), {"max_ts": 3}, "nil timestamp column"),
        (body(None, [-1, 0], [None, None], [None, None], None), {"count": 2, "last_delta": 1}, "below 0"),
        (body(None, None, [None], [None], [[["k", "v"]]]), {}, "header"),
        (body(None, None, [None], [None], [7]), {}, "headers are not an array"),
        (body(None, None, [None], [b"abcdefgh"], None)[:-1], {}, "not valid msgpack"),  # cut short
    ],
)
def test_decode_refuses_bad_bodies_with_valid_crc(body: bytes, kw: dict[str, int], message: str) -> None:
    if len(body) < 8:
        body = body + b"\xc0" * (8 - len(body))  # pad to the minimum body so the header passes
    buf = craft(body, **kw)
    with pytest.raises(CorruptRecordError, match=message):
        decode_one(buf)


def test_unpack_limits_are_bounded_by_the_body_length() -> None:
    # An array header claiming 2**32-1 elements inside a 12-byte body: refused, nothing allocated.
    body = b"\xdd\xff\xff\xff\xff" + b"\xc0" * 7
    with pytest.raises(CorruptRecordError):
        decode_one(craft(body, count=1))
    # A batch whose header claims 2 GiB is refused before anything is read.
    header = bytearray(enc(0, [Record(b"v")]))
    struct.pack_into(">i", header, 8, 2**31 - 13)
    with pytest.raises(CorruptRecordError, match="exceeds the maximum"):
        check_header(read_header(header), MAX)


def test_decode_batch_refuses_a_body_past_the_buffer() -> None:
    buf = enc(0, [Record(b"v" * 50)])
    with pytest.raises(CorruptRecordError, match="past the end"):
        decode_batch(buf[:-5], 0, read_header(buf))


def test_scan_reports_valid_prefix_and_why_it_stopped() -> None:
    batches = [enc(i * 3, [Record(b"x"), Record(b"y"), Record(b"z")]) for i in range(5)]
    log = b"".join(batches)
    ends = [sum(map(len, batches[: i + 1])) for i in range(5)]
    result = scan_batches(log, max_batch_bytes=MAX)
    assert (result.valid_end, result.stop, result.next_offset) == (len(log), ScanStop.END, 15)
    assert [p for p, _ in result.batches] == [0, *ends[:-1]]
    assert scan_batches(b"", max_batch_bytes=MAX).stop is ScanStop.END

    torn = scan_batches(log[:-7], max_batch_bytes=MAX)
    assert (torn.valid_end, torn.stop, len(torn.batches)) == (ends[3], ScanStop.INCOMPLETE, 4)
    short_header = scan_batches(log[: ends[3] + 30], max_batch_bytes=MAX)
    assert (short_header.valid_end, short_header.stop) == (ends[3], ScanStop.INCOMPLETE)

    flipped = bytearray(log)
    flipped[ends[1] + 70] ^= 1
    bad = scan_batches(bytes(flipped), max_batch_bytes=MAX)
    assert (bad.valid_end, bad.stop, len(bad.batches)) == (ends[1], ScanStop.CORRUPT, 2)
    assert "CRC" in bad.reason

    repeated = scan_batches(batches[0] + batches[0], max_batch_bytes=MAX)
    assert (repeated.valid_end, repeated.stop) == (len(batches[0]), ScanStop.CORRUPT)
    assert "below the expected 3" in repeated.reason
    assert scan_batches(log, max_batch_bytes=MAX, next_offset=1).stop is ScanStop.CORRUPT

    zeros = scan_batches(log + b"\x00" * 100, max_batch_bytes=MAX)  # a preallocated tail
    assert (zeros.valid_end, zeros.stop) == (len(log), ScanStop.CORRUPT)


def test_scan_and_decode_accept_bytearray_and_memoryview() -> None:
    buf = enc(5, [Record(b"a"), Record(b"b")])
    for view in (bytearray(buf), memoryview(buf), memoryview(bytearray(buf))):
        assert scan_batches(view, max_batch_bytes=MAX).stop is ScanStop.END
        assert [r.value for r in decode_batches(view, max_batch_bytes=MAX)] == [b"a", b"b"]


def test_a_negative_base_timestamp_is_corrupt_with_either_timestamp_type() -> None:
    # Timestamps are never below 0 (FORMAT.md §2.3 rule 5), LogAppendTime batches included.
    for attributes in (0, 0x08):
        buf = craft(body(None, None, [None], [b"v"], None), base_ts=-1, max_ts=-1, attributes=attributes)
        assert "negative" in (header_problem(read_header(buf), MAX) or "")
        assert scan_batches(buf, max_batch_bytes=MAX).stop is ScanStop.CORRUPT
        with pytest.raises(CorruptRecordError, match="negative"):
            decode_one(buf)


def test_minimum_batch_size_is_69_bytes() -> None:
    buf = enc(0, [Record(None)])
    assert len(buf) == MIN_BATCH_SIZE == 69
    assert decode_one(buf) == [Record(None, None, 1_000, (), 0)]


def test_rebase_batch_moves_a_batch_without_touching_its_crc() -> None:
    buf = bytearray(enc(0, [Record(b"a"), Record(b"b")]))
    crc_before = bytes(buf[17:21])
    rebase_batch(buf, 1_000)
    assert bytes(buf[17:21]) == crc_before
    assert [r.offset for r in decode_one(bytes(buf))] == [1_000, 1_001]
    two = bytearray(enc(0, [Record(b"x")]) + enc(0, [Record(b"y")]))
    rebase_batch(two, 1, position=len(two) // 2)
    assert [r.offset for r in decode_one(bytes(two))] == [0, 1]
    with pytest.raises(ValueError, match="outside"):
        rebase_batch(buf, -1)
    with pytest.raises(ValueError, match="outside"):
        rebase_batch(buf, 2**63 - 1)


def test_decode_batches_refuses_batches_whose_offsets_do_not_follow_on() -> None:
    # A base offset is outside the CRC: a batch that does not start at the previous one's last
    # offset + 1 would serve its records at offsets that are not theirs (a gap, or offsets twice).
    for base in (7, 0):
        two = bytearray(enc(0, [Record(b"x")]) + enc(0, [Record(b"y")]))
        rebase_batch(two, base, position=len(two) // 2)
        with pytest.raises(CorruptRecordError, match="expected 1"):
            decode_one(bytes(two))


def test_body_columns_returns_the_checked_columns() -> None:
    buf = enc(3, [Record(b"a", b"k", 10, (("h", b"v"),)), Record(None, None, 7)])
    header = read_header(buf)
    offsets, deltas, keys, values, headers = body_columns(buf, 0, header)
    assert (tuple(offsets), tuple(deltas)) == ((0, 1), (0, -3))
    assert (keys, values, headers) == ((b"k", None), (b"a", None), ((("h", b"v"),), ()))
    bad = craft(msgpack.packb([[0, 0, None, None, [], None]]))
    with pytest.raises(CorruptRecordError, match="5 columns"):
        body_columns(bad, 0, read_header(bad))
