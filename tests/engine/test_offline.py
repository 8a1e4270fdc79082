"""engine.offline: describe, dump, verify, lookup explanation and reads on hand-built files (recovery: test_loader.py).

The files are written with the batch codec and the index classes (tests/cli/segfiles.py)
and then damaged byte by byte; every damage must come back as a typed finding naming
the file and position, never as an exception.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.engine import loader, offline
from seglog.engine.errors import StorageError, UnknownTopicOrPartitionError
from seglog.engine.offline import Check, Severity
from seglog.indexes import OffsetIndex, TimeIndex, TransactionIndex
from seglog.indexes.transaction_index import AbortedTxn
from seglog.segments.records import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from segfiles import (
    T0,
    append_bytes,
    flip_byte,
    records,
    simple_log_dir,
    truncate,
    write_checkpoints,
    write_partition,
    write_segment,
)

MAX = 1 << 20


def seg_path(log_dir: Path, topic: str, partition: int, base: int, suffix: str = ".log") -> Path:
    return log_dir / f"{topic}-{partition}" / f"{base:020d}{suffix}"


def bad(report: offline.VerifyReport) -> list[offline.Finding]:
    return [f for f in report.findings if f.severity is not Severity.INFO]


# ----------------------------------------------------------------------------- listing


def test_list_segments_gives_each_segment_its_successor(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    segs = offline.list_segments(tmp_path / "orders-0")
    assert [(s.base_offset, s.next_base_offset) for s in segs] == [(0, 12), (12, 24), (24, None)]
    assert segs[-1].is_active and not segs[0].is_active
    assert all(s.size_bytes == s.log_path.stat().st_size > 0 for s in segs)
    assert all(s.index_bytes is not None and s.time_index_bytes is not None for s in segs)
    assert all(s.txn_index_bytes is None for s in segs)


def test_describe_log_dir_reads_offsets_and_checkpoints(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    info = offline.describe_log_dir(tmp_path)
    assert info.topics() == ["orders"] and info.clean_shutdown
    p0, p1 = info.partitions
    assert (p0.partition, p0.log_start_offset, p0.log_end_offset, p0.recovery_point) == (0, 0, 36, 36)
    assert (p1.partition, p1.log_end_offset) == (1, 2)
    assert p0.size_bytes == sum(s.size_bytes for s in p0.segments)
    assert offline.describe_log_dir(tmp_path, topic="nope").partitions == []


def test_describe_missing_directory_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="no such log directory"):
        offline.describe_log_dir(tmp_path / "missing")
    with pytest.raises(StorageError):
        offline.verify(tmp_path / "missing")


def test_log_end_offset_survives_a_garbage_index(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    idx = seg_path(tmp_path, "orders", 0, 24, ".index")
    idx.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x07")  # offset 29 "at" position 7: not a batch start
    assert offline.describe_partition(tmp_path / "orders-0").log_end_offset == 36


# ----------------------------------------------------------------------------- verify: clean


def test_verify_clean_directory(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    report = offline.verify(tmp_path)
    assert report.ok, report.findings
    assert report.findings == []
    assert (report.partitions, report.segments, report.batches, report.records) == (2, 4, 13, 38)
    assert report.indexes_checked == 8
    assert report.bytes_checked == sum(p.stat().st_size for p in tmp_path.rglob("*.log"))


def test_verify_one_partition_directory(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    report = offline.verify(tmp_path / "orders-0")
    assert report.ok and report.partitions == 1 and report.segments == 3


def test_verify_reports_progress(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    seen: list[offline.VerifyProgress] = []
    offline.verify(tmp_path, on_progress=seen.append)
    assert seen and seen[-1].bytes_done == seen[-1].bytes_total


def test_verify_changes_nothing(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    flip_byte(seg_path(tmp_path, "orders", 0, 12), 100)
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()}
    offline.verify(tmp_path, deep=True)
    loader.dry_run_recovery(tmp_path, force=True)
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.rglob("*") if p.is_file()}
    assert before == after


# ----------------------------------------------------------------------------- verify: damage


def test_corrupted_offset_index_entry_names_the_file(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    idx = seg_path(tmp_path, "orders", 0, 12, ".index")
    data = bytearray(idx.read_bytes())
    assert len(data) >= 8
    data[4:8] = (int.from_bytes(data[4:8], "big") + 1).to_bytes(4, "big")  # position off by one
    idx.write_bytes(bytes(data))
    report = offline.verify(tmp_path)
    assert not report.ok
    (f,) = bad(report)
    assert (f.check, f.severity, f.path, f.position) == (Check.OFFSET_INDEX, Severity.ERROR, idx, 0)
    assert "not the start of a batch" in f.message
    assert report.bad_files == [idx]


def test_offset_index_entry_pointing_at_the_wrong_batch(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    idx = seg_path(tmp_path, "orders", 0, 0, ".index")
    entries = offline.dump_index(idx).entries
    assert len(entries) >= 2
    # Swap in the first entry's position for the second: a batch start, but the wrong batch.
    data = bytearray(idx.read_bytes())
    data[12:16] = data[4:8]
    idx.write_bytes(bytes(data))
    (f,) = bad(offline.verify(tmp_path))
    assert f.check is Check.OFFSET_INDEX and f.path == idx
    # Entries out of order are caught by the sanity check before the log comparison.
    assert "does not follow" in f.message or "holds offsets" in f.message


def test_index_length_not_a_multiple_of_the_entry_size(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    tix = seg_path(tmp_path, "orders", 0, 0, ".timeindex")
    append_bytes(tix, b"\x01\x02\x03")
    (f,) = bad(offline.verify(tmp_path))
    assert (f.check, f.path, f.position) == (Check.INDEX_SIZE, tix, tix.stat().st_size - 3)


def test_time_index_timestamp_that_is_not_the_running_max(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    tix = seg_path(tmp_path, "orders", 0, 0, ".timeindex")
    data = bytearray(tix.read_bytes())
    ts = int.from_bytes(data[0:8], "big")
    data[0:8] = (ts - 1).to_bytes(8, "big")  # still increasing, but below the batch's max timestamp
    tix.write_bytes(bytes(data))
    (f,) = bad(offline.verify(tmp_path))
    assert (f.check, f.path, f.position) == (Check.TIME_INDEX, tix, 0)
    assert "largest timestamp" in f.message


def test_time_index_out_of_order(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    tix = seg_path(tmp_path, "orders", 0, 0, ".timeindex")
    data = bytearray(tix.read_bytes())
    assert len(data) >= 24
    data[12:20] = (0).to_bytes(8, "big")
    tix.write_bytes(bytes(data))
    (f,) = bad(offline.verify(tmp_path))
    assert f.check is Check.TIME_INDEX and "slot 1" in f.message and f.position == 12


def test_torn_tail_names_the_position(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 24)
    last_batch = offline.scan_segment(log, max_batch_bytes=MAX, keep_batches=True).positions[-1]
    truncate(log, last_batch + 30)
    report = offline.verify(tmp_path)
    kinds = {(f.check, f.path, f.position) for f in bad(report)}
    assert (Check.TORN_TAIL, log, last_batch) in kinds
    torn = next(f for f in report.findings if f.check is Check.TORN_TAIL)
    assert "torn write" in torn.message and f"position {last_batch}" in torn.message
    assert torn.offset == 33  # the next offset recovery would assign


def test_flipped_byte_in_the_middle_is_an_invalid_batch(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 12)
    positions = offline.scan_segment(log, max_batch_bytes=MAX, keep_batches=True).positions
    flip_byte(log, positions[1] + 70)  # inside the body of the second batch: the CRC catches it
    report = offline.verify(tmp_path)
    torn = [f for f in bad(report) if f.check is Check.BATCH]
    assert len(torn) == 1 and torn[0].position == positions[1] and "CRC" in torn[0].message
    # Index entries now point past the last valid batch, and the next segment no longer follows on.
    assert any(f.check is Check.OFFSET_INDEX for f in bad(report))
    assert any(f.check is Check.OFFSETS and "missing" in f.message for f in bad(report))


def test_untrimmed_index_is_info_on_a_live_active_segment_and_a_warning_elsewhere(tmp_path: Path) -> None:
    simple_log_dir(tmp_path, clean=False)
    active = seg_path(tmp_path, "orders", 0, 24, ".index")
    rolled = seg_path(tmp_path, "orders", 0, 0, ".index")
    append_bytes(active, bytes(64))
    report = offline.verify(tmp_path)
    assert report.ok
    (note,) = report.findings
    assert (note.severity, note.check, note.path) == (Severity.INFO, Check.INDEX_SIZE, active)
    append_bytes(rolled, bytes(64))
    (f,) = bad(offline.verify(tmp_path))
    assert (f.severity, f.path) == (Severity.WARNING, rolled)


def test_preallocated_log_tail_is_reported_as_zeros(tmp_path: Path) -> None:
    simple_log_dir(tmp_path, clean=False)
    log = seg_path(tmp_path, "orders", 1, 0)
    size = log.stat().st_size
    append_bytes(log, bytes(1000))
    report = offline.verify(tmp_path)
    (f,) = report.findings
    assert (f.severity, f.check, f.position) == (Severity.INFO, Check.ZERO_TAIL, size)
    (tmp_path / ".clean-shutdown").write_bytes(b"")
    (f,) = offline.verify(tmp_path).findings
    assert f.severity is Severity.WARNING


def test_orphan_and_misnamed_files(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    orphan = tmp_path / "orders-0" / f"{99:020d}.index"
    orphan.write_bytes(b"")
    misnamed = tmp_path / "orders-0" / "42.log"
    misnamed.write_bytes(b"")
    pending = tmp_path / "orders-0" / f"{0:020d}.log.deleted"
    pending.write_bytes(b"")
    report = offline.verify(tmp_path)
    got = {(f.check, f.path, f.severity) for f in report.findings}
    assert got == {
        (Check.ORPHAN, orphan, Severity.WARNING),
        (Check.FILE_NAME, misnamed, Severity.WARNING),
        (Check.FILE_NAME, pending, Severity.INFO),
    }


def test_checkpoints_unparseable_or_beyond_the_log_end(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    write_checkpoints(tmp_path, {("orders", 0): 37, ("orders", 1): 2, ("gone", 0): 5})
    found = {(f.path.name, f.severity, f.offset) for f in offline.verify(tmp_path).findings
             if f.check is Check.CHECKPOINT}
    assert found == {
        ("recovery-point-offset-checkpoint", Severity.ERROR, 37),
        ("recovery-point-offset-checkpoint", Severity.WARNING, 5),
        ("log-start-offset-checkpoint", Severity.WARNING, 0),  # 'gone 0 0': no such partition
    }
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"0\n7\norders 0 1\n")
    errs = [f for f in offline.verify(tmp_path).findings if f.check is Check.CHECKPOINT]
    assert any(f.severity is Severity.ERROR and f.path.name == "recovery-point-offset-checkpoint" for f in errs)


def test_gap_and_overlap_between_segments(tmp_path: Path) -> None:
    directory, _ = write_partition(tmp_path, "t", 0, [[records(3)]])
    write_segment(directory, 10, [records(2)])
    (f,) = bad(offline.verify(tmp_path))
    assert (f.check, f.severity, f.offset) == (Check.OFFSETS, Severity.WARNING, 3)
    write_segment(directory, 11, [records(2)])
    fs = bad(offline.verify(tmp_path))
    assert any(f.check is Check.OFFSETS and f.severity is Severity.ERROR and "overlap" in f.message for f in fs)


def test_batch_below_the_segment_base_offset(tmp_path: Path) -> None:
    directory, _ = write_partition(tmp_path, "t", 0, [[records(3)]])
    os.rename(directory / f"{0:020d}.log", directory / f"{5:020d}.log")
    for suffix in (".index", ".timeindex"):
        (directory / f"{0:020d}{suffix}").unlink()
    fs = bad(offline.verify(tmp_path))
    assert any(f.check is Check.BATCH and "below the expected 5" in f.message for f in fs)


def test_topic_file_and_group_file_problems(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    (tmp_path / "orders-1" / "topic.json").write_text("{not json")
    groups = tmp_path / "consumer-offsets"
    groups.mkdir()
    (groups / "YmlsbGluZw.json").write_text("[]")  # "billing", but not a group file
    got = {(f.check, f.severity) for f in offline.verify(tmp_path).findings}
    assert got == {(Check.TOPIC_FILE, Severity.WARNING), (Check.GROUP_FILE, Severity.WARNING)}


def test_txn_index_checks(tmp_path: Path) -> None:
    directory, _ = write_partition(tmp_path, "t", 0, [[records(3), records(3)]])
    path = directory / f"{0:020d}.txnindex"
    txn = TransactionIndex(path, 0)
    txn.append(AbortedTxn(1, 0, 2, 0))
    txn.append(AbortedTxn(2, 3, 9, 0))  # last offset 9 is beyond the segment's data (next offset 6)
    txn.close()
    (f,) = bad(offline.verify(tmp_path))
    assert (f.check, f.position, f.offset) == (Check.TXN_INDEX, 34, 9)
    append_bytes(path, b"xx")
    assert {f.check for f in bad(offline.verify(tmp_path))} == {Check.TXN_INDEX, Check.INDEX_SIZE}
    dump = offline.dump_txn_index(path)
    assert dump.entries == [AbortedTxn(1, 0, 2, 0), AbortedTxn(2, 3, 9, 0)] and dump.partial_bytes == 2


def test_deep_verify_decodes_records(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    report = offline.verify(tmp_path, deep=True)
    assert report.ok and report.findings == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_is_a_finding_never_a_crash(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    log_dir = simple_log_dir(tmp_path_factory.mktemp("d"))
    files = sorted(p for p in log_dir.rglob("*") if p.is_file() and p.stat().st_size)
    target = data.draw(st.sampled_from(files))
    size = target.stat().st_size
    how = data.draw(st.sampled_from(["flip", "truncate", "garbage"]))
    if how == "flip":
        flip_byte(target, data.draw(st.integers(0, size - 1)))
    elif how == "truncate":
        truncate(target, data.draw(st.integers(0, size - 1)))
    else:
        append_bytes(target, data.draw(st.binary(min_size=1, max_size=200)))
    report = offline.verify(log_dir, deep=True)
    loader.dry_run_recovery(log_dir, force=True)
    offline.describe_log_dir(log_dir)
    for f in report.findings:
        assert f.path.is_relative_to(log_dir) and f.message
    if not report.ok:
        assert target in report.bad_files or any(f.path.parent == target.parent for f in bad(report))


# ----------------------------------------------------------------------------- dump


def test_dump_log_headers_records_and_max_bytes(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 12)
    batches = list(offline.dump_log(log))
    assert [b.header.base_offset for b in batches] == [12, 15, 18, 21]
    assert all(b.records is None for b in batches)
    deep = list(offline.dump_log(log, records=True))
    assert [r.offset for b in deep for r in b.records or []] == list(range(12, 24))
    assert deep[0].records is not None and deep[0].records[0].value == b"v0"
    cut = list(offline.dump_log(log, max_bytes=batches[2].position))
    assert len(cut) == 2


def test_dump_log_reports_a_torn_tail(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 0)
    truncate(log, log.stat().st_size - 5)
    findings: list[offline.Finding] = []
    batches = list(offline.dump_log(log, findings=findings))
    assert len(batches) == 3 and findings[0].check is Check.TORN_TAIL


def test_dump_index_finds_entries_and_preallocated_slots(tmp_path: Path) -> None:
    path = tmp_path / f"{100:020d}.index"
    idx = OffsetIndex(path, 100, 80)
    idx.append(105, 0)  # relative offset 5, position 0
    idx.append(110, 300)
    idx.flush()
    dump = offline.dump_index(path)  # still preallocated: 10 slots, 2 used
    idx.close()
    assert dump.kind == "offset" and dump.base_offset == 100
    assert [tuple(e) for e in dump.entries] == [(105, 0), (110, 300)]
    assert (dump.zero_slots, dump.partial_bytes, dump.file_bytes) == (8, 0, 80)
    tpath = tmp_path / f"{100:020d}.timeindex"
    tix = TimeIndex(tpath, 100, 36)
    tix.maybe_append(T0, 104)
    tix.close()
    tdump = offline.dump_index(tpath)
    assert tdump.kind == "time" and [tuple(e) for e in tdump.entries] == [(T0, 104)] and tdump.zero_slots == 0


def test_index_sanity_check_alone(tmp_path: Path) -> None:
    path = tmp_path / f"{50:020d}.index"
    path.write_bytes(bytes.fromhex("00000002 00000010 00000001 00000020".replace(" ", "")))
    (f,) = offline.index_sanity_check(path)
    assert f.check is Check.OFFSET_INDEX and f.position == 8 and "does not follow" in f.message
    path.write_bytes(bytes.fromhex("ffffffff00000000"))
    (f,) = offline.index_sanity_check(path)
    assert "outside" in f.message


def test_base_offset_of_and_segment_file_name() -> None:
    assert offline.segment_file_name(42) == "00000000000000000042.log"
    assert offline.base_offset_of("x/00000000000000000042.timeindex") == 42
    assert offline.base_offset_of("00000000000000000042.log.deleted") == 42
    assert offline.base_offset_of("42.log") is None


# ----------------------------------------------------------------------------- explain


def _out_of_order_dir(log_dir: Path) -> None:
    # Timestamps go up and down across batches, and segments overlap in time.
    ts = [50, 10, 70, 30, 90, 20, 60, 100, 5, 80, 95, 40]
    batches = [[Record(b"x", None, T0 + t * 1000, ())] for t in ts]
    write_partition(log_dir, "t", 0, [batches[:6], batches[6:]], index_interval=0)
    write_checkpoints(log_dir, {("t", 0): 12})


def test_explain_offset_matches_the_index_and_a_scan(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    for offset in range(36):
        ex = offline.explain_offset(tmp_path, "orders", 0, offset)
        assert ex.result_offset == offset and ex.segment_base_offset == offset // 12 * 12
        assert ex.batches_scanned[-1][1] <= offset <= ex.batches_scanned[-1][2]
        assert ex.bytes_scanned > 0 and ex.scan_start_position == ex.offset_index_entry.position  # type: ignore[union-attr]
        assert ex.result_position == ex.batches_scanned[-1][0]
        idx = OffsetIndex(seg_path(tmp_path, "orders", 0, ex.segment_base_offset or 0, ".index"),
                          ex.segment_base_offset or 0, writable=False)
        try:
            assert idx.lookup(offset) == ex.offset_index_entry
        finally:
            idx.close()


def test_explain_offset_records_the_probes(tmp_path: Path) -> None:
    write_partition(tmp_path, "t", 0, [[records(1) for _ in range(40)]])
    ex = offline.explain_offset(tmp_path, "t", 0, 20)
    assert ex.index_entries == 39 and ex.offset_index_probes
    assert ex.offset_index_entry == (20, ex.result_position)
    assert len(ex.batches_scanned) == 1
    assert all(0 <= p.slot < 39 for p in ex.offset_index_probes)
    assert ex.offset_index_probes[-1].key <= 20 or len(ex.offset_index_probes) > 1


def test_explain_offset_out_of_range(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    ex = offline.explain_offset(tmp_path, "orders", 0, 36)
    assert ex.result_offset is None and ex.segment_base_offset is None and "OffsetOutOfRange" in ex.message
    with pytest.raises(UnknownTopicOrPartitionError):
        offline.explain_offset(tmp_path, "orders", 7, 0)


@pytest.mark.parametrize("target", [0, 5, 10, 11, 20, 29, 31, 50, 55, 69, 71, 80, 90, 94, 95, 100, 101])
def test_explain_timestamp_is_the_earliest_offset_at_or_after(tmp_path: Path, target: int) -> None:
    _out_of_order_dir(tmp_path)
    ts = [50, 10, 70, 30, 90, 20, 60, 100, 5, 80, 95, 40]
    want = next((o for o, t in enumerate(ts) if t >= target), None)
    ex = offline.explain_timestamp(tmp_path, "t", 0, T0 + target * 1000)
    assert ex.result_offset == want, ex.message
    if want is not None:
        assert ex.result_timestamp == T0 + ts[want] * 1000
        assert ex.segments_considered[-1][0] == ex.segment_base_offset
    else:
        assert ex.segment_base_offset is None and "None" in ex.message


def test_explain_on_missing_log_dir(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        offline.explain_offset(tmp_path / "nope", "t", 0, 0)


# ----------------------------------------------------------------------------- reading without an Engine


def test_read_records_from_any_offset(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    for start in (0, 4, 11, 12, 13, 35):
        got = list(offline.read_records(tmp_path, "orders", 0, start))
        assert [r.offset for r in got] == list(range(start, 36))
    assert [r.offset for r in offline.read_records(tmp_path, "orders", 0, 10, end_offset=14)] == [10, 11, 12, 13]
    assert list(offline.read_records(tmp_path, "orders", 0, 36)) == []


def test_read_records_does_not_trust_a_garbage_index(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    flip_byte(seg_path(tmp_path, "orders", 0, 12, ".index"), 7)  # first entry points mid-batch
    assert [r.offset for r in offline.read_records(tmp_path, "orders", 0, 20)] == list(range(20, 36))


def test_read_records_stops_at_a_torn_tail(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 24)
    truncate(log, log.stat().st_size - 1)
    assert [r.offset for r in offline.read_records(tmp_path, "orders", 0, 30)] == [30, 31, 32]


def test_offset_for_timestamp_and_sentinels(tmp_path: Path) -> None:
    _out_of_order_dir(tmp_path)
    assert offline.offset_for_timestamp(tmp_path, "t", 0, -2) == (-1, 0)
    assert offline.offset_for_timestamp(tmp_path, "t", 0, -1) == (-1, 12)
    assert offline.offset_for_timestamp(tmp_path, "t", 0, -3) == (T0 + 100_000, 7)
    assert offline.offset_for_timestamp(tmp_path, "t", 0, T0 + 85_000) == (T0 + 90_000, 4)
    assert offline.offset_for_timestamp(tmp_path, "t", 0, T0 + 100_001) is None
    with pytest.raises(ValueError, match="sentinels"):
        offline.offset_for_timestamp(tmp_path, "t", 0, -4)


def test_group_offsets_skips_unreadable_files_of_the_previous_format(tmp_path: Path) -> None:
    from seglog.engine.groups import encode_legacy_group_file, legacy_group_file_name

    simple_log_dir(tmp_path)
    groups = tmp_path / "consumer-offsets"
    groups.mkdir()
    (groups / legacy_group_file_name("billing")).write_bytes(encode_legacy_group_file("billing", {("orders", 0): 7}))
    (groups / legacy_group_file_name("broken")).write_bytes(b"{")
    assert offline.group_offsets(tmp_path) == {"billing": {("orders", 0): 7}}
    # A group whose file does not parse has no offsets: it is not listed (verify names the file).
    assert offline.describe_log_dir(tmp_path).groups == ["billing"]


def test_an_unreadable_segment_is_a_finding(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    log = seg_path(tmp_path, "orders", 0, 12)
    log.unlink()
    log.mkdir()  # a directory where a .log should be
    report = offline.verify(tmp_path)
    assert any(f.path == log and f.severity is Severity.ERROR for f in report.findings)


def test_verify_since_checks_only_recently_modified_segments(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    old_s = 1_700_000_000  # 2023-11-14
    for p in tmp_path.rglob("*"):
        os.utime(p, (old_s, old_s))
    flip_byte(seg_path(tmp_path, "orders", 0, 0), 40)  # CRC-covered damage in a segment nobody touched since
    os.utime(seg_path(tmp_path, "orders", 0, 0), (old_s, old_s))
    append_bytes(seg_path(tmp_path, "orders", 0, 12, ".index"), b"\x01")  # touched now
    report = offline.verify(tmp_path, since_ms=(old_s + 60) * 1000)
    assert (report.segments, report.segments_skipped) == (1, 3)
    assert report.bad_files == [seg_path(tmp_path, "orders", 0, 12, ".index")]
    assert not any(f.check is Check.CHECKPOINT for f in report.findings)  # log end offsets still known
    full = offline.verify(tmp_path)
    assert seg_path(tmp_path, "orders", 0, 0) in full.bad_files and full.segments_skipped == 0
