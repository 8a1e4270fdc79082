"""Produce with one append awaited per call, every shape, beside sqlite3: the ratios of issue 22's point 4.

    .venv/bin/python bench/append_shapes.py                 # 7 rounds, the matrix's sizes
    .venv/bin/python bench/append_shapes.py --rounds 3 --appends 300
    .venv/bin/python bench/append_shapes.py --quick         # smoke run, seconds

For 1, 10, 100 and 1000 records per append x 100-B and 1 KiB values (16-B keys), the same
records as ``seglog bench --only shapes`` (``tools.bench.data.Dataset``), each round writes:

    seglog      ``await log.append(batch)`` per batch into a fresh one-partition engine (uvloop,
                ``flush.messages`` default: no fsync), open and close untimed
    concurrent  the same batches from 100 tasks at once (the batches they share: for information)
    sqlite      ``BEGIN; executemany; COMMIT`` per batch, WAL, ``synchronous=NORMAL``, fresh file

seglog and sqlite alternate shape by shape in one process (their order flips each round), after one
discarded warm-up round; each ratio printed is the median of the per-round ratios (seglog records/s
divided by sqlite records/s), so both sides of a ratio were measured seconds apart. The machine is
shared: quote ratios, not rates. Plain script, never run by the tests.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
from pathlib import Path

from seglog.engine import Record, run
from seglog.tools.bench import references as ref
from seglog.tools.bench import workloads
from seglog.tools.bench.data import Dataset, remove
from seglog.tools.bench.shapes import CONCURRENT_CALLERS, CONFIG, SHAPES, Shape, produce_concurrent

TARGETS = {1: 1.0, 10: 2.0, 100: 5.0, 1000: 5.0}


def shape_records(shape: Shape, appends: int, max_bytes: int) -> int:
    # As tools.bench.shapes.produce_records: whole appends, bounded by appends and by bytes.
    return shape.records * max(1, min(appends, max_bytes // shape.value_bytes // shape.records))


def fresh(directory: Path, tag: str) -> Path:
    where = directory / tag
    remove(where)
    where.mkdir()
    gc.collect()
    return where


async def seglog_seconds(directory: Path, batches: list[list[Record]], rows: list[list[object]]) -> float:
    return await workloads.produce(fresh(directory, "seglog"), batches, CONFIG)


async def concurrent_seconds(directory: Path, batches: list[list[Record]], rows: list[list[object]]) -> float:
    return await produce_concurrent(fresh(directory, "concurrent"), batches, CONCURRENT_CALLERS, CONFIG)


async def sqlite_seconds(directory: Path, batches: list[list[Record]], rows: list[list[object]]) -> float:
    peer = ref.SqlitePeer(fresh(directory, "sqlite") / "db.sqlite", "NORMAL")
    try:
        return peer.append(rows)  # type: ignore[arg-type]
    finally:
        peer.close()


VARIANTS = {"seglog": seglog_seconds, "sqlite": sqlite_seconds, "concurrent": concurrent_seconds}


async def one_round(
    directory: Path, shapes: list[Shape], datasets: dict[int, Dataset], appends: int, max_bytes: int, flip: bool
) -> dict[str, dict[str, float]]:
    """records/s of each variant per shape key."""
    out: dict[str, dict[str, float]] = {}
    for shape in shapes:
        count = shape_records(shape, appends, max_bytes)
        dataset = datasets[shape.value_bytes]
        batches = dataset.batches(shape.records, count)
        rows = dataset.row_batches(shape.records, count)
        rates: dict[str, float] = {}
        for name in reversed(VARIANTS) if flip else VARIANTS:
            rates[name] = count / await VARIANTS[name](directory, batches, rows)
            remove(directory / name)
        out[shape.key] = rates
    return out


async def main(rounds: int, appends: int, max_bytes: int, only: list[str]) -> None:
    shapes = [s for s in SHAPES if not only or s.key in only]
    biggest = max(shape_records(s, appends, max_bytes) for s in shapes)
    datasets = {v: Dataset(biggest, v) for v in {s.value_bytes for s in shapes}}
    per_round: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="seglog-append-shapes-") as tmp:
        for r in range(rounds + 1):
            got = await one_round(Path(tmp), shapes, datasets, appends, max_bytes, flip=r % 2 == 1)
            if r:  # round 0 warms up
                per_round.append(got)
    print(f"produce, one append awaited per call; {rounds} rounds, median of per-round ratios")
    print(f"{'shape':>14} {'seglog/sqlite':>14} {'target':>7} {'concurrent/sqlite':>18} {'seglog rec/s':>13}")
    for shape in shapes:
        ratios = [r[shape.key]["seglog"] / r[shape.key]["sqlite"] for r in per_round]
        concurrent = [r[shape.key]["concurrent"] / r[shape.key]["sqlite"] for r in per_round]
        rate = statistics.median(r[shape.key]["seglog"] for r in per_round)
        target = TARGETS[shape.records]
        verdict = "ok" if statistics.median(ratios) >= target else "MISS"
        print(
            f"{shape.label:>14} {statistics.median(ratios):>14.2f} {'>=' + format(target, 'g'):>7} "
            f"{statistics.median(concurrent):>18.2f} {rate:>13,.0f}  {verdict}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--appends", type=int, default=1000, help="at most this many appends per variant per round")
    parser.add_argument("--max-bytes", type=int, default=32 << 20, help="... and at most this many value bytes")
    parser.add_argument("--quick", action="store_true", help="2 rounds of at most 30 appends")
    parser.add_argument("--shape", action="append", default=[], help="only this shape (e.g. 1x100, 100x1024)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.appends, args.max_bytes = 2, 30, 1 << 20
    run(main(args.rounds, args.appends, args.max_bytes, args.shape))
