"""LogSegments (the ordered map of a partition's segments) against Kafka's LogSegmentsTest (T5, LSS-1..6)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from seghelpers import SegmentFactory

from seglog.segments.segment import LogSegments


@dataclass(frozen=True)
class Seg:
    base_offset: int
    size: int = 0


def segments_of(*bases: int) -> tuple[LogSegments[Seg], dict[int, Seg]]:
    segs: LogSegments[Seg] = LogSegments()
    made = {b: Seg(b) for b in bases}
    for seg in made.values():
        segs.add(seg)
    return segs, made


def test_lss1_basic_operations() -> None:
    segs: LogSegments[Seg] = LogSegments()
    assert segs.is_empty and len(segs) == 0
    s40, s80, s40b = Seg(40), Seg(80), Seg(40, size=1)
    assert segs.add(s40) is None
    assert len(segs) == 1 and 40 in segs and segs.get(40) is s40
    segs.add(s80)
    assert len(segs) == 2
    assert segs.add(s40b) is s40  # same base offset: replaced
    assert len(segs) == 2 and segs.get(40) is s40b
    assert segs.remove(80) is s80
    assert len(segs) == 1 and 80 not in segs and segs.remove(80) is None
    segs.clear()
    assert len(segs) == 0 and 40 not in segs and segs.first_segment is None and segs.active_segment is None


def test_lss2_access_in_order() -> None:
    segs: LogSegments[Seg] = LogSegments()
    made = [Seg(b) for b in (1, 2, 3, 4)]
    for seg in made:
        segs.add(seg)
        assert segs.first_segment is made[0] and segs.last_segment is seg
    s1, s2, s3, s4 = made
    assert segs.base_offsets() == [1, 2, 3, 4] and segs.values() == made and list(segs) == made
    with pytest.raises(ValueError, match="below"):
        segs.values(2, 1)
    assert segs.values(1, 1) == []
    assert segs.values(1, 2) == [s1]
    assert segs.values(1, 3) == [s1, s2]
    assert segs.values(1, 4) == [s1, s2, s3]
    assert segs.values(2, 4) == [s2, s3]
    assert segs.values(3, 4) == [s3]
    assert segs.values(4, 4) == []
    assert segs.values(4, 5) == [s4]
    assert segs.active_segment is s4
    assert segs.non_active_from(2) == [s2, s3]
    assert segs.non_active_from(4) == []
    assert segs.non_active_from(5) == []


def test_values_from_an_offset_inside_a_segment_and_below_the_first() -> None:
    segs, m = segments_of(10, 20, 30)
    assert segs.values(25, 31) == [m[20], m[30]]  # from the segment holding 25
    assert segs.values(0, 21) == [m[10], m[20]]  # no floor segment: from the first
    with pytest.raises(ValueError, match="both"):
        segs.values(1, None)


def test_lss3_closest_matches() -> None:
    segs, m = segments_of(1, 3, 5, 7)
    assert segs.floor_segment(2) is m[1]
    assert segs.floor_segment(3) is m[3]
    assert segs.floor_segment(0) is None
    assert segs.lower_segment(3) is m[1]
    assert segs.lower_segment(4) is m[3]
    assert segs.lower_segment(1) is None
    assert segs.higher_segment(4) is m[5]
    assert segs.higher_segment(5) is m[7]
    assert segs.higher_segment(7) is None


def test_lss4_higher_segments() -> None:
    segs, m = segments_of(1, 3, 5, 7, 9)
    assert segs.higher_segments(0) == [m[1], m[3], m[5], m[7], m[9]]
    assert segs.higher_segments(1) == [m[3], m[5], m[7], m[9]]
    assert segs.higher_segments(8) == [m[9]]
    assert segs.higher_segments(9) == []


def test_lss5_total_size_does_not_overflow() -> None:
    segs: LogSegments[Seg] = LogSegments()
    segs.add(Seg(0, size=2**31 - 1))
    segs.add(Seg(100, size=2**31 - 1))
    assert segs.size_bytes == 4294967294


async def test_lss6_update_parent_dir(make_segment: SegmentFactory, tmp_path: Path) -> None:
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir()
    seg = await make_segment(0, directory=old_dir)
    segs = LogSegments()
    segs.add(seg)
    for s in segs:
        s.update_parent_dir(new_dir)
    for path in (seg.log_path, seg.offset_index_path, seg.time_index_path, seg.txn_index_path):
        assert path.parent == new_dir
    old_dir.rename(new_dir)  # the files moved with the directory; the open descriptor follows


def test_live_from_gives_bases_and_segments_from_the_one_holding_the_offset_in_new_lists() -> None:
    segs, m = segments_of(10, 20, 30)
    assert segs.live_from(25) == ([20, 30], [m[20], m[30]])
    assert segs.live_from(20) == ([20, 30], [m[20], m[30]])
    assert segs.live_from(0) == ([10, 20, 30], [m[10], m[20], m[30]])  # below the first: all
    bases, live = segs.live_from(0)
    segs.remove(20)  # a roll or a deletion while a caller walks its lists: they do not change
    assert (bases, live) == ([10, 20, 30], [m[10], m[20], m[30]])


def test_first_live_is_live_froms_first_segment_with_where_its_offsets_end() -> None:
    segs, m = segments_of(10, 20, 30)
    for offset in (0, 10, 15, 20, 29, 30, 1000):
        bases, live = segs.live_from(offset)
        assert segs.first_live(offset, 99) == (bases[0], live[0], segs.following_base(bases[0], 99)), offset
    assert segs.first_live(25, 99) == (20, m[20], 30)
    assert segs.first_live(35, 99) == (30, m[30], 99)  # the last: its offsets end at the default
    assert LogSegments().first_live(0, 99) is None


def test_following_base_is_the_next_segments_base_or_the_default_for_the_last() -> None:
    segs, _ = segments_of(10, 20, 30)
    assert segs.following_base(10, 99) == 20
    assert segs.following_base(20, 99) == 30
    assert segs.following_base(30, 99) == 99
