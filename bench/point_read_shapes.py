"""Point read and time lookup + read, every append shape, beside sqlite3 (issue 22, points 1 and 2).

    .venv/bin/python bench/point_read_shapes.py [--rounds 7] [--lookups 400] [--small 50000] [--large 20000]

The 8 shapes of ``seglog bench --only shapes`` (1, 10, 100, 1000 records per
append x 100 B and 1 KiB values), each measured in ONE process with the
variants interleaved (their order rotates from round to round, after one
discarded warm-up round):

* point read: ``await log.read(offset, 1)`` of a random offset beside sqlite3
  (WAL) ``SELECT ... WHERE seq = ?`` (rowid);
* time lookup + read: ``await log.offset_for_timestamp(ts)`` then
  ``await log.read(offset, 1)`` beside sqlite3 ``WHERE ts >= ? ORDER BY ts
  LIMIT 1`` with an index on ``ts``, and one executor round trip
  (``run_in_executor(None, noop)``).

Prints, per shape, the median over rounds of each round's p50 ratio (both
sides measured seconds apart): on a shared, noisy machine the ratios hold
where absolute figures do not. Plain script, never run by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from seglog.engine import LogConfig, PartitionLog
from seglog.tools.bench import references as ref
from seglog.tools.bench import workloads
from seglog.tools.bench.data import BASE_TIMESTAMP_MS, Dataset, open_engine
from seglog.tools.bench.timing import percentile

SHAPES = [(n, v) for v in (100, 1024) for n in (1, 10, 100, 1000)]
CONFIG = LogConfig(max_message_bytes=4 << 20)  # 1000 records of 1 KiB make a ~1.05 MB batch

def _variants(
    log: PartitionLog, peer: ref.SqlitePeer, offsets: list[int], stamps: list[int], lookups: int
) -> dict[str, Callable[[list[float]], Awaitable[None]]]:
    async def seglog_point(out: list[float]) -> None:
        await workloads.point_reads(log, offsets, out)

    async def sqlite_point(out: list[float]) -> None:
        peer.point_reads(offsets, out)

    async def seglog_ts(out: list[float]) -> None:
        await workloads.timestamp_reads(log, stamps, out)

    async def sqlite_ts(out: list[float]) -> None:
        peer.timestamp_reads(stamps, out)

    async def hop(out: list[float]) -> None:
        await ref.hop_latencies(lookups, out)

    return {"point": seglog_point, "sqlite_point": sqlite_point, "ts": seglog_ts, "sqlite_ts": sqlite_ts, "hop": hop}


async def main(rounds: int, lookups: int, small: int, large: int) -> None:
    rnd = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="seglog-point-") as tmp:
        directory = Path(tmp)
        engine = await open_engine(directory / "seglog", CONFIG)
        sqlite: dict[int, ref.SqlitePeer] = {}
        try:
            datasets = {v: Dataset(small if v < 1024 else large, v) for v in (100, 1024)}
            for v, dataset in datasets.items():
                sqlite[v] = ref.SqlitePeer(directory / f"sqlite-{v}.db", "NORMAL")
                sqlite[v].append(dataset.row_batches(1000))
                sqlite[v].index_timestamps()
            logs: dict[tuple[int, int], PartitionLog] = {}
            for n, v in SHAPES:
                topic = f"shape-{n}x{v}"
                await engine.create_topic(topic)
                logs[(n, v)] = engine.log(topic)
                await workloads.fill(logs[(n, v)], datasets[v].batches(n))
            ratios: dict[tuple[int, int], dict[str, list[float]]] = {s: {} for s in SHAPES}
            for round_no in range(rounds + 1):
                for shape in SHAPES:
                    n, v = shape
                    log, peer, count = logs[shape], sqlite[v], datasets[v].count
                    offsets = [rnd.randrange(count) for _ in range(lookups)]
                    stamps = [BASE_TIMESTAMP_MS + o for o in offsets]

                    variants = _variants(log, peer, offsets, stamps, lookups)
                    names = list(variants)
                    turn = round_no % len(names)
                    p50: dict[str, float] = {}
                    for name in names[turn:] + names[:turn]:
                        gc.collect()
                        samples: list[float] = []
                        await variants[name](samples)
                        p50[name] = percentile(samples, 50)
                    if round_no == 0:
                        continue  # warm-up
                    got = ratios[shape]
                    got.setdefault("point/sqlite", []).append(p50["point"] / p50["sqlite_point"])
                    got.setdefault("ts/sqlite", []).append(p50["ts"] / p50["sqlite_ts"])
                    got.setdefault("ts/hop", []).append(p50["ts"] / p50["hop"])
                    got.setdefault("point_us", []).append(p50["point"] * 1e6)
                    got.setdefault("ts_us", []).append(p50["ts"] * 1e6)
        finally:
            await engine.close()
            for peer in sqlite.values():
                peer.close()
    print(f"rounds={rounds} lookups={lookups} small={small} large={large} (medians over rounds)")
    print(f"{'shape':>12} {'point/sqlite':>13} {'ts+read/sqlite':>15} {'ts+read/hop':>12} {'point us':>9} {'ts us':>8}")
    for n, v in SHAPES:
        got = ratios[(n, v)]
        med = {k: statistics.median(x) for k, x in got.items()}
        label = f"{n}x{'1KiB' if v == 1024 else '100B'}"
        print(f"{label:>12} {med['point/sqlite']:>13.2f} {med['ts/sqlite']:>15.2f} {med['ts/hop']:>12.2f} "
              f"{med['point_us']:>9.1f} {med['ts_us']:>8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lookups", type=int, default=400)
    parser.add_argument("--small", type=int, default=50_000, help="records per log with 100-B values")
    parser.add_argument("--large", type=int, default=20_000, help="records per log with 1 KiB values")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.lookups, args.small, args.large))
