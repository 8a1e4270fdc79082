"""segments.files: segment file names and the one listing of a partition directory."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from seglog.indexes.errors import StorageError
from seglog.segments import files
from seglog.segments.faults import FailingOps
from seglog.segments.files import ListedSegment, list_partition_dir, remove_leftovers_sync


def touch(directory: Path, *names: str) -> None:
    for name in names:
        (directory / name).write_bytes(b"x")


def test_names_are_the_base_offset_in_20_digits_and_a_suffix() -> None:
    assert files.filename_prefix(42) == "00000000000000000042"
    assert files.segment_file_name(42) == "00000000000000000042.log"
    assert files.segment_file_name(42, files.TIME_INDEX_SUFFIX) == "00000000000000000042.timeindex"
    assert files.segment_file_name(2**63 - 1) == "09223372036854775807.log"


@pytest.mark.parametrize(("name", "base"), [
    ("00000000000000000042.log", 42),
    ("x/00000000000000000042.timeindex", 42),
    ("00000000000000000042.log.deleted", 42),  # any suffix: the stem decides
    ("42.log", None),
    ("000000000000000000042.log", None),  # 21 digits
    ("0000000000000000004x.log", None),
    ("٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٤٢.log", None),  # digits, but not ASCII ones
])
def test_base_offset_of_reads_the_20_digit_stem(name: str, base: int | None) -> None:
    assert files.base_offset_of(name) == base
    assert files.base_offset_of(Path(name)) == base


@pytest.mark.parametrize(("name", "parsed"), [
    ("00000000000000000042.log", (42, ".log")),
    ("00000000000000000042.index", (42, ".index")),
    ("00000000000000000042.timeindex", (42, ".timeindex")),
    ("00000000000000000042.txnindex", (42, ".txnindex")),
    ("00000000000000000042.log.deleted", None),
    ("00000000000000000042.snapshot", None),
    ("00000000000000000042.logx", None),
    ("42.log", None),
    ("topic.json", None),
    ("", None),
])
def test_parse_segment_file_name_accepts_exact_segment_names_only(name: str, parsed: tuple[int, str] | None) -> None:
    assert files.parse_segment_file_name(name) == parsed


def test_listing_sorts_segments_and_notes_which_index_files_exist(tmp_path: Path) -> None:
    touch(tmp_path, "00000000000000000100.log", "00000000000000000100.index",
          "00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
          "00000000000000000000.txnindex", "00000000000000000050.log", "00000000000000000050.timeindex",
          "topic.json", "00000000000000000007.snapshot", "00000000000000000003.snapshot", "3.snapshot")
    listing = list_partition_dir(tmp_path)
    assert listing.directory == tmp_path
    assert listing.segments == (
        ListedSegment(0, True, True, True),
        ListedSegment(50, False, True, False),
        ListedSegment(100, True, False, False),
    )
    assert listing.base_offsets == [0, 50, 100]
    assert listing.leftovers == listing.orphan_indexes == listing.misnamed == ()
    assert listing.snapshots == (3, 7)  # producer-state snapshots, by offset
    assert listing.segments[1].path(tmp_path, files.TIME_INDEX_SUFFIX) == tmp_path / "00000000000000000050.timeindex"


def test_listing_sets_apart_leftovers_orphan_indexes_and_misnamed_files(tmp_path: Path) -> None:
    touch(tmp_path, "00000000000000000000.log", "00000000000000000000.log.deleted",
          "00000000000000000000.index.deleted", "00000000000000000009.log.swap", "00000000000000000009.log.cleaned",
          "topic.json.tmp", "00000000000000000030.index", "00000000000000000030.txnindex", "42.log", "x.timeindex")
    listing = list_partition_dir(tmp_path)
    assert listing.base_offsets == [0]
    assert listing.segments[0] == ListedSegment(0, False, False, False)
    assert listing.leftovers == (
        "00000000000000000000.index.deleted", "00000000000000000000.log.deleted", "00000000000000000009.log.cleaned",
        "00000000000000000009.log.swap", "topic.json.tmp",
    )
    assert listing.orphan_indexes == ("00000000000000000030.index", "00000000000000000030.txnindex")
    assert listing.misnamed == ("42.log", "x.timeindex")
    assert set(listing.removable) == set(listing.leftovers) | set(listing.orphan_indexes)


def test_remove_leftovers_removes_exactly_what_an_open_removes(tmp_path: Path) -> None:
    touch(tmp_path, "00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.log.deleted",
          "00000000000000000030.timeindex", "42.log", "topic.json")
    listing = list_partition_dir(tmp_path)
    (tmp_path / "00000000000000000030.timeindex").unlink()  # gone meanwhile: not an error
    assert remove_leftovers_sync(listing) == ["00000000000000000000.log.deleted"]
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000000.index", "00000000000000000000.log", "42.log", "topic.json"]
    assert list_partition_dir(tmp_path).removable == ()


def test_listing_a_missing_directory_or_a_file_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such partition directory"):
        list_partition_dir(tmp_path / "missing")
    touch(tmp_path, "plain")
    with pytest.raises(StorageError, match="not a directory"):
        list_partition_dir(tmp_path / "plain")


def test_listing_and_removal_go_through_the_file_layer(tmp_path: Path) -> None:
    touch(tmp_path, "00000000000000000000.log", "00000000000000000000.log.deleted")
    ops = FailingOps()
    ops.fail("listdir", errno.EIO)
    with pytest.raises(StorageError, match="cannot list"):
        list_partition_dir(tmp_path, ops=ops)
    listing = list_partition_dir(tmp_path, ops=ops)
    ops.fail("unlink", errno.EACCES)
    with pytest.raises(StorageError, match="cannot remove a leftover"):
        remove_leftovers_sync(listing, ops=ops)
    assert (tmp_path / "00000000000000000000.log.deleted").exists()
    assert ops.calls["listdir"] == 2 and ops.calls["unlink"] == 1

def test_snapshot_file_names() -> None:
    assert files.snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert files.snapshot_offset_of("00000000000000001234.snapshot") == 1234
    for name in (
        "00000000000000001234.snapshot.deleted", "1234.snapshot", "0000000000000000123x.snapshot",
        "00000000000000001234.log", "99999999999999999999.snapshot", "٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠٠١.snapshot",
    ):
        assert files.snapshot_offset_of(name) is None, name
