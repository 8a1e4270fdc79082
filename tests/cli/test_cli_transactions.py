"""``seglog dump`` and ``verify`` on a partition with transactions: markers decoded, ``.txnindex`` checked.

The directory is written by the real engine (transactional appends of two
producers, a commit and an abort marker, a clean close); the verify tests then
rewrite ``.txnindex`` entries so that they point at the wrong batches.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from cliharness import Result

from seglog.engine import Engine, Record

Cli = Callable[..., Result]
A, B = 7, 8  # producer ids
ENTRY = struct.Struct(">hqqqq")  # Kafka's AbortedTxn: version, producer id, first, last, last stable offset


async def _write(log_dir: Path) -> Path:
    """t-0: 0 plain | 1-2 A txn | 3 B txn | 4 COMMIT A | 5 B txn | 6 ABORT B (coordinator epoch 5) | 7 plain."""
    async with Engine.open(log_dir) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"plain")])
        await log.append([Record(b"a1"), Record(b"a2")], producer_id=A, producer_epoch=0, base_sequence=0,
                         transactional=True)
        await log.append([Record(b"b1")], producer_id=B, producer_epoch=2, base_sequence=0, transactional=True)
        assert await log.write_txn_marker(A, 0, commit=True) == 4
        await log.append([Record(b"b2")], producer_id=B, producer_epoch=2, base_sequence=1, transactional=True)
        assert await log.write_txn_marker(B, 2, commit=False, coordinator_epoch=5) == 6
        await log.append([Record(b"after")])
        return log.directory


@pytest.fixture
def part(tmp_path: Path) -> Path:
    return asyncio.run(_write(tmp_path / "data"))


def _log(part: Path) -> Path:
    return part / f"{0:020d}.log"


def _txnindex(part: Path) -> Path:
    return part / f"{0:020d}.txnindex"


# ------------------------------------------------------------------------------------------ dump


def test_dump_decodes_each_marker_and_shows_the_transactional_bit(cli: Cli, part: Path) -> None:
    r = cli("dump", _log(part))
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert len(lines) == 7
    assert "isTransactional: false isControl: false producerId: -1" in lines[0]
    assert "isTransactional: true isControl: false producerId: 7 producerEpoch: 0 baseSequence: 0" in lines[1]
    assert "isTransactional: true isControl: true producerId: 7 producerEpoch: 0 baseSequence: -1" in lines[3]
    assert lines[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")
    assert lines[5].startswith("baseOffset: 6 ") and lines[5].endswith("endTxnMarker: ABORT coordinatorEpoch: 5")
    assert "endTxnMarker" not in lines[4]
    doc = json.loads(cli("dump", _log(part), "--json").out)
    batches = doc["files"][0]["batches"]
    assert [b.get("control") for b in batches] == [
        None, None, None, {"type": "COMMIT", "coordinator_epoch": 0}, None,
        {"type": "ABORT", "coordinator_epoch": 5}, None,
    ]
    assert [b["is_transactional"] for b in batches] == [False, True, True, True, True, True, False]


def test_dump_of_the_txnindex_shows_the_aborted_transaction(cli: Cli, part: Path) -> None:
    r = cli("dump", _txnindex(part))
    assert (r.code, r.out) == (0, "version: 0 producerId: 8 firstOffset: 3 lastOffset: 6 lastStableOffset: 7\n")


# ------------------------------------------------------------------------------------------ verify


def test_verify_finds_nothing_wrong_with_the_transactions_the_engine_writes(cli: Cli, part: Path) -> None:
    r = cli("verify", part.parent, "--deep")
    assert r.code == 0, r


def _rewrite_entry(part: Path, **fields: int) -> None:
    version, pid, first, last, lso = ENTRY.unpack(_txnindex(part).read_bytes())
    values = {"pid": pid, "first": first, "last": last, "lso": lso} | fields
    _txnindex(part).write_bytes(ENTRY.pack(version, values["pid"], values["first"], values["last"], values["lso"]))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"pid": A}, "the marker at offset 6 is producer 8's, not 7's"),
        ({"last": 4, "first": 1, "pid": A}, "the marker at offset 4 is a commit, not an abort"),
        ({"last": 5}, "last offset 5 is not a transaction marker"),
        ({"first": 2}, "first offset 2 is not where producer 8's transaction starts (offset 3)"),
        ({"lso": 5}, "last stable offset 5 is not the one at its marker (7:"),
    ],
    ids=["another-producers-marker", "a-commit", "a-data-batch", "first-offset-inside-a-batch", "wrong-lso"],
)
def test_verify_names_a_txnindex_entry_that_is_not_an_abort_of_its_producer(
    cli: Cli, part: Path, fields: dict[str, int], problem: str
) -> None:
    _rewrite_entry(part, **fields)
    r = cli("verify", part.parent, "--json")
    assert r.code == 1, r
    findings = json.loads(r.out)["findings"]
    assert {(f["check"], f["severity"], Path(f["path"]).name) for f in findings} == {
        ("txn-index", "error", _txnindex(part).name)}
    (finding,) = [f for f in findings if f["message"].startswith("slot 0 ")]
    assert problem in finding["message"], finding["message"]
    # An entry moved off the abort marker at 6 leaves that marker without one.
    moved = fields.get("last", 6) != 6
    assert len(findings) == 1 + moved, findings
    if moved:
        assert "the abort marker at offset 6 (producer 8) has no entry" in findings[1]["message"]


@pytest.mark.parametrize("how", ["emptied", "deleted"])
def test_verify_names_an_abort_marker_whose_txnindex_entry_is_lost(cli: Cli, part: Path, how: str) -> None:
    if how == "emptied":
        _txnindex(part).write_bytes(b"")
    else:
        _txnindex(part).unlink()
    r = cli("verify", part.parent, "--json")
    assert r.code == 1, r
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["check"], finding["severity"], Path(finding["path"]).name, finding["offset"]) == (
        "txn-index", "error", _txnindex(part).name, 6)
    assert finding["message"].startswith(
        "the abort marker at offset 6 (producer 8) has no entry: expected producer id 8, first offset 3, "
        "last offset 6, last stable offset 7; a read_committed read would return the records of that aborted "
        "transaction"), finding["message"]


def test_verify_names_a_txnindex_entry_without_its_abort_marker(cli: Cli, part: Path) -> None:
    """An extra entry (producer A's committed transaction, ended by the marker at 4) before the real one."""
    real = _txnindex(part).read_bytes()
    _txnindex(part).write_bytes(ENTRY.pack(0, A, 1, 4, 3) + real)
    r = cli("verify", part.parent, "--json")
    assert r.code == 1, r
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["check"], finding["position"], finding["offset"]) == ("txn-index", 0, 4)
    assert "slot 0 (producer 7, offsets 1..4): the marker at offset 4 is a commit, not an abort" in finding["message"]


