"""engine.loader: the recovery plan, the chain of segments, the log start -- and that the dry run is the open.

The rules are pure (``plan_recovery``, ``RecoveryWalk``, ``settle_log_start``) and tested here
without a file; ``dry_run_recovery`` runs them over hand-built directories; the property test
at the end damages real directories at random and holds ``seglog recover --dry-run``'s plan to
what ``Engine.open`` (and, after a clean stop, each partition's first use) then does.
"""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from corruption_model import (
    LONG_INTERVAL_MS as LONG,
)
from corruption_model import (
    SHAPES,
    Site,
    Templates,
    apply_random_damage,
    engine_config,
)

from seglog.engine import Engine, RecoveryProgress, errors, loader, offline
from seglog.engine.checkpoints import ClosedPartition
from seglog.engine.loader import (
    DiskSegment,
    PartitionFacts,
    PartitionRecovery,
    RecoveryWalk,
    dry_run_recovery,
    plan_recovery,
    settle_log_start,
)
from seglog.segments.records import Record

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from segfiles import flip_byte, simple_log_dir, write_checkpoints

MAX = 1 << 20


def facts(*segments: tuple[int, int], missing_index: tuple[int, ...] = (), end: int | None = None,
          problem: str | None = None) -> PartitionFacts:
    """A partition of ``(base offset, .log bytes)`` segments; ``missing_index``: bases without a ``.timeindex``."""
    return PartitionFacts(
        tuple(DiskSegment(base, size, True, base not in missing_index) for base, size in segments), (), end, problem
    )


def walk_all(walk: RecoveryWalk, scans: dict[int, tuple[int, int]], *, heads: dict[int, int] | None = None,
             start: int | None = None, last_end: int | None = None) -> PartitionRecovery:
    """Drive ``walk`` as the open does: ``scans[base] = (valid bytes, next offset)``; a first batch at its name."""
    segments = walk.plan.facts.segments
    looked: list[int] = []
    while (i := walk.next()) is not None:
        base = segments[i].base_offset
        looked.append(base)
        first = (heads or {}).get(base, base)
        if walk.first_batch(i, first if segments[i].size_bytes else None):
            valid, next_offset = scans[base]
            walk.scanned(i, valid_bytes=valid, next_offset=next_offset)
    return walk.finish(topic="t", partition=0, log_start_checkpoint=start, last_end=last_end)


def actions(recovery: PartitionRecovery) -> list[tuple[int, str]]:
    return [(s.base_offset, s.action.value) for s in recovery.segments]


# ------------------------------------------------------------------------------------------ the plan


def test_an_unclean_stop_recovers_from_the_segment_holding_the_recovery_point() -> None:
    f = facts((0, 100), (10, 100), (20, 100), (30, 50))
    plan = plan_recovery(f, unclean=True, recovery_point=25)
    assert (plan.unclean_from, plan.recovery_point) == (2, 25) and "recovery point 25" in plan.unclean_why
    assert [plan.why_scanned(i) is not None for i in range(4)] == [False, False, True, True]
    assert plan_recovery(f, unclean=True, recovery_point=None).unclean_from == 0  # no checkpoint entry: all


def test_a_clean_stop_scans_only_segments_missing_an_index_or_an_active_segment_that_does_not_parse() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 100), missing_index=(10,), end=25),
                         unclean=False, recovery_point=25)
    assert plan.unclean_from == 3 and plan.rebuilt == ((1, "its .timeindex is missing"),)
    plan = plan_recovery(facts((0, 100), (10, 100), problem="a torn batch"), unclean=False, recovery_point=None)
    assert [i for i, _ in plan.rebuilt] == [1] and "does not parse to its end (a torn batch)" in plan.rebuilt[0][1]


