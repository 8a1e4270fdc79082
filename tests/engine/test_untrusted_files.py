"""Nothing read from disk is trusted: one test per damaged file that once gave a wrong answer or a stray exception.

Each test writes a small log through ``Engine``, damages one file the way docs/FORMAT.md lays it
out, opens the directory again and holds the rule through the public API only (``read``,
``offset_for_timestamp``, the log start and end, the ``seglog`` command line): a read returns
only the records at the offsets asked for, a lookup answers from the records, an index or a
clean-shutdown record that lies is not believed, and every refusal is a ``SeglogError``.
``test_corruption_fuzz.py`` does the same with random damage.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from corruption_model import (
    OFFSET_ENTRY,
    T0,
    TIME_ENTRY,
    batches_of,
    flip_bit,
    open_engine,
    run_cli,
    seg_path,
    segment_bases,
)

from seglog import Engine, PartitionLog, Record
from seglog.engine.errors import CorruptRecordError, SeglogError

TOPIC = "t"
# Small segments: a 30-batch log has about ten of them, each with an index entry per batch.
TOPIC_CONFIG = {"segment_bytes": 400, "index_interval_bytes": 0, "retention_ms": -1, "segment_ms": 1 << 62}


def _timestamp(offset: int) -> int:
    """Out of order: each run of three offsets goes backwards in time."""
    return T0 + offset * 10 - (offset % 3) * 25


async def write_log(
    path: Path, batches: int = 30, per_batch: int = 3, *, clean: bool = True, config: dict[str, Any] | None = None
) -> list[Record]:
    """``batches`` batches of ``per_batch`` records in topic ``t``; closed cleanly, or (``clean=False``) copied open.

    Returns the records by offset. With ``clean=False`` the directory at ``path`` is a copy taken
    while the engine still had it open: what a crash of the process leaves behind.
    """
    records: list[Record] = []
    live = path.with_name(path.name + "-live") if not clean else path
    engine = await open_engine(live)
    try:
        await engine.create_topic(TOPIC, partitions=1, config={**TOPIC_CONFIG, **(config or {})})
        log = engine.log(TOPIC)
        for b in range(batches):
            batch = [
                Record(f"v{b * per_batch + i}".encode(), key=f"k{b}".encode(), timestamp=_timestamp(b * per_batch + i))
                for i in range(per_batch)
            ]
            res = await log.append(batch)
            records += [Record(r.value, r.key, r.timestamp, r.headers, res.first_offset + i) for i, r in
                        enumerate(batch)]
        if not clean:
            shutil.copytree(live, path, ignore=shutil.ignore_patterns(".lock"))
    finally:
        await engine.close()
    if not clean:
        shutil.rmtree(live)
    return records


def partition_dir(path: Path) -> Path:
    return path / f"{TOPIC}-0"


async def library_call(what: str, call: Awaitable[Any]) -> Any:
    """Await ``call``; an exception that is not a ``SeglogError`` fails the test, naming ``what``."""
    try:
        return await call
    except SeglogError:
        raise
    except Exception as exc:
        raise AssertionError(f"{what} raised {type(exc).__name__}, not a SeglogError: {exc}") from exc


def same(a: Record, b: Record) -> bool:
    return (a.offset, a.key, a.value, a.timestamp) == (b.offset, b.key, b.value, b.timestamp)


async def served(log: PartitionLog, model: list[Record]) -> dict[int, Record | SeglogError]:
    """Read at every offset of ``log``; assert that each answer starts at the offset asked for and holds
    the model's records; returns what each offset gave (its record, or the SeglogError raised)."""
    out: dict[int, Record | SeglogError] = {}
    with contextlib.suppress(SeglogError):
        # After a clean stop a partition's files open at its first use, and its log start and end are
        # then the files' (the clean-shutdown record's until then): read the range the files hold.
        await library_call("read(start)", log.read(log.log_start_offset, 1))
    for offset in range(log.log_start_offset, log.log_end_offset):
        try:
            got = await library_call(f"read({offset})", log.read(offset, 1 << 20))
        except SeglogError as exc:
            out[offset] = exc
            continue
        assert got.records, f"read({offset}) returned nothing below the log end {log.log_end_offset}"
        for expected_offset, rec in enumerate(got.records, start=offset):
            assert rec.offset == expected_offset, (
                f"read({offset}) returned offset {rec.offset} where {expected_offset} belongs: a silent jump")
            assert rec.offset < len(model) and same(rec, model[rec.offset]), (
                f"read({offset}) returned {rec!r}, but the record at offset {rec.offset} is "
                f"{model[rec.offset] if rec.offset < len(model) else 'nothing'}")
        out[offset] = got.records[0]
    return out


