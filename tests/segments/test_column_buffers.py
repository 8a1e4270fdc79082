"""decode_buffers (the Spark source's decoder) against decode_columns, on any batch.

``seglog.segments._speedups.arrow_batch`` reads a batch body itself (a bounded reader
of the msgpack subset FORMAT.md §2.2 allows) straight into Arrow-layout
buffers. Whatever the body, ``decode_buffers`` must give what
``decode_columns`` gives: the same rows, or the same CorruptRecordError. The
bodies here are near misses of a real one (wrong types, lengths, int widths,
trailing bytes, bad UTF-8, headers of every shape), behind a valid CRC.
"""

from __future__ import annotations

import os
import struct
from array import array

import google_crc32c
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog.segments.batch as batch_module
from seglog.segments.batch import MAGIC, TimestampType, encode_batch, read_header
from seglog.segments.columns import ColumnBuffers, RecordColumns, decode_buffers, decode_columns
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

_HEADER_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)  # valid keys: no NUL

# SEGLOG_PURE_PYTHON=1 (make pytest-pure) turns the C module off on purpose: tests of the C code itself skip.
needs_c = pytest.mark.skipif(bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="SEGLOG_PURE_PYTHON=1: no C module")

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def via_columns(buf: bytes, start: int, end: int) -> object:
    out = RecordColumns()
    try:
        decode_columns(buf, 0, read_header(buf), out, start_offset=start, end_offset=end)
    except CorruptRecordError as exc:
        return ("corrupt", str(exc))
    return out


def via_buffers(buf: bytes, start: int, end: int) -> object:
    out = ColumnBuffers()
    try:
        decode_buffers(buf, 0, read_header(buf), out, start_offset=start, end_offset=end)
    except CorruptRecordError as exc:
        return ("corrupt", str(exc))
    return out.to_columns()


ints = st.one_of(st.integers(-40, 300), st.integers(-(2**63), 2**64 - 1), st.booleans(), st.floats(0, 1))
entries = st.one_of(st.none(), st.binary(max_size=5), st.text(max_size=3), st.integers(-1, 1), st.just([b"x"]))
header_items = st.one_of(
    st.just([]), st.just([["k", b"v"]]), st.just([["k", b"v"], ["é", b""]]), st.just([["k", "v"]]),
    st.just([[b"k", b"v"]]), st.just([["k", None]]), st.just([["k", b"v", b"w"]]), st.just(["k", b"v"]),
    st.just(3), st.none(),
)