async def _write_markers_without_data(log_dir: Path) -> None:
    """Aborts that end no open transaction here (Kafka writes the marker, and its entry, anyway)."""
    async with Engine.open(log_dir) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"b1")], producer_id=B, producer_epoch=0, base_sequence=0, transactional=True)
        assert await log.write_txn_marker(A, 0, commit=False) == 1  # nothing of A's open: first offset 1
        assert await log.write_txn_marker(B, 0, commit=False) == 2


def test_verify_takes_the_entry_of_an_abort_that_ended_no_open_transaction(cli: Cli, tmp_path: Path) -> None:
    asyncio.run(_write_markers_without_data(tmp_path / "data"))
    r = cli("dump", tmp_path / "data" / "t-0" / f"{0:020d}.txnindex")
    assert r.out.splitlines() == [
        "version: 0 producerId: 7 firstOffset: 1 lastOffset: 1 lastStableOffset: 0",
        "version: 0 producerId: 8 firstOffset: 0 lastOffset: 2 lastStableOffset: 3",
    ]
    r = cli("verify", tmp_path / "data")
    assert r.code == 0, r


async def _write_across_rolls(log_dir: Path) -> Path:
    """Segment 0: A txn at 0 | segment 1: B txn at 1, ABORT A at 2 (LSO 1: B open), COMMIT B at 3 | segment 4."""
    async with Engine.open(log_dir) as engine:
        await engine.create_topic("t", partitions=1)
        log = engine.log("t", 0)
        await log.append([Record(b"a")], producer_id=A, producer_epoch=0, base_sequence=0, transactional=True)
        await log.roll()
        await log.append([Record(b"b")], producer_id=B, producer_epoch=0, base_sequence=0, transactional=True)
        assert await log.write_txn_marker(A, 0, commit=False) == 2
        assert await log.write_txn_marker(B, 0, commit=True) == 3
        await log.roll()
        return log.directory


def test_verify_replays_transactions_across_segments_and_from_a_snapshot_after_the_head_is_deleted(
    cli: Cli, tmp_path: Path
) -> None:
    part = asyncio.run(_write_across_rolls(tmp_path / "data"))
    txnindex = part / f"{1:020d}.txnindex"
    assert ENTRY.unpack(txnindex.read_bytes()) == (0, A, 0, 2, 1)
    assert cli("verify", part.parent).code == 0
    for suffix in (".log", ".index", ".timeindex"):
        (part / f"{0:020d}{suffix}").unlink()  # retention took the head; the snapshot at 1 holds A's open txn
    assert (part / f"{1:020d}.snapshot").exists()
    assert cli("verify", part.parent).code == 0
    txnindex.write_bytes(ENTRY.pack(0, A, 0, 2, 2))
    r = cli("verify", part.parent, "--json")
    (finding,) = [f for f in json.loads(r.out)["findings"] if f["check"] == "txn-index"]
    assert "last stable offset 2 is not the one at its marker (1:" in finding["message"], finding


def test_verify_without_the_state_at_the_head_only_bounds_first_and_last_stable_offsets(
    cli: Cli, tmp_path: Path
) -> None:
    part = asyncio.run(_write_across_rolls(tmp_path / "data"))
    for suffix in (".log", ".index", ".timeindex"):
        (part / f"{0:020d}{suffix}").unlink()
    (part / f"{1:020d}.snapshot").unlink()
    # A's transaction may have begun before offset 1: its first offset 0 is possible, 3 (after the marker) is not.
    assert cli("verify", part.parent).code == 0
    txnindex = part / f"{1:020d}.txnindex"
    txnindex.write_bytes(ENTRY.pack(0, A, 3, 2, 1))
    r = cli("verify", part.parent, "--json")
    findings = [f for f in json.loads(r.out)["findings"] if f["check"] == "txn-index"]
    assert len(findings) == 1 and r.code == 1, r
    assert "first offset 3 is above last offset 2" in findings[0]["message"]
    txnindex.write_bytes(ENTRY.pack(0, A, 1, 2, 2))
    r = cli("verify", part.parent, "--json")
    (finding,) = [f for f in json.loads(r.out)["findings"] if f["check"] == "txn-index"]
    assert "last stable offset 2 is not the one at its marker (at most 1:" in finding["message"], finding
