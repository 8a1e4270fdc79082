"""Index entries and base offsets are checked when a read uses them (issue 18, "nothing read from disk is trusted").

An offset-index entry leads a read to a batch: that batch must end at the entry's offset and before
the next entry's position; a walk's batches must follow on from the segment's base offset (a base
offset is outside the CRC). A time-index entry names the batch holding the largest timestamp so far:
that batch must have it. A read never serves records at other offsets; an index that lies is rebuilt
once, with a WARNING, and a damaged ``.log`` is a ``CorruptRecordError`` when read.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from seghelpers import SegmentFactory, append, batch

from seglog.indexes.offset_index import OFFSET_ENTRY
from seglog.indexes.time_index import TIME_ENTRY
from seglog.segments.batch import read_header
from seglog.segments.errors import CorruptRecordError
from seglog.segments.segment import LogSegment

# Batches of two records (offsets 2k, 2k+1), about 80 bytes each: with an index interval of 100 bytes
# every second batch gets an offset-index entry (docs/FORMAT.md: counted before the batch is added).
BATCHES = 10
INTERVAL = 100


def _values(offset: int) -> tuple[str, str]:
    return (f"v{offset}", f"v{offset + 1}")


async def _written(make_segment: SegmentFactory, tmp_path: Path) -> list[tuple[int, int]]:
    """A closed segment at base 0; returns (position, base offset) of each batch."""
    seg = await make_segment(0, index_interval_bytes=INTERVAL)
    for k in range(BATCHES):
        await append(seg, [batch(2 * k, *_values(2 * k))])
    seg.close()
    data = (tmp_path / "00000000000000000000.log").read_bytes()
    out, position = [], 0
    while position < len(data):
        header = read_header(data, position)
        out.append((position, header.base_offset))
        position += header.size
    return out


def _entries(path: Path, entry: struct.Struct) -> list[tuple[int, int]]:
    return [(e[0], e[1]) for e in entry.iter_unpack(path.read_bytes())]


async def _reopened(make_segment: SegmentFactory) -> LogSegment:
    return await make_segment(0, index_interval_bytes=INTERVAL, file_already_exists=True)


async def _values_read(seg: LogSegment, offset: int) -> list[tuple[int, bytes | None]]:
    cached = seg.read_records_cached(offset, 1)
    if cached is not None:
        return [(r.offset, r.value) for r in cached]
    got = seg.read(offset, 1, min_one_message=True)
    assert got is not None
    return [(r.offset, r.value) for r in got.records()]


def _flip_base_offset(path: Path, position: int, new_base: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(struct.pack(">q", new_base))


async def test_a_batch_whose_base_offset_changed_is_never_served_at_its_claimed_offsets(
    make_segment: SegmentFactory, tmp_path: Path
) -> None:
    batches = await _written(make_segment, tmp_path)
    entries = _entries(tmp_path / "00000000000000000000.index", OFFSET_ENTRY)
    # An indexed batch in the middle (not the first or last entry, which the open check reads).
    position, base = next((p, b) for p, b in batches if (b + 1, p) in entries[1:-1])
    _flip_base_offset(tmp_path / "00000000000000000000.log", position, base - 2)  # claims the previous batch's
    seg = await _reopened(make_segment)
    # The offsets it claims are served from the batch that holds them; its own are refused.
    assert await _values_read(seg, base - 1) == [(base - 1, f"v{base - 1}".encode())]
    with pytest.raises(CorruptRecordError, match="expected"):
        await _values_read(seg, base)
    # Everything before it is served, from its own batch.
    for offset in range(base - 2):
        got = await _values_read(seg, offset)
        assert got[0] == (offset, f"v{offset}".encode()), (offset, got)


async def test_a_lying_offset_index_is_rebuilt_once_with_a_warning_and_reads_stay_exact(
    make_segment: SegmentFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    batches = await _written(make_segment, tmp_path)
    index = tmp_path / "00000000000000000000.index"
    entries = _entries(index, OFFSET_ENTRY)
    assert len(entries) >= 3
    # The middle entries lead to the batch after theirs (well-formed: offsets and positions increase).
    positions = [p for p, _ in batches]
    lied = [entries[0]] + [(o, positions[positions.index(p) + 1]) for o, p in entries[1:-1]] + [entries[-1]]
    index.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in lied))
    seg = await _reopened(make_segment)
    with caplog.at_level(logging.WARNING, logger="seglog"):
        for _ in range(2):
            for offset in range(2 * BATCHES):
                got = await _values_read(seg, offset)
                assert got[0] == (offset, f"v{offset}".encode()), (offset, got)
    rebuilt = [r for r in caplog.records if "rebuilding the indexes" in r.getMessage()]
    assert len(rebuilt) == 1, [r.getMessage() for r in caplog.records]
    assert _entries(index, OFFSET_ENTRY) == entries  # rebuilt from the .log
    # And trusted again: the synchronous read placed by the index answers (the C point read too, when built).
    assert seg.read_cached(entries[1][0], 1) is not None


async def test_a_lying_time_index_entry_is_caught_when_used_and_the_lookup_stays_exact(
    make_segment: SegmentFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await _written(make_segment, tmp_path)
    timeindex = tmp_path / "00000000000000000000.timeindex"
    entries = _entries(timeindex, TIME_ENTRY)
    assert len(entries) >= 3
    # Middle entries claim timestamps 25 ms (more than a batch spans) below the truth: a lookup would skip records.
    lied = [entries[0]] + [(t - 25, o) for t, o in entries[1:-1]] + [entries[-1]]
    timeindex.write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in lied))
    seg = await _reopened(make_segment)
    with caplog.at_level(logging.WARNING, logger="seglog"):
        for target in range(0, 20 * BATCHES + 10, 5):
            want = (target + 9) // 10 if target <= 10 * (2 * BATCHES - 1) else None  # record o has timestamp 10*o
            got = seg.find_offset_by_timestamp(target)
            assert (None if got is None else got.offset) == want, (target, got)
    assert sum("rebuilding the indexes" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("writable", [True, False])
async def test_the_largest_timestamp_counts_the_batches_after_the_last_index_entry(
    make_segment: SegmentFactory, tmp_path: Path, writable: bool
) -> None:
    # A time index without its final (roll/close) entry, as the active segment's after an unclean stop:
    # the batches after the last offset-index entry still count (Kafka's loadLargestTimestamp).
    await _written(make_segment, tmp_path)
    timeindex = tmp_path / "00000000000000000000.timeindex"
    entries = _entries(timeindex, TIME_ENTRY)
    timeindex.write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in entries[:-1]))
    seg = await make_segment(0, index_interval_bytes=INTERVAL, file_already_exists=True, writable=writable)
    last = 2 * BATCHES - 1
    assert seg.read_max_timestamp_and_offset_so_far() == (10 * last, last)
    got = seg.find_offset_by_timestamp(10 * last)
    assert got is not None and got.offset == last
