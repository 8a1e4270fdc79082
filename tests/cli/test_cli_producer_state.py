"""``seglog dump``, ``verify`` and ``recover`` on producer state: batch producer fields, ``.snapshot`` files.

The directories are written by the real engine (idempotent appends, a roll, a
clean close), so every snapshot is one the writer leaves behind; the tests
then damage or move files as a crash or an operator would.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

import google_crc32c
import pytest
from cliharness import Result
from segfiles import truncate

from seglog.engine import Engine, LogConfig, Record
from seglog.engine.producer_state import encode_snapshot
from seglog.segments.files import snapshot_file_name
from seglog.server.records import encode_batch as encode_kafka_batch

Cli = Callable[..., Result]
PID = 42


def _kafka_batch(values: list[bytes], *, producer_id: int, epoch: int, sequence: int) -> bytes:
    """A RecordBatch v2 as an idempotent Kafka producer sends it: producer id, epoch and base sequence set."""
    now = time.time_ns() // 1_000_000  # an old timestamp would roll the segment (segment.ms) at the next append
    head = bytearray(encode_kafka_batch([Record(v, None, now, (), i) for i, v in enumerate(values)],
                                        leader_epoch=-1))
    struct.pack_into(">qhi", head, 43, producer_id, epoch, sequence)
    struct.pack_into(">I", head, 17, google_crc32c.value(bytes(head[21:])))
    return bytes(head)


async def _write(log_dir: Path) -> Path:
    """orders-0: [0,1] native producer batch | roll (snapshot 2) | [2] Kafka producer batch, [3] plain | close (4)."""
    async with Engine.open(log_dir, LogConfig(segment_bytes=4096)) as engine:
        await engine.create_topic("orders", partitions=1)
        log = engine.log("orders", 0)
        await log.append([Record(b"a"), Record(b"b")], producer_id=PID, producer_epoch=3, base_sequence=0)
        await log.roll()
        await log.append_kafka_batch(_kafka_batch([b"c"], producer_id=PID, epoch=3, sequence=2))
        await log.append([Record(b"d")])
        return log.directory


@pytest.fixture
def part(tmp_path: Path) -> Path:
    directory = asyncio.run(_write(tmp_path / "data"))
    assert sorted(p.name for p in directory.glob("*.snapshot")) == [snapshot_file_name(2), snapshot_file_name(4)]
    return directory


def _crashed(part: Path, target: Path) -> Path:
    """A copy of the log directory as a kill -9 before the close leaves it: no marker, no close snapshot."""
    shutil.copytree(part.parent, target, ignore=shutil.ignore_patterns(".lock"))
    (target / ".clean-shutdown").unlink()
    return target / part.name


# ------------------------------------------------------------------------------------------ dump


def test_dump_shows_each_batchs_producer_fields_in_both_formats(cli: Cli, part: Path) -> None:
    r = cli("dump", part / f"{2:020d}.log")
    assert r.code == 0, r
    kafka, plain = r.out.splitlines()
    assert "producerId: 42 producerEpoch: 3 baseSequence: 2 magic: 2" in kafka
    assert "isTransactional: false isControl: false" in kafka
    assert "producerId: -1 producerEpoch: -1 baseSequence: -1 magic: 84" in plain
    doc = json.loads(cli("dump", part / f"{0:020d}.log", "--json").out)
    (batch,) = doc["files"][0]["batches"]
    assert {k: batch[k] for k in ("format", "producer_id", "producer_epoch", "base_sequence", "is_transactional",
                                  "is_control")} == {"format": "seglog", "producer_id": 42, "producer_epoch": 3,
                                                     "base_sequence": 0, "is_transactional": False,
                                                     "is_control": False}


def test_dump_prints_a_snapshots_producers_and_their_batches(cli: Cli, part: Path) -> None:
    r = cli("dump", part / snapshot_file_name(4))
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[0].startswith("producerId: 42 producerEpoch: 3 coordinatorEpoch: -1 currentTxnFirstOffset: None ")
    assert [line.split(" timestamp:")[0] for line in lines[1:]] == [
        "| firstSequence: 0 lastSequence: 1 firstOffset: 0 lastOffset: 1 offsetDelta: 1",
        "| firstSequence: 2 lastSequence: 2 firstOffset: 2 lastOffset: 2 offsetDelta: 0",
    ]
    doc = json.loads(cli("dump", part / snapshot_file_name(2), "--json").out)
    (snap,) = doc["files"]
    assert (snap["kind"], snap["offset"], snap["findings"]) == ("snapshot", 2, [])
    (producer,) = snap["producers"]
    assert (producer["producer_id"], producer["producer_epoch"], producer["current_txn_first_offset"]) == (42, 3, None)
    assert [(b["first_sequence"], b["last_sequence"], b["last_offset"]) for b in producer["batches"]] == [(0, 1, 1)]


def test_a_partition_dump_puts_each_snapshot_before_the_segment_starting_at_its_offset(cli: Cli, part: Path) -> None:
    doc = json.loads(cli("dump", part, "--json").out)
    names = [Path(f["path"]).name for f in doc["files"]]
    assert names == [f"{0:020d}.log", f"{0:020d}.index", f"{0:020d}.timeindex", snapshot_file_name(2),
                     f"{2:020d}.log", f"{2:020d}.index", f"{2:020d}.timeindex", snapshot_file_name(4)]


def test_dump_of_a_snapshot_that_does_not_decode_names_why_and_exits_1(cli: Cli, part: Path) -> None:
    snapshot = part / snapshot_file_name(4)
    raw = bytearray(snapshot.read_bytes())
    raw[-1] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    r = cli("dump", snapshot)
    assert r.code == 1 and r.out == ""
    assert "error [snapshot]" in r.err and "CRC-32C mismatch" in r.err


# ------------------------------------------------------------------------------------------ verify


def test_verify_finds_nothing_wrong_with_the_snapshots_the_engine_writes(cli: Cli, part: Path) -> None:
    r = cli("verify", part.parent, "-v")
    assert r.code == 0, r
    assert "snapshot" not in r.out


def test_verify_names_a_snapshot_that_does_not_decode(cli: Cli, part: Path) -> None:
    snapshot = part / snapshot_file_name(2)
    snapshot.write_bytes(snapshot.read_bytes()[:-1])
    r = cli("verify", part.parent, "--json")
    assert r.code == 1
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["check"], finding["severity"], Path(finding["path"]).name) == ("snapshot", "error", snapshot.name)
    assert "CRC-32C mismatch" in finding["message"]


def test_verify_names_a_snapshot_inside_a_batch(cli: Cli, part: Path) -> None:
    (part / snapshot_file_name(1)).write_bytes(encode_snapshot([]))  # decodes, but inside batch [0, 1]
    r = cli("verify", part.parent, "--json")
    assert r.code == 1
    (finding,) = json.loads(r.out)["findings"]
    assert (Path(finding["path"]).name, finding["severity"]) == (snapshot_file_name(1), "error")
    assert "not where a batch starts" in finding["message"]


def test_verify_names_a_snapshot_past_the_log_end(cli: Cli, part: Path) -> None:
    (part / snapshot_file_name(9)).write_bytes(encode_snapshot([]))
    r = cli("verify", part.parent, "--json")
    assert r.code == 1
    (finding,) = json.loads(r.out)["findings"]
    assert (Path(finding["path"]).name, finding["severity"]) == (snapshot_file_name(9), "error")
    assert "past the log end offset 4" in finding["message"]


def test_verify_leaves_the_snapshots_the_engine_cleans_up_itself_alone(cli: Cli, part: Path) -> None:
    # The previous clean close's snapshot (at a batch boundary, at no segment's base) and one below the
    # log start: the engine leaves both behind and deletes them when it next loads the producer state.
    (part / snapshot_file_name(3)).write_bytes(encode_snapshot([]))
    (part.parent / "log-start-offset-checkpoint").write_text("0\n1\norders 0 3\n")
    r = cli("verify", part.parent, "--json")
    assert r.code == 0, r
    assert json.loads(r.out)["findings"] == []


# ------------------------------------------------------------------------------------------ recover


def test_recover_dry_run_lists_the_snapshots_the_open_would_delete(cli: Cli, part: Path, tmp_path: Path) -> None:
    crashed = _crashed(part, tmp_path / "crashed")
    second = crashed / f"{2:020d}.log"
    truncate(second, second.stat().st_size - 3)  # a torn last batch: recovery ends the log at 3
    (crashed / snapshot_file_name(4)).write_bytes(b"")  # as if the close's snapshot were cut by the crash
    (crashed / snapshot_file_name(2)).write_bytes((crashed / snapshot_file_name(2)).read_bytes()[:-1])
    (crashed / snapshot_file_name(1)).write_bytes(encode_snapshot([]))
    before = {p: p.read_bytes() for p in crashed.parent.rglob("*") if p.is_file()}
    r = cli("recover", crashed.parent, "--dry-run", "--json")
    assert r.code == 0, r
    assert {p: p.read_bytes() for p in crashed.parent.rglob("*") if p.is_file()} == before
    (partition,) = json.loads(r.out)["partitions"]
    assert partition["log_end_offset"] == 3
    removed = {s["file"]: s["reason"] for s in partition["removed_snapshots"]}
    assert list(removed) == [snapshot_file_name(4), snapshot_file_name(1), snapshot_file_name(2)]
    assert "past the log end offset 3" in removed[snapshot_file_name(4)]
    assert "a stray" in removed[snapshot_file_name(1)]
    assert "does not decode (CRC-32C mismatch" in removed[snapshot_file_name(2)]
    r = cli("recover", crashed.parent, "--dry-run")
    assert f"orders-0: producer snapshot {snapshot_file_name(4)} to be deleted: past the log end" in r.err


def test_recover_says_which_snapshots_the_open_deleted(cli: Cli, part: Path, tmp_path: Path) -> None:
    crashed = _crashed(part, tmp_path / "crashed")
    second = crashed / f"{2:020d}.log"
    truncate(second, second.stat().st_size - 3)
    r = cli("recover", crashed.parent, "--json", "--no-progress")
    assert r.code == 0, r
    (partition,) = json.loads(r.out)["partitions"]
    assert [s["file"] for s in partition["removed_snapshots"]] == [snapshot_file_name(4)]
    assert not (crashed / snapshot_file_name(4)).exists()
