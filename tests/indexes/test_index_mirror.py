"""The native mirror behind OffsetIndex/TimeIndex lookups: built lazily, never disagreeing with the file.

White-box where it must be: ``_mirror`` is looked at to prove that opening
does not build it and that closing drops it; every other check compares
lookups against the file (a fresh index on it, or the struct search).
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from seglog.indexes import ClosedError, OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset
from seglog.indexes.search import largest_lower_bound
from seglog.indexes.time_index import TIME_ENTRY

BASE = 5000


def offset_answers(index: OffsetIndex, top: int) -> list[tuple[OffsetPosition, OffsetPosition | None]]:
    return [(index.lookup(t), index.lookup_ceiling(t)) for t in range(BASE - 2, top)]


def fill_offsets(index: OffsetIndex, count: int) -> None:
    last, position = index.entry(index.entries - 1) if index.entries else (BASE - 1, 0)
    for i in range(count):
        last += 1 + i % 3
        position += 100 + i % 7
        index.append(last, position)


def test_opening_does_not_build_the_mirror_and_closing_drops_it(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000005000.index"
    with OffsetIndex(path, BASE, max_index_size=4000 * 8) as index:
        fill_offsets(index, 3000)  # appends before the first lookup build nothing either
        assert index._mirror is None
    with OffsetIndex(path, BASE, writable=False) as index:
        assert index._mirror is None  # opening thousands of segments must stay cheap
        index.lookup(BASE + 10)
        assert index._mirror is not None
        assert [len(column) for column in index._mirror] == [3000, 3000]
    assert index._mirror is None
    with pytest.raises(ClosedError):
        index.lookup(BASE)
    with pytest.raises(ClosedError):
        index.lookup_ceiling(BASE)


def test_offset_mirror_built_then_appended_truncated_and_reopened_agrees_with_a_fresh_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000005000.index"
    index = OffsetIndex(path, BASE, max_index_size=5000 * 8)
    try:
        fill_offsets(index, 2500)  # more than the 1024-entry warm section: both search steps run
        index.lookup(BASE)  # the mirror now exists; everything below must keep it equal to the file
        fill_offsets(index, 700)
        middle = index.entry(1800).offset
        index.truncate_to(middle + 1)  # keeps slot 1800
        assert index.entries == 1801
        fill_offsets(index, 300)
        index.truncate_to(index.entry(2000).offset)  # an exact hit: slot 2000 goes
        top = index.last_offset + 3
        before = offset_answers(index, top)
        index.flush()
        index.trim_to_valid_size()
        with OffsetIndex(path, BASE, writable=False) as fresh:
            assert offset_answers(fresh, top) == before
            assert [fresh.entry(n) for n in range(fresh.entries)] == [index.entry(n) for n in range(index.entries)]
        index.resize(5000 * 8)  # remapped, same entries: the mirror stays
        assert offset_answers(index, top) == before
        fill_offsets(index, 50)
        top = index.last_offset + 3
        before = offset_answers(index, top)
    finally:
        index.close()
    with OffsetIndex(path, BASE, max_index_size=5000 * 8) as reopened:
        assert offset_answers(reopened, top) == before
        reopened.reset()  # before a rebuild: no entries, and the mirror says so
        assert reopened.lookup(BASE + 100) == (BASE, 0)
        assert reopened.lookup_ceiling(BASE) is None
        reopened.append(BASE + 7, 0)
        assert reopened.lookup(BASE + 100) == (BASE + 7, 0)


def time_answers(index: TimeIndex, stamps: range) -> list[TimestampOffset]:
    return [index.lookup(t) for t in stamps]


def test_time_mirror_built_then_appended_truncated_and_reopened_agrees_with_a_fresh_index(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000005000.timeindex"
    ts0 = 1_700_000_000_000
    rnd = random.Random(3)
    index = TimeIndex(path, BASE, max_index_size=3000 * 12)
    try:
        ts, offset = ts0, BASE
        for _ in range(1500):  # above the 682-entry warm section
            ts, offset = ts + rnd.randrange(0, 5), offset + rnd.randrange(0, 3)  # repeats are skipped
            index.maybe_append(ts, offset)
        index.lookup(ts0)  # builds the mirror
        for _ in range(400):
            ts, offset = ts + rnd.randrange(0, 5), offset + rnd.randrange(0, 3)
            index.maybe_append(ts, offset)
        index.truncate_to(index.entry(1000).offset)  # repeated offsets: every entry at that offset goes
        ts, offset = index.last_entry
        for _ in range(200):
            ts, offset = ts + 1 + rnd.randrange(0, 5), offset + rnd.randrange(0, 3)
            index.maybe_append(ts, offset)
        stamps = range(ts0 - 2, ts + 3)
        before = time_answers(index, stamps)
        # The struct search over the mapping (the file) agrees with the mirror, slot for slot.
        for target in stamps[::5]:
            slot = largest_lower_bound(index._mm, index.entries, target, key=TIME_ENTRY, stride=12)
            assert index.lookup(target) == (index.entry(slot) if slot is not None else (-1, BASE))
        index.flush()
        index.trim_to_valid_size()
        with TimeIndex(path, BASE, writable=False) as fresh:
            assert time_answers(fresh, stamps) == before
    finally:
        index.close()
    with TimeIndex(path, BASE, max_index_size=3000 * 12) as reopened:
        assert time_answers(reopened, stamps) == before


def test_concurrent_appends_and_lookups_see_only_entries_that_exist(tmp_path: Path) -> None:
    # Readers race the writer and each other for the first lookup (the mirror build) and then
    # for every append; each answer must be an entry the writer wrote, and the floor of its target.
    index = OffsetIndex(tmp_path / "00000000000000005000.index", BASE, max_index_size=20_000 * 8)
    written = 12_000
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def writer() -> None:
        start.wait()
        for i in range(written):
            index.append(BASE + 2 * i, 10 * i)

    def reader(seed: int) -> None:
        rnd = random.Random(seed)
        start.wait()
        try:
            for _ in range(6000):
                target = BASE + rnd.randrange(-2, 2 * written)
                offset, position = index.lookup(target)
                if (offset, position) != (BASE, 0):
                    assert offset <= target and (offset - BASE) % 2 == 0 and position == 5 * (offset - BASE)
        except BaseException as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader, args=(1,))]
    threads.append(threading.Thread(target=reader, args=(2,)))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert index.lookup(BASE + 2 * written) == (BASE + 2 * (written - 1), 10 * (written - 1))
        assert [index.lookup(BASE + 2 * i + 1).offset for i in range(0, written, 97)] == [
            BASE + 2 * i for i in range(0, written, 97)
        ]
    finally:
        index.close()


@pytest.mark.parametrize("count", [0, 1, 2, 1500])  # 1500 entries: more than the 1024-entry warm section
def test_ceiling_span_is_the_ceiling_entry_and_the_bytes_to_the_next(tmp_path: Path, count: int) -> None:
    # What a point read trusts to place its batch: the position of lookup_ceiling's entry, and the
    # distance to the following entry's position (0 for the last entry).
    with OffsetIndex(tmp_path / "00000000000000005000.index", BASE, max_index_size=4000 * 8) as index:
        fill_offsets(index, count)
        entries = [index.entry(slot) for slot in range(index.entries)]
        top = entries[-1][0] + 3 if entries else BASE + 3
        for target in range(BASE - 2, top):
            ceiling = index.lookup_ceiling(target)
            span = index.ceiling_span(target)
            if ceiling is None:
                assert span is None
                continue
            assert span is not None and span[0] == ceiling.position
            slot = [offset for offset, _ in entries].index(ceiling.offset)
            expected = entries[slot + 1][1] - ceiling.position if slot + 1 < len(entries) else 0
            assert span[1] == expected
            assert span[2] == ceiling.offset
