"""A read-only index is a snapshot, not a mapping: a writer trimming the file cannot crash the reader."""

from __future__ import annotations

from pathlib import Path

from seglog.indexes import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset


def test_reader_survives_the_writer_trimming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, 0, max_index_size=4096)
    for i in range(1, 4):
        writer.append(i * 10, i * 100)
    writer.flush()
    reader = OffsetIndex(path, 0, writable=False)
    try:
        # Kafka would count every preallocated slot (file size / 8); a read-only snapshot stops at
        # the zero tail of the live writer's index, so its lookups stay exact.
        assert reader.entries == 3
        writer.close()  # trims the file to 24 bytes; a mapped reader would now die of SIGBUS
        assert path.stat().st_size == 24
        assert reader.lookup(25) == OffsetPosition(20, 200)
        assert reader.entry(2) == OffsetPosition(30, 300)
    finally:
        reader.close()
    again = OffsetIndex(path, 0, writable=False)
    try:
        assert again.entries == 3 and again.last_offset == 30
    finally:
        again.close()


def test_time_index_reader_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    writer = TimeIndex(path, 0, max_index_size=1200)
    writer.maybe_append(100, 5)
    writer.maybe_append(200, 9)
    writer.close()
    reader = TimeIndex(path, 0, writable=False)
    try:
        assert reader.lookup(150) == TimestampOffset(100, 5)
        assert reader.last_entry == TimestampOffset(200, 9)
    finally:
        reader.close()


def test_snapshot_of_a_full_untrimmed_index_keeps_every_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    writer = OffsetIndex(path, 0, max_index_size=80)
    writer.append(0, 0)  # slot 0 may legitimately be all zeros
    for i in range(1, 10):
        writer.append(i, i * 7)
    writer.flush()
    reader = OffsetIndex(path, 0, writable=False)
    try:
        assert reader.entries == 10 and reader.lookup(9) == OffsetPosition(9, 63)
    finally:
        reader.close()
        writer.close()