def earliest_at_or_after(model: list[Record], start: int, ts: int) -> int | None:
    return next((r.offset for r in model[start:] if r.timestamp is not None and r.timestamp >= ts), None)


def lookup_targets(model: list[Record]) -> list[int]:
    stamps = sorted({r.timestamp for r in model if r.timestamp is not None})
    return [stamps[0] - 1, *stamps, *(t + 1 for t in stamps), stamps[-1] + 1]


async def reopen(path: Path) -> Engine:
    return await library_call("Engine.open", open_engine(path))


# ------------------------------------------------------------------------------- the clean-shutdown record


def omit_first_segment_from_clean_shutdown(path: Path) -> int:
    """Rewrite the ``.clean-shutdown`` record without the partition's first segment; returns the new first base."""
    marker = path / ".clean-shutdown"
    lines = marker.read_text("ascii").splitlines()
    out = []
    first = -1
    for line in lines:
        parts = line.split(" ")
        if len(parts) in (6, 7) and parts[0] == TOPIC:
            bases = parts[5].split(",")
            assert len(bases) > 1, "the test needs a partition of several segments"
            parts[5] = ",".join(bases[1:])
            first = int(bases[1])
            if len(parts) == 7:  # version 2: each segment's bytes too, the record stays well-formed
                sizes = parts[6].split(",")
                parts[3] = str(int(parts[3]) - int(sizes[0]))
                parts[6] = ",".join(sizes[1:])
        out.append(" ".join(parts))
    assert first > 0, f"no line for {TOPIC} in {lines}"
    marker.write_text("\n".join(out) + "\n", "ascii")
    return first


def checkpointed_log_start(path: Path) -> int | None:
    for line in (path / "log-start-offset-checkpoint").read_text("ascii").splitlines()[2:]:
        topic, partition, offset = line.split(" ")
        if (topic, partition) == (TOPIC, "0"):
            return int(offset)
    return None


async def test_clean_shutdown_record_omitting_the_first_segment_does_not_move_the_log_start(tmp_path: Path) -> None:
    model = await write_log(tmp_path / "data")
    omit_first_segment_from_clean_shutdown(tmp_path / "data")
    async with await reopen(tmp_path / "data") as engine:
        log = engine.log(TOPIC)
        try:
            got = await library_call("read(0)", log.read(0, 1))
        except SeglogError as exc:
            raise AssertionError(f"read(0) refused: {exc}") from exc
        assert got.records and same(got.records[0], model[0])
        assert log.log_start_offset == 0, "the record hid the first segment"
        await served(log, model)
    assert checkpointed_log_start(tmp_path / "data") == 0, "the wrong log start was checkpointed"
    async with await reopen(tmp_path / "data") as engine:
        assert engine.log(TOPIC).log_start_offset == 0


# ------------------------------------------------------------------------------------ batches and segments


