"""The offline tools find an offset index's floor entry by binary search over a few slots, not the whole file.

A live segment's ``.index`` is preallocated (10 MiB by default): an offline
reader (a Spark plan, ``offline.log_end_offset``) looks at it at every plan and
must not read all of it. The search must give what reading every entry and
bisecting gives, on indexes of any length, preallocated or trimmed, with a
partial last slot; on a garbage index it gives some slot of the file (which the
caller checks against the batch it names) and never raises.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.engine.offline.indexes import dump_index
from seglog.engine.offline.segment_scan import _index_floor
from seglog.indexes.fileops import FileOps
from seglog.segments.fileio import use_ops

BASE = 1000
ENTRY = struct.Struct(">ii")


def _expected(path: Path, target: int | None) -> tuple[int, int] | None:
    entries = dump_index(path, base_offset=BASE).entries
    if target is None:
        return tuple(entries[-1]) if entries else None  # type: ignore[return-value]
    slot = bisect_right([e[0] for e in entries], target) - 1
    return tuple(entries[slot]) if slot >= 0 else None  # type: ignore[return-value]


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 50), max_size=300),
    zero_slots=st.integers(0, 2000),
    partial=st.integers(0, 7),
    target=st.one_of(st.none(), st.integers(BASE - 5, BASE + 20_000)),
)
def test_the_floor_entry_is_the_one_reading_every_entry_gives(
    tmp_path_factory: object, gaps: list[int], zero_slots: int, partial: int, target: int | None
) -> None:
    path = Path(tmp_path_factory.mktemp("idx")) / f"{BASE:020d}.index"  # type: ignore[attr-defined]
    relative, entries = 0, []
    for i, gap in enumerate(gaps):
        relative += gap
        entries.append(ENTRY.pack(relative, 100 * (i + 1)))
    path.write_bytes(b"".join(entries) + bytes(8 * zero_slots + partial))
    assert _index_floor(path, BASE, target) == _expected(path, target)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=4096), target=st.one_of(st.none(), st.integers(-(2**40), 2**40)))
def test_a_garbage_index_gives_one_of_its_slots_or_none(
    tmp_path_factory: object, data: bytes, target: int | None
) -> None:
    path = Path(tmp_path_factory.mktemp("idx")) / f"{BASE:020d}.index"  # type: ignore[attr-defined]
    path.write_bytes(data)
    found = _index_floor(path, BASE, target)
    slots = {(BASE + rel, pos) for rel, pos in ENTRY.iter_unpack(data[: len(data) // 8 * 8])}
    assert found is None or found in slots


class CountingOps(FileOps):
    def __init__(self) -> None:
        self.read_bytes = 0

    def pread(self, fd: int, size: int, position: int) -> bytes:
        data = super().pread(fd, size, position)
        self.read_bytes += len(data)
        return data


def test_a_preallocated_index_is_probed_not_read(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(b"".join(ENTRY.pack(10 * (i + 1), 4096 * (i + 1)) for i in range(5000)) + bytes(10 << 20))
    ops = CountingOps()
    with use_ops(ops):
        assert _index_floor(path, BASE, None) == (BASE + 50_000, 4096 * 5000)
        assert _index_floor(path, BASE, BASE + 12_345) == (BASE + 12_340, 4096 * 1234)
    assert ops.read_bytes < 1024  # two binary searches of 8-byte slots, against 10 MiB in the file
