"""``seglog bench --only shapes``: every append shape and operation, beside sqlite3, LMDB, RocksDB and the raw limits.

The matrix (docs/PERFORMANCE.md, "Every shape"): logs written with 1, 10, 100
and 1000 records per append, with 100-B and 1 KiB values (16-B keys,
timestamps 1 ms apart), each measured for

* **point read** — ``read(offset, 1)`` of a random offset; sqlite3 ``WHERE
  seq = ?`` (rowid), LMDB and RocksDB ``get`` of the 8-byte offset key, and the
  raw floor: ``pread`` + ``unpackb`` of a record whose position is held in memory;
* **time lookup + read** — ``offset_for_timestamp(ts)`` then ``read(offset,
  1)``; sqlite3 ``WHERE ts >= ? ORDER BY ts LIMIT 1`` over an index on ``ts``,
  LMDB and RocksDB a seek in a timestamp -> offset table then a ``get``; the
  raw column is one executor round trip (``run_in_executor(None, noop)``);
* **produce** — one ``append`` of N records awaited per call; sqlite3 one
  ``executemany`` + commit per call (WAL, ``synchronous=NORMAL``), LMDB one
  write transaction, RocksDB one write batch per call, raw ``Packer.pack`` +
  one ``os.write`` per call;
* **produce, concurrent callers** — the same appends from 100 tasks at once
  (seglog only: the peers are synchronous, their rate is the produce row's);
* **sequential fetch** — ``read(offset, 1 MiB)`` front to back; sqlite3
  ``SELECT ... ORDER BY seq``, LMDB and RocksDB iteration with an ``unpackb``
  per row, raw 1 MiB ``pread`` + streaming ``Unpacker``.

Every variant of a shape and operation runs once per round, next to the others
(their order rotates from round to round), for every shape, after one
discarded warm-up round. A figure is the median of the rounds (a latency: of
each round's p50 and p99); a ratio is the median of the per-round ratios, so
that both sides of each ratio were measured seconds apart. The verdicts are
issue 22's targets, per shape (:data:`TARGETS`).

The peers' read stores are one per value size (their layout does not depend on
how the records were appended); seglog has one log per shape.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from seglog.engine import LogConfig, PartitionLog, Record
from seglog.tools.bench import kvpeers, workloads
from seglog.tools.bench import references as ref
from seglog.tools.bench.data import BASE_TIMESTAMP_MS, Dataset, open_engine, remove
from seglog.tools.bench.timing import Rounds, now, percentile

CONCURRENT_CALLERS: Final = 100
# 1000 records of 1 KiB make a ~1.05 MB batch, above Kafka's default max.message.bytes (1 MiB + 12).
CONFIG: Final = LogConfig(max_message_bytes=4 << 20)
RECORDS_PER_APPEND: Final = (1, 10, 100, 1000)
VALUE_BYTES: Final = (100, 1024)
COLUMNS: Final = ("seglog", "sqlite", "lmdb", "rocksdb", "raw")


@dataclass(frozen=True, slots=True)
class Shape:
    records: int  # records per append
    value_bytes: int

    @property
    def key(self) -> str:
        return f"{self.records}x{self.value_bytes}"

    @property
    def label(self) -> str:
        value = "1 KiB" if self.value_bytes == 1024 else f"{self.value_bytes} B"
        return f"{self.records} x {value}"


SHAPES: Final = tuple(Shape(n, v) for v in VALUE_BYTES for n in RECORDS_PER_APPEND)


@dataclass(frozen=True, slots=True)
class Operation:
    label: str
    unit: str  # "us" (latency: lower is better) or "rec/s"
    columns: tuple[str, ...]
    raw_label: str


OPERATIONS: Final[dict[str, Operation]] = {
    "point_read": Operation("point read by offset", "us", COLUMNS, "pread + unpackb, position known"),
    "timestamp_read": Operation("offset_for_timestamp + 1-record read", "us", COLUMNS, "one executor round trip"),
    "produce": Operation("produce, one append awaited per call", "rec/s", COLUMNS, "msgpack + os.write per append"),
    "produce_concurrent": Operation(f"produce, {CONCURRENT_CALLERS} concurrent callers", "rec/s", ("seglog",), "-"),
    "fetch": Operation("sequential fetch (1 MiB reads, decoded)", "rec/s", COLUMNS, "pread 1 MiB + Unpacker"),
}


@dataclass(frozen=True, slots=True)
class Target:
    """One of issue 22's targets: ``seglog`` of ``op`` divided by ``over`` (an operation and a column)."""

    label: str
    op: str
    over: tuple[str, str]
    at_most: bool  # True: the ratio must be <= the bound (latencies); False: >= (throughputs)
    bound: Callable[[Shape], float]

    def text(self, shape: Shape) -> str:
        return f"{'<=' if self.at_most else '>='} {self.bound(shape):g}"

    def holds(self, shape: Shape, value: float) -> bool:
        return value <= self.bound(shape) if self.at_most else value >= self.bound(shape)