def flip_base_offset(path: Path, *, segment_index: int, batch_index: int, bit: int) -> tuple[int, int]:
    """Flip ``bit`` of a batch's base offset (bytes 0-7, outside the CRC); returns (old, new) base offset."""
    d = partition_dir(path)
    log_file = seg_path(d, segment_bases(d)[segment_index], ".log")
    batch = batches_of(log_file)[batch_index]
    flip_bit(log_file, batch.position + 7 - bit // 8, bit % 8)
    return batch.base_offset, batch.base_offset ^ (1 << bit)


def forget_clean_shutdown(path: Path) -> None:
    """Make the next open recover every segment, as after a crash before the first checkpoint."""
    (path / ".clean-shutdown").unlink(missing_ok=True)
    (path / "recovery-point-offset-checkpoint").unlink(missing_ok=True)


@pytest.mark.parametrize("stop", [
    "clean",  # a read's header walk holds the offsets to follow on: the flipped batch is refused
    "unclean",  # recovery's reader holds the offsets to follow on, and cuts the segment at the flipped batch
])
async def test_flipped_bit_in_a_sealed_batch_base_offset_never_serves_records_at_wrong_offsets(
    tmp_path: Path, stop: str
) -> None:
    model = await write_log(tmp_path / "data", per_batch=4)
    old, new = flip_base_offset(tmp_path / "data", segment_index=0, batch_index=1, bit=3)
    assert (old, new) == (4, 12), "the test expects the second batch (offsets 4-7) to claim base offset 12"
    if stop == "unclean":
        forget_clean_shutdown(tmp_path / "data")
    async with await reopen(tmp_path / "data") as engine:
        log = engine.log(TOPIC)
        answers = await served(log, model)
        hit = answers.get(old)
        if stop == "clean":
            # Nothing recovered it: reading it is the error, and what came before is still served.
            assert isinstance(hit, CorruptRecordError), f"read({old}) gave {hit!r}, not a CorruptRecordError"
        else:
            # Recovery set it aside (the log ends before it) or it is still refused when read.
            assert log.log_end_offset <= old or isinstance(hit, CorruptRecordError), (log.log_end_offset, hit)
        assert all(same(answers[o], model[o]) for o in range(old) if isinstance(answers.get(o), Record)), answers
        assert all(isinstance(answers.get(o), Record) for o in range(old)), "records before the damage were lost"


async def test_high_bit_flip_in_a_sealed_batch_base_offset_never_serves_a_huge_offset(tmp_path: Path) -> None:
    model = await write_log(tmp_path / "data", per_batch=4)
    flip_base_offset(tmp_path / "data", segment_index=0, batch_index=1, bit=52)
    async with await reopen(tmp_path / "data") as engine:
        await served(engine.log(TOPIC), model)


def swap(p: Path, q: Path) -> None:
    a, b = p.read_bytes(), q.read_bytes()
    p.write_bytes(b)
    q.write_bytes(a)


@pytest.mark.parametrize("stop", ["clean", "unclean"])
async def test_two_swapped_log_files_never_serve_records_at_wrong_offsets(tmp_path: Path, stop: str) -> None:
    model = await write_log(tmp_path / "data", clean=stop == "clean")
    d = partition_dir(tmp_path / "data")
    bases = segment_bases(d)
    swap(seg_path(d, bases[2], ".log"), seg_path(d, bases[4], ".log"))
    async with await reopen(tmp_path / "data") as engine:
        answers = await served(engine.log(TOPIC), model)
        assert all(isinstance(answers.get(o), Record) for o in range(bases[2])), "records before the swap were lost"


@pytest.mark.parametrize("stop", ["clean", "unclean", "read_only"])
async def test_deleted_middle_log_file_is_a_reported_gap_never_a_silent_jump(tmp_path: Path, stop: str) -> None:
    model = await write_log(tmp_path / "data", clean=stop == "clean")
    d = partition_dir(tmp_path / "data")
    bases = segment_bases(d)
    middle = len(bases) // 2
    seg_path(d, bases[middle], ".log").unlink()
    gap = range(bases[middle], bases[middle + 1])
    try:
        # A read-only open trusts the listing (a writer may be appending): its reads must not jump.
        engine = await (library_call("Engine.open", open_engine(tmp_path / "data", read_only=True))
                        if stop == "read_only" else reopen(tmp_path / "data"))
    except SeglogError:
        return  # refusing to open the partition reports the gap too
    async with engine:
        log = engine.log(TOPIC)
        answers = await served(log, model)  # asserts no read jumps over the gap
        assert all(isinstance(answers.get(o), Record) for o in range(log.log_start_offset, gap.start)), (
            "records before the gap were lost")
        in_gap = [answers[o] for o in gap if o in answers]
        assert all(isinstance(a, SeglogError) for a in in_gap), in_gap


@pytest.mark.parametrize("where", ["after_the_end", "inside_the_log"])
@pytest.mark.parametrize("mode", ["writable", "read_only"])
async def test_duplicated_segment_never_makes_a_lookup_answer_past_the_log_end(
    tmp_path: Path, where: str, mode: str
) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    bases = segment_bases(d)
    source = bases[-2]  # a sealed segment holding timestamps near the end
    copy_as = len(model) + 50 if where == "after_the_end" else bases[1] + 1
    for suffix in (".log", ".index", ".timeindex"):
        shutil.copyfile(seg_path(d, source, suffix), seg_path(d, copy_as, suffix))
    try:
        # A read-only open trusts the listing (a writer may be appending): its answers must not.
        engine = await (library_call("Engine.open", open_engine(tmp_path / "data", read_only=True))
                        if mode == "read_only" else reopen(tmp_path / "data"))
    except SeglogError:
        return
    async with engine:
        log = engine.log(TOPIC)
        for ts in lookup_targets(model):
            try:
                hit = await library_call(f"offset_for_timestamp({ts})", log.offset_for_timestamp(ts))
            except SeglogError:
                continue
            if hit is None:
                continue
            assert log.log_start_offset <= hit.offset < log.log_end_offset, (
                f"offset_for_timestamp({ts}) = {hit.offset}, outside the log [{log.log_start_offset}, "
                f"{log.log_end_offset})")
            assert hit.offset < len(model) and model[hit.offset].timestamp == hit.timestamp >= ts, (ts, hit)
        await served(log, model)


# --------------------------------------------------------------------------------------------- indexes


async def assert_served_exactly(engine: Engine, model: list[Record]) -> None:
    log = engine.log(TOPIC)
    assert (log.log_start_offset, log.log_end_offset) == (0, len(model))
    answers = await served(log, model)
    refused = {o: a for o, a in answers.items() if not isinstance(a, Record)}
    assert not refused, f"an index is disposable, yet reads were refused: {refused}"


async def assert_lookups_exact(engine: Engine, model: list[Record]) -> None:
    log = engine.log(TOPIC)
    wrong = []
    for ts in lookup_targets(model):
        hit = await library_call(f"offset_for_timestamp({ts})", log.offset_for_timestamp(ts))
        want = earliest_at_or_after(model, 0, ts)
        if (None if hit is None else hit.offset) != want:
            wrong.append(f"offset_for_timestamp({ts}) = {hit}, the earliest offset with a timestamp >= it is {want}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lie", [
    "timestamps_later",
    "timestamps_earlier",
    "one_far_entry",
])
async def test_lying_time_index_after_a_clean_shutdown_does_not_change_the_answers(tmp_path: Path, lie: str) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    bases = segment_bases(d)
    for base in bases[:-1]:  # every sealed segment's time index lies, consistently with itself
        batches = batches_of(seg_path(d, base, ".log"))
        entries, best = [], -1
        for b in batches:
            best = max(best, b.max_timestamp)
            shift = {"timestamps_later": 400, "timestamps_earlier": -400, "one_far_entry": 0}[lie]
            entries.append((best + shift, b.last_offset - base))
        if lie == "one_far_entry":
            entries = [(best + 10_000, 0)]
        seg_path(d, base, ".timeindex").write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in entries))
    async with await reopen(tmp_path / "data") as engine:
        await assert_lookups_exact(engine, model)
        await assert_served_exactly(engine, model)


