"""Segment recovery: random corruption of the .log and of each index, torn tails, power loss,
and an event loop that keeps running while a large segment is recovered."""

from __future__ import annotations

import asyncio
import random
import struct
import time
from pathlib import Path

import google_crc32c
import msgpack
import pytest
from seghelpers import SegmentFactory, append, batch

from seglog.segments.batch import MAGIC, MAGIC_V1, TimestampType, encode_batch
from seglog.segments.errors import CorruptRecordError, SegmentOffsetOverflowError, UnsupportedFormatError
from seglog.segments.faults import PowerLossOps
from seglog.segments.fileio import in_thread
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment

MAX_BATCH = 1 << 20


def varied_batches(rng: random.Random, count: int) -> list[bytes]:
    """`count` batches of 1-5 records with varied sizes and out-of-order timestamps."""
    out, offset = [], 0
    for _ in range(count):
        n = rng.randint(1, 5)
        records = [Record(rng.randbytes(rng.randint(0, 120)), None, rng.randint(0, 10_000)) for _ in range(n)]
        out.append(encode_batch(offset, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0))
        offset += n
    return out


async def build(make_segment: SegmentFactory, batches: list[bytes], interval: int = 100) -> list[int]:
    """Append `batches` one by one, close, return each batch's start position."""
    seg = await make_segment(0, index_interval_bytes=interval, max_index_size=4096)
    positions = []
    for b in batches:
        positions.append(seg.size)
        await append(seg, [b])
    seg.close()
    return positions


async def reopen(make_segment: SegmentFactory, interval: int = 100) -> LogSegment:
    return await make_segment(0, index_interval_bytes=interval, max_index_size=4096, file_already_exists=True)


async def index_entries(seg: LogSegment) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    offset_index, time_index = seg._indexes()
    return (
        [tuple(offset_index.entry(n)) for n in range(offset_index.entries)],  # type: ignore[misc]
        [tuple(time_index.entry(n)) for n in range(time_index.entries)],  # type: ignore[misc]
    )


