"""End-to-end behaviour of the public API (engine only), as docs/API.md and README's guarantees promise it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from enginehelpers import reach

from seglog import engine
from seglog.engine import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Engine,
    LogConfig,
    OffsetAndTimestamp,
    Record,
    errors,
)
from seglog.engine.partitioner import partition_for_key
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops

SMALL = LogConfig(segment_bytes=4096, segment_index_bytes=1024, index_interval_bytes=256)


def values(records: list[Record]) -> list[bytes | None]:
    return [r.value for r in records]


async def read_all(log: engine.PartitionLog, start: int | None = None) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        got = await log.read(offset, 1 << 16)
        out.extend(got.records)
        offset = got.next_offset
    return out


def test_public_names_are_pinned() -> None:
    assert set(engine.__all__) == {
        "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "AppendResult", "Engine", "FetchResult",
        "LogConfig", "OffsetAndTimestamp", "PartitionLog", "Record", "RecordMetadata", "RecoveryProgress",
        "errors", "run", "ConsumerRecord", "GroupConsumer", "TopicPartition", "AbortedTransaction", "Isolation",
    }
    for name in [
        "InvalidTopicError", "TopicExistsError", "UnknownTopicOrPartitionError", "OffsetOutOfRangeError",
        "RecordTooLargeError", "CorruptRecordError", "CorruptIndexError", "InvalidOffsetError",
        "InvalidTimestampError", "IndexFullError", "IndexOffsetOverflowError", "LogDirLockedError",
    ]:
        assert issubclass(getattr(errors, name), errors.SeglogError), name


async def test_append_read_round_trip(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as eng:
        await eng.create_topic("orders", partitions=3)
        assert eng.topics() == ["orders"]
        log = eng.log("orders", 0)
        res = await log.append(
            [Record(value=b"v", key=b"k", timestamp=1_700_000_000_000, headers=(("h", b"x"),)), Record(None)]
        )
        assert (res.first_offset, res.last_offset) == (0, 1)
        assert res.max_timestamp >= 1_700_000_000_000
        got = await log.read(res.first_offset, max_bytes=1 << 20)
        assert got.records[0] == Record(b"v", b"k", 1_700_000_000_000, (("h", b"x"),), 0)
        assert got.records[1].value is None and got.records[1].offset == 1
        assert got.records[1].timestamp is not None  # None becomes the append time
        assert (got.next_offset, got.high_watermark, got.log_start_offset) == (2, 2, 0)
        assert (log.log_start_offset, log.log_end_offset) == (0, 2)


async def test_read_starts_at_the_exact_offset_inside_a_batch(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(str(i).encode()) for i in range(10)])
        got = await log.read(7)
        assert [r.offset for r in got.records] == [7, 8, 9]
        assert values(got.records) == [b"7", b"8", b"9"]


async def test_read_bounds_and_min_one_message(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"x" * 1000)])
        await log.append([Record(b"y" * 1000)])
        one = await log.read(0, max_bytes=1)
        assert values(one.records) == [b"x" * 1000] and one.next_offset == 1
        empty = await log.read(2)
        assert empty.records == [] and empty.next_offset == 2
        with pytest.raises(errors.OffsetOutOfRangeError, match="outside the log"):
            await log.read(3)
        with pytest.raises(errors.OffsetOutOfRangeError):
            await log.read(-1)


async def test_bad_input_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    config = LogConfig(max_message_bytes=2000)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"keep")])
        with pytest.raises(errors.RecordTooLargeError, match=r"max\.message\.bytes"):
            await log.append([Record(b"z" * 5000)])
        with pytest.raises(errors.InvalidRecordError):
            await log.append([])
        with pytest.raises(errors.InvalidRecordError):
            await log.append([Record("text")])  # type: ignore[arg-type]
        with pytest.raises(errors.InvalidRecordError):
            await log.append(Record(b"not wrapped"))  # type: ignore[arg-type]
        with pytest.raises(errors.InvalidRecordError):
            await log.append([Record(b"v", headers=(("h", "not bytes"),))])  # type: ignore[arg-type]
        with pytest.raises(errors.InvalidRecordError):
            await log.append([Record(b"v", timestamp=-5)])
        assert values(await read_all(log)) == [b"keep"]
        assert log.log_end_offset == 1


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "", "x" * 250, "naïve"])
async def test_invalid_topic_names_never_touch_the_disk(tmp_path: Path, name: str) -> None:
    data = tmp_path / "data"
    async with Engine.open(data) as eng:
        with pytest.raises(errors.InvalidTopicError):
            await eng.create_topic(name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert not any(p.is_dir() for p in data.iterdir())


async def test_topic_errors(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t", partitions=2)
        with pytest.raises(errors.TopicExistsError):
            await eng.create_topic("t")
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="no partition 2"):
            eng.log("t", 2)
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="unknown topic"):
            eng.log("nope", 0)
        with pytest.raises(errors.InvalidConfigError):
            await eng.create_topic("u", partitions=0)


async def test_second_engine_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    async with Engine.open(tmp_path):
        with pytest.raises(errors.LogDirLockedError, match="another seglog Engine"):
            await Engine.open(tmp_path)
    # Released on close.
    eng = await Engine.open(tmp_path)
    await eng.close()
    await eng.close()  # idempotent


async def test_lock_holds_across_processes(tmp_path: Path) -> None:
    async with Engine.open(tmp_path):
        proc = await asyncio.create_subprocess_exec(
            os.sys.executable, "-c",  # type: ignore[attr-defined]
            "import asyncio, sys\n"
            "from seglog.engine import Engine, errors\n"
            "async def main():\n"
            "    try:\n"
            f"        await Engine.open({str(tmp_path)!r})\n"
            "    except errors.LogDirLockedError:\n"
            "        sys.exit(7)\n"
            "asyncio.run(main())\n",
        )
        assert await proc.wait() == 7


async def test_reopen_keeps_everything(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, SMALL) as eng:
        await eng.create_topic("t", partitions=2, config={"retention.ms": 123456789})
        for i in range(200):
            await eng.log("t", i % 2).append([Record(f"r{i}".encode(), timestamp=1000 + i)])
        assert eng.log("t", 0).segment_count > 1
    assert (tmp_path / ".clean-shutdown").exists()
    async with Engine.open(tmp_path, SMALL) as eng:
        assert not (tmp_path / ".clean-shutdown").exists()
        assert eng.had_clean_shutdown
        assert eng.topic_config("t").retention_ms == 123456789
        assert eng.partitions_for("t") == 2
        got = await read_all(eng.log("t", 1))
        assert values(got) == [f"r{i}".encode() for i in range(1, 200, 2)]
        assert [r.offset for r in got] == list(range(100))
        res = await eng.log("t", 1).append([Record(b"more")])
        assert res.first_offset == 100


async def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, SMALL) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        stamps = [100, 300, 200, 500, 400, 400, 900, 50]
        for ts in stamps:
            await log.append([Record(b"x" * 300, timestamp=ts)])
        for target in range(0, 1000, 25):
            expect = next((i for i, ts in enumerate(stamps) if ts >= target), None)
            hit = await log.offset_for_timestamp(target)
            if expect is None:
                assert hit is None, target
            else:
                assert hit == OffsetAndTimestamp(expect, stamps[expect]), target
        assert await log.offset_for_timestamp(LATEST_TIMESTAMP) == OffsetAndTimestamp(8, -1)
        assert await log.offset_for_timestamp(EARLIEST_TIMESTAMP) == OffsetAndTimestamp(0, -1)
        assert await log.offset_for_timestamp(MAX_TIMESTAMP) == OffsetAndTimestamp(6, 900)
        with pytest.raises(errors.InvalidRecordError):
            await log.offset_for_timestamp(-7)


async def test_log_append_time_overwrites_timestamps(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t", config={"message.timestamp.type": "LogAppendTime"})
        res = await eng.log("t").append([Record(b"a", timestamp=5), Record(b"b", timestamp=6)])
        assert res.log_append_time > 1_600_000_000_000
        got = await eng.log("t").read(0)
        assert {r.timestamp for r in got.records} == {res.log_append_time}


async def test_subscribe_waits_for_new_records_and_ends_on_close(tmp_path: Path) -> None:
    eng = await Engine.open(tmp_path)
    await eng.create_topic("t")
    log = eng.log("t")
    await log.append([Record(b"0")])
    seen: list[bytes | None] = []

    async def consume() -> None:
        async for rec in log.subscribe(start_offset=0):
            seen.append(rec.value)

    task = asyncio.create_task(consume())
    await reach(lambda: seen == [b"0"], "the subscriber got the record that was there")
    await reach(lambda: bool(log._data_waiters), "the subscriber waits for new records")
    await log.append([Record(b"1"), Record(b"2")])
    await reach(lambda: len(seen) == 3, "the subscriber got the new records")
    assert seen == [b"0", b"1", b"2"]
    await eng.close()
    await asyncio.wait_for(task, 30)  # a bound for a hang, not an ordering: close ends the subscription


async def test_concurrent_appends_are_grouped_and_contiguous(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        results = await asyncio.gather(*(log.append([Record(str(i).encode())]) for i in range(500)))
        offsets = sorted(r.first_offset for r in results)
        assert offsets == list(range(500))
        got = await read_all(log)
        assert sorted(int(v or b"") for v in values(got)) == list(range(500))
        by_offset = {r.first_offset: i for i, r in enumerate(results)}
        assert [int(r.value or b"") for r in got] == [by_offset[o] for o in range(500)]


async def test_cancelled_appends_leave_no_partial_batch(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            writing = ops.gate("pwritev", path_contains=".log")
            tasks = [asyncio.create_task(log.append([Record(b"%d" % i)] * 5)) for i in range(50)]
            await writing.reached()
            assert not log._pending, "the writer took every append into the write in flight"
            for t in tasks[::3]:
                t.cancel()  # cancelled while their records are being written
            writing.release()
            await asyncio.gather(*tasks, return_exceptions=True)
            got = await read_all(log)
            assert len(got) == 250 and log.log_end_offset == len(got)  # a write once started is whole
        # Every batch is whole: five equal values in a row.
        for i in range(0, len(got), 5):
            assert len(set(values(got[i : i + 5]))) == 1


async def test_produce_partitions_by_key_like_kafka(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t", partitions=5)
        meta = await eng.produce("t", b"v", key=b"foobar")
        assert meta.partition == partition_for_key(b"foobar", 5) and meta.offset == 0
        spread = {(await eng.produce("t", b"v")).partition for _ in range(10)}
        assert spread == set(range(5))


async def test_committed_offsets_are_durable(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("orders")
        assert await eng.committed("billing", "orders", 0) is None
        await eng.commit_offset("billing", "orders", 0, 42)
        await eng.commit_offset("billing/team α", "orders", 0, 7)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await eng.commit_offset("billing", "orders", 3, 1)
        with pytest.raises(errors.InvalidRecordError):
            await eng.commit_offset("billing", "orders", 0, -1)
    async with Engine.open(tmp_path) as eng:
        assert await eng.committed("billing", "orders", 0) == 42
        assert await eng.committed("billing/team α", "orders", 0) == 7
        assert eng.groups() == ["billing", "billing/team α"]


async def test_delete_records_before_moves_the_log_start(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, SMALL) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for i in range(100):
            await log.append([Record(b"%03d" % i + b"." * 200)])
        segments_before = log.segment_count
        assert await log.delete_records_before(60) == 60
        assert log.log_start_offset == 60
        assert log.segment_count < segments_before
        with pytest.raises(errors.OffsetOutOfRangeError):
            await log.read(59)
        got = await log.read(60)
        assert got.records[0].offset == 60 and got.log_start_offset == 60
        with pytest.raises(errors.OffsetOutOfRangeError):
            await log.delete_records_before(101)
    async with Engine.open(tmp_path, SMALL) as eng:
        assert eng.log("t").log_start_offset == 60


async def test_retention_by_size_and_time(tmp_path: Path) -> None:
    config = SMALL.with_overrides(retention_bytes=8192, file_delete_delay_ms=0)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        await eng.create_topic("old", config={"retention.ms": 1000, "retention.bytes": -1})
        log = eng.log("t")
        for _ in range(100):
            await log.append([Record(b"." * 200, timestamp=None)])
        deleted = await eng.enforce_retention()
        assert deleted > 0
        assert log.size_bytes <= 8192 + 4096
        assert log.log_start_offset > 0 and log.log_end_offset == 100
        old = eng.log("old")
        for _ in range(3):
            await old.append([Record(b"ancient", timestamp=1_000)])
        await eng.enforce_retention()
        # Everything expired: the active segment was rolled first, nothing is readable, offsets go on.
        assert old.log_start_offset == 3 and old.log_end_offset == 3 and old.segment_count == 1
        res = await old.append([Record(b"new")])
        assert res.first_offset == 3
        await reach(lambda: not eng._background._doomed, "the deletions (file.delete.delay.ms=0) ran in the background")
    leftovers = [p.name for p in (tmp_path / "old-0").iterdir() if p.name.endswith(".deleted")]
    assert leftovers == []


async def test_flush_messages_one_moves_the_recovery_point_each_append(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, LogConfig(flush_messages=1)) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        for i in range(5):
            await log.append([Record(b"x")])
            assert log.recovery_point == log.log_end_offset == i + 1


async def test_delete_topic(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("gone", partitions=2)
        await eng.log("gone", 1).append([Record(b"x")])
        await eng.commit_offset("g", "gone", 1, 1)
        await eng.delete_topic("gone")
        assert eng.topics() == []
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            eng.log("gone", 0)
        assert await eng.committed("g", "gone", 1) is None
        await eng.create_topic("gone")  # the name is free again
        assert eng.log("gone").log_end_offset == 0


async def test_closed_engine_refuses_work(tmp_path: Path) -> None:
    eng = await Engine.open(tmp_path)
    await eng.create_topic("t")
    log = eng.log("t")
    await eng.close()
    with pytest.raises(errors.ClosedError):
        eng.topics()
    with pytest.raises(errors.ClosedError):
        await log.append([Record(b"x")])


async def test_read_only_engine_sees_data_and_changes_nothing(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        await eng.log("t").append([Record(b"x")])
    before = sorted((p.relative_to(tmp_path), p.stat().st_size) for p in tmp_path.rglob("*") if p.is_file())
    async with Engine.open(tmp_path, read_only=True) as ro:
        assert values((await ro.log("t").read(0)).records) == [b"x"]
        with pytest.raises(errors.ClosedError, match="read-only"):
            await ro.log("t").append([Record(b"y")])
    after = sorted((p.relative_to(tmp_path), p.stat().st_size) for p in tmp_path.rglob("*") if p.is_file())
    assert before == after


async def test_append_encoded_places_foreign_batches_after_the_log_end(tmp_path: Path) -> None:
    from seglog.segments.batch import TimestampType, encode_batch

    def batch(*vals: bytes) -> bytes:
        return encode_batch(0, [Record(v, timestamp=7) for v in vals], timestamp_type=TimestampType.CREATE_TIME,
                            now_ms=1)

    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        await log.append([Record(b"own")])
        res = await log.append_encoded(batch(b"a", b"b") + batch(b"c"))
        assert (res.first_offset, res.last_offset) == (1, 3)
        got = await log.read(0)
        assert [(r.offset, r.value) for r in got.records] == [(0, b"own"), (1, b"a"), (2, b"b"), (3, b"c")]
        good = batch(b"x")
        bad = bytearray(good)
        bad[-1] ^= 1
        with pytest.raises(errors.CorruptRecordError):
            await log.append_encoded(good + bytes(bad))
        with pytest.raises(errors.CorruptRecordError):
            await log.append_encoded(good[:-3])
        assert log.log_end_offset == 4


async def test_read_only_engine_beside_a_writer_that_closes(tmp_path: Path) -> None:
    """A writer trimming its preallocated indexes must not crash a reader (it used to: SIGBUS)."""
    config = LogConfig(segment_bytes=8192, segment_index_bytes=4096, index_interval_bytes=64)
    writer = await Engine.open(tmp_path, config)
    await writer.create_topic("t")
    for i in range(50):
        await writer.log("t").append([Record(b"%02d" % i * 20)])
    async with Engine.open(tmp_path, config, read_only=True) as reader:
        assert (await reader.log("t").read(45, 1)).records[0].value == b"45" * 20
        await writer.close()  # trims the active segment's indexes under the reader
        for i in (0, 17, 49):
            assert (await reader.log("t").read(i, 1)).records[0].value == b"%02d" % i * 20
        assert (await reader.log("t").offset_for_timestamp(0)) is not None


async def test_readers_and_subscribers_beside_concurrent_appenders(tmp_path: Path) -> None:
    """Readers never see a gap, a reordering or a half batch while several producers append and roll."""
    # Concurrent small appends are merged into few batches: the 600 records take ~8 KB.
    config = LogConfig(segment_bytes=2048, segment_index_bytes=1024, index_interval_bytes=256)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")

        async def produce(who: int) -> None:
            for i in range(60):
                await log.append([Record(b"%d:%d:%d" % (who, i, j)) for j in range(1 + i % 4)])

        async def read_loop() -> int:
            # Reads until it has read all 600 records (starting over whenever it catches up), so it
            # checks the log while the producers append, however the tasks are scheduled.
            checks = offset = 0
            read_to_end = False
            while not read_to_end:
                if offset >= log.log_end_offset:
                    read_to_end = offset >= 600
                    offset = 0
                    await asyncio.sleep(0.001)
                    continue
                got = await log.read(offset, 2048)
                assert [r.offset for r in got.records] == list(range(offset, offset + len(got.records)))
                assert got.records and got.records[-1].offset < got.high_watermark
                offset = got.next_offset
                checks += 1
                await asyncio.sleep(0)  # page-cache reads never suspend: let the producers run
            return checks

        seen: list[Record] = []

        async def subscriber() -> None:
            async for rec in log.subscribe(0):
                seen.append(rec)
                if len(seen) == 600:
                    return

        sub = asyncio.create_task(subscriber())
        results = await asyncio.gather(*(produce(w) for w in range(4)), read_loop(), read_loop())
        await asyncio.wait_for(sub, 60)  # a bound for a hang: the subscriber stops at 600 records
        assert all(n > 0 for n in results[4:])
        assert log.log_end_offset == 600 and log.segment_count > 1
        assert [r.offset for r in seen] == list(range(600))
        # Each producer's records appear in its own order (append order is call order).
        for who in range(4):
            mine = [r.value for r in seen if (r.value or b"").startswith(b"%d:" % who)]
            assert mine == [b"%d:%d:%d" % (who, i, j) for i in range(60) for j in range(1 + i % 4)]


async def test_short_and_odd_sized_index_files_are_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, segment_index_bytes=1024, index_interval_bytes=64)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        for i in range(80):
            await eng.log("t").append([Record(b"%02d" % i * 20)])
    part = tmp_path / "t-0"
    indexes = sorted(part.glob("*.index"))
    indexes[0].write_bytes(indexes[0].read_bytes()[:5])  # not a whole entry
    timeindexes = sorted(part.glob("*.timeindex"))
    timeindexes[0].write_bytes(timeindexes[0].read_bytes()[:13])
    async with Engine.open(tmp_path, config) as eng:
        log = eng.log("t")
        for i in range(80):
            assert (await log.read(i, 1)).records[0].value == b"%02d" % i * 20
        assert (await log.offset_for_timestamp(0)) is not None
    assert indexes[0].stat().st_size % 8 == 0 and timeindexes[0].stat().st_size % 12 == 0


async def test_a_read_from_the_tail_cache_returns_what_the_same_read_from_the_file_does(tmp_path: Path) -> None:
    # The last write stays in memory for subscribers; a read served from there must follow the
    # file read's max_bytes rule exactly (found in review: 2 records from memory, 3 from the file).
    from seglog.segments.batch import TimestampType, encode_batch

    def staged(n: int, size: int) -> bytes:
        records = [Record(b"%d" % i * size, b"k") for i in range(n)]
        return encode_batch(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=7)

    shapes = [
        [staged(5, 10)],  # one batch: the common case
        [staged(3, 10), staged(4, 30), staged(2, 5), staged(6, 12)],  # several batches in one write
    ]
    for n, parts in enumerate(shapes):
        directory = tmp_path / str(n)
        cached: dict[tuple[int, int], list[Record]] = {}
        async with Engine.open(directory) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            await log.append_encoded(b"".join(parts))
            for offset in range(log.log_end_offset):
                for max_bytes in (0, 1, 37, 60, 100, 180, 1 << 20):
                    cached[offset, max_bytes] = (await log.read(offset, max_bytes)).records
        async with Engine.open(directory) as eng:  # reopened: no tail cache, every read is a file read
            log = eng.log("t")
            for (offset, max_bytes), records in cached.items():
                assert (await log.read(offset, max_bytes)).records == records, (offset, max_bytes)
