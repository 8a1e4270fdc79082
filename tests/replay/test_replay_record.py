"""Recording: a log directory to a workload and back (round trip), and RecordingEngine."""

from __future__ import annotations

import asyncio
from pathlib import Path

from replay_helpers import partition_contents

from seglog.engine import Engine, Record
from seglog.tools.replay.format import load_workload
from seglog.tools.replay.plan import build_plan
from seglog.tools.replay.recorder import RecordingEngine, record_log
from seglog.tools.replay.runner import ReplayOptions, replay_into

BASE_MS = 1_795_341_600_000


async def populate(log_dir: Path) -> None:
    """Two topics, several batches, out-of-order timestamps, headers, null keys and a tombstone."""
    async with Engine.open(log_dir) as engine:
        await engine.create_topic("orders", partitions=2)
        await engine.create_topic("audit", partitions=1)
        for p in range(2):
            log = engine.log("orders", p)
            for batch in range(5):
                await log.append([
                    Record(value=f"o{p}-{batch}-{i}".encode(), key=b"k%d" % i,
                           timestamp=BASE_MS + batch * 100 + (i * 7) % 30 - 15,  # goes back within a batch
                           headers=(("n", str(i).encode()),))
                    for i in range(4)
                ])
        audit = engine.log("audit", 0)
        await audit.append([Record(value=None, key=b"gone", timestamp=BASE_MS + 5)])
        await audit.append([Record(value=b"late", key=None, timestamp=BASE_MS - 1000)])
        await audit.append([Record(value=b"", key=b"", timestamp=BASE_MS + 9)])


async def test_record_then_replay_into_a_fresh_directory_gives_the_same_records(tmp_path: Path) -> None:
    await populate(tmp_path / "src")
    async with Engine.open(tmp_path / "src") as engine:
        recorded = await record_log(engine)
    assert recorded.partitions == {"audit": 1, "orders": 2}
    assert len(recorded.rows) == 2 * 5 * 4 + 3
    from seglog.tools.replay.format import write_workload

    path = write_workload(tmp_path / "w.parquet", recorded.rows, recorded.partitions)
    plan = build_plan(load_workload(path))  # validates: ts_ns clamped, so it never goes back
    outcome = await replay_into(tmp_path / "dst", plan, ReplayOptions(speed=None))
    assert outcome.ok, outcome.metrics.error_samples
    assert await partition_contents(tmp_path / "dst") == await partition_contents(tmp_path / "src")


async def test_a_time_range_selects_offsets_like_list_offsets(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "src") as engine:
        await engine.create_topic("t", partitions=1)
        await engine.log("t", 0).append([Record(value=b"%d" % i, timestamp=BASE_MS + i * 10) for i in range(20)])
        w = await record_log(engine, topics=["t"], from_ms=BASE_MS + 45, to_ms=BASE_MS + 100)
    # earliest offset with ts >= +45 is 5 (+50); the range ends before offset 10 (+100)
    assert [r.offset for r in w.rows] == [5, 6, 7, 8, 9]
    assert [r.seq for r in w.rows] == [5, 6, 7, 8, 9]
    assert {r.producer for r in w.rows} == {"t-0"}


async def test_recording_an_unknown_topic_is_an_error(tmp_path: Path) -> None:
    from seglog.engine import errors

    async with Engine.open(tmp_path / "src") as engine:
        try:
            await record_log(engine, topics=["nope"])
        except errors.UnknownTopicOrPartitionError as exc:
            assert "nope" in str(exc)
        else:
            raise AssertionError("recording an unknown topic did not fail")


async def test_recording_engine_captures_calls_and_the_capture_replays(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "app") as engine:
        rec = RecordingEngine(engine)
        await rec.create_topic("events", partitions=3)

        async def writer(name: str) -> None:
            log = rec.log("events", 0)
            for i in range(5):
                await log.append([Record(value=f"{name}-{i}-{j}".encode(), timestamp=BASE_MS + i) for j in range(3)])
                await asyncio.sleep(0)  # the other writer takes its turn: their appends interleave

        await asyncio.gather(asyncio.create_task(writer("w1"), name="w1"),
                             asyncio.create_task(writer("w2"), name="w2"))
        await rec.produce("events", b"keyed", key=b"customer-7", timestamp=BASE_MS)
        for i in range(4):  # key-less: the engine takes turns; the recording keeps its choices
            await rec.produce("events", b"loose-%d" % i, timestamp=BASE_MS)
        got = await rec.log("events", 0).read(2, max_bytes=4096)
        assert got.records[0].offset == 2  # calls pass through unchanged
        await rec.log("events", 0).offset_for_timestamp(BASE_MS + 3)
        assert rec.topics() == ["events"]  # not recorded, passed through
        path = rec.write(tmp_path / "capture.jsonl")

    w = load_workload(path)
    assert w.partitions == {"events": 3}
    ops = [r.op for r in w.rows]
    assert ops.count("produce") == 35 and ops.count("fetch") == 1 and ops.count("fetch_time") == 1
    producers = {r.producer for r in w.rows if r.op == "produce" and r.partition == 0}
    assert {"w1", "w2"} <= producers  # the test task itself produced too
    # one append call = one instant = one batch on replay
    w1 = [r for r in w.rows if r.producer == "w1"]
    assert len({r.ts_ns for r in w1}) == 5
    outcome = await replay_into(tmp_path / "replayed", build_plan(w), ReplayOptions(speed=None))
    assert outcome.ok, outcome.metrics.error_samples
    assert outcome.metrics.batches == 15  # 10 appends + 5 produce calls
    src, dst = await partition_contents(tmp_path / "app"), await partition_contents(tmp_path / "replayed")
    # Every produce lands in the same partition: the engine's partitioner and the plan's murmur2 agree
    # on the keyed record, and the recording kept the engine's turns for the key-less ones.
    assert {tp: sorted(v, key=repr) for tp, v in src.items()} == {tp: sorted(v, key=repr) for tp, v in dst.items()}
    # Per-producer order survives, even though the two writers interleave differently.
    for records in (src[("events", 0)], dst[("events", 0)]):
        for name in ("w1", "w2"):
            mine = [v for _k, v, _t, _h in records if isinstance(v, bytes) and v.startswith(name.encode())]
            assert mine == sorted(mine)