async def assert_holds_exactly(seg: LogSegment, batches: list[bytes]) -> None:
    """The segment holds exactly `batches`, every offset is readable, lookups agree with a model."""
    assert seg.size == sum(map(len, batches))
    got = seg.read(0, 1 << 30)
    data = got.data if got else b""
    assert data == b"".join(batches)
    records = got.records() if got else []
    assert seg.read_next_offset() == len(records)
    for r in records[:: max(1, len(records) // 25)]:
        one = seg.read(r.offset, 1, min_one_message=True)
        assert one is not None and one.records()[0] == r
        hit = seg.find_offset_by_timestamp(r.timestamp or 0)
        want = next(x for x in records if (x.timestamp or 0) >= (r.timestamp or 0))
        assert hit is not None and hit.offset == want.offset


@pytest.mark.parametrize("seed", range(12))
async def test_random_corruption_of_the_log_cuts_exactly_the_damaged_tail(
    make_segment: SegmentFactory, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    batches = varied_batches(rng, 30)
    positions = await build(make_segment, batches)
    clean = await reopen(make_segment)
    assert clean.recover(MAX_BATCH) == 0
    expected_indexes = await index_entries(clean)
    clean.close()

    log = tmp_path / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    k = rng.randrange(len(batches))
    mode = ("flip", "overwrite", "truncate", "zeros")[seed % 4]
    if mode == "flip":
        # Any byte the checks cover: the length, magic, CRC, header fields, body. (The base offset and
        # the leader epoch are outside the CRC, as in Kafka; the offset rules guard the former.)
        inside = rng.choice([*range(8, 12), *range(16, len(batches[k]))])
        data[positions[k] + inside] ^= 1 << rng.randrange(8)
        cut = positions[k]
    elif mode == "overwrite":
        start = positions[k] + rng.randrange(8, len(batches[k]))
        data[start:] = rng.randbytes(len(data) - start)
        cut = positions[k]
    elif mode == "truncate":
        end = positions[k] + rng.randrange(1, len(batches[k]))
        del data[end:]
        cut = positions[k]
    else:  # a preallocated or zero-filled tail after the last good batch
        data[positions[k] :] = bytes(len(data) - positions[k])
        cut = positions[k]
    log.write_bytes(bytes(data))

    seg = await reopen(make_segment)
    assert seg.recover(MAX_BATCH) == len(data) - cut
    assert log.stat().st_size == cut
    await assert_holds_exactly(seg, batches[:k])
    offsets, _ = await index_entries(seg)
    assert offsets == [e for e in expected_indexes[0] if e[1] < cut]


INDEX_DAMAGE = ("random", "truncated", "zero-filled", "deleted", "stray-bytes", "entries-past-the-log")


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("damage", INDEX_DAMAGE)
async def test_recovery_rebuilds_a_damaged_index(
    make_segment: SegmentFactory, tmp_path: Path, suffix: str, damage: str
) -> None:
    rng = random.Random(f"{suffix}{damage}")
    batches = varied_batches(rng, 40)
    await build(make_segment, batches)
    clean = await reopen(make_segment)
    clean.recover(MAX_BATCH)
    expected = await index_entries(clean)
    clean.close()

    index = tmp_path / f"00000000000000000000{suffix}"
    data = bytearray(index.read_bytes())
    assert data, "the scenario needs index entries"
    if damage == "random":
        data[3:] = rng.randbytes(len(data) - 3)
    elif damage == "truncated":
        del data[len(data) // 2 + 1 :]
    elif damage == "zero-filled":
        data = bytearray(len(data) + 4096)
    elif damage == "stray-bytes":
        data += b"\x07\x07\x07"
    elif damage == "entries-past-the-log":
        width = 8 if suffix == ".index" else 12
        data += struct.pack(">ii", 10**6, 10**7) if width == 8 else struct.pack(">qi", 10**9, 10**6)
    if damage == "deleted":
        index.unlink()
    else:
        index.write_bytes(bytes(data))

    seg = await reopen(make_segment)
    assert seg.recover(MAX_BATCH) == 0  # a damaged index never costs log data
    assert await index_entries(seg) == expected
    seg.sanity_check()
    await assert_holds_exactly(seg, batches)


async def test_recovery_of_a_clean_segment_rebuilds_the_same_indexes(make_segment: SegmentFactory) -> None:
    batches = varied_batches(random.Random(7), 50)
    seg = await make_segment(0, index_interval_bytes=100, max_index_size=4096)
    for b in batches:
        await append(seg, [b])
    before = await index_entries(seg)
    progress: list[tuple[int, int]] = []
    assert seg.recover(MAX_BATCH, progress=lambda done, total: progress.append((done, total))) == 0
    # The recovery thread schedules each progress call on the loop before it hands back its result:
    # all of them have run when recover() returns.
    offsets, times = await index_entries(seg)
    assert offsets == before[0]
    # Recovery adds the final time-index entry that appends leave for roll/close.
    assert times[: len(before[1])] == before[1] and len(times) <= len(before[1]) + 1
    assert progress and progress[-1] == (seg.size, seg.size)
    extra = encode_batch(
        seg.read_next_offset(), [Record(b"after")], timestamp_type=TimestampType.CREATE_TIME, now_ms=5
    )
    await append(seg, [extra])  # the recovered segment takes appends
    await assert_holds_exactly(seg, [*batches, extra])


async def test_recovery_of_an_empty_segment(make_segment: SegmentFactory) -> None:
    seg = await make_segment(0)
    assert seg.recover(MAX_BATCH) == 0
    assert seg.read_next_offset() == 0 and seg.largest_record_timestamp() is None


async def test_batches_below_the_base_offset_are_cut(make_segment: SegmentFactory, tmp_path: Path) -> None:
    (tmp_path / "00000000000000000100.log").write_bytes(batch(5, "misplaced"))
    seg = await make_segment(100, file_already_exists=True)
    assert seg.recover(MAX_BATCH) == len(batch(5, "misplaced"))


def sparse_batch(base_offset: int, deltas: list[int]) -> bytes:
    """A valid batch whose records have the offset deltas ``deltas`` (a gap inside a batch is allowed)."""
    n = len(deltas)
    body = msgpack.packb([deltas, None, [None] * n, [b"v"] * n, None], use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, deltas[-1], 0, 0, -1, -1, -1, n) + body
    return struct.pack(">qiibI", base_offset, 49 + len(body), -1, MAGIC, google_crc32c.value(tail)) + tail


async def test_offsets_beyond_the_int32_range_are_refused(make_segment: SegmentFactory, tmp_path: Path) -> None:
    # Offsets 0, then 1 and 2**31 in one batch: valid, but 2**31 is not storable relative to base 0.
    (tmp_path / "00000000000000000000.log").write_bytes(batch(0, "a") + sparse_batch(1, [0, 2**31 - 1]))
    seg = await make_segment(0, file_already_exists=True)
    with pytest.raises(SegmentOffsetOverflowError, match="more than 2\\*\\*31-1 above"):
        seg.recover(MAX_BATCH)


def v1_batch(base_offset: int, values: list[bytes]) -> bytes:
    """A batch as seglog < 0.2 wrote it: magic 0x53 and a body of [delta, ts delta, key, value, headers] rows."""
    body = msgpack.packb([[i, 0, None, v, []] for i, v in enumerate(values)], use_bin_type=True)
    tail = struct.pack(">hiqqqhii", 0, len(values) - 1, 0, 0, -1, -1, -1, len(values)) + body
    return struct.pack(">qiibI", base_offset, 49 + len(body), -1, MAGIC_V1, google_crc32c.value(tail)) + tail


async def test_a_segment_of_the_old_format_is_refused_not_cut(make_segment: SegmentFactory, tmp_path: Path) -> None:
    # An upgrade must not turn "this version cannot read it" into "recovery deleted it".
    log = tmp_path / "00000000000000000000.log"
    old = v1_batch(0, [b"a", b"b"]) + v1_batch(2, [b"c"])
    log.write_bytes(old)
    seg = await make_segment(0, file_already_exists=True)
    with pytest.raises(UnsupportedFormatError, match="format v1"):
        seg.recover(MAX_BATCH)
    assert log.read_bytes() == old
    with pytest.raises(CorruptRecordError, match="format v1"):
        seg.read(0, 1 << 20)
    seg.close()
    # A v1 batch larger than recovery's 4 MiB read (a topic whose max.message.bytes allowed it).
    big = v1_batch(0, [bytes(5 << 20)])
    log.write_bytes(big)
    seg = await make_segment(0, file_already_exists=True)
    with pytest.raises(UnsupportedFormatError):
        seg.recover(MAX_BATCH)
    assert log.stat().st_size == len(big)
    seg.close()
    # Garbage that merely starts with the old magic byte is still a torn tail, and is cut.
    log.write_bytes(batch(0, "a") + bytes(16) + bytes([MAGIC_V1]) + bytes(60))
    seg = await make_segment(0, file_already_exists=True)
    assert seg.recover(MAX_BATCH) == 77


async def test_batches_larger_than_the_maximum_are_cut(make_segment: SegmentFactory, tmp_path: Path) -> None:
    small, big = batch(0, "a"), batch(1, "b" * 5000)
    (tmp_path / "00000000000000000000.log").write_bytes(small + big)
    seg = await make_segment(0, file_already_exists=True)
    assert seg.recover(max_batch_bytes=1000) == len(big)


@pytest.mark.parametrize("torn", [0, 30, 10_000])
async def test_power_loss_keeps_exactly_the_synced_batches(
    make_segment: SegmentFactory, tmp_path: Path, torn: int
) -> None:
    ops = PowerLossOps()
    rng = random.Random(torn)
    batches = varied_batches(rng, 12)
    seg = await make_segment(0, ops=ops)
    await append(seg, batches[:4], fsync=True)
    await append(seg, batches[4:6])
    await append(seg, batches[6:8], fsync=True)  # syncs 4..7 too
    await append(seg, batches[8:])
    seg.close()
    ops.power_fail(torn_bytes=torn)
    recovered = await make_segment(0, file_already_exists=True)
    recovered.recover(MAX_BATCH)
    kept = sum(map(len, batches[:8]))
    whole = [b for i, b in enumerate(batches) if i < 8 or sum(map(len, batches[8 : i + 1])) <= torn]
    assert recovered.size == sum(map(len, whole)) >= kept
    await assert_holds_exactly(recovered, whole)


async def test_event_loop_keeps_ticking_while_a_large_segment_is_recovered(
    make_segment: SegmentFactory, tmp_path: Path
) -> None:
    # ~120k small batches (about 10 MB): the scan costs a few µs of Python per batch, enough to
    # take a few hundred ms. The file is built directly: one encoded batch, base offsets patched
    # (they are outside the CRC), so building it costs little.
    one = batch(0, "x" * 20)
    count = 120_000
    data = bytearray(one * count)
    for i in range(count):
        struct.pack_into(">q", data, i * len(one), i)
    (tmp_path / "00000000000000000000.log").write_bytes(bytes(data))
    seg = await make_segment(0, index_interval_bytes=4096, max_index_size=1 << 20, file_already_exists=True)

    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick_task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    started = time.perf_counter()
    assert await in_thread(seg.recover, MAX_BATCH) == 0  # as the engine runs it: one thread hop
    elapsed = time.perf_counter() - started
    done.set()
    await tick_task
    assert seg.read_next_offset() == count
    assert elapsed > 0.05, "the segment is too small to show anything"
    # The recovery thread releases the GIL at least every 5 ms (sys.getswitchinterval()); a frozen
    # loop would show one gap as long as the whole recovery.
    assert len(gaps) >= 5
    assert max(gaps) < max(0.25, elapsed / 3)


async def test_a_garbage_first_header_does_not_stop_the_open(make_segment: SegmentFactory, tmp_path: Path) -> None:
    (tmp_path / "00000000000000000000.log").write_bytes(bytes(4096))  # a crash with a preallocated file
    seg = await make_segment(0, file_already_exists=True)
    assert seg.first_batch_timestamp == 2**63 - 1
    assert seg.recover(MAX_BATCH) == 4096
    await append(seg, [batch(0, "fresh", ts=77)])
    assert seg.first_batch_timestamp == 77
