"""The partial decoders of segments.batch agree with the whole-batch column path.

``decode_batch(..., max_bytes=)`` (one-record reads) builds Records only up to
the one whose key and value bytes reach ``max_bytes``; ``find_timestamp`` (time
lookups) unpacks only the offset and timestamp columns. The properties: the
partial result is a non-empty prefix of the full result, it stops at the
record that reaches ``max_bytes``, ``find_timestamp`` finds what a scan of
the decoded records finds, and a body that is wrong but CRC-valid raises
``CorruptRecordError`` on every path that reads the wrong column. Modest
example counts, no deadline.
"""

from __future__ import annotations

import google_crc32c
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.segments.batch import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TimestampType,
    decode_batch,
    encode_batch,
    find_timestamp,
    read_header,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record

_HEADER_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4)  # valid keys: no NUL

PROPS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

records_strategy = st.lists(
    st.builds(
        Record,
        value=st.one_of(st.none(), st.binary(max_size=48)),
        key=st.one_of(st.none(), st.binary(max_size=8)),
        timestamp=st.integers(0, 2**40),
        headers=st.lists(st.tuples(_HEADER_KEYS, st.binary(max_size=4)), max_size=2).map(tuple),
    ),
    min_size=1,
    max_size=40,
)
time_types = st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME])


def _batch(records: list[Record], base: int, ts_type: TimestampType) -> bytes:
    return encode_batch(base, records, timestamp_type=ts_type, now_ms=1_700_000_000_000)


@PROPS
@given(records_strategy, st.integers(0, 2**40), time_types, st.data())
def test_partial_decode_is_a_prefix_of_the_full_decode(
    records: list[Record], base: int, ts_type: TimestampType, data: st.DataObject
) -> None:
    buf = _batch(records, base, ts_type)
    header = read_header(buf)
    start = data.draw(st.integers(base - 2, base + len(records) + 1))
    max_bytes = data.draw(st.integers(0, len(buf) + 10))
    full = decode_batch(buf, 0, header, start_offset=start)
    part = decode_batch(buf, 0, header, start_offset=start, max_bytes=max_bytes)
    assert part == full[: len(part)]
    assert bool(part) == bool(full)  # at least one record whenever one exists
    if max_bytes < header.batch_length and len(records) > 1:
        # The records built hold max_bytes key+value bytes or more only with the last one (at least one).
        sizes = [len(r.key or b"") + len(r.value or b"") for r in part]
        assert len(part) <= 1 or sum(sizes[:-1]) < max_bytes
        assert len(part) == len(full) or sum(sizes) >= max_bytes


@PROPS
@given(records_strategy, st.integers(0, 2**40), time_types, st.data())
def test_find_timestamp_agrees_with_a_scan_of_the_records(
    records: list[Record], base: int, ts_type: TimestampType, data: st.DataObject
) -> None:
    buf = _batch(records, base, ts_type)
    header = read_header(buf)
    start = data.draw(st.integers(base - 2, base + len(records) + 1))
    target = data.draw(st.one_of(st.integers(0, 2**40 + 10), st.sampled_from([r.timestamp or 0 for r in records])))
    full = decode_batch(buf, 0, header, start_offset=start)
    expect = next(((r.timestamp, r.offset) for r in full if r.timestamp is not None and r.timestamp >= target), None)
    assert find_timestamp(buf, 0, header, target, start_offset=start) == expect


def _framed(body: bytes, *, count: int, last_offset_delta: int, base_ts: int = 0, max_ts: int = 0) -> bytes:
    # A batch with a valid header and CRC around an arbitrary body (the CRC covers attributes .. body).
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = bytearray(HEADER.pack(0, length, -1, MAGIC, 0, 0, last_offset_delta, base_ts, max_ts, -1, -1, -1, count))
    buf = bytes(head) + body
    crc = google_crc32c.value(buf[CRC_START:])
    head[17:21] = crc.to_bytes(4, "big")
    return bytes(head) + body


def test_sparse_batches_read_their_offset_column() -> None:
    # Offset deltas 0, 5, 9 (an explicit column, not nil): a record's place is not its delta.
    columns = [[0, 5, 9], [0, 1, 2], [None, None, None], [b"a", b"b", b"c"], None]
    buf = _framed(msgpack.packb(columns), count=3, last_offset_delta=9, max_ts=2)
    header = read_header(buf)
    full = decode_batch(buf, 0, header, start_offset=5)
    assert [r.offset for r in full] == [5, 9]
    assert decode_batch(buf, 0, header, start_offset=5, max_bytes=1) == full[:1]
    assert find_timestamp(buf, 0, header, 2) == (2, 9)


@pytest.mark.parametrize(
    ("columns", "find_sees_it"),
    [
        ([None, None, [None, 7], [b"a", b"b"], None], False),  # a key that is not bin
        ([None, None, [None, None], [b"a", b"b"], [[], [], []]], False),  # 3 header lists for 2 records
        ([[0, 2], None, [None, None], [b"a", b"b"], None], True),  # offset deltas beyond the last delta 1
        ([None, [0, 5], [None, None], [b"a", b"b"], None], True),  # a timestamp beyond the header's max
        ([None, [0], [None, None], [b"a", b"b"], None], True),  # one timestamp for two records
    ],
)
def test_a_wrong_body_is_corrupt_on_every_path(columns: list[object], find_sees_it: bool) -> None:
    buf = _framed(msgpack.packb(columns), count=2, last_offset_delta=1, max_ts=0)
    header = read_header(buf)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf, 0, header)
    with pytest.raises(CorruptRecordError):
        decode_batch(buf, 0, header, start_offset=1, max_bytes=1)
    if find_sees_it:  # find_timestamp reads (and checks) only the offset and timestamp columns
        with pytest.raises(CorruptRecordError):
            find_timestamp(buf, 0, header, 0, start_offset=1)
