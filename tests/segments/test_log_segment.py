"""LogSegment against Kafka's LogSegmentTest scenarios and D-1..D-6.

Kafka's record helper puts each record in its own shallow batch with timestamp
offset*10; `batch(offset, *values)` here builds ONE batch of several records,
so where a Kafka scenario depends on per-record positions, one batch per record
is appended. Skipped on purpose: LS-15 (transaction markers) and LS-16 (leader
epochs), which seglog does not write; LS-22 (appendFromFile, no such API; the
overflow rule it checks is tested by test_overflow_is_checked_before_writing).
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from seghelpers import SegmentFactory, append, batch, size_of

import seglog.segments.batch as batch_module
from seglog.engine.log import segment_append
from seglog.indexes.errors import ClosedError, StorageError
from seglog.segments import fileio
from seglog.segments.batch import TimestampType, encode_batch, encode_batch_parts, read_header
from seglog.segments.errors import CorruptRecordError, SegmentOffsetOverflowError
from seglog.segments.faults import FailingOps
from seglog.segments.records import Record
from seglog.segments.segment import FIRST_BATCH_TIMESTAMP_UNKNOWN, LogOffsetMetadata, LogSegment, RollParams

INT_MAX = 2**31 - 1


async def values_read(seg: LogSegment, offset: int, max_bytes: int, **kw: object) -> list[tuple[int, bytes]] | None:
    got = seg.read(offset, max_bytes, **kw)  # type: ignore[arg-type]
    if got is None:
        return None
    return [(r.offset, r.value or b"") for r in got.records()]


@pytest.mark.parametrize(
    ("base", "last"),
    [(0, 2**31), (1, 0), (100, 10), (2**31, 0), (2**31, 2**32)],  # LS-1 (negative offsets cannot be encoded)
)
async def test_ls1_offset_overflow_on_append(make_segment: SegmentFactory, base: int, last: int) -> None:
    seg = await make_segment(base)
    with pytest.raises(SegmentOffsetOverflowError, match="cannot be stored relative to base offset"):
        await append(seg, [batch(last, "hello")])
    assert seg.size == 0


async def test_overflow_is_checked_before_writing(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    with pytest.raises(SegmentOffsetOverflowError):
        await append(seg, [batch(0, "ok"), batch(INT_MAX + 5, "too far")])
    assert seg.size == 0 and seg.read_next_offset() == 0
    await append(seg, [batch(0, "ok"), batch(INT_MAX, "last one that fits")])
    assert seg.read_next_offset() == INT_MAX + 1
    assert not seg.has_overflow()


async def test_ls2_read_on_empty_segment(make_segment: SegmentFactory) -> None:
    seg = await make_segment(40)
    assert seg.read(40, 300) is None


# LS-3 and LS-5 (Kafka: a read before the first offset, or from a gap, returns the next batch) hold
# for compacted Kafka logs; seglog's offsets follow on (docs/FORMAT.md §2.3 rule 7), so a segment
# whose first batch is not at its base offset, or with a gap between batches, is damaged: a read
# refuses it rather than serve records at offsets other than the ones asked for.
async def test_ls3_a_first_batch_above_the_segment_base_offset_is_refused_when_read(
    make_segment: SegmentFactory,
) -> None:
    seg = await make_segment(40)
    await append(seg, [batch(50, "hello", "there", "little", "bee")])
    with pytest.raises(CorruptRecordError, match=r"offsets 40\.\.49 missing"):
        seg.read(41, 300)


async def test_ls4_read_after_last_offset(make_segment: SegmentFactory) -> None:
    seg = await make_segment(50)
    await append(seg, [batch(50, "hello", "there")])
    assert seg.read(52, 200) is None


async def test_ls5_a_gap_between_batches_is_refused_when_read(make_segment: SegmentFactory) -> None:
    seg = await make_segment(50)
    await append(seg, [batch(50, "hello", "there")])
    await append(seg, [batch(60, "alpha", "beta")])
    with pytest.raises(CorruptRecordError, match=r"offsets 52\.\.59 missing"):
        seg.read(55, 200)


async def test_ls6_read_offset_metadata_with_max_bytes_1(make_segment: SegmentFactory) -> None:
    seg = await make_segment(50)
    first, second = batch(50, "hello"), batch(51, "there")
    await append(seg, [first])
    await append(seg, [second])
    for offset, position in ((48, 0), (50, 0), (51, size_of(first))):
        got = seg.read(offset, 1)
        assert got is not None
        assert got.offset_metadata == LogOffsetMetadata(offset, 50, position)
        assert (got.data, got.first_entry_incomplete) == (b"", True)
    assert seg.read(52, 1) is None
    assert seg.read(53, 1) is None


async def test_read_min_one_message_max_position_and_whole_batches(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    b0, b1, b2 = batch(0, "a" * 100), batch(1, "b" * 100), batch(2, "c" * 100)
    await append(seg, [b0, b1, b2])
    got = seg.read(0, 10, min_one_message=True)
    assert got is not None and got.data == b0  # at least one whole batch
    got = seg.read(0, len(b0) + len(b1) - 1)
    assert got is not None and got.data == b0  # never a partial batch
    got = seg.read(1, 10_000, max_position=len(b0) + len(b1))
    assert got is not None and got.data == b1
    got = seg.read(0, 0)
    assert got is not None and (got.data, got.first_entry_incomplete) == (b"", False)
    with pytest.raises(ValueError, match="max_bytes"):
        seg.read(0, -1)


async def test_ls7_truncate_loop(make_segment: SegmentFactory) -> None:
    seg = await make_segment(40)
    offset = 40
    for _ in range(30):
        await append(seg, [batch(offset, "hello")])
        await append(seg, [batch(offset + 1, "hello")])
        assert [o for o, _ in await values_read(seg, offset, 10_000) or []] == [offset, offset + 1]
        assert seg.truncate_to(offset + 1, now_ms=0) == size_of(batch(offset + 1, "hello"))
        assert [o for o, _ in await values_read(seg, offset, 10_000) or []] == [offset]
        offset += 1


async def test_ls8_truncate_reopened_empty_segment(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, now_ms=0)
    seg.sanity_check()  # loads (creates) both indexes
    seg.close()
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 0  # trimmed on close
    seg = await make_segment(0, now_ms=1000, file_already_exists=True)
    params = RollParams(300_000, INT_MAX, -1, 100, 1024, 1500)
    assert seg.should_roll(params)  # a reopened index is exactly as long as its entries: full
    seg.truncate_to(57, now_ms=1500)
    assert seg.time_waited_for_roll(1500, -1) == 0
    assert not seg.should_roll(params)  # indexes resized back to max_index_size
    assert not seg.should_roll(params._replace(now_ms=1500 + 300_001))  # empty: never rolls for time
    assert seg.time_waited_for_roll(1500 + 300_001, -1) == 300_001
    assert seg.should_roll(params._replace(max_offset_in_messages=INT_MAX + 200))


async def test_ls9_reload_largest_timestamp_and_next_offset_after_truncation(make_segment: SegmentFactory) -> None:
    one = size_of(batch(40, "x"))
    seg = await make_segment(40, index_interval_bytes=2 * one - 1)
    for offset in range(40, 70):
        await append(seg, [batch(offset, "x")])
    assert seg.read_next_offset() == 70
    time_index = (seg._indexes())[1]
    assert time_index.entries == 14  # entries on appends #3, #5, ..., #29
    seg.truncate_to(41, now_ms=0)
    assert time_index.entries == 0
    assert seg.largest_timestamp() == 400
    assert seg.read_next_offset() == 41


async def test_ls10_truncate_full_segment(make_segment: SegmentFactory) -> None:
    seg = await make_segment(40, now_ms=1000)
    first = batch(40, "hello", "there", ts=1000)
    await append(seg, [first])
    assert seg.time_waited_for_roll(1500, 1500) == 500
    seg.truncate_to(0, now_ms=1500)
    assert seg.size == 0 and seg.time_waited_for_roll(1500, -1) == 0
    assert not seg.should_roll(RollParams(300_000, INT_MAX, 1500, 41, 100, 1500))
    assert seg.read(0, 1024) is None
    await append(seg, [first])
    assert seg.read_next_offset() == 42


async def test_ls11_find_offset_by_timestamp(make_segment: SegmentFactory) -> None:
    one = size_of(batch(40, "x"))
    seg = await make_segment(40, index_interval_bytes=2 * one - 1)
    for i in range(40, 50):
        await append(seg, [batch(i, "x")])
    assert seg.largest_timestamp() == 490
    expected = {420: 42, 421: 43, 430: 43, 431: 44, 491: None, 401: 41, 399: 40}
    for ts, offset in expected.items():
        hit = seg.find_offset_by_timestamp(ts)
        assert (hit.offset if hit else None) == offset, ts
    hit = seg.find_offset_by_timestamp(420)
    assert hit is not None and hit.timestamp == 420
    hit = seg.find_offset_by_timestamp(0, starting_offset=45)
    assert hit is not None and hit.offset == 45


async def test_find_offset_by_timestamp_with_out_of_order_timestamps(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0, index_interval_bytes=0)
    # (offset, ts): the earliest offset with ts >= target, not the first in timestamp order.
    stamps = [50, 10, 90, 20, 70, 30, 95, 5]
    for offset, ts in enumerate(stamps):
        await append(seg, [encode_batch(offset, [Record(b"v", timestamp=ts)],
                                       timestamp_type=TimestampType.CREATE_TIME, now_ms=0)])
    for target in range(0, 100, 3):
        want = next((o for o, t in enumerate(stamps) if t >= target), None)
        hit = seg.find_offset_by_timestamp(target)
        assert (hit.offset if hit else None) == want, target
        want = next((o for o, t in enumerate(stamps) if t >= target and o >= 3), None)
        hit = seg.find_offset_by_timestamp(target, starting_offset=3)
        assert (hit.offset if hit else None) == want, target


async def test_ls12_next_offset(make_segment: SegmentFactory) -> None:
    seg = await make_segment(40)
    assert seg.read_next_offset() == 40
    await append(seg, [batch(50, "hello", "there", "you")])
    assert seg.read_next_offset() == 53


async def test_next_offset_of_a_reopened_segment_is_read_from_the_log(
    make_segment: SegmentFactory,
) -> None:
    seg = await make_segment(0, index_interval_bytes=0)
    for i in range(0, 30, 3):
        await append(seg, [batch(i, "a", "b", "c")])
    seg.close()
    seg = await make_segment(0, file_already_exists=True)
    assert seg.read_next_offset() == 30


async def test_ls13_change_file_suffixes(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(40)
    old = [seg.log_path, seg.offset_index_path, seg.time_index_path, seg.txn_index_path]
    assert not seg.offset_index_path.exists() and not seg.time_index_path.exists()
    seg.change_file_suffixes("", ".deleted")
    new = [seg.log_path, seg.offset_index_path, seg.time_index_path, seg.txn_index_path]
    assert [str(p) for p in new] == [str(p) + ".deleted" for p in old]
    assert seg.has_suffix(".deleted") and seg.log_path.exists() and not old[0].exists()
    await append(seg, [batch(40, "x")])  # appends follow the renamed file
    assert not seg.offset_index_path.exists()  # one batch: no index entry, no index file
    assert seg.find_offset_by_timestamp(0) is not None  # loads the indexes: created under the new names
    assert seg.offset_index_path.exists() and seg.time_index_path.exists()
    with pytest.raises(ValueError, match="does not end with"):
        seg.change_file_suffixes(".cleaned", "")


async def test_ls14_recovery_fixes_corrupt_offset_index(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, index_interval_bytes=10)
    for i in range(100):
        await append(seg, [batch(i, "x")])
    entries_before = (seg._indexes())[0].entries
    seg.close()
    index = tmp_path / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[5:] = bytes((i * 131 + 7) % 256 for i in range(len(data) - 5))
    index.write_bytes(bytes(data))
    seg = await make_segment(0, index_interval_bytes=10, file_already_exists=True)
    assert seg.recover(max_batch_bytes=1 << 20) == 0
    assert (seg._indexes())[0].entries == entries_before
    for i in range(100):
        got = seg.read(i, 1, min_one_message=True)
        assert got is not None and got.records()[0].offset == i


async def test_ls17_recovery_fixes_corrupt_time_index(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, index_interval_bytes=10)
    for i in range(100):
        await append(seg, [batch(i, "x")])
    seg.close()
    index = tmp_path / "00000000000000000000.timeindex"
    data = bytearray(index.read_bytes())
    data[5:] = bytes((i * 97 + 3) % 256 for i in range(len(data) - 5))
    index.write_bytes(bytes(data))
    seg = await make_segment(0, index_interval_bytes=10, file_already_exists=True)
    seg.recover(max_batch_bytes=1 << 20)
    for i in range(100):
        hit = seg.find_offset_by_timestamp(i * 10)
        assert hit is not None and hit.offset == i
        if i < 99:
            hit = seg.find_offset_by_timestamp(i * 10 + 1)
            assert hit is not None and hit.offset == i + 1


@pytest.mark.parametrize("seed", range(10))
async def test_ls18_recovery_with_corrupt_log(make_segment: SegmentFactory, tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    seg = await make_segment(0)
    positions = []
    for i in range(20):
        positions.append(seg.size)
        await append(seg, [batch(i, f"record-{i}")])
    seg.close()
    k = rng.randrange(20)
    log = tmp_path / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    start = positions[k] + rng.randrange(15)
    data[start:] = rng.randbytes(len(data) - start)
    log.write_bytes(bytes(data))
    seg = await make_segment(0, file_already_exists=True)
    assert seg.recover(max_batch_bytes=1 << 20) == len(data) - positions[k]
    assert seg.size == positions[k]
    got = seg.read(0, 1 << 20)
    assert ([r.offset for r in got.records()] if got else []) == list(range(k))
    assert seg.read_next_offset() == k


async def test_ls19_ls20_preallocated_segment(make_segment: SegmentFactory, tmp_path: Path) -> None:
    prealloc = 8 * 1024 * 1024  # Kafka's test uses 512 MiB; the behaviour does not depend on the size
    seg = await make_segment(50, preallocate_bytes=prealloc)
    await append(seg, [batch(50, "hello", "there")])
    await append(seg, [batch(52, "alpha", "beta")])
    assert await values_read(seg, 52, 200) == [(52, b"alpha"), (53, b"beta")]
    log = tmp_path / "00000000000000000050.log"
    assert log.stat().st_size == prealloc
    size = seg.size
    seg.close()
    assert log.stat().st_size == size
    seg = await make_segment(50, file_already_exists=True, preallocate_bytes=prealloc)
    assert seg.size == size == log.stat().st_size
    assert await values_read(seg, 52, 200) == [(52, b"alpha"), (53, b"beta")]


async def test_crash_with_a_preallocated_tail_is_cut_by_recovery(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, preallocate_bytes=1 << 20)
    await append(seg, [batch(0, "a", "b")])
    size = seg.size
    log = tmp_path / "00000000000000000000.log"
    seg.flush()
    # "Crash": a second handle on the same files sees the untrimmed, zero-filled file.
    crashed = await make_segment(0, file_already_exists=True, directory=tmp_path)
    assert crashed.size == 1 << 20
    assert crashed.recover(max_batch_bytes=1 << 20) == (1 << 20) - size
    assert log.stat().st_size == size
    assert await values_read(crashed, 0, 1000) == [(0, b"a"), (1, b"b")]


async def test_ls21_truncate_to_an_offset_inside_a_batch(make_segment: SegmentFactory) -> None:
    # Kafka's LS-21 cuts at an offset in a gap; seglog has none (offsets follow on): the cut here
    # falls inside a batch, which goes whole.
    seg = await make_segment(40)
    await append(seg, [batch(40, "first message")])
    await append(seg, [batch(41, "message", "after")])
    seg.truncate_to(42, now_ms=0)
    assert await values_read(seg, 0, 1000) == [(40, b"first message")]
    assert seg.truncate_to(1000, now_ms=0) == 0  # beyond the segment: nothing changes


async def test_ls23_first_batch_timestamp(make_segment: SegmentFactory) -> None:
    seg = await make_segment(1)
    assert seg.first_batch_timestamp == FIRST_BATCH_TIMESTAMP_UNKNOWN == 2**63 - 1
    await append(seg, [batch(1, "x", ts=1000)])
    assert seg.first_batch_timestamp == 1000
    seg.close()
    reopened = LogSegment.open(
        seg.log_path.parent, 1, max_index_size=1000, index_interval_bytes=10, roll_jitter_ms=0, now_ms=0,
        file_already_exists=True,
    )
    with reopened:
        assert reopened.first_batch_timestamp == 1000


async def test_ls24_read_up_to_a_max_offset(make_segment: SegmentFactory) -> None:
    seg = await make_segment(50)
    for offset, value in ((50, "hello"), (51, "there"), (52, "beautiful")):
        await append(seg, [batch(offset, value)])
    for offset in (50, 51, 52):
        got = seg.read(offset, 1024)
        assert got is not None
        assert [r.offset for r in got.records(max_offset=offset + 1)] == [offset]


async def test_d1_index_interval_rule(make_segment: SegmentFactory) -> None:
    size = size_of(batch(0, "x"))
    interval = size * 5 // 3  # D-1's 100 bytes for 60-byte batches: between one and two batches
    seg = await make_segment(0, index_interval_bytes=interval)
    for i in range(6):
        await append(seg, [batch(i, "x")])
    offset_index = (seg._indexes())[0]
    assert [offset_index.entry(n) for n in range(offset_index.entries)] == [(2, 2 * size), (4, 4 * size)]


async def test_index_entries_of_a_grouped_append_follow_the_same_rule(make_segment: SegmentFactory) -> None:
    size = size_of(batch(0, "x"))
    one_by_one = await make_segment(0, index_interval_bytes=size * 5 // 3, directory=None)
    for i in range(9):
        await append(one_by_one, [batch(i, "x")])
    grouped = await make_segment(100, index_interval_bytes=size * 5 // 3)
    await append(grouped, [batch(100 + i, "x") for i in range(9)])
    a, b = (one_by_one._indexes())[0], (grouped._indexes())[0]
    assert [(o, p) for o, p in (a.entry(n) for n in range(a.entries))] == [
        (o - 100, p) for o, p in (b.entry(n) for n in range(b.entries))
    ]


async def test_d2_should_roll_on_size(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    await append(seg, [batch(0, "x" * 50)])
    limit = seg.size + 100
    assert seg.should_roll(RollParams(10**9, limit, 0, 1, 101, 0))
    assert not seg.should_roll(RollParams(10**9, limit, 0, 1, 100, 0))


async def test_d3_should_roll_on_time_with_jitter(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0, roll_jitter_ms=200)
    await append(seg, [batch(0, "x", ts=5000)])
    assert not seg.should_roll(RollParams(1000, INT_MAX, 5800, 1, 10, 0))
    assert seg.should_roll(RollParams(1000, INT_MAX, 5801, 1, 10, 0))


async def test_d4_empty_segment_uses_wall_clock_and_never_rolls_for_time(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0, now_ms=10_000)
    assert seg.time_waited_for_roll(12_000, -1) == 2000
    assert not seg.should_roll(RollParams(1000, INT_MAX, -1, 0, 10, 12_000))


async def test_d5_should_roll_when_an_index_is_full(make_segment: SegmentFactory) -> None:
    # max_index_size 36: time index 3 slots, full at 2 entries (the last is reserved).
    seg = await make_segment(0, index_interval_bytes=0, max_index_size=36)
    params = RollParams(10**9, INT_MAX, 0, 10, 10, 0)
    for i in range(3):
        assert not seg.should_roll(params)
        await append(seg, [batch(i, "x", ts=i)])
    offset_index, time_index = seg._indexes()
    assert (offset_index.entries, time_index.entries, time_index.is_full) == (2, 2, True)
    assert seg.should_roll(params)
    # max_index_size 48: the offset index (6 slots) fills first when timestamps do not grow.
    seg2 = await make_segment(100, index_interval_bytes=0, max_index_size=48)
    for i in range(7):
        await append(seg2, [batch(100 + i, "x", ts=7)])
    offset_index, time_index = seg2._indexes()
    assert offset_index.is_full and not time_index.is_full
    assert seg2.should_roll(params._replace(max_offset_in_messages=107))
    await append(seg2, [batch(107, "x", ts=8)])  # a full index takes no more entries; the append works
    assert offset_index.entries == 6


async def test_d6_should_roll_on_relative_offset_overflow(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    params = RollParams(10**9, INT_MAX, 0, 2**31, 10, 0)
    assert seg.should_roll(params)
    assert not seg.should_roll(params._replace(max_offset_in_messages=2**31 - 1))


async def test_reopened_segment_is_full_until_its_indexes_are_resized(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0, index_interval_bytes=0)
    for i in range(5):
        await append(seg, [batch(i, "x")])
    seg.close()
    seg = await make_segment(0, index_interval_bytes=0, file_already_exists=True)
    params = RollParams(10**9, INT_MAX, 0, 5, 10, 0)
    assert seg.should_roll(params)
    seg.resize_indexes(1000)
    assert not seg.should_roll(params)
    await append(seg, [batch(5, "x")])  # the byte counter restarts at 0 on open (Kafka): no entry yet
    await append(seg, [batch(6, "x")])
    assert (seg._indexes())[0].entries == 5


async def test_on_become_inactive_trims_and_writes_the_last_time_entry(
    make_segment: SegmentFactory, tmp_path: Path
) -> None:
    seg = await make_segment(0, index_interval_bytes=1 << 20, preallocate_bytes=1 << 16)
    await append(seg, [batch(0, "a", ts=100)])
    await append(seg, [batch(1, "b", ts=300)])
    seg.on_become_inactive()
    assert (tmp_path / "00000000000000000000.index").stat().st_size == 0
    assert (tmp_path / "00000000000000000000.timeindex").stat().st_size == 12  # (300, 1)
    assert (tmp_path / "00000000000000000000.log").stat().st_size == seg.size
    assert (seg.read_max_timestamp_and_offset_so_far()) == (300, 1)
    assert seg.largest_record_timestamp() == 300


async def test_close_writes_the_final_time_index_entry(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, index_interval_bytes=1 << 20)
    await append(seg, [batch(0, "a", ts=100), batch(1, "b", ts=50)])
    seg.close()
    seg.close()
    assert (tmp_path / "00000000000000000000.timeindex").read_bytes() == (100).to_bytes(8, "big") + bytes(4)
    with pytest.raises(ClosedError, match="closed"):
        await append(seg, [batch(2, "c")])
    with pytest.raises(ClosedError):
        seg.read(0, 100)


async def test_largest_timestamp_falls_back_to_mtime(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    assert seg.largest_record_timestamp() is None
    assert seg.largest_timestamp() > 1_600_000_000_000


async def test_delete_removes_every_file(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0, index_interval_bytes=0)
    for i in range(3):
        await append(seg, [batch(i, "x")])
    assert sorted(await fileio.list_dir(tmp_path)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"
    ]
    seg.delete()
    assert await fileio.list_dir(tmp_path) == []
    seg.close()  # idempotent after delete


async def test_read_only_segment(make_segment: SegmentFactory, tmp_path: Path) -> None:
    seg = await make_segment(0)
    await append(seg, [batch(0, "a", "b")])
    seg.close()
    (tmp_path / "00000000000000000000.index").unlink(missing_ok=True)
    (tmp_path / "00000000000000000000.timeindex").unlink()
    ro = await make_segment(0, file_already_exists=True, writable=False)
    assert await values_read(ro, 0, 1000) == [(0, b"a"), (1, b"b")]
    assert await values_read(ro, 1, 1000) == [(1, b"b")]
    with pytest.raises(ClosedError, match="read-only"):
        await append(ro, [batch(2, "c")])
    with pytest.raises(ClosedError, match="read-only"):
        ro.recover(1 << 20)


async def test_append_refuses_buffers_that_are_not_one_batch(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    with pytest.raises(ValueError, match="not one encoded batch"):
        await append(seg, [batch(0, "a") + b"extra"])
    assert seg.size == 0


async def test_enospc_leaves_the_segment_as_it_was(make_segment: SegmentFactory) -> None:
    ops = FailingOps()
    seg = await make_segment(0, index_interval_bytes=0, ops=ops)
    await append(seg, [batch(0, "a")])
    await append(seg, [batch(1, "b")])
    size, entries = seg.size, (seg._indexes())[0].entries
    ops.fail("pwritev", errno.ENOSPC, partial_bytes=50)
    with pytest.raises(StorageError, match="No space left on device"):
        await append(seg, [batch(2, "c" * 200), batch(3, "d")])
    assert seg.size == size == seg.log_path.stat().st_size
    assert (seg._indexes())[0].entries == entries
    assert seg.read_next_offset() == 2
    assert seg.read(2, 1000) is None
    await append(seg, [batch(2, "c")])
    assert await values_read(seg, 0, 1000) == [(0, b"a"), (1, b"b"), (2, b"c")]
    seg.close()
    again = await make_segment(0, file_already_exists=True)
    assert again.recover(max_batch_bytes=1 << 20) == 0


async def test_segment_files_are_named_by_base_offset(make_segment: SegmentFactory) -> None:
    seg = await make_segment(1734)
    assert seg.log_path.name == "00000000000000001734.log"
    assert seg.offset_index_path.name == "00000000000000001734.index"
    assert seg.time_index_path.name == "00000000000000001734.timeindex"
    assert seg.txn_index_path.name == "00000000000000001734.txnindex"


async def test_append_refuses_offsets_that_do_not_increase(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    with pytest.raises(ValueError, match="offsets must increase"):
        await append(seg, [batch(0, "a", "b"), batch(1, "c")])
    await append(seg, [batch(0, "a", "b")])
    with pytest.raises(ValueError, match="cannot follow offset 1"):
        await append(seg, [batch(1, "c")])
    assert seg.size == size_of(batch(0, "a", "b"))


async def test_append_parts_writes_batches_split_into_header_and_body(make_segment: SegmentFactory) -> None:
    # The engine's write path: each batch as (61-byte header, body), never joined in memory.
    seg = await make_segment(0)
    parts, headers = [], []
    for base, values in ((0, [b"a", b"b"]), (2, [b"c" * 5000])):
        head, body = encode_batch_parts(base, [Record(v) for v in values], timestamp_type=TimestampType.CREATE_TIME,
                                        now_ms=7)
        parts += [head, body]
        headers.append(read_header(head))
    assert await segment_append(seg, parts, headers) == 0
    got = seg.read(0, 1 << 20)
    assert got is not None
    assert [r.value for r in got.records()] == [b"a", b"b", b"c" * 5000]
    assert bytes(got.data) == b"".join(parts)
    # Parts that do not add up to the batches, or a header that is not a batch's: refused, nothing written.
    head, body = encode_batch_parts(3, [Record(b"d")], timestamp_type=TimestampType.CREATE_TIME, now_ms=7)
    with pytest.raises(ValueError, match="do not add up"):
        await segment_append(seg, [head, body[:-1]], [read_header(head)])
    with pytest.raises(ValueError, match="not a valid batch header"):
        await segment_append(seg, [head, body], [read_header(head)._replace(magic=0)])
    assert seg.size == len(b"".join(parts))
    seg.close()


@pytest.mark.parametrize("interval", [10, 300])
async def test_read_cached_answers_as_read_does_or_not_at_all(make_segment: SegmentFactory, interval: int) -> None:
    # The engine's point-read path: when read_cached answers, it must be exactly read(...,
    # min_one_message=True); with every batch indexed (interval 10) it must answer nearly always.
    seg = await make_segment(0, index_interval_bytes=interval)
    offset = 0
    for n in range(40):
        values = [f"v{offset + i}." * (1 + (n * 7 + i) % 9) for i in range(1 + n % 5)]
        await append(seg, [batch(offset, *values)])
        offset += len(values)
    answered = asked = points = 0
    for target in range(offset):
        for max_bytes in (0, 1, 60, 700, 1 << 20):
            for max_position in (None, seg.size - 1):
                asked += 1
                slow = seg.read(target, max_bytes, max_position=max_position, min_one_message=True)
                point = seg.read_records_cached(target, max_bytes, max_position)
                if point is not None:
                    points += 1
                    assert slow is not None and point == slow.records()
                fast = seg.read_cached(target, max_bytes, max_position)
                if fast is None:
                    continue
                answered += 1
                assert slow is not None
                assert fast.offset_metadata == slow.offset_metadata
                assert bytes(fast.data) == bytes(slow.data)
                assert fast.max_bytes == slow.max_bytes
                assert fast.records() == slow.records()
    if interval == 10:
        assert answered > asked * 0.8
    else:
        assert answered > 0
    assert points > 0 or batch_module._fast is None  # without the C module point reads take read()


async def test_read_cached_declines_before_the_indexes_are_checked(
    make_segment: SegmentFactory, tmp_path: Path
) -> None:
    seg = await make_segment(0)
    for offset in range(0, 30, 3):
        await append(seg, [batch(offset, "a", "b", "c")])
    assert seg.read_cached(4, 1) is not None
    seg.close()
    reopened = LogSegment.open(
        tmp_path, 0, max_index_size=1000, index_interval_bytes=10, roll_jitter_ms=0, now_ms=0,
        file_already_exists=True,
    )
    try:
        assert reopened.read_cached(4, 1) is None  # the index files are not loaded and checked yet
        got = reopened.read(4, 1, min_one_message=True)  # loads and checks them
        assert got is not None and [r.offset for r in got.records()] == [4]
        cached = reopened.read_cached(4, 1)
        assert cached is not None and [r.offset for r in cached.records()] == [4]
    finally:
        reopened.close()
