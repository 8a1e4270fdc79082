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
        ({"first": 2}, "first offset 2 is not where a transactional batch of producer 8 starts"),
    ],
    ids=["another-producers-marker", "a-commit", "a-data-batch", "first-offset-inside-a-batch"],
)
def test_verify_names_a_txnindex_entry_that_is_not_an_abort_of_its_producer(
    cli: Cli, part: Path, fields: dict[str, int], problem: str
) -> None:
    _rewrite_entry(part, **fields)
    r = cli("verify", part.parent, "--json")
    assert r.code == 1, r
    (finding,) = json.loads(r.out)["findings"]
    assert (finding["check"], finding["severity"], Path(finding["path"]).name) == (
        "txn-index", "error", _txnindex(part).name)
    assert problem in finding["message"], finding["message"]
