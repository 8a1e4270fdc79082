"""The C loops of ``seglog.segments._speedups`` against the pure-Python reference in ``seglog.segments.batch``.

The C module takes only the valid case and hands everything else back to the
Python code, so for *any* input the two paths must agree: the same columns,
the same Records (of type ``Record``), or the same exception with the same
message. Each property runs an operation twice, once with the C module and
once with ``seglog.segments.batch._fast`` set to ``None``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from typing import Any

import google_crc32c
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog.segments.batch as batch_module
from seglog.segments.batch import (
    MAGIC,
    TimestampType,
    body_columns,
    decode_batch,
    decode_first_batch,
    encode_batch,
    find_timestamp,
    read_header,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record
from tests.segments.seghelpers import both

# SEGLOG_PURE_PYTHON=1 (make pytest-pure) turns the C module off on purpose: tests of the C code itself skip.
needs_c = pytest.mark.skipif(bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="SEGLOG_PURE_PYTHON=1: no C module")

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT64_MAX = 2**63 - 1


@needs_c
def test_the_c_module_is_built_and_used() -> None:
    # `optional=True` in setup.py lets an install without a compiler succeed on the Python
    # path; on this project's machines (and in CI) the build must succeed, or every speed figure
    # in docs/PERFORMANCE.md is wrong. This catches a silently failed build.
    assert batch_module._fast is not None
    assert batch_module._fast.__name__ == "seglog.segments._speedups"


def records_typed(result: object) -> None:
    # A decode result is a list of exact Records, wherever it came from.
    if isinstance(result, tuple) and result[0] == "ok" and isinstance(result[1], list):
        assert all(type(r) is Record for r in result[1])


# ----------------------------------------------------------------------------------------- encode

field_values = st.one_of(
    st.none(), st.binary(max_size=6), st.text(max_size=2), st.integers(-3, 3), st.just(bytearray(b"x")),
)
timestamps = st.one_of(
    st.none(), st.integers(0, 2**41), st.integers(-(2**64), 2**65), st.just(INT64_MAX), st.just(INT64_MAX + 1),
    st.booleans(), st.just(1.5),
)
header_values = st.one_of(
    st.just(()), st.just((("h", b"v"),)), st.just((("h", b"v"), ("", b""))), st.just([("h", b"v")]),
    st.just((("h", "v"),)), st.just(((b"h", b"v"),)), st.just((("h", b"v", b"w"),)), st.just((["h", b"v"],)),
    st.just(7),
)
valid_records = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=8)),
    key=st.one_of(st.none(), st.binary(max_size=8)),
    timestamp=st.one_of(st.none(), st.integers(0, 2**41)),
    headers=st.one_of(st.just(()), st.just((("h", b"v"),))),
)
messy_records = st.one_of(
    valid_records,
    st.builds(Record, value=field_values, key=field_values, timestamp=timestamps, headers=header_values),
    st.tuples(field_values, field_values, timestamps, header_values, st.integers(-1, 3)),  # a plain 5-tuple
    st.lists(st.none(), min_size=5, max_size=5),  # iterable into 5 fields, but a list
    st.tuples(st.binary(max_size=2)),  # not 5 fields
    st.integers(),  # not iterable
)


@FUZZ
@given(
    st.lists(st.one_of(valid_records, valid_records, messy_records), min_size=1, max_size=12),
    st.sampled_from(list(TimestampType)),
    st.one_of(st.integers(0, 2**41), st.integers(-2, 2**64)),
    st.booleans(),
)
def test_the_c_encoder_agrees_with_python_on_any_input(
    records: list[Any], ts_type: TimestampType, now_ms: int, as_tuple: bool
) -> None:
    # The same batch bytes, or the same exception type and message.
    given_records: Any = tuple(records) if as_tuple else records
    fast, slow = both(lambda: encode_batch(7, given_records, timestamp_type=ts_type, now_ms=now_ms))
    assert fast == slow


@needs_c
@FUZZ
@given(
    st.lists(st.one_of(valid_records, valid_records, messy_records), min_size=1, max_size=12),
    st.sampled_from(list(TimestampType)),
    st.integers(0, 2**41),
    st.integers(0, 400),
)
def test_the_c_small_batch_encoder_agrees_with_python(
    records: list[Any], ts_type: TimestampType, now_ms: int, max_bytes: int
) -> None:
    # encode_small_batch's C twin: the same whole batch and max timestamp whenever it answers; None
    # whenever the Python path has no batch to give (invalid records, too large), and an answer for
    # every list of plain valid records that fits.
    assert batch_module._fast is not None and batch_module._small_batch_in_c
    fast = batch_module._fast.encode_small_batch(records, ts_type is TimestampType.LOG_APPEND_TIME, now_ms, max_bytes)
    slow = batch_module._encode_small_batch_py(records, ts_type is TimestampType.LOG_APPEND_TIME, now_ms, max_bytes)
    if fast is not None:
        assert fast == slow and type(fast[0]) is bytearray
    elif all(type(r) is Record for r in records) and slow is not None:
        assert len(slow[0]) > max_bytes, f"C declined a plain valid batch: {records!r}"
    if slow is not None:  # and the batch is encode_batch_parts' (header and body), whole
        head, body = batch_module.encode_batch_parts(0, records, timestamp_type=ts_type, now_ms=now_ms)
        assert slow == (head + body, read_header(head).max_timestamp)


@needs_c
def test_the_small_batch_encoder_takes_the_c_path_for_plain_records() -> None:
    records = [Record(b"v" * 100, b"k", 1_700_000_000_000 + i, (("h", b"x"),) if i else ()) for i in range(10)]
    assert batch_module._small_batch_in_c, "google-crc32c's C function is in use"
    assert batch_module.encode_small_batch is batch_module._fast.encode_small_batch  # type: ignore[union-attr]
    encoded = batch_module.encode_small_batch(records, False, 1, 1 << 17)
    assert encoded is not None and encoded == batch_module._encode_small_batch_py(records, False, 1, 1 << 17)
    assert batch_module.encode_small_batch(records, False, 1, len(encoded[0]) - 1) is None, "larger: None"


header_keys = st.one_of(
    st.text(max_size=40), st.just("\ud800"), st.just("é" * 20), st.just("k" * 300), st.just("k\x00ey")
)
wide_records = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300), st.just(b"v" * 70_000)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    timestamp=st.one_of(st.none(), st.integers(0, 2**62), st.just(INT64_MAX)),
    headers=st.lists(st.tuples(header_keys, st.binary(max_size=300)), max_size=17).map(tuple),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(wide_records, min_size=1, max_size=20), st.sampled_from(list(TimestampType)), st.integers(0, 2**62))
def test_the_c_encoder_uses_every_msgpack_width_as_msgpack_does(
    records: list[Record], ts_type: TimestampType, now_ms: int
) -> None:
    # Lengths and integers across msgpack's size classes (fix/8/16/32 bit), non-ASCII and
    # refused (lone surrogate, NUL) header keys: the bytes must be msgpack's own, the errors Python's.
    fast, slow = both(lambda: encode_batch(0, records, timestamp_type=ts_type, now_ms=now_ms))
    assert fast == slow


@pytest.mark.parametrize("count", [15, 16, 65_535, 65_536])
def test_many_records_cross_the_array_size_classes(count: int) -> None:
    records = [Record(b"", None, i * 300) for i in range(count)]
    fast, slow = both(lambda: encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1))
    assert fast == slow and fast[0] == "ok"  # type: ignore[index]


def test_one_thousand_records_with_mixed_timestamps_encode_alike() -> None:
    records = [Record(b"v%d" % i, b"k", None if i % 7 == 0 else 1_700_000_000_000 + (i * 37) % 1000)
               for i in range(1000)]
    now = 1_800_000_000_000
    fast, slow = both(lambda: encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=now))
    assert fast == slow


class _ReadsAsAnotherRecord(tuple):  # type: ignore[type-arg]
    """A 5-tuple whose iteration (what the Python path reads) differs from its storage."""

    def __iter__(self) -> Iterator[object]:
        return iter((b"iterated", None, 5, (), -1))


@pytest.mark.parametrize("count", [1, 2])
def test_a_tuple_subclass_with_its_own_iter_encodes_as_the_python_path_reads_it(count: int) -> None:
    # zip(*records) and tuple unpacking go through __iter__; the C loop read the tuple's storage
    # and wrote b"stored" with timestamp 1 where the Python path writes b"iterated" at 5.
    records: Any = [_ReadsAsAnotherRecord((b"stored", None, 1, (), -1))] * count
    fast, slow = both(lambda: encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1))
    assert fast == slow and fast[0] == "ok"  # type: ignore[index]
    buf = fast[1]  # type: ignore[index]
    assert [(r.value, r.timestamp) for r in decode_batch(buf, 0, read_header(buf))] == [(b"iterated", 5)] * count


@needs_c
def test_records_and_plain_tuples_still_take_the_c_encoder() -> None:
    # The check that turns tuple subclasses with their own __iter__ away must not turn Record away:
    # the agreement tests would still pass, only slower.
    assert batch_module._fast is not None
    for records in ([Record(b"v", None, 3, (("h", b"x"),))], [(b"v", None, 3, (), -1)] * 2):
        assert batch_module._fast.encode_body(records, False, 1) is not None


# ----------------------------------------------------------------------------------------- decode

ints = st.one_of(st.integers(-3, 40), st.integers(-(2**63), 2**64 - 1), st.booleans())
column_entries = st.one_of(st.none(), st.binary(max_size=4), st.text(max_size=2), st.integers(-2, 2), st.booleans())
header_entries = st.one_of(
    st.just([]), st.just([["k", b"v"]]), st.just([["k", "v"]]), st.just([[b"k", b"v"]]), st.just([["k", b"v", 1]]),
    st.just(["k", b"v"]), st.just(3), st.none(),
)


@st.composite
def near_miss_batches(draw: st.DrawFn) -> tuple[bytes, int, int | None]:
    """A batch with a valid CRC whose body is five columns close to what seglog writes."""
    count = draw(st.integers(1, 6))

    def column(entries: st.SearchStrategy[object]) -> object:
        size = draw(st.one_of(st.just(count), st.just(count), st.integers(0, count + 1)))
        return draw(st.lists(entries, min_size=size, max_size=size))

    dense = draw(st.booleans())
    offsets = None if dense else draw(st.one_of(
        st.just(list(range(count))), st.lists(ints, min_size=count, max_size=count)
    ))
    base_ts = draw(st.one_of(st.integers(0, 2**41), st.just(0)))
    span = draw(st.integers(0, 5))
    deltas = draw(st.one_of(
        st.none(),
        st.lists(st.integers(-2, span + 1), min_size=count, max_size=count),
        st.just(column(ints)),
    ))
    keys = column(column_entries) if draw(st.booleans()) else [b"k"] * count
    values = column(column_entries) if draw(st.booleans()) else [b"v%d" % i for i in range(count)]
    headers = draw(st.one_of(st.none(), st.just(column(header_entries)), st.just([[]] * count)))
    body = msgpack.packb([offsets, deltas, keys, values, headers], use_bin_type=True)
    body += b"\xc0" * max(0, 8 - len(body))
    last_delta = count - 1 if dense or draw(st.booleans()) else draw(st.integers(count - 1, count + 3))
    attributes = 0x08 if draw(st.booleans()) else 0
    base_offset = draw(st.integers(0, 2**40))
    tail = struct.pack(">hiqqqhii", attributes, last_delta, base_ts, base_ts + span, -1, -1, -1, count) + body
    buf = struct.pack(">qiibI", base_offset, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    start = base_offset + draw(st.integers(-1, count + 1))
    max_bytes = draw(st.one_of(st.none(), st.integers(0, 12)))
    return buf, max(start, 0), max_bytes


@FUZZ
@given(near_miss_batches())
def test_the_c_decoder_agrees_with_python_on_near_miss_bodies(case: tuple[bytes, int, int | None]) -> None:
    buf, start_offset, max_bytes = case
    header = read_header(buf)
    fast, slow = both(lambda: decode_batch(buf, 0, header, start_offset=start_offset, max_bytes=max_bytes))
    assert fast == slow
    records_typed(fast)
    fast_columns, slow_columns = both(lambda: body_columns(buf, 0, header))
    assert fast_columns == slow_columns


@FUZZ
@given(near_miss_batches(), st.integers(0, 2**41 + 8))
def test_the_c_timestamp_search_agrees_with_python_on_near_miss_bodies(
    case: tuple[bytes, int, int | None], target: int
) -> None:
    buf, start_offset, _ = case
    header = read_header(buf)
    target = target if target % 2 else header.base_timestamp + target % 7  # often inside the batch
    fast, slow = both(lambda: find_timestamp(buf, 0, header, target, start_offset=start_offset))
    assert fast == slow


@needs_c
def test_a_dense_batch_is_read_and_searched_by_the_c_loops() -> None:
    # The agreement tests would still pass if the C functions always declined (the Python path
    # answering both times); a point read and a timestamp seek must really take them.
    assert batch_module._fast is not None
    records = [Record(b"v%d" % i, b"k", 1_000 + 2 * i, (("h", b"x"),) if i % 2 else ()) for i in range(50)]
    buf = encode_batch(100, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1)
    header = read_header(buf)
    body = (61, len(buf), 50, 49, 100, 1_000, 1_098, 0)
    one = batch_module._fast.decode_records(Record, buf, *body, 7, 1)
    assert one == [Record(b"v7", b"k", 1_014, (("h", b"x"),), 107)]
    assert batch_module._fast.decode_records(Record, buf, *body, 0, -1) == decode_batch(buf, 0, header)
    search = (61, len(buf), 50, 49, 1_000, 1_098, 0)
    assert batch_module._fast.find_timestamp(buf, *search, 3, 1_013) == (7, 1_014)
    assert batch_module._fast.find_timestamp(buf, *search, 0, 1_099) == (-1, -1)


def test_a_header_name_that_is_not_utf8_fails_a_read_that_does_not_return_its_record() -> None:
    # msgpack checks every str of the body, so the Python path refuses the batch even when the
    # bad name belongs to a record the read skips; the C reader must decline, not return record 0.
    good = b"\x92\xa1h\xc4\x01x"  # ["h", b"x"]
    bad = b"\x92\xa2\xff\xfe\xc4\x01x"  # [<not UTF-8>, b"x"]
    body = b"\x95\xc0\xc0\x92\xc0\xc0\x92\xc4\x01a\xc4\x01b\x92\x91" + good + b"\x91" + bad
    tail = struct.pack(">hiqqqhii", 0, 1, 0, 0, -1, -1, -1, 2) + body
    buf = struct.pack(">qiibI", 0, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    fast, slow = both(lambda: decode_batch(buf, 0, read_header(buf), start_offset=0, max_bytes=1))
    assert fast == slow
    assert fast[0] is CorruptRecordError  # type: ignore[index]


def unchecked_batch(
    base_offset: int, base_ts: int, max_ts: int, offsets: list[int] | None, deltas: list[int] | None
) -> bytes:
    """A three-record batch with a valid CRC whose header check_header would refuse."""
    body = bytes(msgpack.packb([offsets, deltas, [b"k"] * 3, [b"v"] * 3, None], use_bin_type=True))
    tail = struct.pack(">hiqqqhii", 0, 2, base_ts, max_ts, -1, -1, -1, 3) + body
    return struct.pack(">qiibI", base_offset, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize(
    ("base_offset", "base_ts", "max_ts", "offsets", "deltas"),
    [
        (INT64_MAX - 1, 0, 0, None, None),  # dense offsets past int64: C wrapped to -2**63
        (INT64_MAX - 1, 0, 0, [0, 1, 2], None),  # the same with an explicit offset column
        (0, -(2**63), 0, None, [2**63] * 3),  # deltas above int64, sums within it: C raised OverflowError
    ],
)
def test_offsets_and_timestamps_beyond_int64_decode_as_python_does(
    base_offset: int, base_ts: int, max_ts: int, offsets: list[int] | None, deltas: list[int] | None, whole: bool
) -> None:
    # decode_batch's callers check the header first, which refuses these; the C loop must still
    # not wrap (signed overflow) or raise where the Python path returns Records.
    buf = unchecked_batch(base_offset, base_ts, max_ts, offsets, deltas)
    header = read_header(buf)
    start, max_bytes = (0, None) if whole else (base_offset + 2, 1)  # all three records, or the last
    fast, slow = both(lambda: decode_batch(buf, 0, header, start_offset=start, max_bytes=max_bytes))
    assert fast == slow and fast[0] == "ok"  # type: ignore[index]
    records_typed(fast)


@FUZZ
@given(
    st.lists(valid_records, min_size=1, max_size=60),
    st.sampled_from(list(TimestampType)),
    st.integers(0, 2**40),
    st.data(),
)
def test_the_c_readers_return_what_python_returns(
    records: list[Record], ts_type: TimestampType, base: int, data: st.DataObject
) -> None:
    # decode_batch (decode_records) and find_timestamp on valid batches of every shape.
    buf = encode_batch(base, records, timestamp_type=ts_type, now_ms=1_234)
    header = read_header(buf)
    start = base + data.draw(st.integers(0, len(records)))
    max_bytes = data.draw(st.one_of(st.none(), st.integers(0, 40)))
    fast, slow = both(lambda: decode_batch(buf, 0, header, start_offset=start, max_bytes=max_bytes))
    assert fast == slow
    records_typed(fast)
    stamps = [r.timestamp for r in records if r.timestamp is not None] or [1_234]
    target = data.draw(st.one_of(st.sampled_from(stamps), st.integers(0, 2**41 + 1)))
    fast, slow = both(lambda: find_timestamp(buf, 0, header, target, start_offset=start))
    assert fast == slow


@pytest.mark.parametrize("ts_type", list(TimestampType))
def test_a_decoded_record_is_a_full_record(ts_type: TimestampType) -> None:
    records = [Record(b"a", None, 5, (("h", b"1"),)), Record(None, b"k", 9)]
    buf = encode_batch(3, records, timestamp_type=ts_type, now_ms=11)
    out = decode_batch(buf, 0, read_header(buf))
    assert [type(r) for r in out] == [Record, Record]
    expected_ts = [11, 11] if ts_type is TimestampType.LOG_APPEND_TIME else [5, 9]
    assert out == [Record(b"a", None, expected_ts[0], (("h", b"1"),), 3), Record(None, b"k", expected_ts[1], (), 4)]
    assert out[0].headers == (("h", b"1"),) and out[1].offset == 4


def test_a_body_with_a_str_value_is_corrupt_on_both_paths() -> None:
    body = msgpack.packb([None, None, [b"k", b"k"], [b"v", "not bytes"], None], use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, 1, 0, 0, -1, -1, -1, 2) + body
    buf = struct.pack(">qiibI", 0, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    fast, slow = both(lambda: decode_batch(buf, 0, read_header(buf)))
    assert fast == slow
    assert fast[0] is CorruptRecordError  # type: ignore[index]
    with pytest.raises(CorruptRecordError, match="value column"):
        decode_batch(buf, 0, read_header(buf))


INT_EDGES = [0, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**40]
NEG_EDGES = [-1, -32, -33, -128, -129, -32_768, -32_769, -(2**31), -(2**31) - 1, -(2**40)]
LENGTH_EDGES = [0, 1, 15, 16, 31, 32, 255, 256, 65_535, 65_536]


def test_every_msgpack_size_class_boundary_encodes_as_msgpack_does() -> None:
    base = 2**41
    records = [Record(b"x", None, base)]
    records += [Record(b"x", None, base + d) for d in INT_EDGES + NEG_EDGES]
    records += [Record(b"v" * n, b"k" * min(n, 300), base, ((("h" * n), b"w" * n),)) for n in LENGTH_EDGES]
    records += [Record(None, None, base, tuple(("k", b"") for _ in range(n))) for n in (15, 16, 17)]
    fast, slow = both(lambda: encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1))
    assert fast[0] == "ok" and fast == slow  # type: ignore[index]
    # And the C readers read every one of those widths back as msgpack does (the signed int
    # classes are one sign-extending case in take_int).
    buf = fast[1]  # type: ignore[index]
    header = read_header(buf)
    for start, max_bytes in ((0, None), (len(INT_EDGES) + 5, 1)):
        got, want = both(lambda s=start, m=max_bytes: decode_batch(buf, 0, header, start_offset=s, max_bytes=m))
        assert got[0] == "ok" and got == want  # type: ignore[index]
    for target in (base - 2**40, base - 129, base, base + 65_536):
        found, want = both(lambda t=target: find_timestamp(buf, 0, header, t))
        assert found == want
    if batch_module._fast is not None:
        assert batch_module._fast.batch_records(Record, google_crc32c.value, buf, 3, 1) is not None


def test_seglog_pure_python_turns_the_c_module_off() -> None:
    # The switch docs/PERFORMANCE.md gives for comparing the two paths, in a fresh interpreter.
    import os
    import subprocess
    import sys

    code = (
        "import seglog.segments.batch as b\n"
        "from seglog.segments.records import Record\n"
        "buf = b.encode_batch(0, [Record(b'v'), Record(b'w')], timestamp_type=b.TimestampType.CREATE_TIME, now_ms=5)\n"
        "out = b.decode_batches(buf, max_batch_bytes=1 << 20)\n"
        "print(b._fast is None, [r.value for r in out])\n"
    )
    env = {**os.environ, "SEGLOG_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True [b'v', b'w']"


def test_a_log_append_time_batch_with_a_negative_max_timestamp_decodes_as_python_does() -> None:
    # Only an unchecked header has max_timestamp < 0; the C loop's "-1 = use the deltas" sentinel
    # must not turn it into base + delta where the Python path reports max_timestamp.
    body = bytes(msgpack.packb([None, [0, 3, 1], [b"k"] * 3, [b"v"] * 3, None], use_bin_type=True))
    tail = struct.pack(">hiqqqhii", 0x08, 2, 10, -1, -1, -1, -1, 3) + body
    buf = struct.pack(">qiibI", 0, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    fast, slow = both(lambda: decode_batch(buf, 0, read_header(buf)))
    assert fast == slow


@pytest.mark.parametrize(
    "call",
    [
        lambda buf, h: decode_batch(buf, 0, h, max_bytes=-1),  # any max_bytes <= 0 takes one record
        lambda buf, h: decode_batch(buf, 0, h, max_bytes=2**63),  # beyond int64: every record
        lambda buf, h: decode_batch(buf, 0, h, max_bytes=2.5),  # not an int: the Python path decides
        lambda buf, h: find_timestamp(buf, 0, h, -(2**64)),  # below int64: the first record
        lambda buf, h: find_timestamp(buf, 0, h, 5.0),
        lambda buf, h: decode_batch(memoryview(bytes(a for b in buf for a in (b, 0)))[::2], 0, h),  # strided
    ],
)
def test_arguments_at_the_c_boundaries_give_the_python_answer(call: Callable[[bytes, Any], object]) -> None:
    # Found by the ASan/UBSan review of decode_records and find_timestamp: -1 meant "no limit" to
    # C, int64 overflow raised OverflowError, floats TypeError, a strided view BufferError.
    buf = encode_batch(0, [Record(b"v%d" % i, None, 5) for i in range(3)],
                       timestamp_type=TimestampType.CREATE_TIME, now_ms=1)
    header = read_header(buf)
    fast, slow = both(lambda: call(buf, header))
    assert fast == slow and fast[0] == "ok"  # type: ignore[index]


@FUZZ
@given(near_miss_batches(), st.integers(0, 64), st.integers(0, 255), st.booleans(), st.binary(max_size=70))
def test_the_c_batch_reader_agrees_with_python_on_any_header(
    case: tuple[bytes, int, int | None], at: int, byte: int, fix_crc: bool, trailing: bytes
) -> None:
    # decode_first_batch checks the header, the CRC and the body in one C call: one byte of the
    # header (or the body's first bytes) changed, the CRC fixed up or not, bytes after the batch.
    buf, start_offset, max_bytes = case
    data = bytearray(buf + trailing)
    if at < len(data):
        data[at] = byte
    if fix_crc and len(data) >= 61:
        end = 12 + struct.unpack_from(">i", data, 8)[0]  # the batch's end as its (maybe changed) length says
        struct.pack_into(">I", data, 17, google_crc32c.value(bytes(data[21 : max(21, min(end, len(data)))])))
    fast, slow = both(lambda: decode_first_batch(bytes(data), start_offset=start_offset, max_bytes=max_bytes))
    assert fast == slow
    records_typed(fast)


@needs_c
def test_a_point_read_batch_takes_the_c_reader() -> None:
    assert batch_module._fast is not None
    records = [Record(b"v%d" % i, b"k", 1_000 + i) for i in range(100)]
    buf = encode_batch(500, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1)
    got = batch_module._fast.batch_records(Record, google_crc32c.value, buf + b"next batch", 542, 1)
    assert got == [Record(b"v42", b"k", 1_042, (), 542)]
    flipped = bytearray(buf)
    flipped[-1] ^= 1  # a CRC mismatch: declined, and the Python path says why
    assert batch_module._fast.batch_records(Record, google_crc32c.value, bytes(flipped), 542, 1) is None
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        decode_first_batch(bytes(flipped), start_offset=542, max_bytes=1)


@pytest.mark.parametrize("fix_crc", [False, True])
@pytest.mark.parametrize("delta", [1, 0x40, 0x80])
def test_every_header_byte_changed_reads_as_python_reads_it(fix_crc: bool, delta: int) -> None:
    # Each of the 61 header bytes (and the body's first) of a valid batch changed in turn, with
    # the CRC left stale or fixed up: the C reader answers exactly where the Python path does.
    records = [Record(b"v%d" % i, b"k" if i % 2 else None, 2_000 + 3 * i) for i in range(12)]
    for ts_type in TimestampType:
        valid = encode_batch(700, records, timestamp_type=ts_type, now_ms=9)
        for at in range(62):
            data = bytearray(valid)
            data[at] = (data[at] + delta) % 256
            if fix_crc:
                struct.pack_into(">I", data, 17, google_crc32c.value(bytes(data[21:])))
            for start, max_bytes in ((700, None), (705, 1), (711, 0)):
                fast, slow = both(
                    lambda d=bytes(data), s=start, m=max_bytes: decode_first_batch(d, start_offset=s, max_bytes=m)
                )
                assert fast == slow, (at, start)