def _produce_bound(shape: Shape) -> float:
    """Issue 22: >= 1x sqlite at 1 record per append, >= 2x at 10, >= 5x at 100 and above."""
    return 1.0 if shape.records < 10 else 2.0 if shape.records < 100 else 5.0


TARGETS: Final[dict[str, Target]] = {
    "point_read_vs_sqlite": Target(
        "point read p50 / sqlite3 point read by rowid p50", "point_read", ("point_read", "sqlite"), True,
        lambda s: 1.5,
    ),
    "timestamp_read_vs_sqlite": Target(
        "offset_for_timestamp + read p50 / sqlite3 ts >= ? ORDER BY ts LIMIT 1 p50", "timestamp_read",
        ("timestamp_read", "sqlite"), True, lambda s: 2.0,
    ),
    "timestamp_read_vs_hop": Target(
        "offset_for_timestamp + read p50 / one executor round trip p50", "timestamp_read",
        ("timestamp_read", "raw"), True, lambda s: 0.5,
    ),
    "produce_vs_sqlite": Target(
        "produce, one append awaited per call / sqlite3 one insert + commit per call", "produce",
        ("produce", "sqlite"), False, _produce_bound,
    ),
    "produce_concurrent_vs_sqlite": Target(
        f"produce, {CONCURRENT_CALLERS} concurrent callers / sqlite3 one insert + commit per call",
        "produce_concurrent", ("produce", "sqlite"), False, _produce_bound,
    ),
    "fetch_vs_raw": Target("sequential fetch / raw read + unpack", "fetch", ("fetch", "raw"), False, lambda s: 0.5),
}


@dataclass(frozen=True, slots=True)
class ShapeSizes:
    read_records_small: int  # records in each read log with 100-B values
    read_records_large: int  # ... with 1 KiB values
    lookups: int  # samples per variant per round (point and time reads)
    produce_appends: int  # at most this many appends per produce variant per round ...
    produce_bytes: int  # ... and at most this many bytes of values (at least one append)
    fetch_passes: int  # times each variant reads its whole store per round


SHAPES_FULL: Final = ShapeSizes(
    read_records_small=50_000, read_records_large=20_000, lookups=1_000, produce_appends=1_000,
    produce_bytes=32 << 20, fetch_passes=4,
)
SHAPES_QUICK: Final = ShapeSizes(
    read_records_small=2_000, read_records_large=1_000, lookups=30, produce_appends=30, produce_bytes=1 << 20,
    fetch_passes=1,
)


def read_records(sizes: ShapeSizes, value_bytes: int) -> int:
    return sizes.read_records_small if value_bytes < 1024 else sizes.read_records_large


def produce_records(sizes: ShapeSizes, shape: Shape) -> int:
    """Records per produce variant per round: whole appends, bounded by appends and by bytes, at least one."""
    by_bytes = sizes.produce_bytes // shape.value_bytes // shape.records
    return shape.records * max(1, min(sizes.produce_appends, by_bytes))


async def produce_concurrent(
    directory: Path, batches: Sequence[Sequence[Record]], callers: int, config: LogConfig | None
) -> float:
    """``callers`` tasks share ``batches``, each awaiting one ``append`` per batch; seconds (open, close untimed)."""
    engine, log = await workloads.open_log(directory, config)
    try:
        shares = [batches[i::callers] for i in range(callers)]

        async def caller(share: Sequence[Sequence[Record]]) -> None:
            append = log.append
            for batch in share:
                await append(batch)

        start = now()
        await asyncio.gather(*(caller(share) for share in shares if share))
        return now() - start
    finally:
        await engine.close()


Variant = Callable[[bool], Awaitable[None]]


