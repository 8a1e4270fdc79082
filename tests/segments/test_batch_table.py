"""Batch tables and record tables (``seglog.segments.batch_table``) and how a segment uses them: a table only
says where to read; the bytes found there are checked against it, a cut forgets it, the budget bounds it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafkahelpers import kafka_batch
from seghelpers import SegmentFactory, append, both, python_only

from seglog.segments import batch as batch_module
from seglog.segments import batch_table as batch_table_module
from seglog.segments import segment as segment_module
from seglog.segments.batch import HEADER_SIZE, TimestampType, encode_batch, read_header
from seglog.segments.batch_table import (
    BatchTable,
    TableBudget,
    build_record_table,
    walk_batch_table,
)
from seglog.segments.errors import CorruptRecordError
from seglog.segments.fileio import WOULD_BLOCK
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment

BASE_TS = 1_700_000_000_000


def _batch(offset: int, count: int, value_bytes: int, *, tag: bytes = b"", stamps: list[int] | None = None) -> bytes:
    records = [
        Record(tag + b"%08d" % (offset + i) + b"v" * value_bytes, b"k%07d" % (offset + i),
               BASE_TS + offset + i if stamps is None else stamps[i])
        for i in range(count)
    ]
    return encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)


def _table(seg: LogSegment, offset: int = 0) -> None:
    # What the engine does on a segment's first read: the walk (here inline), installed.
    job = seg.batch_table_job(offset)
    assert job is not None
    seg.install_batch_table(job())


def _file_bytes(seg: LogSegment) -> bytes:
    return Path(seg.log_path).read_bytes()[: seg.size]


def _page_cache_reads(seg: LogSegment) -> bool:
    return bool(seg._log._page_cache_reads)


async def test_the_walk_tables_every_batch_and_stops_at_a_damaged_header(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    batches = [_batch(i * 3, 3, 20) for i in range(10)]
    await append(seg, batches)
    data = bytearray(_file_bytes(seg))
    build = walk_batch_table(lambda p, n: bytes(data[p : p + n]), 0, len(data), 0, 1000)
    assert list(build.last_offsets) == [i * 3 + 2 for i in range(10)] and build.end == len(data)
    sizes = [len(b) for b in batches]
    assert list(build.positions) == [sum(sizes[:i]) for i in range(10)]
    data[sum(sizes[:6]) + 16] = 0x01  # batch 6's magic
    damaged = walk_batch_table(lambda p, n: bytes(data[p : p + n]), 0, len(data), 0, 1000)
    assert len(damaged.positions) == 6 and damaged.end == sum(sizes[:6])
    assert len(walk_batch_table(lambda p, n: bytes(data[p : p + n]), 0, len(data), 0, 4).positions) == 4


def test_the_first_batch_reaching_a_timestamp_is_found_with_out_of_order_timestamps() -> None:
    rnd = random.Random(5)
    table = BatchTable(0)
    stamps = [rnd.randrange(1000) for _ in range(200)]
    for i, ts in enumerate(stamps):
        table.add(i * 100, 100, i, ts)
    for target in range(-1, 1002, 7):
        for start in (0, 50, 199):
            expected = next((i for i in range(start, 200) if stamps[i] >= target), 200)
            assert table.first_reaching(target, start) == expected


def test_the_budget_evicts_the_least_recently_used_and_refuses_what_can_never_fit() -> None:
    budget = TableBudget(100)
    dropped: list[str] = []
    assert budget.charge("a", 40, lambda: dropped.append("a"))
    assert budget.charge("b", 40, lambda: dropped.append("b"))
    budget.touch("a")
    assert budget.charge("c", 40, lambda: dropped.append("c"))
    assert dropped == ["b"] and budget.used_bytes == 80
    assert not budget.charge("d", 101, lambda: None)
    assert budget.grow("c", 20) and budget.used_bytes == 100
    assert not budget.grow("gone", 1)
    budget.release("a")
    assert budget.used_bytes == 60 and len(budget) == 1
    budget.set_limit(0)
    assert dropped == ["b", "c"] and budget.used_bytes == 0


def test_a_record_table_places_each_key_and_value() -> None:
    stamps = [BASE_TS + x for x in (5, 3, 9, 9, 1)]
    buf = _batch(40, 5, 30, stamps=stamps)
    header = read_header(buf)
    table = build_record_table(buf, 1000, header)
    assert table is not None and len(table) == 5 and not table.sorted
    for i in range(5):
        key_at, value_at = table.key_positions[i] - 1000, table.value_positions[i] - 1000
        assert buf[key_at : key_at + table.key_lengths[i]] == b"k%07d" % (40 + i)
        assert buf[value_at : value_at + table.value_lengths[i]] == b"%08d" % (40 + i) + b"v" * 30
    assert [table.first_at_or_after(BASE_TS + t, 0) for t in (0, 4, 6, 10)] == [0, 0, 2, 5]
    assert table.first_at_or_after(BASE_TS + 4, 3) == 3
    assert table.matches(buf[:61])
    damaged = bytearray(buf)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        build_record_table(damaged, 1000, header)


async def test_a_cut_forgets_the_tables_so_rewritten_bytes_are_never_served_from_them(
    make_segment: SegmentFactory,
) -> None:
    seg = await make_segment(0, index_interval_bytes=4096)
    await append(seg, [_batch(0, 100, 400)])
    await append(seg, [_batch(100, 100, 400)])
    _table(seg)
    got = seg.read_records_cached(150, 1)
    if not _page_cache_reads(seg):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    assert got is not None and got[0].value.startswith(b"00000150")  # type: ignore[union-attr]
    assert seg._record_tables and seg._batch_table is not None
    seg.truncate_to(100, now_ms=0)
    assert not seg._record_tables and seg._batch_table is None
    # The same offsets and sizes again, other bytes: a table kept from before the cut would serve the old ones.
    await append(seg, [_batch(100, 100, 399, tag=b"X")])
    _table(seg, 150)
    got = seg.read_records_cached(150, 1)
    assert got is not None and got[0].value == b"X00000150" + b"v" * 399


@pytest.mark.parametrize(
    ("count", "value_bytes", "offset", "key_near_header"),
    [
        pytest.param(100, 400, 50, True, id="header-and-key-in-one-read"),
        pytest.param(600, 60, 550, False, id="header-key-and-value-apart"),
    ],
)
async def test_a_batch_changed_under_its_record_table_is_not_served(
    make_segment: SegmentFactory, count: int, value_bytes: int, offset: int, key_near_header: bool
) -> None:
    seg = await make_segment(0, index_interval_bytes=4096)
    await append(seg, [_batch(0, count, value_bytes), _batch(count, 1, 10)])
    _table(seg)
    assert seg.read_records_cached(offset, 1) is not None or not _page_cache_reads(seg)
    if not _page_cache_reads(seg):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    records = seg._record_tables[0]
    key_end = records.key_positions[offset] + records.key_lengths[offset] - records.position
    assert (key_end <= segment_module._NEAR_KEY_BYTES) is key_near_header  # the read path this case is for
    assert seg.read_records_cached(offset, 1) is not None  # served from the table while the header matches
    with open(seg.log_path, "r+b") as f:  # another CRC field: the header no longer matches the table
        f.seek(17)
        f.write(b"\x00\x00\x00\x00")
    assert seg.read_records_cached(offset, 1) is None  # the blocking read then decides (and refuses the CRC)
    data = seg.read(offset, 1, min_one_message=True)
    assert data is not None and data is not WOULD_BLOCK
    with pytest.raises(CorruptRecordError):
        data.records()


async def test_the_cached_time_lookup_answers_as_the_blocking_one(make_segment: SegmentFactory) -> None:
    rnd = random.Random(3)
    seg = await make_segment(0, index_interval_bytes=256)
    offset = 0
    for count in [1, 3, 200, 1, 5, 120, 2] * 3:
        stamps = [BASE_TS + rnd.randrange(5000) for _ in range(count)]
        await append(seg, [_batch(offset, count, 300 if count > 100 else 10, stamps=stamps)])
        offset += count
    _table(seg)
    if not _page_cache_reads(seg):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    answered = 0
    for _ in range(300):
        ts, start = BASE_TS + rnd.randrange(-10, 5010), rnd.choice([0, 0, rnd.randrange(offset)])
        cached = seg.find_offset_by_timestamp_cached(ts, start)
        if cached is WOULD_BLOCK:
            continue
        answered += 1
        assert cached == seg.find_offset_by_timestamp(ts, start), (ts, start)
    assert answered > 250


def _record_at_time_both(
    buf: bytes | bytearray, base: int, last: int, ts: int, start: int
) -> tuple[Record | None, Record | None]:
    # record_at_time with the C module (when built) and its Python twin on the Python codec alone.
    fast = batch_module._fast
    c_got = None if fast is None else fast.record_at_time(Record, batch_module._crc_value, buf, base, last, ts, start)
    with python_only():
        py_got = batch_module.record_at_time_py(buf, base, last, ts, start)
    if fast is None:
        c_got = py_got
    return c_got, py_got


def test_the_one_call_time_lookup_of_a_tabled_batch_finds_what_the_python_lookup_finds() -> None:
    rnd = random.Random(11)
    for trial in range(80):
        count = rnd.choice([1, 2, 7, 40, 150])
        stamps = [BASE_TS + rnd.randrange(100) for _ in range(count)]  # out of order
        buf = _batch(500, count, rnd.randrange(0, 50), stamps=stamps)
        header = read_header(buf)
        for _ in range(10):
            ts, start = BASE_TS + rnd.randrange(-5, 105), 500 + rnd.randrange(count)
            c_got, py_got = _record_at_time_both(buf, 500, 500 + count - 1, ts, start)
            assert c_got == py_got and type(c_got) is type(py_got), trial
            expected = batch_module.find_timestamp(buf, 0, header, ts, start_offset=start)
            if expected is None:
                assert py_got is None
            else:
                assert py_got is not None and (py_got.timestamp, py_got.offset) == expected, trial
                assert py_got == batch_module.decode_batch(buf, 0, header, start_offset=py_got.offset, max_bytes=1)[0]


def test_the_one_call_time_lookup_returns_nothing_from_damaged_bytes_or_a_batch_the_table_does_not_name() -> None:
    count = 12
    buf = _batch(500, count, 30, stamps=[BASE_TS + i for i in range(count)])
    ts = BASE_TS + 5
    good, _ = _record_at_time_both(buf, 500, 511, ts, 500)
    assert good is not None and good.offset == 505
    # Every byte flipped, one at a time: the C call and its twin agree, and any answer is the true one
    # (bytes neither reads -- the leader epoch -- leave it; everything else is refused).
    for at in range(len(buf)):
        damaged = bytearray(buf)
        damaged[at] ^= 0x40
        c_got, py_got = _record_at_time_both(damaged, 500, 511, ts, 500)
        assert c_got == py_got, at
        assert py_got is None or (12 <= at < 16 and py_got == good), at
    # The batch must be the one the table names: its base offset, last offset and length.
    assert _record_at_time_both(buf, 499, 511, ts, 500) == (None, None)
    assert _record_at_time_both(buf, 500, 512, ts, 500) == (None, None)
    assert _record_at_time_both(buf + b"\0", 500, 511, ts, 500) == (None, None)
    assert _record_at_time_both(buf[:-1], 500, 511, ts, 500) == (None, None)
    assert _record_at_time_both(buf[:60], 500, 511, ts, 500) == (None, None)
    # No record qualifies: after the last timestamp, or a start beyond the batch.
    assert _record_at_time_both(buf, 500, 511, BASE_TS + count, 500) == (None, None)
    assert _record_at_time_both(buf, 500, 511, ts, 512) == (None, None)
    # A control batch (a transaction marker) answers no time lookup here.
    control = bytearray(buf)
    control[22] |= batch_module.CONTROL_BIT
    assert _record_at_time_both(control, 500, 511, ts, 500) == (None, None)


def test_a_walk_stops_after_its_byte_limit_and_the_next_goes_on() -> None:
    batches = [_batch(i * 2, 2, 30) for i in range(20)]
    data = b"".join(batches)
    size = len(batches[0])
    first = walk_batch_table(lambda p, n: data[p : p + n], 0, len(data), 0, 1000, max_bytes=5 * size)
    assert first.complete and len(first.positions) == 5 and first.end == 5 * size
    table = BatchTable(0)
    assert table.extend(first)
    rest = walk_batch_table(lambda p, n: data[p : p + n], table.end, len(data), table.next_offset, 1000)
    assert rest.complete and table.extend(rest) and table.end == len(data) and len(table) == 20
    assert not table.extend(rest)  # it no longer begins at the table's end
    capped = walk_batch_table(lambda p, n: data[p : p + n], 0, len(data), 0, 3)
    assert not capped.complete and len(capped.positions) == 3


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=st.lists(st.tuples(st.booleans(), st.integers(1, 12), st.integers(0, 300)), min_size=1, max_size=30),
    damage=st.one_of(st.none(), st.tuples(st.integers(0, 29), st.integers(0, 1 << 16), st.integers(1, 255))),
    gap=st.one_of(st.none(), st.integers(0, 29)),
    window=st.integers(61, 4096),
    max_entries=st.integers(0, 40),
    max_bytes=st.integers(1, 1 << 16),
    start_batch=st.integers(0, 5),
)
def test_the_c_walk_tables_exactly_what_the_python_walk_tables(
    shapes: list[tuple[bool, int, int]],
    damage: tuple[int, int, int] | None,
    gap: int | None,
    window: int,
    max_entries: int,
    max_bytes: int,
    start_batch: int,
) -> None:
    # Seglog and Kafka batches back to back (a log written by both front ends), maybe one byte damaged or
    # an offset skipped, read through windows of any size (headers across a window's end), from any batch on.
    parts, offset = [], 0
    for n, (kafka, count, value_bytes) in enumerate(shapes):
        offset += n == gap
        records = [Record(b"v" * value_bytes, None, BASE_TS + offset + i) for i in range(count)]
        if kafka:
            parts.append(kafka_batch(offset, records))
        else:
            parts.append(encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0))
        offset += count
    data = bytearray(b"".join(parts))
    if damage is not None:  # mostly a header byte (what the walk reads), else anywhere in a batch
        which, at, bits = damage
        which %= len(parts)
        at = at % HEADER_SIZE if at % 4 else at % len(parts[which])
        data[sum(len(part) for part in parts[:which]) + at] ^= bits
    start_batch = min(start_batch, len(parts) - 1)
    start = sum(len(part) for part in parts[:start_batch])
    expected = sum(count for _, count, _ in shapes[:start_batch]) + (gap is not None and gap < start_batch)
    saved = batch_table_module._WALK_WINDOW
    batch_table_module._WALK_WINDOW = window  # type: ignore[misc]  # Final: small windows, many refills
    try:
        fast, slow = both(
            lambda: walk_batch_table(lambda p, n: bytes(data[p : p + n]), start, len(data), expected, max_entries,
                                     max_bytes)
        )
    finally:
        batch_table_module._WALK_WINDOW = saved  # type: ignore[misc]
    assert fast == slow
    if damage is None and gap is None and max_entries >= len(parts) and max_bytes >= len(data):
        assert fast[0] == "ok" and fast[1].end == len(data)  # type: ignore[index]


def test_the_c_walk_is_what_a_walk_uses_with_the_c_module() -> None:
    # The comparison above means something only if the C loop runs: it tables these without the Python loop.
    data = b"".join(_batch(i * 2, 2, 30) for i in range(50))
    calls = 0
    real = batch_module.read_header

    def counting(buf: bytes | bytearray | memoryview, position: int = 0) -> object:
        nonlocal calls
        calls += 1
        return real(buf, position)

    if batch_table_module._fast is None:
        pytest.skip("the C module is not built (SEGLOG_PURE_PYTHON): the Python walk is the only one")
    saved = batch_table_module.read_header
    batch_table_module.read_header = counting  # type: ignore[assignment]
    try:
        build = walk_batch_table(lambda p, n: data[p : p + n], 0, len(data), 0, 1000)
    finally:
        batch_table_module.read_header = saved
    assert len(build.positions) == 50 and build.end == len(data) and calls == 0


async def _partly_tabled(
    make_segment: SegmentFactory, monkeypatch: pytest.MonkeyPatch
) -> tuple[LogSegment, BatchTable]:
    """40 one-record batches of ~270 B, walked at most 2000 B at a time: the first read tables a part only."""
    monkeypatch.setattr(LogSegment, "_walk_max_bytes", 2000)
    seg = await make_segment(0, index_interval_bytes=4096)
    await append(seg, [_batch(i, 1, 200) for i in range(40)])
    _table(seg, 0)
    table = seg._batch_table
    assert table is not None and 0 < len(table) < 40
    return seg, table


async def test_a_segment_is_tabled_a_part_per_read(
    make_segment: SegmentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seg, table = await _partly_tabled(make_segment, monkeypatch)
    assert seg.batch_table_job(0) is None  # offset 0 is tabled already
    while len(table) < 40:
        before = len(table)
        _table(seg, 39)
        assert len(table) > before
    assert seg.batch_table_job(39) is None


async def test_a_larger_read_of_a_record_table_batch_keeps_its_table(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0, index_interval_bytes=4096)
    await append(seg, [_batch(0, 100, 400), _batch(100, 1, 10)])
    _table(seg)
    got = seg.read_records_cached(50, 1)
    if not _page_cache_reads(seg):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    assert got is not None and len(got) == 1 and seg._record_tables
    records = seg._record_tables[0]
    more = seg.read_records_cached(50, 2000)
    assert more is not None and [r.offset for r in more] == [50, 51, 52, 53, 54]
    assert seg._record_tables.get(0) is records


async def test_a_time_lookup_is_answered_from_a_partial_table_only_when_it_reaches_the_timestamp(
    make_segment: SegmentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    seg, table = await _partly_tabled(make_segment, monkeypatch)
    if not _page_cache_reads(seg):
        pytest.skip("this file system has no page-cache-only reads (RWF_NOWAIT)")
    assert seg.find_offset_by_timestamp_cached(BASE_TS + 2, 0) == seg.find_offset_by_timestamp(BASE_TS + 2, 0)
    assert seg.find_offset_by_timestamp_cached(BASE_TS + 39, 0) is WOULD_BLOCK  # maybe in the untabled rest
    assert seg.batch_table_job(0) is None  # a read of offset 0 is served ...
    while (job := seg.batch_table_job(0, whole=True)) is not None:  # ... a time lookup tables the rest
        seg.install_batch_table(job())
    assert len(table) == 40
    assert seg.find_offset_by_timestamp_cached(BASE_TS + 39, 0) == seg.find_offset_by_timestamp(BASE_TS + 39, 0)
    assert seg.find_offset_by_timestamp_cached(BASE_TS + 40, 0) is None
