"""Crash safety through the public API: kill -9 of a writer process, power loss, a full disk.

The durability promise (README, "Guarantees"): a record whose append returned survives a process crash; with
``flush_messages=1`` it also survives power loss; a failed append leaves the
log as it was.
"""

from __future__ import annotations

import asyncio
import errno
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.engine.checkpoints import parse_checkpoint
from seglog.engine.testing import partition_records
from seglog.segments.faults import FailingOps, GatedOps, PowerLossOps
from seglog.segments.fileio import use_ops

WRITER = r"""
import asyncio, sys
from seglog.engine import Engine, LogConfig, Record, errors

async def main(path, run_id, flush_messages, callers):
    config = LogConfig(segment_bytes=16384, segment_index_bytes=4096, index_interval_bytes=512,
                       flush_messages=flush_messages)
    async with Engine.open(path, config) as engine:
        try:
            await engine.create_topic("t", partitions=2)
        except errors.TopicExistsError:
            pass
        print("ready", flush=True)

        async def caller(k):
            # With several callers, their small appends in flight together share batches.
            seq = k
            while True:
                for p in (0, 1):
                    n = 1 + seq % 7
                    values = [f"{run_id}:{seq}:{i}".encode() * (1 + (seq + i) % 5) for i in range(n)]
                    res = await engine.log("t", p).append([Record(v, key=str(seq).encode()) for v in values])
                    print(f"ack {p} {res.first_offset} {res.last_offset} {run_id}:{seq}", flush=True)
                    seq += callers

        await asyncio.gather(*(caller(k) for k in range(callers)))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


# flush_messages=1 (every append fsynced) with small segments and indexes: rolls happen in the power-loss tests.
DURABLE_SMALL = LogConfig(flush_messages=1, segment_bytes=8192, segment_index_bytes=2048, index_interval_bytes=256)


def _expected_values(tag: str, count: int) -> list[bytes]:
    run_id, seq = tag.split(":")
    s = int(seq)
    return [f"{run_id}:{s}:{i}".encode() * (1 + (s + i) % 5) for i in range(count)]


def _run_and_kill(
    path: Path, run_id: str, kill_after_acks: int, flush_messages: int, callers: int = 1
) -> list[tuple[int, int, int, str]]:
    # Killed after a number of acknowledgements, not after a time: on a busy machine a timed kill may
    # come before the writer has done anything worth checking.
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), run_id, str(flush_messages), str(callers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.strip() == "ready", proc.stderr.read() if proc.stderr else first
    lines = []
    while len(lines) < kill_after_acks:
        line = proc.stdout.readline()
        if not line:
            break  # the writer died: its stderr says why, below
        lines.append(line)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert len(lines) == kill_after_acks, f"the writer stopped after {len(lines)} acknowledgements: {err}"
    acks = []
    for line in [*lines, *out.splitlines()]:
        parts = line.split()
        if len(parts) == 5 and parts[0] == "ack":  # a line cut by the kill is not an ack
            acks.append((int(parts[1]), int(parts[2]), int(parts[3]), parts[4]))
    return acks


@pytest.mark.slow
@pytest.mark.parametrize(("flush_messages", "callers"), [(2**63 - 1, 1), (1, 1), (2**63 - 1, 5), (1, 5)])
async def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, flush_messages: int, callers: int) -> None:
    rng = random.Random(flush_messages + callers)
    acked: list[tuple[int, int, int, str]] = []
    for run in range(4):
        acked += await asyncio.to_thread(
            _run_and_kill, tmp_path, f"r{run}", rng.randrange(20, 400), flush_messages, callers
        )
        async with Engine.open(tmp_path) as engine:
            assert not engine.had_clean_shutdown
            for partition in (0, 1):
                records = await partition_records(engine.log("t", partition))
                by_offset = {r.offset: r.value for r in records}
                assert [r.offset for r in records] == list(range(len(records))), "offsets must stay dense"
                for p, first, last, tag in acked:
                    if p != partition:
                        continue
                    want = _expected_values(tag, last - first + 1)
                    got = [by_offset.get(o) for o in range(first, last + 1)]
                    assert got == want, f"run {run}: acked batch {tag} at {first}..{last} lost or changed"


async def _crash(engine: Engine) -> None:
    """Stop an engine the way a crash does: no flush, no checkpoint, no clean-shutdown marker."""
    await engine._abort_open()


async def test_power_loss_keeps_fsynced_appends(tmp_path: Path) -> None:
    ops = PowerLossOps()
    config = DURABLE_SMALL
    with use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        log = engine.log("t")
        acked = []
        for i in range(60):
            res = await log.append([Record(b"%04d" % i * 20)])
            acked.append(res.first_offset)
        await _crash(engine)
        ops.power_fail(torn_bytes=7)
    async with Engine.open(tmp_path, config) as engine:
        records = await partition_records(engine.log("t"))
        assert [r.offset for r in records][: len(acked)] == acked
        assert [r.value for r in records][:60] == [b"%04d" % i * 20 for i in range(60)]


async def test_power_loss_keeps_fsynced_appends_that_shared_a_batch(tmp_path: Path) -> None:
    # flush_messages=1 with concurrent callers: their small appends are merged into one batch and
    # fsynced once; every caller that got its result must find its records after a power loss,
    # and appends still in flight when the power went may be gone, whole.
    power = PowerLossOps()
    config = DURABLE_SMALL
    with GatedOps(power) as ops, use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        log = engine.log("t")
        acked: dict[int, bytes] = {}
        for wave in range(6):
            results = await asyncio.gather(*(log.append([Record(b"%d-%d" % (wave, i))]) for i in range(10)))
            acked.update({r.first_offset: b"%d-%d" % (wave, i) for i, r in enumerate(results)})
        syncing = ops.gate("fdatasync", path_contains=".log")
        in_flight = [asyncio.ensure_future(log.append([Record(b"late-%d" % i)])) for i in range(5)]
        await syncing.reached()  # the late appends are written, not yet fsynced: the power goes now
        assert not any(task.done() for task in in_flight)
        power.power_fail(torn_bytes=7)
        syncing.release()
        await _crash(engine)
        await asyncio.gather(*in_flight, return_exceptions=True)
    async with Engine.open(tmp_path, config) as engine:
        records = await partition_records(engine.log("t"))
        stored = {r.offset: r.value for r in records}
        assert all(stored.get(offset) == value for offset, value in acked.items())
        assert [r.offset for r in records] == list(range(len(records)))
        assert len(records) == 60  # the late batch, never synced, is gone whole (its torn head cut)


async def test_power_loss_without_fsync_never_corrupts(tmp_path: Path) -> None:
    """Without flush_messages=1, unsynced appends may be lost, but what remains is a valid prefix."""
    ops = PowerLossOps()
    config = LogConfig(segment_bytes=8192, segment_index_bytes=2048, index_interval_bytes=256)
    with use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        for i in range(10):
            await engine.log("t").append([Record(b"%04d" % i)])
        await engine.flush()
        for i in range(10, 40):
            await engine.log("t").append([Record(b"%04d" % i)])
        await _crash(engine)
        ops.power_fail(torn_bytes=3)
    async with Engine.open(tmp_path, config) as engine:
        records = await partition_records(engine.log("t"))
        assert len(records) >= 10
        assert [r.value for r in records] == [b"%04d" % i for i in range(len(records))]
        res = await engine.log("t").append([Record(b"after")])
        assert res.first_offset == len(records)


async def test_full_disk_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    ops = FailingOps()
    with use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            await log.append([Record(b"before")])
            ops.fail("pwritev", errno.ENOSPC, partial_bytes=30, times=1)
            with pytest.raises(errors.StorageError, match="No space left"):
                await log.append([Record(b"x" * 100)] * 3)
            assert log.log_end_offset == 1
            assert [r.value for r in (await log.read(0)).records] == [b"before"]
            res = await log.append([Record(b"after")])
            assert res.first_offset == 1
            assert [r.value for r in await partition_records(log)] == [b"before", b"after"]
    async with Engine.open(tmp_path) as engine:
        assert [r.value for r in await partition_records(engine.log("t"))] == [b"before", b"after"]


async def test_failed_fsync_is_reported_and_not_acknowledged(tmp_path: Path) -> None:
    ops = FailingOps()
    with use_ops(ops):
        async with Engine.open(tmp_path, LogConfig(flush_messages=1)) as engine:
            await engine.create_topic("t")
            log = engine.log("t")
            ops.fail("fdatasync", errno.EIO, times=1)
            with pytest.raises(errors.StorageError):
                await log.append([Record(b"maybe")])
            assert log.recovery_point == 0
            res = await log.append([Record(b"sure")])
            assert log.recovery_point == res.last_offset + 1


async def test_torn_tail_and_garbage_index_are_repaired_on_open(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=8192, segment_index_bytes=2048, index_interval_bytes=128)
    async with Engine.open(tmp_path, config) as engine:
        await engine.create_topic("t")
        for i in range(100):
            await engine.log("t").append([Record(b"%03d" % i * 10)])
    part = tmp_path / "t-0"
    logs = sorted(part.glob("*.log"))
    active = logs[-1]
    # A torn tail: half a batch appended after the last good one, and no clean shutdown.
    with open(active, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x01\x00garbage")
    (tmp_path / ".clean-shutdown").unlink()
    # Garbage in an old segment's offset index and a missing time index.
    first_index = logs[0].with_suffix(".index")
    first_index.write_bytes(os.urandom(first_index.stat().st_size or 64))
    logs[0].with_suffix(".timeindex").unlink()
    async with Engine.open(tmp_path, config) as engine:
        log = engine.log("t")
        assert log.log_end_offset == 100
        for i in range(100):
            got = await log.read(i, 1)
            assert got.records[0].value == b"%03d" % i * 10
        hit = await log.offset_for_timestamp(0)
        assert hit is not None and hit.offset == 0


async def test_bit_flip_in_an_old_segment_is_corruption_not_garbage(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, segment_index_bytes=2048)
    async with Engine.open(tmp_path, config) as engine:
        await engine.create_topic("t")
        for i in range(60):
            await engine.log("t").append([Record(b"%03d" % i * 30)])
    first = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    # Batches are 61 header bytes + a 97-byte body here: byte 61 + 40 is inside the first body,
    # which only the CRC covers (a header byte could trip the header checks first).
    data[61 + 40] ^= 0x40
    first.write_bytes(bytes(data))
    async with Engine.open(tmp_path, config) as engine:
        with pytest.raises(errors.CorruptRecordError, match="CRC"):
            await engine.log("t").read(0, 1 << 20)
        # The batches after the damaged one are still readable.
        got = await engine.log("t").read(1, 1 << 20)
        assert got.records[0].offset == 1 and got.records[0].value == b"001" * 30


async def test_a_point_read_of_a_flipped_batch_is_corruption_not_garbage(tmp_path: Path) -> None:
    # One-record reads take a fast path (the batch placed by the index, checked, CRC-verified and
    # decoded in one call); a bad batch there must still be CorruptRecordError, its neighbours fine.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        for i in range(10):
            await engine.log("t").append([Record(b"%02d-%02d" % (i, j) * 20) for j in range(50)])
    path = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = bytearray(path.read_bytes())
    batch_size = len(data) // 10  # ten batches of the same size
    data[5 * batch_size + 61 + 300] ^= 0x04  # inside the body of batch 5 (offsets 250-299)
    path.write_bytes(bytes(data))
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t")
        for offset in (250, 275, 299):
            with pytest.raises(errors.CorruptRecordError, match="CRC"):
                await log.read(offset, 1)
        for offset in (249, 300, 320):
            got = await log.read(offset, 1)
            assert [r.offset for r in got.records] == [offset]
            assert got.records[0].value == b"%02d-%02d" % divmod(offset, 50) * 20


async def test_an_index_with_positions_out_of_order_is_never_fatal_to_a_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Found in review: a damaged .index that passes the open check (only its last entry and length
    # are checked then) gave the point read a negative read size, and read() raised ValueError.
    config = LogConfig(index_interval_bytes=1)  # every batch but the first gets an entry
    async with Engine.open(tmp_path, config) as engine:
        await engine.create_topic("t")
        for i in range(20):
            await engine.log("t").append([Record(b"v%d" % i * 20) for _ in range(3)])
    index = next(tmp_path.rglob("*.index"))
    data = bytearray(index.read_bytes())  # 8-byte entries: relative offset, position
    data[28:32], data[36:40] = data[36:40], data[28:32]  # swap the positions of entries 3 and 4
    index.write_bytes(bytes(data))
    async with Engine.open(tmp_path, config) as engine:
        log = engine.log("t")
        got = await log.read(12, 1 << 20)  # batch 4 (offsets 12-14), entry 3
        assert got.records[0].offset == 12
        # Every offset reads from exactly itself: a lying entry never makes a read skip records
        # (entry 3 says offset 14 ends at batch 5's position; a walk from there began at 15).
        for offset in range(60):
            for max_bytes in (1, 1 << 20):
                first = (await log.read(offset, max_bytes)).records[0]
                assert (first.offset, first.value) == (offset, b"v%d" % (offset // 3) * 20)
            found = await log.offset_for_timestamp((await log.read(offset, 1)).records[0].timestamp or 0)
            assert found is not None and found.offset <= offset
    # Said once for the file (and the indexes rebuilt), not once per read that met the bad entry.
    warnings = [r for r in caplog.records if "offset index places" in r.getMessage()]
    assert len(warnings) == 1 and "rebuilding the indexes" in warnings[0].getMessage()


async def test_an_index_pointing_at_the_wrong_bytes_is_rebuilt_even_after_a_clean_shutdown(tmp_path: Path) -> None:
    import struct

    config = LogConfig(segment_bytes=8192, segment_index_bytes=2048, index_interval_bytes=128)
    async with Engine.open(tmp_path, config) as engine:
        await engine.create_topic("t")
        for i in range(100):
            await engine.log("t").append([Record(b"%03d" % i * 10)])
    first_index = sorted((tmp_path / "t-0").glob("*.index"))[0]
    entries = first_index.read_bytes()
    assert len(entries) >= 16
    # Same offsets, positions shifted by 7 bytes: Kafka's sanity check passes, the entries lie.
    lying = b"".join(
        struct.pack(">ii", rel, pos + 7) for rel, pos in struct.iter_unpack(">ii", entries)
    )
    first_index.write_bytes(lying)
    assert (tmp_path / ".clean-shutdown").exists()
    async with Engine.open(tmp_path, config, read_only=True) as ro:
        for i in range(0, 100, 7):
            assert (await ro.log("t").read(i, 1)).records[0].value == b"%03d" % i * 10
    async with Engine.open(tmp_path, config) as engine:
        log = engine.log("t")
        for i in range(100):
            assert (await log.read(i, 1)).records[0].value == b"%03d" % i * 10
        assert (await log.offset_for_timestamp(0)) is not None
    assert first_index.read_bytes() == entries  # rebuilt to what the .log says


async def test_garbage_after_a_clean_shutdown_is_cut_on_open(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        await engine.log("t").append([Record(b"kept")])
    active = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    with open(active, "ab") as f:
        f.write(b"\xff" * 100)  # not a crash: the clean-shutdown marker is still there
    assert (tmp_path / ".clean-shutdown").exists()
    async with Engine.open(tmp_path) as engine:
        log = engine.log("t")
        assert log.log_end_offset == 1
        assert [r.value for r in (await log.read(0)).records] == [b"kept"]
        assert (await log.append([Record(b"next")])).first_offset == 1


async def test_recovered_bytes_are_made_durable_before_the_checkpoint_moves(tmp_path: Path) -> None:
    """Crash, recover (data still only in the page cache), then lose power: nothing may go missing
    below the recovery point the recovery wrote. The recovered sealed segments are synced at the open,
    so the checkpoint passes them; the recovered active segment is not (Kafka's rule), so it stays below it."""
    ops = PowerLossOps()
    config = LogConfig(segment_bytes=8192, segment_index_bytes=2048, index_interval_bytes=256)
    with use_ops(ops):
        engine = await Engine.open(tmp_path, config)
        await engine.create_topic("t")
        await engine.flush()
        for i in range(300):
            await engine.log("t").append([Record(b"%04d" % i)])
        await _crash(engine)  # unsynced: the 300 records live only in the (simulated) page cache
        engine = await Engine.open(tmp_path, config)  # recovery sees them and writes the checkpoints
        log = engine.log("t")
        assert log.log_end_offset == 300
        active = max(int(p.name.split(".")[0]) for p in (tmp_path / "t-0").glob("*.log"))
        assert active > 0, "the test wants sealed segments"
        checkpointed = parse_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_bytes())
        assert checkpointed[("t", 0)] == active  # past the synced sealed segments, not into the active one
        await _crash(engine)
        ops.power_fail()
    async with Engine.open(tmp_path, config) as engine:
        values = [r.value for r in await partition_records(engine.log("t"))]
        assert values == [b"%04d" % i for i in range(len(values))]  # a valid prefix
        assert len(values) >= active  # everything below the checkpointed recovery point survived
