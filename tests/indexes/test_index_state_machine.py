"""Property tests: OffsetIndex and TimeIndex driven by Hypothesis against list models.

Every rule mirrors the same change on a plain list; every invariant compares
lookups, ceilings and reopen-from-disk with what the list says, and the
in-memory mirror the lookups search with the entries in the file.
"""

from __future__ import annotations

import bisect
import struct
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog.indexes import IndexFullError, InvalidOffsetError, OffsetIndex, TimeIndex
from seglog.indexes.abstract import AbstractIndex
from seglog.indexes.offset_index import OFFSET_ENTRY
from seglog.indexes.time_index import TIME_ENTRY

SLOTS = 40


def assert_mirror_matches_file(index: AbstractIndex[tuple[int, int]], entry: struct.Struct) -> None:
    """The mirror (when built) holds exactly the valid entries of the mapping, column by column."""
    if index._mirror is None:
        return
    keys, values = index._mirror
    rows = list(entry.iter_unpack(index._mm[: index.size_bytes]))
    assert keys.tolist() == [k for k, _ in rows]
    assert values.tolist() == [v for _, v in rows]


class OffsetIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "00000000000000001000.index"
        self.base = 1000
        self.index = OffsetIndex(self.path, self.base, max_index_size=SLOTS * 8)
        self.model: list[tuple[int, int]] = []

    def teardown(self) -> None:
        self.index.close()
        self.dir.cleanup()

    @rule(step=st.integers(0, 50), grow=st.integers(0, 5000))
    def append(self, step: int, grow: int) -> None:
        offset = (self.model[-1][0] if self.model else self.base) + step
        position = (self.model[-1][1] if self.model else 0) + grow
        if len(self.model) == SLOTS:
            try:
                self.index.append(offset, position)
            except IndexFullError:
                return
            raise AssertionError("append to a full index succeeded")
        if self.model and step == 0:
            try:
                self.index.append(offset, position)
            except InvalidOffsetError:
                return
            raise AssertionError("append of a repeated offset succeeded")
        self.index.append(offset, position)
        self.model.append((offset, position))

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        top = self.model[-1][0] + 5 if self.model else self.base + 5
        offset = data.draw(st.integers(self.base, top))
        self.index.truncate_to(offset)
        self.model = [e for e in self.model if e[0] < offset]

    @rule()
    def reopen(self) -> None:
        self.index.close()
        self.index = OffsetIndex(self.path, self.base, max_index_size=SLOTS * 8)
        self.index.sanity_check(full=True)
        self.index.resize(SLOTS * 8)  # a clean reopen is trimmed; give the slots back

    @precondition(lambda self: self.model)
    @rule()
    def crash_and_rebuild(self) -> None:
        self.index.flush()
        self.index.close_handler()
        self.index = OffsetIndex(self.path, self.base, max_index_size=SLOTS * 8)
        assert self.index.entries == SLOTS  # untrimmed: every slot reads as an entry
        self.index.reset()
        for offset, position in self.model:
            self.index.append(offset, position)

    @invariant()
    def lookups_match_the_model(self) -> None:
        offsets = [o for o, _ in self.model]
        assert self.index.entries == len(self.model)
        assert self.index.last_offset == (offsets[-1] if offsets else self.base)
        top = offsets[-1] + 3 if offsets else self.base + 3
        for target in range(self.base - 1, top, max(1, (top - self.base) // 40)):
            i = bisect.bisect_right(offsets, target)
            assert self.index.lookup(target) == (self.model[i - 1] if i else (self.base, 0))
            j = bisect.bisect_left(offsets, target)
            assert self.index.lookup_ceiling(target) == (self.model[j] if j < len(offsets) else None)
        assert_mirror_matches_file(self.index, OFFSET_ENTRY)


class TimeIndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "00000000000000000000.timeindex"
        self.index = TimeIndex(self.path, 0, max_index_size=SLOTS * 12)
        self.model: list[tuple[int, int]] = []

    def teardown(self) -> None:
        self.index.close()
        self.dir.cleanup()

    @rule(dt=st.integers(0, 100), doff=st.integers(0, 20), closing=st.booleans())
    def maybe_append(self, dt: int, doff: int, closing: bool) -> None:
        ts = (self.model[-1][0] if self.model else 1_700_000_000_000) + dt
        offset = (self.model[-1][1] if self.model else 0) + doff
        limit = SLOTS if closing else SLOTS - 1
        if len(self.model) >= limit:
            try:
                self.index.maybe_append(ts, offset, skip_full_check=closing)
            except IndexFullError:
                return
            raise AssertionError("append to a full time index succeeded")
        self.index.maybe_append(ts, offset, skip_full_check=closing)
        if not self.model or ts > self.model[-1][0]:
            self.model.append((ts, offset))

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        top = self.model[-1][1] + 3 if self.model else 3
        offset = data.draw(st.integers(0, top))
        self.index.truncate_to(offset)
        self.model = [e for e in self.model if e[1] < offset]

    @rule()
    def reopen(self) -> None:
        self.index.close()
        self.index = TimeIndex(self.path, 0, max_index_size=SLOTS * 12)
        self.index.sanity_check(full=True)
        self.index.resize(SLOTS * 12)

    @invariant()
    def lookups_match_the_model(self) -> None:
        stamps = [t for t, _ in self.model]
        assert self.index.last_entry == (self.model[-1] if self.model else (-1, 0))
        start = stamps[0] - 2 if stamps else 0
        for target in range(start, (stamps[-1] + 3) if stamps else 3, 7):
            i = bisect.bisect_right(stamps, target)
            assert self.index.lookup(target) == (self.model[i - 1] if i else (-1, 0))
        assert_mirror_matches_file(self.index, TIME_ENTRY)


TestOffsetIndexMachine = OffsetIndexMachine.TestCase
TestOffsetIndexMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestTimeIndexMachine = TimeIndexMachine.TestCase
TestTimeIndexMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
