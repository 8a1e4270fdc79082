"""Small appends from concurrent callers are merged into one batch; each caller still gets its own answer.

The writer encodes the small appends (up to ``SMALL_APPEND_RECORDS`` records)
waiting beside each other as one batch, as Kafka's producer accumulates the
records of many threads into one batch per partition. What a caller relies on
must not change: its own offsets and max timestamp in the ``AppendResult``,
its records whole and in order, an error only for the caller at fault, and a
cancelled caller's records never written.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from enginehelpers import reach, read_all, writer_held

from seglog.engine import Engine, LogConfig, PartitionLog, Record, errors
from seglog.engine.log import SMALL_APPEND_RECORDS
from seglog.segments.batch import BatchHeader, scan_batches
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


def batches_on_disk(log: PartitionLog) -> list[BatchHeader]:
    headers: list[BatchHeader] = []
    for path in sorted(log.directory.glob("*.log")):
        scan = scan_batches(path.read_bytes(), max_batch_bytes=1 << 30)
        headers.extend(header for _, header in scan.batches)
    return headers


async def test_concurrent_single_record_appends_share_a_batch_and_keep_their_own_results(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        records = [Record(b"v%d" % i, b"k", 1_700_000_000_000 + (i * 7) % 50) for i in range(200)]
        results = await asyncio.gather(*(log.append([r]) for r in records))
        assert sorted(r.first_offset for r in results) == list(range(200))
        assert all(r.first_offset == r.last_offset for r in results)
        assert [r.max_timestamp for r in results] == [r.timestamp for r in records]  # its own, not the batch's
        stored = {r.offset: r for r in await read_all(log)}
        for record, result in zip(records, results, strict=True):
            assert stored[result.first_offset] == record._replace(offset=result.first_offset)
        headers = batches_on_disk(log)
        assert len(headers) < 20  # 200 appends, merged (one batch per write of the group)
        assert sum(h.record_count for h in headers) == 200


async def test_a_merged_callers_records_stay_together_and_in_order(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        batches = [[Record(b"%d:%d" % (who, j)) for j in range(1 + who % SMALL_APPEND_RECORDS)] for who in range(60)]
        results = await asyncio.gather(*(log.append(b) for b in batches))
        stored = await read_all(log)
        for who, result in enumerate(results):
            assert result.last_offset - result.first_offset + 1 == len(batches[who])
            mine = stored[result.first_offset : result.last_offset + 1]
            assert [r.value for r in mine] == [r.value for r in batches[who]]


async def test_only_the_caller_with_an_invalid_record_fails(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        bad = Record(b"bad", None, -5)  # a negative timestamp: refused by the encoder, not the quick screen
        calls = [[Record(b"%d" % i)] for i in range(30)]
        calls[13] = [Record(b"ok"), bad]
        outcomes = await asyncio.gather(*(log.append(c) for c in calls), return_exceptions=True)
        assert isinstance(outcomes[13], errors.InvalidRecordError)
        assert all(not isinstance(o, BaseException) for i, o in enumerate(outcomes) if i != 13)
        assert sorted(r.value or b"" for r in await read_all(log)) == sorted(b"%d" % i for i in range(30) if i != 13)


async def test_a_caller_cancelled_before_the_write_is_not_written(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            async with writer_held(log, ops):
                tasks = [asyncio.create_task(log.append([Record(b"%d" % i)])) for i in range(40)]
                await reach(lambda: len(log._pending) == 40, "every append is queued, none taken by the writer")
                for task in tasks[1::2]:
                    task.cancel()
                await asyncio.gather(*tasks[1::2], return_exceptions=True)
            await asyncio.gather(*tasks, return_exceptions=True)
            written = {r.value for r in await read_all(log)}
            for i, task in enumerate(tasks):
                assert (b"%d" % i in written) == (not task.cancelled())


async def test_changing_the_list_after_the_call_does_not_change_what_is_written(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as eng:
            await eng.create_topic("t")
            log = eng.log("t")
            batch = [Record(b"first")]
            async with writer_held(log, ops):
                pending = asyncio.ensure_future(log.append(batch))
                await reach(lambda: len(log._pending) == 1, "the append is queued, not yet encoded")
                batch[0] = Record(b"changed")
                batch.append(Record(b"added"))
            result = await pending
            assert result.first_offset == result.last_offset == 1  # after the blocker
            assert [r.value for r in await read_all(log)] == [b"blocker", b"first"]


async def test_a_merged_batch_never_exceeds_max_message_bytes(tmp_path: Path) -> None:
    # Record headers are not in the merge estimate: 30 appends of ~360 bytes each would make a
    # ~11 KB batch, over the 2 KB limit every single append respects; the writer must split it.
    config = LogConfig(max_message_bytes=2048)
    async with Engine.open(tmp_path, config) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        record = Record(b"v", None, 1, (("h", b"x" * 300),))
        results = await asyncio.gather(*(log.append([record]) for _ in range(30)))
        assert sorted(r.first_offset for r in results) == list(range(30))
        assert all(h.size <= 2048 for h in batches_on_disk(log))
        assert len(await read_all(log)) == 30


async def test_merged_appends_under_log_append_time_all_report_the_append_time(tmp_path: Path) -> None:
    async with Engine.open(tmp_path, LogConfig(message_timestamp_type="LogAppendTime")) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        results = await asyncio.gather(*(log.append([Record(b"%d" % i, timestamp=5)]) for i in range(20)))
        stored = {r.offset: r for r in await read_all(log)}
        for result in results:
            assert result.log_append_time == result.max_timestamp > 5
            assert stored[result.first_offset].timestamp == result.log_append_time


@pytest.mark.parametrize("records", [[], "not a list", [b"raw bytes"]])
async def test_a_bad_small_append_fails_at_once_and_writes_nothing(tmp_path: Path, records: object) -> None:
    async with Engine.open(tmp_path) as eng:
        await eng.create_topic("t")
        log = eng.log("t")
        with pytest.raises(errors.InvalidRecordError):
            await log.append(records)  # type: ignore[arg-type]
        assert log.log_end_offset == 0

