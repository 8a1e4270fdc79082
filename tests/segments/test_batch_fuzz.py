"""Fuzzing the batch decoder: random, truncated, bit-flipped and structurally wrong input.

The property: every malformed input raises CorruptRecordError and nothing else
(no struct.error, msgpack exception, ValueError, MemoryError...). Bounded:
modest example counts, no deadline, well under 10 s in total.
"""

from __future__ import annotations

import struct

import google_crc32c
import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.segments.batch import (
    MAGIC,
    ScanStop,
    TimestampType,
    _columns_of,
    _columns_of_one,
    body_columns,
    decode_batch,
    decode_batches,
    encode_batch,
    header_problem,
    read_header,
    scan_batches,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

_HEADER_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)  # valid keys: no NUL

MAX = 64 * 1024
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

records_strategy = st.lists(
    st.builds(
        Record,
        value=st.one_of(st.none(), st.binary(max_size=64)),
        key=st.one_of(st.none(), st.binary(max_size=16)),
        timestamp=st.one_of(st.none(), st.integers(0, 2**45)),
        headers=st.lists(st.tuples(_HEADER_KEYS, st.binary(max_size=8)), max_size=3).map(tuple),
    ),
    min_size=1,
    max_size=20,
)


def _decode_or_corrupt(buf: bytes) -> list[Record] | None:
    try:
        return decode_batches(buf, max_batch_bytes=MAX)
    except CorruptRecordError:
        return None


def _scan_never_raises(buf: bytes) -> None:
    result = scan_batches(buf, max_batch_bytes=MAX)
    assert 0 <= result.valid_end <= len(buf)
    assert (result.stop is ScanStop.END) == (result.valid_end == len(buf))


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(buf: bytes) -> None:
    _decode_or_corrupt(buf)
    _scan_never_raises(buf)


@FUZZ
@given(st.binary(min_size=61, max_size=300))
def test_random_bytes_behind_a_plausible_magic(buf: bytes) -> None:
    data = bytearray(buf)
    data[16] = MAGIC
    struct.pack_into(">i", data, 8, len(data) - 12)
    _decode_or_corrupt(bytes(data))
    _scan_never_raises(bytes(data))


@FUZZ
@given(records_strategy, st.integers(0, 2**40), st.data())
def test_round_trip_then_truncations_and_bit_flips(records: list[Record], base: int, data: st.DataObject) -> None:
    buf = encode_batch(base, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=99)
    decoded = decode_batches(buf, max_batch_bytes=MAX)
    assert [r.value for r in decoded] == [r.value for r in records]
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    assert [r.timestamp for r in decoded] == [99 if r.timestamp is None else r.timestamp for r in records]

    cut = data.draw(st.integers(0, len(buf) - 1))
    assert _decode_or_corrupt(buf[:cut]) is None or cut == 0
    _scan_never_raises(buf[:cut])

    flipped = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 3))):
        bit = data.draw(st.integers(0, len(buf) * 8 - 1))
        flipped[bit // 8] ^= 1 << (bit % 8)
    out = _decode_or_corrupt(bytes(flipped))
    if out is not None:
        # Only the first 17 bytes (base offset, length, epoch, magic) are outside the CRC, as in
        # Kafka; a flip there that still parses can change only the offsets.
        assert [r.value for r in out] == [r.value for r in records]
    _scan_never_raises(bytes(flipped))


msgpack_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False),
        st.binary(max_size=8), st.text(max_size=8),
    ),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=25,
)


# Five columns, each nil or an array of random values: near misses of a real body (FORMAT.md §2.2).
column_bodies = st.lists(st.one_of(st.none(), st.lists(msgpack_values, max_size=4)), min_size=5, max_size=5)


@FUZZ
@given(st.one_of(st.lists(msgpack_values, min_size=1, max_size=5), column_bodies), st.integers(1, 4),
       st.integers(0, 5), st.integers(-3, 3))
