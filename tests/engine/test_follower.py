"""A read-only Engine follows a live writer in another process (engine/follow.py).

The writer runs in a child process (``writerprocess``); each of its replies
says the command is done (an append has returned). The follower lives in the
test process and must catch up by itself: ``caught_up`` waits for it with a
bounded timeout, which orders nothing (the handshake did) but bounds the
follower's delay.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from writerprocess import writer_process

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.engine.results import MAX_TIMESTAMP
from seglog.segments.batch import TimestampType, encode_batch

CATCH_UP_S = 5.0  # the follower's delay must stay far below this; it only keeps a broken test from hanging
SMALL = dict(segment_bytes=2048, segment_index_bytes=1024, index_interval_bytes=128)


async def caught_up(condition: Callable[[], bool], what: str) -> None:
    """Wait (bounded) until the follower's view satisfies ``condition``."""
    deadline = time.monotonic() + CATCH_UP_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"the follower did not catch up within {CATCH_UP_S} s: {what}")
        await asyncio.sleep(0.002)


def end_of(engine: Engine, topic: str, partition: int) -> int | None:
    """The log end offset of a partition, or None while the follower has not seen the partition yet."""
    try:
        return engine.log(topic, partition).log_end_offset
    except errors.UnknownTopicOrPartitionError:
        return None


def values(n: int, start: int = 0, size: int = 40) -> list[bytes]:
    return [b"%06d" % i + b"." * (size - 6) for i in range(start, start + n)]


async def test_a_follower_sees_records_a_writer_process_appends_after_it_opened(tmp_path: Path) -> None:
    async with writer_process(tmp_path) as writer:
        await writer.call("create", "t", 1, None)
        await writer.call("append", "t", 0, values(5), [1000] * 5)
        async with Engine.open(tmp_path, read_only=True) as follower:
            plog = follower.log("t")
            assert plog.log_end_offset == 5
            seen: list[Record] = []
            reached_end = asyncio.Event()

            async def subscriber() -> None:
                async for record in plog.subscribe(0):
                    seen.append(record)
                    if len(seen) == 5:
                        reached_end.set()  # waiting for records not written yet from here on
                    if len(seen) == 11:
                        return

            task = asyncio.create_task(subscriber())
            await asyncio.wait_for(reached_end.wait(), CATCH_UP_S)
            assert await writer.call("append", "t", 0, values(5, 5), [2000] * 5) == (5, 9)
            await caught_up(lambda: plog.log_end_offset == 10, "log end 10")
            got = await plog.read(5)
            assert [(r.offset, r.value) for r in got.records] == list(enumerate(values(5, 5), 5))
            assert got.high_watermark == 10
            await writer.call("append", "t", 0, values(1, 10), [3000])
            await asyncio.wait_for(task, CATCH_UP_S)
            assert [(r.offset, r.value) for r in seen] == list(enumerate(values(11)))


async def test_a_follower_follows_rolls_into_new_segments(tmp_path: Path) -> None:
    async with writer_process(tmp_path, **SMALL) as writer:
        await writer.call("create", "t", 1, None)
        await writer.call("appends", "t", 0, values(10), [1000 + i for i in range(10)])
        async with Engine.open(tmp_path, LogConfig(**SMALL), read_only=True) as follower:
            plog = follower.log("t")
            assert plog.segment_count == 1
            end = await writer.call("appends", "t", 0, values(190, 10), [1010 + i for i in range(190)])
            _, _, bases = await writer.call("state", "t", 0)
            assert len(bases) > 3  # the writer rolled several times after the follower opened
            await caught_up(lambda: plog.log_end_offset == end, f"log end {end}")
            assert plog.segment_base_offsets() == bases
            offset = 0
            while offset < end:  # every record once, in order, across every segment
                got = await plog.read(offset, 300)
                assert [r.value for r in got.records] == values(len(got.records), offset)
                offset = got.next_offset
            for i in (0, 57, 123, 199):
                assert (await plog.read(i, 1)).records[0].value == values(1, i)[0]