class _Figures:
    """Per-round figures of every (shape, operation, column), in round order."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str], list[float]] = {}
        self.p99s: dict[tuple[str, str, str], list[float]] = {}

    def rate(self, shape: Shape, op: str, column: str, items: int, seconds: float) -> None:
        self.values.setdefault((shape.key, op, column), []).append(items / seconds)

    def latency(self, shape: Shape, op: str, column: str, samples: list[float]) -> None:
        self.values.setdefault((shape.key, op, column), []).append(percentile(samples, 50) * 1e6)
        self.p99s.setdefault((shape.key, op, column), []).append(percentile(samples, 99) * 1e6)


def _ratio_rounds(numerator: list[float] | None, denominator: list[float] | None) -> list[float]:
    if not numerator or not denominator:
        return []
    return [a / b for a, b in zip(numerator, denominator, strict=True) if b > 0]


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


async def run_section(
    sizes: ShapeSizes,
    rounds: Rounds,
    directory: Path,
    data: Callable[[int, int], Dataset],
    rnd: random.Random,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Build the read stores, run every variant round by round; the ``shapes`` part of the report."""
    peers = kvpeers.available()
    figures = _Figures()
    datasets = {
        v: data(v, max(read_records(sizes, v), *(produce_records(sizes, s) for s in SHAPES if s.value_bytes == v)))
        for v in VALUE_BYTES
    }
    engine = await open_engine(directory / "seglog", CONFIG)
    sqlite: dict[int, ref.SqlitePeer] = {}
    kv: dict[tuple[str, int], kvpeers.KvPeer] = {}
    try:
        logs: dict[str, PartitionLog] = {}
        for shape in SHAPES:
            count = read_records(sizes, shape.value_bytes)
            say(f"shapes: writing {count:,} records, {shape.label} per append")
            topic = f"shape-{shape.key}"
            await engine.create_topic(topic)
            logs[shape.key] = engine.log(topic)
            await workloads.fill(logs[shape.key], datasets[shape.value_bytes].batches(shape.records, count))
        raw_files: dict[int, tuple[Path, list[int]]] = {}
        for v in VALUE_BYTES:
            count, dataset = read_records(sizes, v), datasets[v]
            raw_path = directory / f"raw-{v}.log"
            raw_files[v] = raw_path, ref.write_raw_file(raw_path, dataset.rows[:count])
            sqlite[v] = ref.SqlitePeer(directory / f"sqlite-{v}.db", "NORMAL")
            sqlite[v].append(dataset.row_batches(1000, count))
            sqlite[v].index_timestamps()
            for peer in peers:
                store = kv[(peer, v)] = kvpeers.open_peer(peer, directory / f"{peer}-{v}")
                store.append(dataset.row_batches(1000, count), with_time_index=True)
                store.ready_for_reads()

        groups: list[list[Variant]] = []
        for shape in SHAPES:
            groups += _read_groups(shape, sizes, figures, logs[shape.key], raw_files[shape.value_bytes],
                                   sqlite[shape.value_bytes], {p: kv[(p, shape.value_bytes)] for p in peers}, rnd)
            groups.append(_produce_group(shape, sizes, figures, datasets[shape.value_bytes], directory, peers))
        total = len(rounds.indexes())
        for round_no in rounds.indexes():
            say(f"shapes: round {round_no + 1}/{total}{' (warm-up)' if not rounds.recorded(round_no) else ''}")
            record = rounds.recorded(round_no)
            for group in groups:
                turn = round_no % len(group)
                for variant in group[turn:] + group[:turn]:
                    gc.collect()
                    await variant(record)
    finally:
        await engine.close()
        for peer_db in sqlite.values():
            peer_db.close()
        for store in kv.values():
            store.close()
        remove(directory)
    return _document(sizes, figures, peers)