@st.composite
def near_miss(draw: st.DrawFn) -> tuple[bytes, int, int]:
    count = draw(st.integers(1, 6))

    def column(of: st.SearchStrategy[object], typical: object) -> object:
        if draw(st.booleans()):
            return [typical] * count if not callable(typical) else [typical(i) for i in range(count)]
        size = draw(st.one_of(st.just(count), st.integers(0, count + 1)))
        return draw(st.lists(of, min_size=size, max_size=size))

    base_ts = draw(st.integers(0, 2**41))
    span = draw(st.integers(0, 300))
    offsets = draw(st.one_of(st.none(), st.none(), st.just(list(range(count))), st.lists(ints, max_size=count)))
    deltas = draw(st.one_of(
        st.none(),
        st.lists(st.integers(-3, span + 2), min_size=count, max_size=count),
        st.just(column(ints, 0)),
    ))
    keys = column(entries, b"k")
    values = column(entries, lambda i: b"v%d" % i)
    headers = draw(st.one_of(st.none(), st.just(column(header_items, [["h", b"1"]]))))
    parts = [offsets, deltas, keys, values, headers]
    body = msgpack.packb(parts, use_bin_type=True)
    body += draw(st.sampled_from([b"", b"", b"\xc0", b"\x00"]))  # trailing bytes are corrupt
    if draw(st.integers(0, 9)) == 0:  # a non-UTF-8 header name
        body = body.replace(b"\xa1h", b"\xa1\xff")
    body += b"\xc0" * max(0, 8 - len(body))
    last_delta = count - 1 if draw(st.integers(0, 3)) else draw(st.integers(0, count + 2))
    attributes = 0x08 if draw(st.booleans()) else 0
    base = draw(st.integers(0, 2**40))
    tail = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, base_ts + span, -1, -1, -1, count) + body
    buf = struct.pack(">qiibI", base, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    start = base + draw(st.integers(-1, count))
    end = base + draw(st.integers(0, count + 2))
    return buf, max(start, 0), end


@FUZZ
@given(near_miss())
def test_decode_buffers_agrees_with_decode_columns(case: tuple[bytes, int, int]) -> None:
    buf, start, end = case
    assert via_buffers(buf, start, end) == via_columns(buf, start, end)


@FUZZ
@given(
    st.lists(
        st.builds(
            Record,
            value=st.one_of(st.none(), st.binary(max_size=300)),
            key=st.one_of(st.none(), st.binary(max_size=20)),
            timestamp=st.one_of(st.none(), st.integers(0, 2**45)),
            headers=st.lists(st.tuples(_HEADER_KEYS, st.binary(max_size=40)), max_size=3).map(tuple),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(list(TimestampType)),
    st.data(),
)
def test_decode_buffers_reads_what_seglog_writes(
    records: list[Record], ts_type: TimestampType, data: st.DataObject
) -> None:
    buf = encode_batch(100, records, timestamp_type=ts_type, now_ms=77)
    start = 100 + data.draw(st.integers(0, len(records) - 1))
    end = data.draw(st.integers(start + 1, 100 + len(records) + 1))
    got = via_buffers(buf, start, end)
    assert got == via_columns(buf, start, end)
    assert isinstance(got, RecordColumns) and got.offsets == list(range(start, min(end, 100 + len(records))))


@needs_c
def test_the_c_reader_is_what_decodes_a_plain_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Guards the fast path itself: a batch seglog wrote never reaches decode_columns when the C module is built.
    assert batch_module._fast is not None
    buf = encode_batch(0, [Record(b"v", b"k", 5), Record(None, None, 6)], timestamp_type=TimestampType.CREATE_TIME,
                       now_ms=1)

    def refuse(*args: object, **kwargs: object) -> bool:
        raise AssertionError("decode_columns was called for a plain batch")

    monkeypatch.setattr("seglog.segments.columns.decode_columns", refuse)
    out = ColumnBuffers()
    decode_buffers(buf, 0, read_header(buf), out)
    assert out.rows == 2 and out.keys.null_count == 1 and out.values.null_count == 1
    assert out.to_columns().values == [b"v", None]


def craft(columns: list[object], count: int, *, base_ts: int = 1000, span: int = 0, attributes: int = 0) -> bytes:
    body = msgpack.packb(columns, use_bin_type=True)
    tail = struct.pack(">hiqqqhii", attributes, count - 1, base_ts, base_ts + span, -1, -1, -1, count) + body
    return struct.pack(">qiibI", 50, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail


@pytest.mark.parametrize(
    "headers",
    [
        [[["k", None]], []],  # a null header value
        [[["k", b"v", b"x"]], []],  # a triple
        [[[b"k", b"v"]], []],  # a bin name
        [[["k", "v"]], []],  # a str value
        [["k", b"v"], []],  # a pair not wrapped in the record's array
        [[], [], []],  # one entry too many
        [[]],  # one too few
        [None, []],  # nil instead of an array
        [[["ok", b"v"]], [["é", b""]]],  # valid, non-ASCII
        [[], []],  # valid, all empty
    ],
)
def test_header_shapes_are_judged_alike(headers: list[object]) -> None:
    buf = craft([None, None, [b"k", None], [b"v", b""], headers], 2)
    for start in (50, 51):
        assert via_buffers(buf, start, 52) == via_columns(buf, start, 52)


@pytest.mark.parametrize(
    ("deltas", "span", "attributes"),
    [
        ([0, 5], 5, 0),  # valid
        ([0, 4], 5, 0),  # the largest is not the header's max
        ([0, 6], 5, 0),  # above it
        ([-1001, 5], 5, 0),  # a timestamp below 0
        ([0, 2**64 - 1], 5, 0x08),  # LogAppendTime: only the type matters, but a uint64 is an int
        ([0, 1.5], 5, 0x08),  # a float is not
        (None, 5, 0),  # nil with max != base
        (None, 5, 0x08),  # nil is fine with LogAppendTime
        ([0, 5, 5], 5, 0),  # one too many
    ],
)
def test_timestamp_columns_are_judged_alike(deltas: object, span: int, attributes: int) -> None:
    buf = craft([None, deltas, [b"k", b"k"], [b"v", b"w"], None], 2, span=span, attributes=attributes)
    assert via_buffers(buf, 50, 52) == via_columns(buf, 50, 52)


def plain_batch() -> tuple[bytes, int]:
    records = [Record(b"v", b"k", 5), Record(None, b"kk", 5)]
    buf = encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=5)
    return buf, 12 + read_header(buf).batch_length


@needs_c
@pytest.mark.parametrize(
    ("count", "lo", "hi"),
    [
        (2**37, 0, 2**37),  # asked a 1 TiB timestamp buffer of malloc (MemoryError) before reading the body
        (2**61 + 1, 0, 2**61 + 1),  # (hi - lo) * 8 wrapped to 8 bytes, then 2**61 writes past them (a crash)
    ],
)
def test_the_c_reader_bounds_the_record_count_by_the_body(count: int, lo: int, hi: int) -> None:
    # arrow_batch trusts no argument: a count the body cannot hold is handed back (None), not allocated.
    fast = batch_module._fast
    assert fast is not None
    buf, end = plain_batch()
    assert fast.arrow_batch(buf, 61, end, count, count - 1, 5, 5, False, lo, hi, 0, 0) is None


@needs_c
def test_the_c_reader_keeps_binary_offsets_within_int32() -> None:
    # keys_base / values_base are the bytes already in the chunk: the end offsets must stay int32,
    # and a base near 2**63 overflowed the check itself (signed overflow, then wrapped offsets).
    fast = batch_module._fast
    assert fast is not None
    buf, end = plain_batch()
    top = 2**31 - 1
    for keys_base, values_base in ((top - 2, 0), (0, top), (2**63 - 1, 0), (0, 2**63 - 1), (top + 1, 0)):
        assert fast.arrow_batch(buf, 61, end, 2, 1, 5, 5, False, 0, 2, keys_base, values_base) is None
    got = fast.arrow_batch(buf, 61, end, 2, 1, 5, 5, False, 0, 2, top - 3, top - 1)
    assert got is not None
    _, key_ends, key_data, _, value_ends, _, value_valid, _ = got
    assert list(array("i", key_ends)) == [top - 2, top] and key_data == b"kkk"
    assert list(array("i", value_ends)) == [top, top] and value_valid == b"\x01\x00"