async def test_a_follower_drops_what_retention_deleted_and_moves_its_log_start(tmp_path: Path) -> None:
    config = dict(SMALL, retention_bytes=10_000, retention_ms=-1, file_delete_delay_ms=50)
    async with writer_process(tmp_path, **config) as writer:
        await writer.call("create", "t", 1, None)
        end = await writer.call("appends", "t", 0, values(200), [1000 + i for i in range(200)])
        async with Engine.open(tmp_path, LogConfig(**config), read_only=True) as follower:
            plog = follower.log("t")
            assert plog.log_start_offset == 0 and plog.log_end_offset == end
            stale = plog.subscribe(0)
            assert (await anext(stale)).offset == 0  # a slow subscriber, still at the start
            assert await writer.call("retention") > 0
            start, _, bases = await writer.call("state", "t", 0)
            assert 0 < start < end - 10
            await caught_up(lambda: plog.log_start_offset == start, f"log start {start}")
            assert plog.segment_base_offsets() == bases
            with pytest.raises(errors.OffsetOutOfRangeError):
                await plog.read(start - 1)
            assert (await plog.read(start, 1)).records[0].value == values(1, start)[0]
            with pytest.raises(errors.OffsetOutOfRangeError):  # its position was deleted under it
                async for _ in stale:
                    pass
            # DeleteRecords moves the start inside a segment: only the checkpoint says so.
            new_start = await writer.call("delete_before", "t", 0, end - 3)
            await caught_up(lambda: plog.log_start_offset == new_start, f"log start {new_start}")
            assert (await plog.read(new_start, 1)).records[0].value == values(1, end - 3)[0]
            with pytest.raises(errors.OffsetOutOfRangeError):
                await plog.read(new_start - 1)
            assert (await plog.offset_for_timestamp(0)).offset == new_start  # type: ignore[union-attr]


async def test_a_follower_finds_new_records_by_timestamp(tmp_path: Path) -> None:
    async with writer_process(tmp_path, **SMALL) as writer:
        await writer.call("create", "t", 1, None)
        await writer.call("appends", "t", 0, values(20), [1000 + 10 * i for i in range(20)])
        async with Engine.open(tmp_path, LogConfig(**SMALL), read_only=True) as follower:
            plog = follower.log("t")
            assert await plog.offset_for_timestamp(5000) is None
            # Out of order on purpose: the earliest offset with a timestamp >= the target wins.
            stamps = [5000 + 10 * i for i in range(60)] + [4000, 9000, 6000]
            end = await writer.call("appends", "t", 0, values(63, 20), stamps)
            await caught_up(lambda: plog.log_end_offset == end, f"log end {end}")
            hit = await plog.offset_for_timestamp(5000)
            assert hit is not None and (hit.offset, hit.timestamp) == (20, 5000)
            hit = await plog.offset_for_timestamp(5555)
            assert hit is not None and (hit.offset, hit.timestamp) == (76, 5560)
            hit = await plog.offset_for_timestamp(8000)
            assert hit is not None and (hit.offset, hit.timestamp) == (81, 9000)
            hit = await plog.offset_for_timestamp(MAX_TIMESTAMP)
            assert hit is not None and (hit.offset, hit.timestamp) == (81, 9000)
            assert await plog.offset_for_timestamp(9001) is None


async def test_a_follower_sees_topics_the_writer_creates_and_deletes(tmp_path: Path) -> None:
    async with writer_process(tmp_path) as writer:
        await writer.call("create", "old", 1, None)
        async with Engine.open(tmp_path, read_only=True) as follower:
            assert follower.topics() == ["old"]
            ended = asyncio.Event()

            async def subscriber() -> None:
                async for _ in follower.log("old").subscribe(0):
                    pass
                ended.set()

            task = asyncio.create_task(subscriber())
            await writer.call("create", "new", 2, {"retention.ms": 1234})
            await writer.call("append", "new", 1, [b"hello"], [1])
            await caught_up(lambda: "new" in follower.topics(), "topic 'new'")
            assert follower.partitions_for("new") == 2
            assert follower.topic_config("new").retention_ms == 1234
            await caught_up(lambda: end_of(follower, "new", 1) == 1, "the record in new-1")
            assert (await follower.log("new", 1).read(0)).records[0].value == b"hello"
            await writer.call("delete_topic", "old")
            await caught_up(lambda: follower.topics() == ["new"], "topic 'old' gone")
            await asyncio.wait_for(ended.wait(), CATCH_UP_S)  # its subscriber ended, as on the writer
            await task
            with pytest.raises(errors.UnknownTopicOrPartitionError):
                follower.log("old")