@pytest.mark.parametrize(("record", "first_in_doubt", "why"), [
    (ClosedPartition(25, 300, 0, (10, 20), (100, 100)), 0, "lists segments [10, 20]"),  # omits the first
    (ClosedPartition(25, 300, 0, (0, 10, 15, 20), (100, 100, 0, 100)), 2, "lists segments"),  # one too many
    (ClosedPartition(25, 300, 0, (0, 10, 20), (100, 90, 110)), 1, "segment 10 holds 100 bytes, the record says 90"),
    (ClosedPartition(25, 290, 0, (0, 10, 20)), 0, "the segments hold 300 bytes, the record says 290"),  # version 1
    (ClosedPartition(27, 300, 0, (0, 10, 20), (100, 100, 100)), 2, "the log ends at 25, the record says 27"),
])
def test_a_clean_shutdown_record_that_disagrees_with_the_files_makes_the_partition_recover(
    record: ClosedPartition, first_in_doubt: int, why: str
) -> None:
    f = facts((0, 100), (10, 100), (20, 100), end=25)
    plan = plan_recovery(f, unclean=False, recovery_point=25, record=record)
    assert plan.record_problem is not None and why in plan.record_problem
    # From the segment before the first one in doubt: its end must meet the next segment's base offset.
    assert plan.unclean_from == max(first_in_doubt - 1, 0)
    assert "does not match the files" in plan.unclean_why


def test_a_clean_shutdown_record_that_agrees_scans_nothing() -> None:
    f = facts((0, 100), (10, 100), (20, 100), end=25)
    for record in (ClosedPartition(25, 300, 0, (0, 10, 20), (100, 100, 100)), ClosedPartition(25, 300, 0, (0, 10, 20))):
        plan = plan_recovery(f, unclean=False, recovery_point=25, record=record)
        assert plan.record_problem is None and not plan.scans_anything


# ------------------------------------------------------------------------------------------ the walk


def test_segments_that_chain_are_recovered_and_kept() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 50)), unclean=True, recovery_point=0)
    got = walk_all(RecoveryWalk(plan), {0: (100, 10), 10: (100, 20), 20: (50, 25)})
    assert actions(got) == [(0, "keep"), (10, "keep"), (20, "keep")]
    assert (got.log_start_offset, got.log_end_offset, got.new_segment_at) == (0, 25, None)


def test_a_segment_whose_first_batch_is_not_at_its_name_is_set_aside_whole_and_the_log_ends_there() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 100), (30, 50)), unclean=True, recovery_point=0)
    got = walk_all(RecoveryWalk(plan), {0: (100, 10), 10: (100, 20), 20: (100, 30), 30: (50, 35)},
                   heads={10: 30})  # segment 10's file holds segment 30's batches (swapped)
    assert actions(got) == [(0, "keep"), (10, "set-aside"), (20, "set-aside"), (30, "set-aside")]
    assert "first batch has base offset 30, not the 10 of its name" in got.segments[1].reason
    assert "offsets 10..19 are missing" in got.segments[2].reason
    assert got.log_end_offset == 10 and got.segments[1].truncated_bytes == 100  # set aside, never cut


def test_a_segment_overlapping_the_log_is_set_aside_alone() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (14, 100), (20, 50)), unclean=True, recovery_point=0)
    got = walk_all(RecoveryWalk(plan), {0: (100, 10), 10: (100, 20), 14: (100, 24), 20: (50, 25)},
                   heads={14: 10})  # a copy of segment 10 under the name 14
    assert actions(got) == [(0, "keep"), (10, "keep"), (14, "set-aside"), (20, "keep")]
    assert "inside the offsets the log already holds below 20" in got.segments[2].reason
    assert got.log_end_offset == 25


def test_a_gap_sets_aside_every_later_segment() -> None:
    plan = plan_recovery(facts((0, 100), (20, 100), (30, 50)), unclean=True, recovery_point=0)  # 10 is gone
    got = walk_all(RecoveryWalk(plan), {0: (100, 10), 20: (100, 30), 30: (50, 35)})
    assert actions(got) == [(0, "keep"), (20, "set-aside"), (30, "set-aside")]
    assert got.log_end_offset == 10


