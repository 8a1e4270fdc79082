"""``seglog bench --only transactions``: transactional produce beside non-transactional produce, same run.

The workload: R records (100-byte values; 100,000 a round, 2,000 with
``--quick``) appended to one partition in batches of 100 records (a Kafka
producer's batch), under the engine's default durability. Measured, variants
interleaved round by round, each into a topic of its own:

* **plain** — ``PartitionLog.append``, no producer id (the non-transactional figure);
* **idempotent** — the same batches with a producer id and sequences (Kafka's
  ``enable.idempotence``, the default of Kafka's Java producer);
* **transactions of 100 / 10,000 records** — what a Kafka transactional
  producer asks of the coordinator: one ``InitProducerId`` for the run, then
  per transaction ``AddPartitionsToTxn``, the batches (transactional), and
  ``EndTxn(commit)``, which writes PrepareCommit durably, a commit marker to
  the partition and CompleteCommit (``engine.transactions``);
* **engine.transaction of 100 records** — the native API, one
  ``async with engine.transaction(...)`` per transaction (its entry takes the
  transactional id with a new epoch: one more durable write each).

Records per second, the median round; the ratios divide by the plain figure
of the same run. docs/PERFORMANCE.md has the figures and the command.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from seglog.engine import Record
from seglog.engine.producer_state import increment_sequence
from seglog.tools.bench.data import open_engine, remove
from seglog.tools.bench.timing import Rate, Rounds, interleave, now

BATCH: Final = 100  # records a batch (one append), as a Kafka producer's batch of 100-byte records
VALUE_BYTES: Final = 100


@dataclass(frozen=True, slots=True)
class TxnSizes:
    records: int  # records a variant writes each round
    small: int  # records a small transaction
    large: int  # records a large transaction


TXN_FULL: Final = TxnSizes(records=100_000, small=100, large=10_000)
TXN_QUICK: Final = TxnSizes(records=2_000, small=100, large=1_000)

COLUMNS: Final = ("plain", "idempotent", "txn_small", "txn_large", "native_small")


def _labels(sizes: TxnSizes) -> dict[str, str]:
    return {
        "plain": "appends, no producer (non-transactional)",
        "idempotent": "appends of an idempotent producer",
        "txn_small": f"transactions of {sizes.small:,} records (coordinator calls, as a Kafka producer)",
        "txn_large": f"transactions of {sizes.large:,} records (coordinator calls, as a Kafka producer)",
        "native_small": f"engine.transaction of {sizes.small:,} records (native, a new epoch each)",
    }


async def run_section(sizes: TxnSizes, rounds: Rounds, directory: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the variants round by round; the rows (records/s) and ratios of the report."""
    batches = [
        [Record(os.urandom(VALUE_BYTES // 2).hex().encode()) for _ in range(BATCH)]
        for _ in range(sizes.records // BATCH)
    ]
    records = len(batches) * BATCH
    rates = {column: Rate() for column in COLUMNS}
    engine = await open_engine(directory / "seglog")
    round_no = [0]
    try:
        for topic in COLUMNS:
            await engine.create_topic(topic, partitions=1)
        coordinator = engine.transactions
        idempotent_pid, idempotent_epoch = await coordinator.init_producer_id(None)
        sequences = {column: 0 for column in COLUMNS}
        producers: dict[str, tuple[int, int]] = {}
        for column in ("txn_small", "txn_large"):
            producers[column] = await coordinator.init_producer_id(f"bench-{column}")

        def timed(column: str, body: Callable[[], Awaitable[None]]) -> Callable[[bool], Awaitable[None]]:
            async def run(record: bool) -> None:
                start = now()
                await body()
                if record:
                    rates[column].add(records, now() - start)
            return run

        async def plain() -> None:
            log = engine.log("plain", 0)
            for batch in batches:
                await log.append(batch)

        async def idempotent() -> None:
            log = engine.log("idempotent", 0)
            for batch in batches:
                await log.append(batch, producer_id=idempotent_pid, producer_epoch=idempotent_epoch,
                                 base_sequence=sequences["idempotent"])
                sequences["idempotent"] = increment_sequence(sequences["idempotent"], BATCH)

        def transactions(column: str, per_txn: int) -> Callable[[], Awaitable[None]]:
            txn_id, (pid, epoch) = f"bench-{column}", producers[column]
            per = max(per_txn // BATCH, 1)

            async def body() -> None:
                log = engine.log(column, 0)
                for first in range(0, len(batches), per):
                    await coordinator.add_partitions(txn_id, pid, epoch, [(column, 0)])
                    for batch in batches[first : first + per]:
                        await log.append(batch, producer_id=pid, producer_epoch=epoch,
                                         base_sequence=sequences[column], transactional=True)
                        sequences[column] = increment_sequence(sequences[column], BATCH)
                    await coordinator.end_txn(txn_id, pid, epoch, True)
            return body

        async def native() -> None:
            per = max(sizes.small // BATCH, 1)
            for first in range(0, len(batches), per):
                async with engine.transaction("bench-native") as txn:
                    for batch in batches[first : first + per]:
                        await txn.append("native_small", 0, batch)

        async def tick(record: bool) -> None:
            round_no[0] += 1
            say(f"transactions: round {round_no[0]}")

        await interleave(rounds, [
            timed("plain", plain), timed("idempotent", idempotent),
            timed("txn_small", transactions("txn_small", sizes.small)),
            timed("txn_large", transactions("txn_large", sizes.large)),
            timed("native_small", native), tick,
        ])
    finally:
        await engine.close()
        remove(directory)
    figures = {column: rate.per_second for column, rate in rates.items() if rate.seconds}
    labels = _labels(sizes)

    def ratio(column: str) -> dict[str, Any]:
        x, y = figures.get(column), figures.get("plain")
        return {"label": f"{labels[column]} / plain appends", "value": None if not x or not y else round(x / y, 3)}

    return {
        "records_per_round": records,
        "batch_records": BATCH,
        "value_bytes": VALUE_BYTES,
        "rows": {column: {"label": labels[column], "records_per_s": figures.get(column)} for column in COLUMNS},
        "ratios": {f"{column}_vs_plain": ratio(column) for column in COLUMNS if column != "plain"},
    }