async def test_a_follower_polls_where_inotify_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seglog.engine import follow

    monkeypatch.setattr(follow, "inotify_available", lambda: False)
    async with writer_process(tmp_path) as writer:
        await writer.call("create", "t", 1, None)
        async with Engine.open(tmp_path, read_only=True, follow_interval_ms=50) as follower:
            assert follower._follower is not None and not follower._follower.notified
            plog = follower.log("t")
            await writer.call("append", "t", 0, values(3), [1] * 3)
            await caught_up(lambda: plog.log_end_offset == 3, "log end 3 by polling")
            assert [r.value for r in (await plog.read(0)).records] == values(3)


async def test_a_follower_opens_beside_a_writer_that_preallocates(tmp_path: Path) -> None:
    config = dict(preallocate=True, segment_bytes=1 << 20)
    async with writer_process(tmp_path, **config) as writer:
        await writer.call("create", "t", 1, None)
        await writer.call("appends", "t", 0, values(10), [1] * 10)
        log_file = tmp_path / "t-0" / "00000000000000000000.log"
        assert log_file.stat().st_size == 1 << 20  # zeros after the last batch
        async with Engine.open(tmp_path, LogConfig(**config), read_only=True) as follower:
            plog = follower.log("t")
            assert plog.log_end_offset == 10
            await writer.call("appends", "t", 0, values(5, 10), [1] * 5)
            await caught_up(lambda: plog.log_end_offset == 15, "log end 15")
            assert [r.value for r in (await plog.read(8)).records] == values(7, 8)


async def test_a_follower_maps_no_file_and_survives_a_writer_trimming_its_files(tmp_path: Path) -> None:
    """A mapped index page past a new end of file would kill the follower with SIGBUS: it maps nothing."""
    config = dict(SMALL, preallocate=True)
    async with writer_process(tmp_path, **config) as writer:
        await writer.call("create", "t", 1, None)
        end = await writer.call("appends", "t", 0, values(30), [1000 + i for i in range(30)])
        async with Engine.open(tmp_path, LogConfig(**config), read_only=True) as follower:
            plog = follower.log("t")

            async def read_everything(end: int) -> None:
                await caught_up(lambda: plog.log_end_offset == end, f"log end {end}")
                for i in range(end):
                    assert (await plog.read(i, 1)).records[0].value == values(1, i)[0]
                    hit = await plog.offset_for_timestamp(1000 + i)
                    assert hit is not None and hit.offset == i

            await read_everything(end)
            await writer.call("reopen")  # a clean close trims the active segment's files, the open grows them
            end = await writer.call("appends", "t", 0, values(100, 30), [1030 + i for i in range(100)])
            await read_everything(end)  # rolled (trimmed) segments and the re-grown active one
            if sys.platform == "linux":
                maps = Path(f"/proc/{os.getpid()}/maps").read_text()
                assert str(tmp_path) not in maps


async def test_a_follower_goes_on_after_its_writer_is_killed_and_another_recovers(tmp_path: Path) -> None:
    async with writer_process(tmp_path, **SMALL) as writer:
        await writer.call("create", "t", 1, None)
        end = await writer.call("appends", "t", 0, values(30), [1000 + i for i in range(30)])
        async with Engine.open(tmp_path, LogConfig(**SMALL), read_only=True) as follower:
            plog = follower.log("t")
            await caught_up(lambda: plog.log_end_offset == end, f"log end {end}")
            await writer.kill()
            # The next writer finds an unclean stop: it recovers (rebuilds indexes, trims, grows them).
            async with writer_process(tmp_path, **SMALL) as successor:
                end = await successor.call("appends", "t", 0, values(30, 30), [1030 + i for i in range(30)])
                await caught_up(lambda: plog.log_end_offset == end, f"log end {end}")
                offset, seen = 0, []
                while offset < end:
                    got = await plog.read(offset)
                    seen += [r.value for r in got.records]
                    offset = got.next_offset
                assert seen == values(60)
                hit = await plog.offset_for_timestamp(1045)
                assert hit is not None and hit.offset == 45