def test_structurally_wrong_bodies_with_a_valid_crc(body_obj: list[object], count: int, lod: int, max_ts: int) -> None:
    body = msgpack.packb(body_obj, use_bin_type=True)
    body += b"\xc0" * max(0, 8 - len(body))
    tail = struct.pack(">hiqqqhii", 0, lod, 0, max(max_ts, 0), -1, -1, -1, count) + body
    buf = struct.pack(">qiibI", 0, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    out = _decode_or_corrupt(buf)
    if out is not None:
        assert all(isinstance(r, Record) for r in out)
        assert all(r.value is None or type(r.value) is bytes for r in out)


@FUZZ
@given(st.binary(min_size=61, max_size=61), st.booleans())
def test_the_scan_fast_path_agrees_with_header_problem(raw: bytes, plausible_magic: bool) -> None:
    data = bytearray(raw)
    if plausible_magic:
        data[16] = MAGIC
    header = read_header(bytes(data))
    problem = header_problem(header, MAX)
    result = scan_batches(bytes(data) + bytes(64), max_batch_bytes=MAX)
    if problem is not None:
        assert (result.stop, result.reason) == (ScanStop.CORRUPT, problem)
    else:
        # A plausible header: the scan goes on to the length, CRC and offset checks.
        assert result.reason != "implausible header"
        assert result.stop is ScanStop.INCOMPLETE or "CRC" in result.reason or "below the expected" in result.reason


single_bodies = st.tuples(
    st.one_of(st.none(), st.just([0]), st.just([1]), st.just([True]), st.just([0, 1])),
    st.one_of(st.none(), st.just([0]), st.just([3]), st.just([1.5]), st.just([])),
    st.one_of(st.just([None]), st.just([b"k"]), st.just(["k"]), st.just([]), st.just(b"k")),
    st.one_of(st.just([None]), st.just([b"v"]), st.just(["v"]), st.just([None, None]), st.just(7)),
    st.one_of(st.none(), st.just([[]]), st.just([[["k", b"v"]]]), st.just([[["k", "v"]]]), st.just([7])),
)


@FUZZ
@given(single_bodies, st.integers(0, 3), st.integers(0, 2**41), st.integers(0, 3), st.booleans())
def test_the_one_record_fast_path_agrees_with_the_column_path(
    columns_obj: tuple[object, ...], lod: int, base_ts: int, ts_span: int, log_append_time: bool
) -> None:
    body = msgpack.packb(list(columns_obj), use_bin_type=True)
    body += b"\xc0" * max(0, 8 - len(body))
    attributes = 0x08 if log_append_time else 0
    tail = struct.pack(">hiqqqhii", attributes, lod, base_ts, base_ts + ts_span, -1, -1, -1, 1) + body
    buf = struct.pack(">qiibI", 5, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    header = read_header(buf)
    try:
        fast = decode_batch(buf, 0, header)
    except CorruptRecordError:
        fast = None
    try:
        columns = body_columns(buf, 0, header)
    except CorruptRecordError:
        columns = None
    assert (fast is None) == (columns is None)
    if fast is not None and columns is not None:
        (record,) = fast
        assert (record.offset, record.key, record.value, record.headers) == (
            5 + columns[0][0], columns[2][0], columns[3][0], columns[4][0]
        )


one_records = st.one_of(
    st.builds(
        Record,
        value=st.one_of(st.none(), st.binary(max_size=8), st.text(max_size=2), st.integers()),
        key=st.one_of(st.none(), st.binary(max_size=8), st.just(bytearray(b"k"))),
        timestamp=st.one_of(st.none(), st.integers(-5, 2**64), st.booleans(), st.just(1.5)),
        headers=st.one_of(
            st.just(()), st.just((("h", b"v"),)), st.just([("h", b"v")]), st.just((("h", "v"),)), st.just(((1, b""),))
        ),
    ),
    st.tuples(st.binary(max_size=2)),  # not a 5-field record
    st.text(min_size=5, max_size=5),  # iterable into 5 fields, all str
    st.integers(),  # not iterable
)


@FUZZ
@given(one_records, st.sampled_from(list(TimestampType)), st.integers(-1, 2**40))
def test_the_one_record_encoder_agrees_with_the_column_encoder(record: object, ts_type: TimestampType,
                                                              now_ms: int) -> None:
    # Same columns, or the same exception type and message, for any single "record".
    def outcome(fn: object) -> object:
        try:
            return fn()  # type: ignore[operator]
        except (TypeError, ValueError) as exc:
            return (type(exc), str(exc))

    general = outcome(lambda: _columns_of([record], 1, ts_type, now_ms))  # type: ignore[list-item]
    fast = outcome(lambda: _columns_of_one(record, ts_type, now_ms))  # type: ignore[arg-type]
    assert fast == general
