"""segments.reader: the one reader of a segment's .log -- windows, bounds, formats, offset rules, stops."""

from __future__ import annotations

import struct
from collections.abc import Callable

import google_crc32c
import msgpack
import pytest
from kafkahelpers import kafka_batch, records_of, reseal

from seglog.segments import reader as reader_module
from seglog.segments.batch import (
    HEADER_SIZE,
    MAGIC,
    MAGIC_V1,
    ScanStop,
    TimestampType,
    encode_batch,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.reader import BatchReader, LocatedBatch
from seglog.segments.records import Record

MAX = 1 << 20


def enc(base: int, n: int = 3, value: bytes = b"v") -> bytes:
    records = [Record(value, None, 1_000 + base + i) for i in range(n)]
    return encode_batch(base, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)


def log_of(base: int, sizes: list[int]) -> tuple[bytes, list[int]]:
    """Batches of ``sizes`` records each from offset ``base``, back to back; and each batch's position."""
    out, positions, offset = b"", [], base
    for n in sizes:
        positions.append(len(out))
        out += enc(offset, n)
        offset += n
    return out, positions


class File:
    """A file in memory, read through ``pread``; counts the reads."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.reads: list[tuple[int, int]] = []

    def pread(self, position: int, size: int) -> bytes:
        self.reads.append((position, size))
        return self.data[position : position + size]


def read(data: bytes, base: int = 0, **options: object) -> tuple[BatchReader, list[LocatedBatch]]:
    options.setdefault("max_batch_bytes", MAX)
    r = BatchReader(File(data).pread, end=len(data), base_offset=base, **options)  # type: ignore[arg-type]
    return r, list(r)


def flip(data: bytes, at: int, mask: int = 1) -> bytes:
    out = bytearray(data)
    out[at] ^= mask
    return bytes(out)


def set_base_offset(data: bytes, position: int, base: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">q", out, position, base)
    return bytes(out)


BOTH = pytest.mark.parametrize("verify", [True, False], ids=["checked", "headers"])


@BOTH
@pytest.mark.parametrize("chunk", [61, 70, 100, 150, 1000, 1 << 20])
def test_batches_straddling_the_read_windows_are_read_whole(chunk: int, verify: bool) -> None:
    data, positions = log_of(12, [1, 5, 2, 40, 3])
    r, got = read(data, 12, chunk_bytes=chunk, verify=verify)
    assert [b.position for b in got] == positions
    assert [b.header.base_offset for b in got] == [12, 13, 18, 20, 60]
    assert (r.stop, r.position, r.next_offset, r.reason) == (ScanStop.END, len(data), 63, "")
    # A torn last batch: the reader stops at its start, and says so.
    r, got = read(data[:-20], 12, chunk_bytes=chunk, verify=verify)
    assert (len(got), r.position, r.stop) == (4, positions[-1], ScanStop.INCOMPLETE)
    assert "cut short" in r.reason
    # Fewer bytes than a header after the last whole batch.
    r, got = read(data[: positions[-1] + 30], 12, chunk_bytes=chunk, verify=verify)
    assert (len(got), r.position, r.stop, r.reason) == (4, positions[-1], ScanStop.INCOMPLETE, "a header is cut short")


def test_a_batch_larger_than_the_chunk_is_read_once_whole() -> None:
    data, _ = log_of(0, [1, 2000, 1])
    f = File(data)
    r = BatchReader(f.pread, end=len(data), base_offset=0, max_batch_bytes=MAX, chunk_bytes=4096)
    assert [b.header.record_count for b in r] == [1, 2000, 1] and r.stop is ScanStop.END
    assert all(size <= max(4096, len(data)) for _, size in f.reads)
    assert sum(size for _, size in f.reads) < 2 * len(data)


def test_a_large_window_starts_at_a_batch_instead_of_joining_the_cut_tail_to_the_next_read() -> None:
    # Joining the tail of one 4 MiB window to the next read copied every window once more (page by page,
    # into a fresh buffer): recovery scanned markedly slower than a loop of whole reads. The cut batch is
    # read again with the next window instead.
    chunk = reader_module._REREAD_FROM
    out, positions, offset = b"", [], 0
    while len(out) < 3 * chunk:
        positions.append(len(out))
        out += enc(offset, 50, b"v" * 100)
        offset += 50
    f = File(out)
    r = BatchReader(f.pread, end=len(out), base_offset=0, max_batch_bytes=MAX, chunk_bytes=chunk)
    assert [b.position for b in r] == positions and r.stop is ScanStop.END
    full = [(position, size) for position, size in f.reads if len(out) - position >= chunk]  # not the last
    assert len(full) == 3
    assert all(position in positions and size == chunk for position, size in full)


@BOTH
def test_a_batch_is_bounded_by_the_file_and_by_max_batch_bytes_before_its_body_is_read(verify: bool) -> None:
    data, positions = log_of(0, [2, 2])
    # The second header announces 1 MiB: more than the file holds.
    huge = bytearray(data)
    struct.pack_into(">i", huge, positions[1] + 8, (1 << 20) - 12)
    f = File(bytes(huge))
    r = BatchReader(f.pread, end=len(huge), base_offset=0, max_batch_bytes=4 << 20, verify=verify)
    assert len(list(r)) == 1 and r.stop is ScanStop.INCOMPLETE and r.position == positions[1]
    assert all(p + s <= len(huge) for p, s in f.reads), "read past the end of the file"
    # Above the topic's largest batch: corrupt, not a torn write, and no body read for it.
    f = File(bytes(huge))
    r = BatchReader(f.pread, end=len(huge), base_offset=0, max_batch_bytes=1 << 16, verify=verify)
    assert len(list(r)) == 1 and r.stop is ScanStop.CORRUPT and "exceeds the maximum batch size" in r.reason


@BOTH
def test_the_first_batch_has_the_base_offset_the_file_name_says(verify: bool) -> None:
    data, _ = log_of(100, [3, 3])
    assert read(data, 100, verify=verify)[0].stop is ScanStop.END
    r, got = read(data, 90, verify=verify)  # the file is named 90: misplaced
    assert (got, r.stop, r.position) == ([], ScanStop.CORRUPT, 0)
    assert "above the expected 90: offsets 90..99 missing" in r.reason
    r, got = read(data, 101, verify=verify)
    assert (got, r.stop) == ([], ScanStop.CORRUPT) and "below the expected 101" in r.reason


@BOTH
@pytest.mark.parametrize(("new_base", "words"), [(12, "above the expected 4"), (2, "below the expected 4")])
def test_a_changed_base_offset_stops_the_reader_at_that_batch(verify: bool, new_base: int, words: str) -> None:
    # The base offset is outside the CRC: the offset rule is what catches it, at the batch itself,
    # not at the one after it (which would keep the wrong offsets in the log).
    data, positions = log_of(0, [4, 4, 4, 4])
    r, got = read(set_base_offset(data, positions[1], new_base), verify=verify)
    assert [b.position for b in got] == positions[:1]
    assert (r.stop, r.position, r.next_offset) == (ScanStop.CORRUPT, positions[1], 4)
    assert words in r.reason


@BOTH
def test_a_walk_from_the_middle_takes_any_offset_of_the_segment_then_holds_them_to_follow_on(verify: bool) -> None:
    data, positions = log_of(50, [2, 3, 4])
    r, got = read(data, 50, start=positions[1], verify=verify)
    assert [b.header.base_offset for b in got] == [52, 55] and r.stop is ScanStop.END
    r, got = read(data, 53, start=positions[1], verify=verify)  # below the segment's base offset
    assert (got, r.stop) == ([], ScanStop.CORRUPT) and "below the segment's base offset 53" in r.reason
    r, got = read(data, 50, start=positions[1], first_offset=51, verify=verify)  # the caller knows better
    assert (got, r.stop) == ([], ScanStop.CORRUPT) and "above the expected 51" in r.reason
    gap = set_base_offset(data, positions[2], 60)
    r, got = read(gap, 50, start=positions[1], verify=verify)
    assert (len(got), r.stop) == (1, ScanStop.CORRUPT) and "offsets 55..59 missing" in r.reason


@BOTH
def test_offsets_past_the_int32_range_of_the_segment_stop_it_with_overflow(verify: bool) -> None:
    first = enc(0, 1)
    n = 2
    body = msgpack.packb([[0, 2**31 - 1], None, [None] * n, [b"v"] * n, None], use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, 2**31 - 1, 0, 0, -1, -1, -1, n) + body
    far = struct.pack(">qiibI", 1, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail
    r, got = read(first + far, verify=verify)
    assert (len(got), r.stop, r.position) == (1, ScanStop.OVERFLOW, len(first))
    assert "more than 2**31-1 above the segment's base offset 0" in r.reason


def v1_batch(base_offset: int, values: list[bytes]) -> bytes:
    body = msgpack.packb([[i, 0, None, v, []] for i, v in enumerate(values)], use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, len(values) - 1, 0, 0, -1, -1, -1, len(values)) + body
    return struct.pack(">qiibI", base_offset, 49 + len(body), -1, MAGIC_V1, google_crc32c.value(tail)) + tail


@BOTH
def test_formats_are_told_apart_by_their_magic_byte(verify: bool) -> None:
    good = enc(0, 2)
    # A whole, intact batch of format v1: unsupported (never cut), however large.
    for old in (v1_batch(2, [b"a", b"b"]), v1_batch(2, [bytes(3 << 20)])):
        r, got = read(good + old, verify=verify, chunk_bytes=4096)
        assert (len(got), r.stop, r.position) == (1, ScanStop.UNSUPPORTED, len(good))
        assert "seglog batch format v1" in r.reason and "not cut" in r.reason
    # The v1 magic byte on bytes whose CRC does not hold: garbage, corrupt.
    r, _ = read(good + flip(v1_batch(2, [b"a" * 20]), 70), verify=verify)
    assert r.stop is ScanStop.CORRUPT
    # An unknown magic byte: corrupt, with the header's own words.
    r, _ = read(good + bytes(16) + b"\x07" + bytes(60), verify=verify)
    assert r.stop is ScanStop.CORRUPT and "magic byte 0x07" in r.reason


@BOTH
def test_kafka_batches_are_read_between_seglog_batches_by_their_own_rules(verify: bool) -> None:
    # Magic 2 (Kafka's RecordBatch v2, stored by the wire server): its header rules, the shared CRC and
    # offset rules, one pass over both formats.
    assert reader_module.FORMATS[2].name == "Kafka RecordBatch v2"
    kafka = kafka_batch(2, records_of(3), "zstd")
    data = enc(0, 2) + kafka + enc(5, 1)
    r, got = read(data, verify=verify)
    assert [(b.header.magic, b.header.base_offset) for b in got] == [(MAGIC, 0), (2, 2), (MAGIC, 5)]
    assert r.stop is ScanStop.END
    if verify:  # a header walk leaves the CRC to batch_bytes, as for seglog's own batches
        r, got = read(enc(0, 2) + flip(kafka, 70) + enc(5, 1), verify=verify)
        assert (len(got), r.stop) == (1, ScanStop.CORRUPT) and "CRC" in r.reason
    r, got = read(enc(0, 2) + bytes(set_base_offset(kafka, 0, 3)), verify=verify)
    assert (len(got), r.stop) == (1, ScanStop.CORRUPT) and "above the expected 2" in r.reason
    # A record count that cannot fit the (uncompressed) records: a header lie, refused before the body.
    lying = bytearray(kafka_batch(2, records_of(3)))
    struct.pack_into(">i", lying, 23, 99)
    struct.pack_into(">i", lying, 57, 100)
    r, got = read(enc(0, 2) + reseal(lying), verify=verify)
    assert (len(got), r.stop) == (1, ScanStop.CORRUPT) and "record count 100" in r.reason


@BOTH
def test_a_limit_stops_before_the_batches_that_start_at_or_after_it(verify: bool) -> None:
    data, positions = log_of(0, [3, 3, 3, 3])
    r, got = read(data, limit=positions[2], verify=verify)
    assert (len(got), r.stop, r.position) == (2, ScanStop.LIMIT, positions[2])
    r, got = read(data, limit=positions[2] + 1, verify=verify)  # a batch that starts before it is read whole
    assert (len(got), r.stop, r.position) == (3, ScanStop.LIMIT, positions[3])
    r.raise_unless_complete()  # a limit is not damage


def test_raise_unless_complete_turns_any_early_stop_into_a_corrupt_record_error() -> None:
    data, positions = log_of(0, [3, 3])
    r, _ = read(data)
    r.raise_unless_complete()
    for damaged in (data[:-5], flip(data, positions[1] + 70), set_base_offset(data, positions[1], 9)):
        r, _ = read(damaged, path="x/00000000000000000000.log")
        with pytest.raises(CorruptRecordError, match=rf"00000000000000000000\.log: batch at position {positions[1]}"):
            r.raise_unless_complete()


def test_header_walks_read_headers_and_check_a_crc_only_for_the_bytes_asked_for() -> None:
    data = b"".join(enc(i * 100, 100, b"v" * 100) for i in range(3))  # ~10 KiB each: more than a header window
    positions = [0, len(data) // 3, 2 * len(data) // 3]
    damaged = flip(data, positions[1] + 100)  # a body byte of the middle batch
    f = File(damaged)
    r = BatchReader(f.pread, end=len(damaged), base_offset=0, max_batch_bytes=MAX, verify=False)
    got = list(r)
    assert len(got) == 3 and r.stop is ScanStop.END  # headers alone do not see the body's damage
    assert r.bytes_read < len(damaged)  # the bodies were skipped
    buf, at = r.batch_bytes(got[0])
    assert buf[at : at + got[0].header.size] == damaged[: positions[1]]
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        r.batch_bytes(got[1])
    # The checking walk sees it, and stops there.
    r, got = read(damaged)
    assert (len(got), r.stop, r.position) == (1, ScanStop.CORRUPT, positions[1]) and "CRC" in r.reason


def test_a_file_that_shrinks_while_read_ends_where_it_now_ends() -> None:
    # A live engine may truncate a file under an offline reader: a short read lowers the end.
    data, positions = log_of(0, [3, 3, 3])
    cut = positions[2]

    def shrinking(position: int, size: int) -> bytes:
        return data[position : min(position + size, cut)]

    for verify in (True, False):
        r = BatchReader(shrinking, end=len(data), base_offset=0, max_batch_bytes=MAX, chunk_bytes=128, verify=verify)
        assert len(list(r)) == 2 and (r.stop, r.position, r.end) == (ScanStop.END, cut, cut)


def test_progress_is_reported_as_windows_are_checked() -> None:
    data, _ = log_of(0, [5] * 50)
    seen: list[int] = []
    r = BatchReader(File(data).pread, end=len(data), base_offset=0, max_batch_bytes=MAX, chunk_bytes=512,
                    progress=seen.append)
    list(r)
    assert seen == sorted(seen) and seen[-1] == len(data) and len(seen) > 5


def test_a_reader_is_iterated_once() -> None:
    r, _ = read(enc(0))
    with pytest.raises(RuntimeError, match="once"):
        iter(r)


def test_every_stop_leaves_position_at_a_batch_boundary_recovery_can_cut_at() -> None:
    data, positions = log_of(7, [1, 2, 3, 4, 5])
    ends = {*positions, len(data)}
    for at in range(0, len(data), 7):
        for damaged in (data[:at], flip(data, at, 0x40)):
            for verify in (True, False):
                r, got = read(damaged, 7, verify=verify, chunk_bytes=97)
                assert r.position in ends and r.position == sum(b.header.size for b in got)
                assert r.stop is not None and (r.stop is ScanStop.END) == (r.position == len(damaged))


def _pread_counts(reader_factory: Callable[[File], BatchReader], data: bytes) -> int:
    f = File(data)
    list(reader_factory(f))
    return len(f.reads)


def test_a_checking_walk_reads_a_file_in_few_large_reads() -> None:
    data, _ = log_of(0, [3] * 2000)
    reads = _pread_counts(lambda f: BatchReader(f.pread, end=len(data), base_offset=0, max_batch_bytes=MAX,
                                                chunk_bytes=64 << 10), data)
    assert reads <= len(data) // (64 << 10) + 2
    assert HEADER_SIZE < 64 << 10