async def test_a_follower_never_blocks_a_writer_that_starts_after_it(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
    # The writer takes the directory's lock after the follower opened: nobody else holds it.
    async with Engine.open(tmp_path, read_only=True) as follower, writer_process(tmp_path) as writer:
        await writer.call("append", "t", 0, [b"x"], [1])
        await caught_up(lambda: follower.log("t").log_end_offset == 1, "log end 1")


# -- the tail, byte by byte (no writer process: the test writes the bytes itself) -------------------


def _batch(offset: int, value: bytes, timestamp: int = 7) -> bytes:
    return encode_batch(offset, [Record(value, timestamp=timestamp)], timestamp_type=TimestampType.CREATE_TIME,
                        now_ms=1)


def _tree(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in root.rglob("*") if p.is_file())


async def _closed_log(tmp_path: Path, n: int) -> Path:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        for i in range(n):
            await engine.log("t").append([Record(b"v%d" % i, timestamp=7)])
    return tmp_path / "t-0" / "00000000000000000000.log"


async def test_a_torn_tail_is_not_yet_written_for_a_follower_and_never_cut(tmp_path: Path) -> None:
    active = await _closed_log(tmp_path, 3)
    async with Engine.open(tmp_path, read_only=True, follow=False) as follower:
        plog = follower.log("t")
        assert plog.log_end_offset == 3
        whole = _batch(3, b"late")
        with open(active, "ab") as f:
            f.write(whole[:40])  # a header and a bit: the rest is still being written
        before = _tree(tmp_path)
        await follower.refresh()
        assert plog.log_end_offset == 3
        assert _tree(tmp_path) == before  # nothing cut, nothing written
        with open(active, "ab") as f:
            f.write(whole[40:-1] + bytes([whole[-1] ^ 0xFF]))  # every byte there, one still wrong
        await follower.refresh()
        assert plog.log_end_offset == 3  # complete in length, yet its CRC-32C does not match: not written
        with open(active, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(whole[-1:])
        await follower.refresh()
        assert plog.log_end_offset == 4
        assert (await plog.read(3)).records[0].value == b"late"


async def test_a_follower_trusts_no_index_entry_past_what_it_validated(tmp_path: Path) -> None:
    # The writer's index files already name a batch whose bytes are not complete in the .log.
    active = await _closed_log(tmp_path, 1)
    index = active.with_suffix(".index")
    time_index = active.with_suffix(".timeindex")
    torn = _batch(1, b"x" * 300, timestamp=99)
    size = active.stat().st_size
    with open(active, "ab") as f:
        f.write(torn[:-10])
    index.write_bytes(index.read_bytes() + (1).to_bytes(4, "big") + size.to_bytes(4, "big"))
    time_index.write_bytes(time_index.read_bytes() + (99).to_bytes(8, "big") + (1).to_bytes(4, "big"))
    async with Engine.open(tmp_path, read_only=True, follow=False) as follower:
        plog = follower.log("t")
        assert plog.log_end_offset == 1
        assert [r.value for r in (await plog.read(0)).records] == [b"v0"]
        assert await plog.offset_for_timestamp(99) is None
        hit = await plog.offset_for_timestamp(MAX_TIMESTAMP)
        assert hit is not None and (hit.offset, hit.timestamp) == (0, 7)
        with open(active, "ab") as f:
            f.write(torn[-10:])
        await follower.refresh()
        hit = await plog.offset_for_timestamp(99)
        assert hit is not None and hit.offset == 1


async def test_a_follower_validates_again_a_segment_the_writer_cut_and_rewrote(tmp_path: Path) -> None:
    # What a writer does when the fsync of a written batch fails: cut it off and write the next
    # batch (other records, same offsets) in its place.
    active = await _closed_log(tmp_path, 2)
    size = active.stat().st_size
    async with Engine.open(tmp_path, read_only=True, follow=False) as follower:
        plog = follower.log("t")
        with open(active, "ab") as f:
            f.write(_batch(2, b"first"))
        await follower.refresh()
        assert (await plog.read(2)).records[0].value == b"first"
        with open(active, "r+b") as f:
            f.truncate(size)
            f.seek(size)
            f.write(_batch(2, b"second, a longer batch than the first"))
        await follower.refresh()
        assert plog.log_end_offset == 3
        got = [r.value for r in (await plog.read(0)).records]
        assert got == [b"v0", b"v1", b"second, a longer batch than the first"]


async def test_follow_interval_must_be_a_positive_int(tmp_path: Path) -> None:
    with pytest.raises(errors.InvalidConfigError, match="follow_interval_ms"):
        Engine.open(tmp_path, read_only=True, follow_interval_ms=0)


async def test_a_segment_sealed_while_the_follower_is_behind_is_read_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seglog.engine import follow

    monkeypatch.setattr(follow, "FOLLOW_SCAN_BYTES", 300)  # a look validates a few batches at most
    async with Engine.open(tmp_path, LogConfig(**SMALL)) as writer:
        await writer.create_topic("t")
        wlog = writer.log("t")
        async with Engine.open(tmp_path, LogConfig(**SMALL), read_only=True, follow=False) as follower:
            for value in values(10):
                await wlog.append([Record(value, timestamp=1)])
            assert follower._follower is not None
            follower._follower._mark(None, True)
            assert await follower._follower._pass() == [("t", 0)]  # one look: still behind in segment 0
            plog = follower.log("t")
            assert 0 < plog.log_end_offset < 10
            for value in values(40, 10):  # the writer rolls meanwhile
                await wlog.append([Record(value, timestamp=1)])
            assert wlog.segment_count > 1
            await follower.refresh()
            assert plog.segment_base_offsets() == wlog.segment_base_offsets()
            assert plog.log_end_offset == 50
            offset, seen = 0, []
            while offset < 50:
                got = await plog.read(offset)
                seen += [r.value for r in got.records]
                offset = got.next_offset
            assert seen == values(50)


async def test_a_follower_keeps_read_committed_below_transactions_the_writer_opens_after_it_loaded(
    tmp_path: Path,
) -> None:
    # The follower loads its producer state (the first read_committed read), then the writer opens
    # a transaction: the follower's last stable offset must stop at it, and the records of the
    # transaction appear to read_committed only once committed, never when aborted.
    async with writer_process(tmp_path) as writer:
        await writer.call("create", "t", 1, None)
        await writer.call("append", "t", 0, values(3), [1000] * 3)
        async with Engine.open(tmp_path, read_only=True) as follower:
            plog = follower.log("t")
            assert [r.offset for r in (await plog.read(0, isolation="read_committed")).records] == [0, 1, 2]
            assert plog.last_stable_offset == 3

            await writer.call("txn_begin", "tx")
            assert await writer.call("txn_append", "tx", "t", 0, values(2, 3)) == (3, 4)
            await caught_up(lambda: plog.log_end_offset == 5, "log end 5 (an open transaction)")
            assert plog.last_stable_offset == 3
            got = await plog.read(0, isolation="read_committed")
            assert [r.offset for r in got.records] == [0, 1, 2]

            await writer.call("txn_end", "tx", False)  # abort: its marker at 5
            await caught_up(lambda: plog.log_end_offset == 6, "log end 6 (the abort marker)")
            assert plog.last_stable_offset == 6
            assert [(t.producer_id, t.first_offset) for t in plog.aborted_transactions(0, 6)] == [
                (plog.aborted_transactions(0, 6)[0].producer_id, 3)
            ]
            got = await plog.read(3, isolation="read_committed")
            assert got.records == [] and got.next_offset == 6

            await writer.call("txn_begin", "tx")
            assert await writer.call("txn_append", "tx", "t", 0, values(2, 6)) == (6, 7)
            await writer.call("txn_end", "tx", True)  # commit: its marker at 8
            await caught_up(lambda: plog.log_end_offset == 9, "log end 9 (the commit marker)")
            assert plog.last_stable_offset == 9
            got = await plog.read(3, isolation="read_committed")
            assert [(r.offset, r.value) for r in got.records] == list(enumerate(values(2, 6), 6))