async def test_missing_index_of_a_sealed_segment_after_a_clean_close_is_rebuilt(tmp_path: Path) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    seg_path(d, segment_bases(d)[2], ".index").unlink()
    async with await reopen(tmp_path / "data") as engine:
        await assert_served_exactly(engine, model)
        await assert_lookups_exact(engine, model)


@pytest.mark.parametrize("seed", range(3))
async def test_index_of_random_bytes_after_a_clean_shutdown_is_rebuilt(tmp_path: Path, seed: int) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    index = seg_path(d, segment_bases(d)[2], ".index")
    rng = random.Random(seed)
    # Random entries whose positions read as negative int32s: the half of random files that leaked a ValueError.
    entries = [(rng.randrange(1 << 31), -rng.randrange(1, 1 << 31)) for _ in range(max(1, index.stat().st_size // 8))]
    index.write_bytes(b"".join(OFFSET_ENTRY.pack(*e) for e in entries))
    async with await reopen(tmp_path / "data") as engine:
        await assert_served_exactly(engine, model)


# ---------------------------------------------------------------- found by the corruption fuzz test (not in issue 18)


async def test_read_only_engine_after_an_unclean_stop_finds_records_past_the_last_time_index_entry(
    tmp_path: Path,
) -> None:
    # One segment, and time-index entries only every 300 bytes: the last records are past the last entry.
    model = await write_log(tmp_path / "data", batches=12, clean=False,
                            config={"segment_bytes": 1 << 20, "index_interval_bytes": 300})
    async with await library_call("Engine.open", open_engine(tmp_path / "data", read_only=True)) as engine:
        await assert_served_exactly(engine, model)
        await assert_lookups_exact(engine, model)


async def test_offline_offsets_by_time_find_a_batch_max_timestamp_held_by_an_earlier_record(tmp_path: Path) -> None:
    engine = await open_engine(tmp_path / "data")
    async with engine:
        await engine.create_topic(TOPIC, partitions=1, config=TOPIC_CONFIG)
        # One batch whose largest timestamp is its first record's, then a later batch.
        await engine.log(TOPIC).append([Record(b"a", timestamp=T0 + 5), Record(b"b", timestamp=T0)])
        await engine.log(TOPIC).append([Record(b"c", timestamp=T0 + 1)])
        assert (await engine.log(TOPIC).offset_for_timestamp(T0 + 5)) == (0, T0 + 5)  # the engine's answer
    for ts, want in ((T0, 0), (T0 + 1, 0), (T0 + 5, 0), (T0 + 6, None)):
        code, out = run_cli("offsets", TOPIC, "--time", str(ts), "--json", "--log-dir", str(tmp_path / "data"))
        assert code == 0
        got = json.loads(out)[0]["offset"]
        assert got == want, f"seglog offsets --time {ts} answered {got}; the earliest offset at or after it is {want}"


async def test_read_only_engine_over_a_zeroed_range_of_a_sealed_log_refuses_with_a_library_error(
    tmp_path: Path,
) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    first = seg_path(d, segment_bases(d)[0], ".log")
    second_batch = batches_of(first)[1].position
    with open(first, "r+b") as f:
        f.seek(second_batch)
        f.write(bytes(first.stat().st_size - second_batch))
    async with await library_call("Engine.open", open_engine(tmp_path / "data", read_only=True)) as engine:
        log = engine.log(TOPIC)
        await served(log, model)
        for ts in lookup_targets(model):
            with contextlib.suppress(SeglogError):
                await library_call(f"offset_for_timestamp({ts})", log.offset_for_timestamp(ts))


async def test_offline_consume_never_jumps_over_a_corrupt_batch_of_a_sealed_segment(tmp_path: Path) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    log_file = seg_path(d, segment_bases(d)[1], ".log")
    batch = batches_of(log_file)[1]
    flip_bit(log_file, batch.position + 20, 6)  # a bit of its CRC-32C (bytes 17-20): the batch fails its check
    code, out = run_cli("consume", TOPIC, "--format", "json", "--log-dir", str(tmp_path / "data"))
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    offsets = [row["offset"] for row in rows]
    assert offsets == list(range(len(offsets))), f"seglog consume jumped: {offsets}"
    assert all(row["value"] == model[row["offset"]].value.decode() for row in rows)  # type: ignore[union-attr]
    assert len(offsets) == batch.base_offset, f"consume stopped at {len(offsets)}, the corrupt batch is at {batch}"
    assert code != 0, "the corrupt batch was not reported"


async def test_offline_offsets_by_time_do_not_believe_a_lying_time_index(tmp_path: Path) -> None:
    model = await write_log(tmp_path / "data")
    d = partition_dir(tmp_path / "data")
    for base in segment_bases(d)[:-1]:  # every sealed segment's time index claims timestamps 400 ms early
        entries, best = [], -1
        for b in batches_of(seg_path(d, base, ".log")):
            best = max(best, b.max_timestamp)
            entries.append((best - 400, b.last_offset - base))
        seg_path(d, base, ".timeindex").write_bytes(b"".join(TIME_ENTRY.pack(*e) for e in entries))
    wrong = []
    for ts in lookup_targets(model):
        code, out = run_cli("offsets", TOPIC, "--time", str(ts), "--json", "--log-dir", str(tmp_path / "data"))
        assert code == 0, out
        got, want = json.loads(out)[0]["offset"], earliest_at_or_after(model, 0, ts)
        if got != want:
            wrong.append(f"seglog offsets --time {ts} answered {got}; the earliest offset at or after it is {want}")
    assert not wrong, "\n".join(wrong)