def test_a_gap_at_the_head_of_the_log_moves_its_start_instead() -> None:
    # The first segment was emptied: nothing is kept before the gap, so the log starts after it.
    plan = plan_recovery(facts((0, 0), (10, 100), (20, 50)), unclean=True, recovery_point=0)
    got = walk_all(RecoveryWalk(plan), {0: (0, 0), 10: (100, 20), 20: (50, 25)}, start=0)
    assert actions(got) == [(0, "delete"), (10, "keep"), (20, "keep")]
    assert (got.log_start_offset, got.log_end_offset) == (10, 25)


def test_after_an_unclean_stop_a_cut_segment_is_followed_by_nothing() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 50)), unclean=True, recovery_point=0)
    got = walk_all(RecoveryWalk(plan), {0: (100, 10), 10: (60, 16), 20: (50, 25)})
    assert actions(got) == [(0, "keep"), (10, "truncate"), (20, "delete")]
    assert got.segments[1].truncated_bytes == 40 and got.log_end_offset == 16


def test_after_a_clean_stop_a_rebuilt_segment_that_no_longer_meets_the_next_one_breaks_the_chain() -> None:
    # Segment 0 misses an index and is cut when rebuilt: offsets 6..9 are gone, and the log ends there.
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 50), missing_index=(0,), end=25), unclean=False,
                         recovery_point=25)
    got = walk_all(RecoveryWalk(plan), {0: (60, 6), 10: (100, 20), 20: (50, 25)})
    assert actions(got) == [(0, "truncate"), (10, "set-aside"), (20, "set-aside")]
    assert got.log_end_offset == 6


def test_trusted_segments_are_not_looked_at() -> None:
    plan = plan_recovery(facts((0, 100), (10, 100), (20, 50), missing_index=(10,), end=25), unclean=False,
                         recovery_point=25)
    got = walk_all(RecoveryWalk(plan), {10: (100, 20)})
    assert actions(got) == [(10, "keep")] and got.log_end_offset == 25  # the active end the open read


# ------------------------------------------------------------------------------------------ the log start


def test_the_log_start_checkpoint_is_raised_to_the_first_segment_and_never_above_the_log_end() -> None:
    assert settle_log_start(None, 10, 30) == (10, None)
    assert settle_log_start(4, 10, 30) == (10, None)  # Kafka's max(checkpoint, first base offset)
    assert settle_log_start(17, 10, 30) == (17, None)
    start, note = settle_log_start(99, 10, 30)
    assert start == 30 and note is not None and "above the log end 30" in note


async def test_a_log_start_checkpoint_above_the_files_is_clamped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    simple_log_dir(tmp_path, clean=False)
    write_checkpoints(tmp_path, {("orders", 0): 0, ("orders", 1): 0}, {("orders", 0): 500, ("orders", 1): 0},
                      clean=False)
    with caplog.at_level(logging.WARNING):
        async with Engine.open(tmp_path) as engine:
            log = engine.log("orders", 0)
            assert (log.log_start_offset, log.log_end_offset) == (36, 36)
    assert "log-start checkpoint 500 is above the log end 36" in caplog.text
    shutil.copy(tmp_path / "log-start-offset-checkpoint", tmp_path / "kept")
    assert b"orders 0 36" in (tmp_path / "kept").read_bytes()


# ------------------------------------------------------------------------------------------ the dry run


def _snapshot(root: Path) -> dict[Path, tuple[int, str]]:
    return {p: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in root.rglob("*") if p.is_file()}


