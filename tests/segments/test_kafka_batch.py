"""segments.kafka_batch: magic-2 header rules, the record walk (C and Python agree), reads, LogAppendTime."""

from __future__ import annotations

import struct

import pytest
from kafkahelpers import kafka_batch, records_of, reseal

from seglog.segments import kafka_batch as kb
from seglog.segments.batch import check_header, decode_batch, read_header, verify_crc
from seglog.segments.errors import CorruptRecordError


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
