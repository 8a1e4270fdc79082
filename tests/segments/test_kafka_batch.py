"""segments.kafka_batch: magic-2 header rules, the record walk (C and Python agree), reads, LogAppendTime."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafkahelpers import kafka_batch, records_of, reseal
from seghelpers import python_only

from seglog.segments import batch as batch_module
from seglog.segments import kafka_batch as kb
from seglog.segments.batch import check_header, decode_batch, decode_first_batch, read_header, verify_crc
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_a_read_from_the_middle_of_a_batch_returns_only_the_records_at_or_after_the_offset(codec: str) -> None:
    records = records_of(30)
    batch = kafka_batch(100, records, codec)
    header = read_header(batch)
    check_header(header, len(batch))
    verify_crc(batch, 0, header)
    got = decode_batch(batch, 0, header, start_offset=117)
    assert [(r.offset, r.value, r.key, r.headers, r.timestamp) for r in got] == [
        (100 + i, r.value, r.key, r.headers, r.timestamp) for i, r in enumerate(records)
    ][17:]
    assert [r.offset for r in decode_batch(batch, 0, header, start_offset=117, max_bytes=1)] == [117]


def _mutations(batch: bytes) -> list[bytes]:
    """``batch`` with one byte of its records changed at each position, CRC resealed: valid or not."""
    out = []
    for at in range(61, len(batch)):
        for value in (0x00, 0x01, 0x7F, 0x80, 0xFF):
            changed = bytearray(batch)
            changed[at] = value
            out.append(reseal(changed))
    return out


def test_the_c_walk_and_the_python_walk_agree_on_every_one_byte_change() -> None:
    if kb._fast is None:
        pytest.skip("the C module is not built")
    base = kafka_batch(0, records_of(4, value=b"\x01"))
    for candidate in _mutations(base):
        section = candidate[61:]
        count, base_ts = struct.unpack_from(">i", candidate, 57)[0], struct.unpack_from(">q", candidate, 27)[0]
        fast = kb._fast.produced_records_ok(section, count, base_ts)
        try:
            walk = kb._walk_records(section, count, base_ts, build=False, produced=True)
        except kb.KafkaBatchError:
            assert fast is None
        else:
            assert fast == (walk.max_delta, walk.missing_timestamps)


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "words"),
    [
        (21, ">h", 0x10, "transactional batch without a producer id"),
        (21, ">h", 0x30, "a control batch must be transactional, carry a producer id"),
        (21, ">h", 0x05, "codec 5"),
        (21, ">h", 0x40, "unknown attribute"),
        (57, ">i", 50, "record count 50"),
        (35, ">q", -1, "max timestamp -1"),
        (27, ">q", 10**15, "base timestamp"),
    ],
)
def test_stored_header_rules_name_the_problem(offset: int, fmt: str, value: int, words: str) -> None:
    batch = bytearray(kafka_batch(0, records_of(3)))
    struct.pack_into(fmt, batch, offset, value)
    with pytest.raises(CorruptRecordError, match=words):
        check_header(read_header(batch), len(batch))


def test_log_append_time_is_stamped_with_a_new_crc_and_reported_by_every_record() -> None:
    batch = kafka_batch(0, records_of(5))
    head, body = bytearray(batch[:61]), batch[61:]
    kb.stamp_log_append_time(head, body, 1_800_000_000_000)
    stamped = bytes(head) + body
    header = read_header(stamped)
    verify_crc(stamped, 0, header)
    assert {r.timestamp for r in decode_batch(stamped, 0, header)} == {1_800_000_000_000}


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda b: b.__setitem__(slice(35, 43), struct.pack(">q", 5)), kb.Refusal.CORRUPT),  # max timestamp lies
        (lambda b: b.__setitem__(slice(21, 23), struct.pack(">h", 0x20)), kb.Refusal.INVALID),  # control batch
        (lambda b: b.__setitem__(slice(21, 23), struct.pack(">h", 0x07)), kb.Refusal.COMPRESSION),
    ],
)
def test_the_writer_check_says_which_kind_of_refusal(change: object, refusal: kb.Refusal) -> None:
    batch = bytearray(kafka_batch(0, records_of(3)))
    change(batch)  # type: ignore[operator]
    with pytest.raises(kb.KafkaBatchError) as caught:
        kb.check_produced(reseal(batch), max_batch_bytes=1 << 20)
    assert caught.value.refusal is refusal


def _read(batch: bytes, start_offset: int, max_bytes: int | None, *, timestamp: int = -1) -> object:
    # What a reader gets from a stored batch (header and CRC checked first, as every read does): its
    # records from start_offset on, and the time lookup's answer; or the error, by type and message.
    try:
        header = read_header(batch)
        check_header(header, len(batch))
        verify_crc(batch, 0, header)
        return (
            decode_batch(batch, 0, header, start_offset=start_offset, max_bytes=max_bytes),
            kb.find_timestamp(batch, 0, header, timestamp, start_offset=start_offset),
            decode_first_batch(batch, start_offset=start_offset, max_bytes=max_bytes),  # a point read
        )
    except CorruptRecordError as exc:
        return (type(exc), str(exc))


def _both(batch: bytes, start_offset: int, max_bytes: int | None, timestamp: int = -1) -> tuple[object, object]:
    if kb._fast is None:
        pytest.skip("the C module is not built (SEGLOG_PURE_PYTHON): the Python walk is the only one")
    fast = _read(batch, start_offset, max_bytes, timestamp=timestamp)
    with python_only():
        slow = _read(batch, start_offset, max_bytes, timestamp=timestamp)
        try:  # what a time lookup finds, by the Python reader: the record, or none
            wanted: object = [
                r for r in decode_first_batch(batch, start_offset=start_offset) if r.timestamp >= timestamp  # type: ignore[operator]
            ][:1]
        except CorruptRecordError:
            wanted = None
    # The time lookup's C search of a Kafka batch (the one record built) finds that record, or declines.
    found = batch_module.kafka_record_at_time(batch, start_offset, timestamp)
    assert found is None or found == wanted
    within = start_offset <= read_header(batch).last_offset  # (a lookup's start is in the batch it searches)
    if wanted is not None and within and batch[21] == 0 and batch[22] & 0x27 == 0:
        assert found == wanted  # a plain (uncompressed, not a marker) valid batch: never declined
    return fast, slow


def test_the_c_reader_and_the_python_reader_agree_on_every_one_byte_change() -> None:
    # Every byte of the records section set to values that break varints, lengths, deltas, UTF-8 and
    # NUL in header keys; the CRC resealed so that the records' own rules are what decides.
    base = kafka_batch(10, records_of(4, value=b"\x01"))
    took = 0
    for candidate in _mutations(base):
        for start_offset, max_bytes in ((0, None), (12, None), (11, 1), (10, 8)):  # 8: two records exactly
            fast, slow = _both(candidate, start_offset, max_bytes, timestamp=1_002)
            assert fast == slow
            took += type(fast) is tuple and type(fast[0]) is list
    assert took  # some changes leave a valid batch (a value byte): the C reader returned its records


_FIELD = st.one_of(st.none(), st.binary(max_size=300))
_HEADERS = st.lists(st.tuples(st.text(max_size=8), st.binary(max_size=20)), max_size=3).map(tuple)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=st.lists(st.tuples(_FIELD, _FIELD, st.integers(0, 10_000), _HEADERS), min_size=1, max_size=40),
    start=st.integers(0, 50),
    max_bytes=st.one_of(st.none(), st.integers(0, 2_000)),
    timestamp=st.integers(-1, 12_000),
    log_append=st.booleans(),
    codec=st.sampled_from(["none", "none", "gzip"]),
)
def test_the_c_reader_returns_what_the_python_reader_returns(
    fields: list[tuple[bytes | None, bytes | None, int, tuple[tuple[str, bytes], ...]]],
    start: int,
    max_bytes: int | None,
    timestamp: int,
    log_append: bool,
    codec: str,
) -> None:
    # Any keys and values (null, empty, long), timestamps out of order, headers with any text key
    # (NUL included: refused alike), a read from any offset, any byte limit, LogAppendTime.
    records = [Record(value, key, 1_000 + ts, headers) for key, value, ts, headers in fields]
    batch = kafka_batch(7, records, codec)
    if log_append:
        head, body = bytearray(batch[:61]), batch[61:]
        kb.stamp_log_append_time(head, body, 1_800_000_000_000)
        batch = bytes(head) + body
    fast, slow = _both(batch, 7 + start, max_bytes, 1_000 + timestamp)
    assert fast == slow
