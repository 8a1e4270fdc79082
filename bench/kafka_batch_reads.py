"""Reads of a log written as Kafka clients write it (the wire server stores their batches as sent) beside
the same records written by ``append``: point read, time lookup + read, sequential fetch.

    .venv/bin/python bench/kafka_batch_reads.py [--records 20000] [--rounds 5]

For 1, 10 and 100 records per batch (100-B values, 16-B keys), one process writes two logs: one with
``append`` (seglog's batch format), one with ``append_kafka_batch`` (Kafka RecordBatch v2, uncompressed,
as a producer sends it). Each round measures, alternating the two logs: the p50 of ``read(offset, 1)``
at random offsets, the p50 of ``offset_for_timestamp`` + ``read`` of the offset found, and the records
per second of a front-to-back fetch in 1 MiB reads. Printed: the Kafka log's figure, seglog's, and
their ratio (Kafka ÷ seglog for latencies: 1.0 means as fast), medians over rounds. Plain script,
never run by the tests; the machine is shared: quote the ratios.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from seglog.engine import Engine, LogConfig, PartitionLog, Record, run
from tests.segments.kafkahelpers import kafka_batch  # the tests' producer-side encoder

CONFIG = LogConfig(max_message_bytes=4 << 20, retention_ms=-1)
BASE_TS = 1_700_000_000_000
LOOKUPS = 1000


async def _fill(log: PartitionLog, records: list[Record], per_batch: int, kafka: bool) -> None:
    for first in range(0, len(records), per_batch):
        part = records[first : first + per_batch]
        if kafka:
            await log.append_kafka_batch(kafka_batch(first, part))
        else:
            await log.append(part)


async def _point(log: PartitionLog, offsets: list[int]) -> float:
    samples = []
    for offset in offsets:
        start = time.perf_counter()
        await log.read(offset, 1)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def _lookup(log: PartitionLog, offsets: list[int]) -> float:
    samples = []
    for offset in offsets:
        start = time.perf_counter()
        found = await log.offset_for_timestamp(BASE_TS + offset)
        assert found is not None
        await log.read(found.offset, 1)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


async def _fetch(log: PartitionLog) -> float:
    offset, end, count = log.log_start_offset, log.log_end_offset, 0
    start = time.perf_counter()
    while offset < end:
        got = await log.read(offset, 1 << 20)
        count += len(got.records)
        offset = got.records[-1].offset + 1
    return count / (time.perf_counter() - start)


async def main(records_per_log: int, rounds: int) -> None:
    records = [Record(random.randbytes(100), b"k%015d" % i, BASE_TS + i) for i in range(records_per_log)]
    print(f"{records_per_log} records of 100 B per log, {rounds} rounds; Kafka-format log vs seglog-format log")
    print(f"{'per batch':>9}  {'point us (k / s)':>18} {'ratio':>5}  {'ts+read us (k / s)':>19} {'ratio':>5}"
          f"  {'fetch krec/s (k / s)':>21} {'ratio':>5}")
    for per_batch in (1, 10, 100):
        with tempfile.TemporaryDirectory() as directory:
            engine = await Engine.open(Path(directory), CONFIG)
            try:
                logs = {}
                for kind in ("seglog", "kafka"):
                    await engine.create_topic(kind)
                    logs[kind] = engine.log(kind)
                    await _fill(logs[kind], records, per_batch, kind == "kafka")
                    await logs[kind].read(0, 1)  # tables the segment, as any first read does
                figures: dict[str, dict[str, list[float]]] = {k: {"point": [], "ts": [], "fetch": []} for k in logs}
                for round_ in range(rounds):
                    offsets = [random.randrange(records_per_log - per_batch) for _ in range(LOOKUPS)]
                    for kind in (("seglog", "kafka") if round_ % 2 else ("kafka", "seglog")):
                        figures[kind]["point"].append(await _point(logs[kind], offsets))
                        figures[kind]["ts"].append(await _lookup(logs[kind], offsets))
                        figures[kind]["fetch"].append(await _fetch(logs[kind]) / 1e3)
            finally:
                await engine.close()
        k = {name: statistics.median(v) for name, v in figures["kafka"].items()}
        s = {name: statistics.median(v) for name, v in figures["seglog"].items()}
        print(f"{per_batch:>9}  {k['point']:>8.1f} / {s['point']:>7.1f} {k['point'] / s['point']:>5.2f}"
              f"  {k['ts']:>8.1f} / {s['ts']:>8.1f} {k['ts'] / s['ts']:>5.2f}"
              f"  {k['fetch']:>9.0f} / {s['fetch']:>9.0f} {k['fetch'] / s['fetch']:>5.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    run(main(args.records, args.rounds))