def _read_groups(
    shape: Shape,
    sizes: ShapeSizes,
    figures: _Figures,
    log: PartitionLog,
    raw_file: tuple[Path, list[int]],
    sqlite: ref.SqlitePeer,
    kv: dict[str, kvpeers.KvPeer],
    rnd: random.Random,
) -> list[list[Variant]]:
    """The point-read, time-lookup and fetch variants of one shape: one group each, the targets drawn per round."""
    count = read_records(sizes, shape.value_bytes)
    raw_path, positions = raw_file
    targets: list[int] = []

    def draw() -> list[int]:
        # Drawn by the first variant of the group to run in a round, shared by every variant of that round.
        if not targets:
            targets.extend(workloads.sample_offsets(rnd, 0, count, sizes.lookups))
        return targets

    def latency_variant(op: str, column: str, measure: Callable[[list[int], list[float]], Awaitable[None]]) -> Variant:
        async def go(record: bool) -> None:
            samples: list[float] = []
            await measure(draw(), samples)
            if record:
                figures.latency(shape, op, column, samples)

        return go

    async def seglog_point(offsets: list[int], out: list[float]) -> None:
        await workloads.point_reads(log, offsets, out)

    async def sqlite_point(offsets: list[int], out: list[float]) -> None:
        sqlite.point_reads(offsets, out)

    async def raw_point(offsets: list[int], out: list[float]) -> None:
        ref.raw_point_reads(raw_path, positions, offsets, out)

    async def seglog_ts(offsets: list[int], out: list[float]) -> None:
        await workloads.timestamp_reads(log, [BASE_TIMESTAMP_MS + o for o in offsets], out)

    async def sqlite_ts(offsets: list[int], out: list[float]) -> None:
        sqlite.timestamp_reads([BASE_TIMESTAMP_MS + o for o in offsets], out)

    async def hop(offsets: list[int], out: list[float]) -> None:
        await ref.hop_latencies(len(offsets), out)

    def kv_point(store: kvpeers.KvPeer) -> Callable[[list[int], list[float]], Awaitable[None]]:
        async def go(offsets: list[int], out: list[float]) -> None:
            store.point_reads(offsets, out)

        return go

    def kv_ts(store: kvpeers.KvPeer) -> Callable[[list[int], list[float]], Awaitable[None]]:
        async def go(offsets: list[int], out: list[float]) -> None:
            store.timestamp_reads([BASE_TIMESTAMP_MS + o for o in offsets], out)

        return go

    groups: list[list[Variant]] = []
    for op, measures in (
        ("point_read", {"seglog": seglog_point, "sqlite": sqlite_point, "raw": raw_point,
                        **{p: kv_point(s) for p, s in kv.items()}}),
        ("timestamp_read", {"seglog": seglog_ts, "sqlite": sqlite_ts, "raw": hop,
                            **{p: kv_ts(s) for p, s in kv.items()}}),
    ):
        group = [latency_variant(op, column, measure) for column, measure in measures.items()]
        groups.append(_clearing(group, targets))

    passes = sizes.fetch_passes

    def fetch_variant(column: str, once: Callable[[], Awaitable[float]]) -> Variant:
        async def go(record: bool) -> None:
            seconds = 0.0
            for _ in range(passes):
                seconds += await once()
            if record:
                figures.rate(shape, "fetch", column, count * passes, seconds)

        return go

    async def seglog_fetch() -> float:
        return await workloads.sequential_fetch(log, count)

    async def raw_fetch() -> float:
        return ref.raw_sequential_read(raw_path, count)

    async def sqlite_fetch() -> float:
        return sqlite.sequential(count)

    def kv_fetch(store: kvpeers.KvPeer) -> Callable[[], Awaitable[float]]:
        async def go() -> float:
            return store.sequential(count)

        return go

    groups.append([
        fetch_variant("seglog", seglog_fetch), fetch_variant("sqlite", sqlite_fetch),
        *(fetch_variant(p, kv_fetch(s)) for p, s in kv.items()), fetch_variant("raw", raw_fetch),
    ])
    return groups


def _clearing(group: list[Variant], targets: list[int]) -> list[Variant]:
    """``group`` whose variants clear the shared targets once every one of them has run in a round."""
    ran = [0]

    def wrap(variant: Variant) -> Variant:
        async def go(record: bool) -> None:
            await variant(record)
            ran[0] += 1
            if ran[0] == len(group):
                ran[0] = 0
                targets.clear()

        return go

    return [wrap(v) for v in group]


