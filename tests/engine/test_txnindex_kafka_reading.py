"""After an aborted transaction, each partition's ``.txnindex`` reads back as Kafka reads its own.

The reader below is written from Kafka's ``TransactionIndex`` and ``AbortedTxn``
alone (storage/internals/log), not from seglog's code: consecutive 34-byte
big-endian entries from position 0 while at least 34 bytes remain (a partial
tail is ignored), each ``version int16 | producer_id int64 | first_offset int64
| last_offset int64 | last_stable_offset int64``, a version above 0 refused.
The last stable offset is Kafka's ``ProducerStateManager.lastStableOffset(completedTxn)``:
the first offset of another producer's transaction still open at the
partition, else the marker's offset + 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.engine import Engine, Record

_ENTRY_BYTES = 34


def kafka_aborted_txns(data: bytes) -> list[tuple[int, int, int, int]]:
    """``(producer_id, first_offset, last_offset, last_stable_offset)`` of every entry, in file order."""
    out = []
    position = 0
    while len(data) - position >= _ENTRY_BYTES:
        entry = data[position : position + _ENTRY_BYTES]
        version = int.from_bytes(entry[0:2], "big", signed=True)
        if version > 0:
            raise ValueError(f"Unexpected aborted transaction version {version}")
        out.append(tuple(int.from_bytes(entry[at : at + 8], "big", signed=True) for at in (2, 10, 18, 26)))
        position += _ENTRY_BYTES
    return out  # type: ignore[return-value]


def test_the_reader_follows_kafkas_rules() -> None:
    entry = (0).to_bytes(2, "big") + b"".join(v.to_bytes(8, "big") for v in (983493, 137, 299, 200))
    assert kafka_aborted_txns(entry + entry[:10]) == [(983493, 137, 299, 200)]  # Kafka's TX-7 and D-11
    with pytest.raises(ValueError, match="version 1"):
        kafka_aborted_txns((1).to_bytes(2, "big") + entry[2:])


async def test_an_aborted_transactions_entries_read_back_as_kafka_reads_them(tmp_path: Path) -> None:
    async with Engine.open(tmp_path / "data") as engine:
        await engine.create_topic("orders", partitions=2)
        other = engine.transaction("other")
        await other.begin()
        await other.append("orders", 0, [Record(b"open")])  # orders-0 offset 0: holds the LSO of orders-0
        with pytest.raises(RuntimeError, match="abort it"):
            async with engine.transaction("billing") as txn:
                await txn.append("orders", 0, [Record(b"a"), Record(b"b")])  # orders-0 offsets 1-2
                await txn.append("orders", 1, [Record(b"c")])  # orders-1 offset 0
                raise RuntimeError("abort it")
        aborted_by = txn.producer_id
        assert engine.log("orders", 0).log_end_offset == 4  # the abort marker at 3
        assert engine.log("orders", 1).log_end_offset == 2  # the abort marker at 1
        first = (tmp_path / "data" / "orders-0" / f"{0:020d}.txnindex").read_bytes()
        second = (tmp_path / "data" / "orders-1" / f"{0:020d}.txnindex").read_bytes()
        await other.commit()
    assert kafka_aborted_txns(first) == [(aborted_by, 1, 3, 0)]  # "other" still open at offset 0
    assert kafka_aborted_txns(second) == [(aborted_by, 0, 1, 2)]  # none open: the marker's offset + 1
    assert len(first) == len(second) == _ENTRY_BYTES