def test_the_dry_run_after_a_clean_shutdown_is_empty_unless_forced(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    before = _snapshot(tmp_path)
    plan = dry_run_recovery(tmp_path)
    assert not plan.will_recover and all(p.segments == () and p.plan.removed_files == () for p in plan.partitions)
    forced = dry_run_recovery(tmp_path, force=True)
    assert forced.will_recover and forced.bytes_truncated == 0
    p0 = forced.partitions[0]
    # The recovery point (36) is the log end: only the segment holding it (the last) is scanned.
    assert (p0.plan.recovery_point, p0.plan.unclean_from, actions(p0)) == (36, 2, [(24, "keep")])
    assert p0.log_end_offset == 36
    assert _snapshot(tmp_path) == before


def test_the_dry_run_after_a_crash_truncates_and_deletes_what_follows(tmp_path: Path) -> None:
    simple_log_dir(tmp_path, clean=False)
    write_checkpoints(tmp_path, {("orders", 0): 5, ("orders", 1): 0}, clean=False)
    log = tmp_path / "orders-0" / f"{12:020d}.log"
    positions = offline.scan_segment(log, max_batch_bytes=MAX, keep_batches=True).positions
    flip_byte(log, positions[2] + 20)
    plan = dry_run_recovery(tmp_path)
    assert plan.will_recover and not plan.clean_shutdown
    p0 = {(p.topic, p.partition): p for p in plan.partitions}[("orders", 0)]
    assert actions(p0) == [(0, "keep"), (12, "truncate"), (24, "delete")]
    cut = p0.segments[1]
    assert cut.valid_bytes == positions[2] and f"invalid batch at position {positions[2]}" in cut.reason
    assert cut.next_offset == 18 and p0.log_end_offset == 18
    deleted = (tmp_path / "orders-0" / f"{24:020d}.log").stat().st_size
    assert plan.bytes_truncated == (log.stat().st_size - positions[2]) + deleted


def test_the_dry_run_after_a_clean_shutdown_rebuilds_segments_missing_an_index(tmp_path: Path) -> None:
    simple_log_dir(tmp_path)
    (tmp_path / "orders-0" / f"{0:020d}.timeindex").unlink()
    flip_byte(tmp_path / "orders-0" / f"{0:020d}.log", 150)  # cut when rebuilt: the later segments no longer chain
    orphan = tmp_path / "orders-0" / f"{99:020d}.index"
    orphan.write_bytes(b"")
    leftover = tmp_path / "orders-1" / "topic.json.tmp"
    leftover.write_bytes(b"")
    plan = dry_run_recovery(tmp_path)
    assert plan.will_recover
    p0, p1 = plan.partitions
    assert actions(p0) == [(0, "truncate"), (12, "set-aside"), (24, "set-aside")]
    assert "its .timeindex is missing" in p0.segments[0].reason
    assert (p0.plan.removed_files, p1.plan.removed_files, p1.segments) == ((orphan.name,), (leftover.name,), ())


def test_the_dry_run_ignores_an_unreadable_recovery_checkpoint(tmp_path: Path) -> None:
    simple_log_dir(tmp_path, clean=False)
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"garbage")
    plan = dry_run_recovery(tmp_path)
    assert plan.recovery_checkpoint_problem is not None
    assert all(p.plan.recovery_point == 0 and p.plan.unclean_from == 0 for p in plan.partitions)


async def test_a_segment_set_aside_is_kept_on_disk_and_never_served_again(tmp_path: Path) -> None:
    simple_log_dir(tmp_path, clean=False)
    write_checkpoints(tmp_path, {("orders", 0): 0, ("orders", 1): 0}, clean=False)  # recover every segment
    (tmp_path / "orders-0" / f"{12:020d}.log").unlink()  # a gap: segment 24 no longer chains
    async with Engine.open(tmp_path) as engine:
        log = engine.log("orders", 0)
        assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets()) == (0, 12, [0])
    stray = sorted(p.name for p in (tmp_path / "orders-0").iterdir() if p.name.endswith(".stray"))
    assert [name.split(".")[:2] for name in stray] == [[f"{24:020d}", "index"], [f"{24:020d}", "log"],
                                                       [f"{24:020d}", "timeindex"]]
    async with Engine.open(tmp_path) as engine:  # a later open neither serves nor removes them
        assert engine.log("orders", 0).segment_base_offsets() == [0]
        assert (await engine.log("orders", 0).append([Record(b"next")])).first_offset == 12
    assert sorted(p.name for p in (tmp_path / "orders-0").iterdir() if p.name.endswith(".stray")) == stray