def _produce_group(
    shape: Shape, sizes: ShapeSizes, figures: _Figures, dataset: Dataset, directory: Path, peers: tuple[str, ...]
) -> list[Variant]:
    """The produce variants of one shape: each writes ``produce_records`` records into a fresh store per round."""
    count = produce_records(sizes, shape)
    batches = dataset.batches(shape.records, count)
    row_batches = dataset.row_batches(shape.records, count)

    def fresh(tag: str) -> Path:
        path = directory / f"produce-{tag}-{shape.key}"
        remove(path)
        path.mkdir()
        return path

    async def seglog(record: bool) -> None:
        where = fresh("seglog")
        seconds = await workloads.produce(where, batches, CONFIG)
        remove(where)
        if record:
            figures.rate(shape, "produce", "seglog", count, seconds)

    async def concurrent(record: bool) -> None:
        where = fresh("concurrent")
        seconds = await produce_concurrent(where, batches, CONCURRENT_CALLERS, CONFIG)
        remove(where)
        if record:
            figures.rate(shape, "produce_concurrent", "seglog", count, seconds)

    async def sqlite(record: bool) -> None:
        where = fresh("sqlite")
        peer = ref.SqlitePeer(where / "db.sqlite", "NORMAL")
        try:
            seconds = peer.append(row_batches)
        finally:
            peer.close()
        remove(where)
        if record:
            figures.rate(shape, "produce", "sqlite", count, seconds)

    def kv(name: str) -> Variant:
        async def go(record: bool) -> None:
            where = fresh(name)
            store = kvpeers.open_peer(name, where / "db")
            try:
                seconds = store.append(row_batches)
            finally:
                store.close()
            remove(where)
            if record:
                figures.rate(shape, "produce", name, count, seconds)

        return go

    async def raw(record: bool) -> None:
        where = fresh("raw")
        seconds = ref.raw_produce(where / "raw.log", row_batches, fsync=False)
        remove(where)
        if record:
            figures.rate(shape, "produce", "raw", count, seconds)

    return [seglog, concurrent, sqlite, *(kv(p) for p in peers), raw]


def _document(sizes: ShapeSizes, figures: _Figures, peers: tuple[str, ...]) -> dict[str, Any]:
    """The JSON document of the section: cells (medians of rounds), ratios and verdicts (medians of round ratios)."""
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    ratios: dict[str, dict[str, dict[str, float | None]]] = {}
    for shape in SHAPES:
        for op, spec in OPERATIONS.items():
            row = cells.setdefault(shape.key, {}).setdefault(op, {})
            for column in spec.columns:
                values = figures.values.get((shape.key, op, column))
                p99s = figures.p99s.get((shape.key, op, column))
                row[column] = None if not values else {
                    "value": _median(values), "p99": _median(p99s) if p99s else None, "rounds": values,
                }
            mine = figures.values.get((shape.key, op, "seglog"))
            ratios.setdefault(shape.key, {})[op] = {
                column: _median(_ratio_rounds(mine, figures.values.get((shape.key, op, column))))
                for column in spec.columns if column != "seglog"
            }
    targets: dict[str, Any] = {}
    for key, target in TARGETS.items():
        by_shape: dict[str, Any] = {}
        for shape in SHAPES:
            rounds = _ratio_rounds(figures.values.get((shape.key, target.op, "seglog")),
                                   figures.values.get((shape.key, *target.over)))
            value = _median(rounds)
            by_shape[shape.key] = {
                "value": value, "target": target.text(shape),
                "holds": None if value is None else target.holds(shape, value), "rounds": rounds,
            }
        targets[key] = {"label": target.label, "by_shape": by_shape, **_extremes(target, by_shape)}
    return {
        "sizes": asdict(sizes),
        "concurrent_callers": CONCURRENT_CALLERS,
        "peers": ["sqlite", *peers],
        "missing_peers": [p for p in kvpeers.PEERS if p not in peers],
        "shapes": {s.key: {"label": s.label, "records_per_append": s.records, "value_bytes": s.value_bytes}
                   for s in SHAPES},
        "operations": {op: {"label": spec.label, "unit": spec.unit, "columns": list(spec.columns),
                            "raw_label": spec.raw_label} for op, spec in OPERATIONS.items()},
        "cells": cells,
        "ratios": ratios,
        "targets": targets,
    }


def _extremes(target: Target, by_shape: dict[str, Any]) -> dict[str, Any]:
    """How many shapes hold, and the best and worst shape by their margin to the bound (ratio / bound)."""
    measured = [(key, cell["value"] / target.bound(_shape(key))) for key, cell in by_shape.items()
                if cell["value"] is not None]
    if not measured:
        return {"holding": 0, "measured": 0, "best": None, "worst": None}
    # Margin > 1 means better than the bound for a throughput, worse for a latency.
    ordered = sorted(measured, key=lambda item: item[1], reverse=not target.at_most)
    best, worst = ordered[0][0], ordered[-1][0]
    return {
        "holding": sum(1 for key, _ in measured if by_shape[key]["holds"]),
        "measured": len(measured),
        "best": {"shape": best, "value": by_shape[best]["value"]},
        "worst": {"shape": worst, "value": by_shape[worst]["value"]},
    }


def _shape(key: str) -> Shape:
    return next(s for s in SHAPES if s.key == key)
