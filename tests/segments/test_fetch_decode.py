"""A fetch's decode of many batches in one C call (``_speedups.batches_records``) against the Python loop.

``decode_batches`` hands the plain valid seglog batches of a buffer to the C
loop, which stops before any other batch (a Kafka batch, a corrupt one, a body
it declines); the Python loop reads or refuses that one and hands back. For any
buffer the two paths must agree: the same Records, or the same exception with
the same message. ``whole_batches_length`` (how much of a segment read is
returned) has a C twin too, held to the same rule.
"""

from __future__ import annotations

import gc
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import google_crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog.segments.batch as batch_module
import seglog.segments.kafka_batch as kb
from seglog.segments.batch import (
    TimestampType,
    decode_batches,
    encode_batch,
    whole_batches_length,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.records import Record
from tests.segments.kafkahelpers import kafka_batch, records_of
from tests.segments.seghelpers import both, python_only

needs_c = pytest.mark.skipif(bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="SEGLOG_PURE_PYTHON=1: no C module")
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX = 1 << 20


@contextmanager
def counting_python_headers() -> Iterator[list[int]]:
    """How many batch headers the Python loop of decode_batches reads (one per batch it takes itself)."""
    calls = [0]
    real = batch_module.read_header

    def counted(buf: object, position: int = 0) -> object:
        calls[0] += 1
        return real(buf, position)  # type: ignore[arg-type]

    batch_module.read_header = counted  # type: ignore[assignment]
    try:
        yield calls
    finally:
        batch_module.read_header = real


def seglog_batch(base: int, count: int, ts_type: TimestampType = TimestampType.CREATE_TIME, seed: int = 0) -> bytes:
    records = [
        Record(
            b"v%d-%d" % (seed, i), b"k" if i % 3 else None, 5_000 + base % 10**6 + i,
            (("h", b"x"),) if i % 4 == 1 else (),
        )
        for i in range(count)
    ]
    return encode_batch(base, records, timestamp_type=ts_type, now_ms=77)


# ----------------------------------------------------------------------------------- the C loop is used


@needs_c
def test_a_fetch_of_one_record_batches_is_decoded_in_one_c_call() -> None:
    # Before: one read_header (and check, CRC, decode) per batch in Python: 500 here.
    buf = b"".join(seglog_batch(i, 1) for i in range(500))
    with counting_python_headers() as calls:
        records = decode_batches(buf, max_batch_bytes=MAX)
    assert calls[0] == 0
    assert [r.offset for r in records] == list(range(500))
    with python_only():
        assert decode_batches(buf, max_batch_bytes=MAX) == records


@needs_c
@pytest.mark.parametrize(("codec", "python_reads"), [("none", 0), ("gzip", 1)])
def test_a_kafka_batch_among_seglog_batches_is_read_in_c_unless_compressed(codec: str, python_reads: int) -> None:
    # Kafka-format batches (stored by the wire server): an uncompressed one is read by the C loop as
    # seglog's are; a compressed one is left to the Python loop, and the C loop resumes after it, with
    # the offset rule carried across.
    parts = [seglog_batch(0, 3), seglog_batch(3, 2), kafka_batch(5, records_of(4), codec), seglog_batch(9, 5),
             seglog_batch(14, 1)]
    buf = b"".join(parts)
    with counting_python_headers() as calls:
        fast = decode_batches(buf, start_offset=1, max_batch_bytes=MAX)
    assert calls[0] == python_reads
    with python_only():
        assert fast == decode_batches(buf, start_offset=1, max_batch_bytes=MAX)
    assert [r.offset for r in fast] == list(range(1, 15))


@needs_c
def test_records_of_a_fetch_are_not_tracked_by_the_cycle_collector() -> None:
    # Thousands of live Records in a fetch's list made every young collection walk them all.
    buf = b"".join(seglog_batch(i * 4, 4) for i in range(50))
    records = decode_batches(buf, max_batch_bytes=MAX)
    assert len(records) == 200
    assert not any(gc.is_tracked(r) for r in records)
    assert records[1].headers == (("h", b"x"),)  # a Record with headers too
    del records
    gc.collect()


@needs_c
def test_the_fetch_loop_computes_crcs_with_google_crc32cs_own_c_function() -> None:
    fast = batch_module._fast
    assert fast is not None
    if google_crc32c.implementation != "c":
        pytest.skip("google-crc32c without its C extension: the Python call is used")
    assert fast.native_crc32c_in_use()
    check = b"x" * 300
    # A library that is not loaded, or a function whose answer is not google_crc32c's, is refused.
    assert not fast.use_native_crc32c("/nonexistent/libnothing.so", check, google_crc32c.value(check))
    from google_crc32c import _crc32c  # type: ignore[attr-defined]

    assert not fast.use_native_crc32c(_crc32c.__file__, check, google_crc32c.value(check) ^ 1)
    assert fast.native_crc32c_in_use()  # a refusal changes nothing
    flipped = bytearray(seglog_batch(0, 3) + seglog_batch(3, 3))
    flipped[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        decode_batches(bytes(flipped), max_batch_bytes=MAX)


@needs_c
def test_the_c_loop_leaves_nothing_of_a_batch_it_stops_at_in_the_list() -> None:
    assert batch_module._fast is not None
    good, bad = seglog_batch(0, 2), bytearray(seglog_batch(2, 3))
    bad[-1] ^= 0x10  # CRC mismatch
    out: list[Record] = []
    position, expected = batch_module._fast.batches_records(
        Record, google_crc32c.value, good + bytes(bad), 0, 0, MAX, -1, out
    )
    assert (position, expected) == (len(good), 2)
    assert [r.offset for r in out] == [0, 1]


# --------------------------------------------------------------------------------------- agreement


@st.composite
def fetched_buffers(draw: st.DrawFn) -> tuple[bytes, int]:
    """Back-to-back batches as a segment read returns them, one of them maybe damaged."""
    parts: list[bytes] = []
    base = draw(st.integers(0, 2**40))
    offset = base
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(
            ["seglog", "seglog", "seglog", "log_append", "kafka", "kafka", "kafka_gzip", "kafka_log_append",
             "kafka_control"]
        ))
        count = 1 if kind == "kafka_control" else draw(st.integers(1, 5))
        if kind == "kafka_control":  # a transaction marker: never a record
            marker = bytearray(kb.encode_control_batch(7, 0, commit=True, coordinator_epoch=0, timestamp=1_000))
            struct.pack_into(">q", marker, 0, offset)  # the base offset is outside the CRC
            parts.append(bytes(marker))
        elif kind.startswith("kafka"):
            batch = kafka_batch(offset, records_of(count), "gzip" if kind == "kafka_gzip" else "none")
            if kind == "kafka_log_append":
                head = bytearray(batch[:61])
                kb.stamp_log_append_time(head, batch[61:], 1_800_000_000_000)
                batch = bytes(head) + batch[61:]
            parts.append(batch)
        else:
            ts_type = TimestampType.LOG_APPEND_TIME if kind == "log_append" else TimestampType.CREATE_TIME
            parts.append(seglog_batch(offset, count, ts_type, seed=len(parts)))
        offset += count + (1 if draw(st.integers(0, 20)) == 0 else 0)  # now and then a gap: offsets do not follow
    buf = bytearray(b"".join(parts))
    damage = draw(st.sampled_from(["none", "none", "byte", "byte_resealed", "cut"]))
    if damage in ("byte", "byte_resealed"):
        at = draw(st.integers(0, len(buf) - 1))
        buf[at] = draw(st.integers(0, 255))
        if damage == "byte_resealed":
            # The CRC fixed up for the batch holding the change: the header and body checks must catch it.
            position = 0
            for part in parts:
                if position <= at < position + len(part):
                    end = min(position + 12 + struct.unpack_from(">i", buf, position + 8)[0], len(buf))
                    if end > position + 21:
                        struct.pack_into(">I", buf, position + 17, google_crc32c.value(bytes(buf[position + 21 : end])))
                    break
                position += len(part)
    elif damage == "cut":
        del buf[draw(st.integers(1, len(buf))) :]
    start = base + draw(st.integers(-1, offset - base + 1))
    return bytes(buf), max(start, 0)


@FUZZ
@given(fetched_buffers(), st.sampled_from([MAX, 100, 200]))
def test_the_c_fetch_loop_agrees_with_python_on_any_buffer(case: tuple[bytes, int], max_batch_bytes: int) -> None:
    buf, start = case
    fast, slow = both(lambda: decode_batches(buf, start_offset=start, max_batch_bytes=max_batch_bytes))
    assert fast == slow
    if fast[0] == "ok":  # type: ignore[index]
        assert all(type(r) is Record for r in fast[1])  # type: ignore[index]
    view = memoryview(bytearray(buf))
    assert both(lambda: decode_batches(view, start_offset=start, max_batch_bytes=max_batch_bytes)) == (fast, fast)


@pytest.mark.parametrize("at", [0, 8, 16, 17, 21, 23, 27, 35, 43, 57, 61, 70])
@pytest.mark.parametrize("reseal", [False, True])
def test_a_corrupt_batch_in_the_middle_of_a_fetch_fails_it_as_the_python_loop_does(at: int, reseal: bool) -> None:
    # Nothing read from disk is trusted: a damaged batch after many good ones still raises, with
    # the Python loop's message; never the good batches' records alone, never a wrong record.
    good = [seglog_batch(i, 1) for i in range(40)]
    middle = bytearray(seglog_batch(40, 3))
    middle[at] ^= 0x41
    if reseal:
        struct.pack_into(">I", middle, 17, google_crc32c.value(bytes(middle[21:])))
    buf = b"".join(good) + bytes(middle) + b"".join(seglog_batch(43 + i, 1) for i in range(10))
    fast, slow = both(lambda: decode_batches(buf, max_batch_bytes=MAX))
    assert fast == slow
    if not reseal:  # every byte of a batch is covered by its CRC or the offset rule
        assert fast[0] is CorruptRecordError  # type: ignore[index]


@st.composite
def placed_buffers(draw: st.DrawFn) -> tuple[bytes, int]:
    """Batches back to back, maybe a gap in the offsets, a cut tail, a damaged length; and the first's size."""
    parts = []
    offset = draw(st.integers(0, 2**63 - 100))
    for _ in range(draw(st.integers(1, 6))):
        count = draw(st.integers(1, 3))
        parts.append(bytearray(seglog_batch(offset, count)))
        offset += count + draw(st.sampled_from([0, 0, 0, 1, -1]))
        offset = min(max(offset, 0), 2**63 - 10)
    buf = bytearray(b"".join(parts))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(buf) - 1))
        buf[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        del buf[draw(st.integers(0, len(buf))) :]
    # A caller passes the size of a checked header's batch (at least 69): any from a header on.
    first = draw(st.one_of(st.just(len(parts[0])), st.just(0), st.integers(61, 200)))
    return bytes(buf), first


@FUZZ
@given(placed_buffers())
def test_whole_batches_length_in_c_agrees_with_python(case: tuple[bytes, int]) -> None:
    buf, first = case
    fast, slow = both(lambda: whole_batches_length(buf, first))
    assert fast == slow


@needs_c
def test_whole_batches_length_takes_the_c_loop() -> None:
    assert batch_module._fast is not None
    buf = b"".join(seglog_batch(i, 1) for i in range(30))
    first = len(seglog_batch(0, 1))
    assert batch_module._fast.whole_batches_length(buf, first) == len(buf)
    gap = buf[: first * 10] + seglog_batch(11, 1)  # offset 10 missing: the read ends before it
    assert batch_module._fast.whole_batches_length(gap, first) == first * 10
    assert batch_module._fast.whole_batches_length(buf, 3) is None  # below a header: Python decides
    with python_only():
        assert whole_batches_length(gap, first) == first * 10


@pytest.mark.parametrize("bits", [0x01, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80])
def test_an_attribute_bit_set_in_a_resealed_batch_reads_as_the_python_loop_reads_it(bits: int) -> None:
    # A codec, the control bit (Kafka's format only), a transactional batch without a producer
    # id, unknown bits: refused by header_problem; the timestamp-type bit changes what is read.
    middle = bytearray(seglog_batch(10, 3))
    middle[22] |= bits
    struct.pack_into(">I", middle, 17, google_crc32c.value(bytes(middle[21:])))
    buf = b"".join(seglog_batch(i, 1) for i in range(10)) + bytes(middle) + seglog_batch(13, 2)
    fast, slow = both(lambda: decode_batches(buf, max_batch_bytes=MAX))
    assert fast == slow
    assert (fast[0] == "ok") == (bits == 0x08)  # type: ignore[index]


@pytest.mark.parametrize("bits", [0x01, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80])
def test_an_attribute_bit_set_in_a_resealed_batch_reads_in_a_point_read_as_in_python(bits: int) -> None:
    # The one-batch reader (a point read, a time lookup's read) checks the header with the same rules as
    # the fetch loop: a transactional batch without a producer id, the control bit, a codec or an
    # unknown bit is refused, never served from C while Python refuses it.
    resealed = bytearray(seglog_batch(10, 3))
    resealed[22] |= bits
    struct.pack_into(">I", resealed, 17, google_crc32c.value(bytes(resealed[21:])))
    fast, slow = both(lambda: batch_module.decode_first_batch(bytes(resealed), start_offset=11))
    assert fast == slow
    assert (fast[0] == "ok") == (bits == 0x08)  # type: ignore[index]
    taken = batch_module.first_batch_records(bytes(resealed), 11, None)
    assert (taken is not None) == (bits == 0x08 and batch_module._fast is not None)


@pytest.mark.parametrize("length", [0, -5, -(2**31)])
def test_a_batch_length_that_is_not_positive_ends_the_whole_batches(length: int) -> None:
    first = seglog_batch(0, 2)
    second = bytearray(seglog_batch(2, 1))
    struct.pack_into(">i", second, 8, length)  # its base offset follows on: only the length is wrong
    buf = first + bytes(second) + seglog_batch(3, 1)
    fast, slow = both(lambda: whole_batches_length(buf, len(first)))
    assert fast == slow == ("ok", len(first))


def test_a_batch_ending_at_the_last_int64_offset_reads_as_the_python_loop_reads_it() -> None:
    # The offset after it is not an int64: the C loop leaves that batch, and what follows, to Python.
    top = 2**63 - 1
    last = seglog_batch(top - 2, 3)
    for buf in (seglog_batch(top - 5, 3) + last, seglog_batch(top - 5, 3) + last + seglog_batch(0, 1)):
        fast, slow = both(lambda b=buf: decode_batches(b, start_offset=top - 4, max_batch_bytes=MAX))
        assert fast == slow
    assert [r.offset for r in decode_batches(seglog_batch(top - 5, 3) + last, max_batch_bytes=MAX)] == list(
        range(top - 5, top + 1)
    )