async def test_a_clean_first_use_that_matches_the_record_scans_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    simple_log_dir(tmp_path)
    async with Engine.open(tmp_path) as engine:  # writes a version 2 record at its clean close
        await engine.log("orders", 0).read(0)
    scans: list[object] = []
    original = loader.LogSegment.recover

    async def counted(self: Any, *args: Any, **kwargs: Any) -> int:
        scans.append(self)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(loader.LogSegment, "recover", counted)
    async with Engine.open(tmp_path) as engine:
        assert [r.offset for r in (await engine.log("orders", 0).read(0, 1 << 20)).records][:3] == [0, 1, 2]
    assert scans == []


# ------------------------------------------------------------------------------ dry run == open (property)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(tmp_path_factory.mktemp("templates"))


def _comparable(p: PartitionRecovery) -> tuple[object, ...]:
    return (p.topic, p.partition, p.plan, p.segments, p.log_start_offset, p.log_end_offset, p.new_segment_at,
            p.notes)


@pytest.mark.parametrize("seed", range(48))
async def test_the_dry_run_plan_is_what_the_open_then_does(
    seed: int, templates: Templates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(f"loader-{seed}")
    clean, unclean = await templates.get(rng.randrange(SHAPES))
    template = clean if rng.random() < 0.5 else unclean
    path = tmp_path / "d"
    shutil.copytree(template.path, path, copy_function=shutil.copyfile)
    damages = apply_random_damage(Site(rng, path, template))
    before = _snapshot(path)
    try:
        plan = dry_run_recovery(path, config=engine_config())
    except errors.SeglogError:
        plan = None  # the dry run refuses the directory: so must the open
    assert _snapshot(path) == before, "the dry run changed a file"
    first_uses: list[PartitionRecovery] = []
    original = loader.open_unopened

    async def recorded(*args: Any) -> Any:
        loaded, recovery = await original(*args)
        first_uses.append(recovery)
        return loaded, recovery

    monkeypatch.setattr(loader, "open_unopened", recorded)
    opened: list[RecoveryProgress] = []
    try:
        engine = await open_engine_with_progress(path, opened.append)
    except errors.SeglogError:
        assert plan is None, f"the open refused what the dry run planned ({damages})"
        return
    assert plan is not None, f"the dry run refused what the open accepted ({damages})"
    async with engine:
        for log in engine.logs():  # after a clean stop each partition is recovered by its first use
            try:
                await log.read(log.log_start_offset, 1)
            except errors.SeglogError:
                continue
        done = [p.recovery for p in opened if p.recovery is not None] + first_uses
        want = {(p.topic, p.partition): p for p in plan.partitions}
        got = {(p.topic, p.partition): p for p in done}
        assert set(got) <= set(want)
        for key, recovery in got.items():
            assert _comparable(recovery) == _comparable(want[key]), f"{key} after {[str(d) for d in damages]}"
            log = engine.log(*key)
            assert (log.log_start_offset, log.log_end_offset) == (recovery.log_start_offset, recovery.log_end_offset)
        # What the open left alone, the dry run left alone too.
        assert all(not want[k].segments for k in set(want) - set(got) if not _lazy(engine, k))


def _lazy(engine: Engine, key: tuple[str, int]) -> bool:
    return engine.log(*key)._unopened is not None


async def open_engine_with_progress(path: Path, on_progress: Any) -> Engine:
    """The fuzz model's engine (its default config, background work that never runs), reporting progress."""
    return await Engine.open(path, engine_config(), on_progress=on_progress, retention_check_interval_ms=LONG,
                             checkpoint_interval_ms=LONG, flush_check_interval_ms=LONG)
