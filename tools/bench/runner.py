"""Orchestration of ``seglog bench``: sizes, sections, rounds; returns a :class:`~seglog.tools.bench.report.Report`."""

from __future__ import annotations

import asyncio
import gc
import random
import resource
import statistics
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from seglog.engine import LogConfig, run
from seglog.tools.bench import references as ref
from seglog.tools.bench import scaling, workloads
from seglog.tools.bench.data import (
    BASE_TIMESTAMP_MS,
    RETENTION_CHECK_INTERVAL_MS,
    Dataset,
    Scratch,
    open_engine,
    remove,
)
from seglog.tools.bench.follow import follow_latencies
from seglog.tools.bench.report import Report
from seglog.tools.bench.timing import Latency, Rate, Rounds, interleave, now, settle

SECTIONS: Final = ("produce", "fetch", "lookup", "recovery", "open", "memory", "scaling", "follow", "shapes")
# Run only when named with --only: wire needs the `wire` extra (Kafka clients) and processes of its own;
# groups is a comparison of group stores with sqlite3 of its own (a minute and a half on its own);
# transactions compares transactional produce with plain appends (its own engine and topics).
EXTRA_SECTIONS: Final = ("wire", "groups", "transactions")
ALL_SECTIONS: Final = SECTIONS + EXTRA_SECTIONS
CONCURRENT_CALLERS: Final = 100
DURABLE: Final = LogConfig(flush_messages=1)  # fsync before every append returns
# 1000 records of 1 KiB make a ~1.05 MB batch, above Kafka's default max.message.bytes (1 MiB + 12).
LARGE_BATCHES: Final = LogConfig(max_message_bytes=4 << 20)
# The follow section: a live producer's pace (not a flood), and the poll interval of its no-inotify run.
FOLLOW_GAP_S: Final = 0.002
FOLLOW_POLL_INTERVAL_MS: Final = 100


@dataclass(frozen=True, slots=True)
class Sizes:
    rounds: int
    warmup: bool
    produce: int  # records per round, batched produce (100-B values)
    produce_1k: int  # records per round, 1 KiB values
    single: int  # records per round, one record per append
    durable: int  # records per round, fsync per batch of 1000 (and per 100, divided by 5)
    durable_single: int  # records per round, fsync per record
    diskcache_divisor: int  # diskcache is ~10-50x slower: it gets this fraction of the records
    fetch: int  # records read front to back
    lookup_records: int  # records in the point-read logs
    lookups: int  # samples per round of each latency
    subscribe: int  # end-to-end samples per round
    recovery_unit_bytes: int  # X of the recovery cases
    open_partitions: int
    scaling_small: int
    scaling_large: int
    memory: int  # records produced and fetched under tracemalloc
    follow: int  # appends a follower in another process must see (one record each)


FULL: Final = Sizes(
    rounds=5, warmup=True, produce=200_000, produce_1k=50_000, single=2_000, durable=50_000, durable_single=300,
    diskcache_divisor=10, fetch=200_000, lookup_records=100_000, lookups=2_000, subscribe=500,
    recovery_unit_bytes=64 << 20, open_partitions=1000, scaling_small=100_000, scaling_large=10_000_000,
    memory=100_000, follow=1000,
)
QUICK: Final = Sizes(
    rounds=1, warmup=False, produce=10_000, produce_1k=2_000, single=200, durable=2_000, durable_single=20,
    diskcache_divisor=10, fetch=10_000, lookup_records=5_000, lookups=100, subscribe=30,
    recovery_unit_bytes=1 << 20, open_partitions=10, scaling_small=1_000, scaling_large=20_000, memory=5_000,
    follow=30,
)


@dataclass(slots=True)
class BenchOptions:
    quick: bool = False
    only: tuple[str, ...] = SECTIONS
    workdir: Path | None = None  # scratch files go under here (default: the system temp dir)
    seed: int = 7
    progress: Callable[[str], None] = field(default=lambda message: None)
    # The cyclic GC's first threshold for the run (gc.set_threshold), for everyone measured: None keeps
    # Python's default (700). Shows what the common tuning of allocation-heavy services does here.
    gc_threshold: int | None = None
    # How often every engine the run opens checks retention (Engine.open's retention_check_interval_ms): None
    # keeps the engine's default. The tests shorten it to show that no section's records are deleted under it.
    retention_check_interval_ms: int | None = None


def run_bench(options: BenchOptions) -> Report:
    """Run the selected sections on uvloop (``engine.run``) and return the report."""
    before = gc.get_threshold()
    if options.gc_threshold is not None:
        gc.set_threshold(options.gc_threshold, *before[1:])
    try:
        return run(_run(options))
    finally:
        gc.set_threshold(*before)


async def _run(options: BenchOptions) -> Report:
    sizes = QUICK if options.quick else FULL
    report = Report(
        options={
            "quick": options.quick,
            "only": list(options.only),
            "sizes": asdict(sizes),
            "gc_threshold": gc.get_threshold()[0],
        }
    )
    scratch = Scratch(options.workdir)
    started = now()
    interval = RETENTION_CHECK_INTERVAL_MS.set(options.retention_check_interval_ms)
    try:
        bench = _Bench(sizes, scratch, report, options)
        for name in ALL_SECTIONS:
            if name in options.only:
                options.progress(f"{name} ...")
                section_start = now()
                await getattr(bench, name)()
                options.progress(f"{name}: {now() - section_start:.1f} s")
    finally:
        RETENTION_CHECK_INTERVAL_MS.reset(interval)
        scratch.cleanup()
    report.seconds = now() - started
    report.notes["max_rss_mb"] = f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}"
    report.notes["loop"] = type(asyncio.get_running_loop()).__module__
    return report


class _Bench:
    def __init__(self, sizes: Sizes, scratch: Scratch, report: Report, options: BenchOptions) -> None:
        self.sizes = sizes
        self.scratch = scratch
        self.report = report
        self.rounds = Rounds(sizes.rounds, sizes.warmup)
        self.rnd = random.Random(options.seed)
        self.say = options.progress
        self._data: dict[int, Dataset] = {}

    def data(self, value_bytes: int, count: int) -> Dataset:
        have = self._data.get(value_bytes)
        if have is None or have.count < count:
            have = self._data[value_bytes] = Dataset(count, value_bytes)
            settle()
        return have

    # -------------------------------------------------------------------------------- produce

    async def produce(self) -> None:
        s = self.sizes
        small = self.data(100, max(s.produce, s.durable))
        big = self.data(1024, s.produce_1k)
        rates: dict[tuple[str, str], Rate] = {}
        variants: list[Callable[[bool], Awaitable[None]]] = []

        def rate(row: str, column: str) -> Rate:
            return rates.setdefault((row, column), Rate())

        def seglog_variant(row: str, data: Dataset, count: int, batch: int, config: LogConfig | None) -> None:
            batches = data.batches(batch, count)

            async def go(record: bool) -> None:
                directory = self.scratch.fresh("produce")
                seconds = await workloads.produce(directory, batches, config)
                remove(directory)
                if record:
                    rate(row, "seglog").add(count, seconds)

            variants.append(go)

        def raw_variant(row: str, data: Dataset, count: int, batch: int, fsync: bool) -> None:
            batches = data.row_batches(batch, count)

            async def go(record: bool) -> None:
                path = self.scratch.path / "raw.log"
                seconds = ref.raw_produce(path, batches, fsync=fsync)
                remove(path)
                if record:
                    rate(row, "raw").add(count, seconds)

            variants.append(go)

        def peer_variant(rows: tuple[str, ...], data: Dataset, count: int, batch: int) -> None:
            batches = data.row_batches(batch, count)
            small_batches = data.row_batches(batch, max(count // s.diskcache_divisor, batch))

            async def go(record: bool) -> None:
                for column, sync in (("sqlite_normal", "NORMAL"), ("sqlite_full", "FULL")):
                    directory = self.scratch.fresh("sqlite")
                    peer = ref.SqlitePeer(directory / "db.sqlite", sync)
                    seconds = peer.append(batches)
                    peer.close()
                    remove(directory)
                    if record:
                        for row in rows:
                            rate(row, column).add(count, seconds)
                directory = self.scratch.fresh("diskcache")
                dc = ref.DiskcachePeer(directory / "dc")
                seconds = dc.append(small_batches)
                dc.close()
                remove(directory)
                if record:
                    for row in rows:
                        rate(row, "diskcache").add(sum(map(len, small_batches)), seconds)

            variants.append(go)

        n, nd = s.produce, s.durable
        seglog_variant("produce_b1000", small, n, 1000, None)
        raw_variant("produce_b1000", small, n, 1000, False)
        seglog_variant("produce_b1000_fsync", small, nd, 1000, DURABLE)
        raw_variant("produce_b1000_fsync", small, nd, 1000, True)
        peer_variant(("produce_b1000", "produce_b1000_fsync"), small, n, 1000)
        seglog_variant("produce_b100", small, n // 2, 100, None)
        raw_variant("produce_b100", small, n // 2, 100, False)
        seglog_variant("produce_b100_fsync", small, nd // 5, 100, DURABLE)
        raw_variant("produce_b100_fsync", small, nd // 5, 100, True)
        peer_variant(("produce_b100", "produce_b100_fsync"), small, n // 2, 100)
        seglog_variant("produce_b1", small, s.single, 1, None)
        raw_variant("produce_b1", small, s.single, 1, False)
        seglog_variant("produce_b1_fsync", small, s.durable_single, 1, DURABLE)
        raw_variant("produce_b1_fsync", small, s.durable_single, 1, True)
        peer_variant(("produce_b1", "produce_b1_fsync"), small, s.durable_single, 1)
        seglog_variant("produce_b1000_1k", big, s.produce_1k, 1000, LARGE_BATCHES)
        raw_variant("produce_b1000_1k", big, s.produce_1k, 1000, False)
        peer_variant(("produce_b1000_1k",), big, s.produce_1k, 1000)

        concurrent_records = small.records[: s.single * 10]
        hop_rows = small.rows[: s.single]

        async def concurrent(record: bool) -> None:
            directory = self.scratch.fresh("concurrent")
            seconds = await workloads.produce_concurrent(directory, concurrent_records, CONCURRENT_CALLERS)
            remove(directory)
            if record:
                rate("produce_concurrent", "seglog").add(len(concurrent_records), seconds)

        async def per_hop(record: bool) -> None:
            path = self.scratch.path / "hop.log"
            seconds = await ref.one_record_per_hop(path, hop_rows)
            remove(path)
            if record:
                rate("produce_concurrent", "raw").add(len(hop_rows), seconds)

        variants += [concurrent, per_hop]
        await self._rounds("produce", variants)
        for (row, column), r in rates.items():
            self.report.put(row, column, r.per_second)

    async def wire(self) -> None:
        from seglog.tools.bench import wire

        sizes = wire.WIRE_QUICK if self.sizes is QUICK else wire.WIRE_FULL
        directory = self.scratch.fresh("wire")
        try:
            self.report.wire = await wire.run_section(sizes, self.rounds, directory, self.say)
        finally:
            remove(directory)

    async def shapes(self) -> None:
        from seglog.tools.bench import shapes

        sizes = shapes.SHAPES_QUICK if self.sizes is QUICK else shapes.SHAPES_FULL
        directory = self.scratch.fresh("shapes")
        self.report.shapes = await shapes.run_section(sizes, self.rounds, directory, self.data, self.rnd, self.say)

    async def groups(self) -> None:
        from seglog.tools.bench import groups

        sizes = groups.GROUPS_QUICK if self.sizes is QUICK else groups.GROUPS_FULL
        directory = self.scratch.fresh("groups")
        self.report.groups = await groups.run_section(sizes, self.rounds, directory, self.say)

    async def transactions(self) -> None:
        from seglog.tools.bench import transactions

        sizes = transactions.TXN_QUICK if self.sizes is QUICK else transactions.TXN_FULL
        directory = self.scratch.fresh("transactions")
        self.report.transactions = await transactions.run_section(sizes, self.rounds, directory, self.say)

    async def _rounds(self, name: str, variants: list[Callable[[bool], Awaitable[None]]]) -> None:
        total = len(list(self.rounds.indexes()))
        done = [0]

        async def tick(record: bool) -> None:
            done[0] += 1
            self.say(f"{name}: round {done[0]}/{total}")

        await interleave(self.rounds, [*variants, tick])

    # -------------------------------------------------------------------------------- fetch

    async def fetch(self) -> None:
        s = self.sizes
        data = self.data(100, s.fetch)
        directory = self.scratch.fresh("fetch")
        engine, log = await workloads.open_log(directory / "seglog")
        try:
            await workloads.fill(log, data.batches(1000, s.fetch))
            raw_path = directory / "raw.log"
            ref.write_raw_file(raw_path, data.rows[: s.fetch])
            sqlite = ref.SqlitePeer(directory / "db.sqlite", "NORMAL")
            sqlite.append(data.row_batches(1000, s.fetch))
            dc_count = s.fetch // s.diskcache_divisor
            dc = ref.DiskcachePeer(directory / "dc")
            dc.append(data.row_batches(1000, dc_count))
            rates = {c: Rate() for c in ("seglog", "raw", "sqlite_normal", "diskcache")}

            async def seg(record: bool) -> None:
                t = await workloads.sequential_fetch(log, s.fetch)
                if record:
                    rates["seglog"].add(s.fetch, t)

            async def raw(record: bool) -> None:
                t = ref.raw_sequential_read(raw_path, s.fetch)
                if record:
                    rates["raw"].add(s.fetch, t)

            async def lite(record: bool) -> None:
                t = sqlite.sequential(s.fetch)
                if record:
                    rates["sqlite_normal"].add(s.fetch, t)

            async def disk(record: bool) -> None:
                t = dc.sequential(dc_count)
                if record:
                    rates["diskcache"].add(dc_count, t)

            await self._rounds("fetch", [seg, raw, lite, disk])
            sqlite.close()
            dc.close()
        finally:
            await engine.close()
            remove(directory)
        for column, r in rates.items():
            self.report.put("fetch_sequential", column, r.per_second)

    # -------------------------------------------------------------------------------- lookups

    async def lookup(self) -> None:
        s = self.sizes
        n = s.lookup_records
        data = self.data(100, n)
        directory = self.scratch.fresh("lookup")
        engine = await open_engine(directory / "seglog")
        try:
            for topic in ("b100", "b1000", "sub"):
                await engine.create_topic(topic)
            log100, log1000, sub = engine.log("b100"), engine.log("b1000"), engine.log("sub")
            await workloads.fill(log100, data.batches(100, n))
            await workloads.fill(log1000, data.batches(1000, n))
            raw_path = directory / "raw.log"
            positions = ref.write_raw_file(raw_path, data.rows[:n])
            sqlite = ref.SqlitePeer(directory / "db.sqlite", "NORMAL")
            sqlite.append(data.row_batches(1000, n))
            sqlite.index_timestamps()
            dc = ref.DiskcachePeer(directory / "dc")
            dc.append(data.row_batches(1000, n))
            lat = {k: Latency() for k in ("hop", "point", "point1000", "raw", "sqlite", "dc", "ts", "sqlite_ts", "sub")}
            rnd = self.rnd

            def offsets() -> list[int]:
                return workloads.sample_offsets(rnd, 0, n, s.lookups)

            def keep(key: str, record: bool) -> list[float]:
                return lat[key].samples if record else []

            async def hop(record: bool) -> None:
                await ref.hop_latencies(s.lookups, keep("hop", record))

            async def point(record: bool) -> None:
                await workloads.point_reads(log100, offsets(), keep("point", record))

            async def point1000(record: bool) -> None:
                await workloads.point_reads(log1000, offsets(), keep("point1000", record))

            async def raw(record: bool) -> None:
                ref.raw_point_reads(raw_path, positions, offsets(), keep("raw", record))

            async def lite(record: bool) -> None:
                sqlite.point_reads(offsets(), keep("sqlite", record))

            async def disk(record: bool) -> None:
                dc.point_reads(offsets(), keep("dc", record))

            async def ts(record: bool) -> None:
                await workloads.timestamp_reads(log100, [BASE_TIMESTAMP_MS + o for o in offsets()], keep("ts", record))

            async def lite_ts(record: bool) -> None:
                sqlite.timestamp_reads([BASE_TIMESTAMP_MS + o for o in offsets()], keep("sqlite_ts", record))

            async def subscribe(record: bool) -> None:
                await workloads.subscribe_latencies(sub, data.records[: s.subscribe], keep("sub", record))

            await self._rounds("lookup", [hop, point, point1000, raw, lite, disk, ts, lite_ts, subscribe])
            sqlite.close()
            dc.close()
        finally:
            await engine.close()
            remove(directory)
        us = 1e6
        put = self.report.put
        for row, pairs in (
            ("executor_round_trip", (("raw", "hop"),)),
            ("point_read", (("seglog", "point"), ("raw", "raw"), ("sqlite_normal", "sqlite"), ("diskcache", "dc"))),
            ("point_read_b1000", (("seglog", "point1000"), ("raw", "raw"), ("sqlite_normal", "sqlite"))),
            ("timestamp_read", (("seglog", "ts"), ("raw", "hop"), ("sqlite_normal", "sqlite_ts"))),
            ("subscribe_latency", (("seglog", "sub"), ("raw", "hop"))),
        ):
            for column, key in pairs:
                put(row, column, lat[key].p(50) * us, lat[key].p(99) * us)

    # -------------------------------------------------------------------------------- recovery

    async def recovery(self) -> None:
        s = self.sizes
        data = self.data(100, 100_000 if not self.rounds.warmup else 200_000)
        directory = self.scratch.fresh("recovery")
        cases = await scaling.build_crash_cases(directory, data, s.recovery_unit_bytes)
        seconds: dict[str, list[float]] = {c.name: [] for c in cases}
        recovered: dict[str, int] = {}
        raw_rate = Rate()
        full_case = cases[0]  # total 4X, everything after the recovery point
        logs = sorted((full_case.root / f"{workloads.TOPIC}-0").glob("*.log"))

        def case_variant(case: scaling.CrashCase) -> Callable[[bool], Awaitable[None]]:
            async def go(record: bool) -> None:
                t, done = await scaling.timed_recovery(case)
                if record:
                    seconds[case.name].append(t)
                    recovered[case.name] = done

            return go

        async def raw(record: bool) -> None:
            t, nbytes = ref.read_and_crc(logs)
            if record:
                raw_rate.add(nbytes, t)

        await self._rounds("recovery", [*(case_variant(c) for c in cases), raw])
        remove(directory)
        self.report.scaling["recovery_cases"] = [
            {
                "name": c.name,
                "bytes_total": c.bytes_total,
                "bytes_after": c.bytes_after,
                "bytes_recovered": recovered[c.name],
                "seconds": statistics.median(seconds[c.name]),
            }
            for c in cases
        ]
        full_seconds = statistics.median(seconds[full_case.name])
        self.report.put("recovery_scan", "seglog", full_case.bytes_after / full_seconds / 1e6)
        self.report.put("recovery_scan", "raw", raw_rate.per_second / 1e6)

    # -------------------------------------------------------------------------------- clean open

    async def open(self) -> None:
        s = self.sizes
        data = self.data(100, 1000)
        base, big = self.scratch.fresh("open1x"), self.scratch.fresh("open10x")
        self.say(f"open: building {s.open_partitions} partitions x 10 segments (twice)")
        base_bytes = await scaling.build_many_partitions(base, s.open_partitions, 1, data)
        big_bytes = await scaling.build_many_partitions(big, s.open_partitions, 10, data)
        times: dict[str, list[float]] = {"open": [], "open10": [], "listing": [], "open_used": []}

        async def listing(record: bool) -> None:
            t, _ = ref.list_log_dir(base)
            if record:
                times["listing"].append(t)

        async def open1(record: bool) -> None:
            t = await scaling.timed_open(base)
            if record:
                times["open"].append(t)

        async def open10(record: bool) -> None:
            t = await scaling.timed_open(big)
            if record:
                times["open10"].append(t)

        async def open_used(record: bool) -> None:
            t = await scaling.timed_open(base, use_every_partition=True)
            if record:
                times["open_used"].append(t)

        await self._rounds("open", [listing, open1, open10, open_used])
        remove(base)
        remove(big)
        m = {k: statistics.median(v) for k, v in times.items()}
        self.report.scaling.update(
            open_partitions=s.open_partitions,
            open_segments=s.open_partitions * scaling.SEGMENTS_PER_PARTITION,
            open_s=m["open"],
            open_10x_data_s=m["open10"],
            open_then_use_s=m["open_used"],
            listing_s=m["listing"],
            open_bytes=base_bytes,
            open_10x_data_bytes=big_bytes,
        )
        self.report.put("clean_open", "seglog", m["open"])
        self.report.put("clean_open", "raw", m["listing"])

    # -------------------------------------------------------------------------------- memory

    async def memory(self) -> None:
        s = self.sizes
        data = self.data(100, s.memory)
        count = s.memory

        async def traced(work: Callable[[], Awaitable[None]]) -> float:
            tracemalloc.start()
            try:
                tracemalloc.reset_peak()
                base = tracemalloc.get_traced_memory()[0]
                await work()
                return (tracemalloc.get_traced_memory()[1] - base) / 1e6
            finally:
                tracemalloc.stop()

        async def seglog() -> None:
            directory = self.scratch.fresh("memory")
            engine, log = await workloads.open_log(directory)
            try:
                await workloads.fill(log, data.batches(1000, count))
                await workloads.sequential_fetch(log, count)
            finally:
                await engine.close()
            remove(directory)

        async def raw() -> None:
            path = self.scratch.path / "memory.raw"
            ref.raw_produce(path, data.row_batches(1000, count), fsync=False)
            ref.raw_sequential_read(path, count)
            remove(path)

        async def lite() -> None:
            directory = self.scratch.fresh("memory-sqlite")
            peer = ref.SqlitePeer(directory / "db.sqlite", "NORMAL")
            peer.append(data.row_batches(1000, count))
            peer.sequential(count)
            peer.close()
            remove(directory)

        put = self.report.put
        put("memory_peak", "seglog", await traced(seglog))
        put("memory_peak", "raw", await traced(raw))
        put("memory_peak", "sqlite_normal", await traced(lite))
        self.report.notes["memory"] = (
            f"tracemalloc peak above the start while producing {count:,} records of 100 B in batches of 1000 "
            "and reading them back (Python allocations only; sqlite's C heap is not traced)"
        )

    # -------------------------------------------------------------------------------- scaling

    async def scaling(self) -> None:
        s = self.sizes
        directory = self.scratch.fresh("scaling")
        engine = await open_engine(directory)
        lat = {k: Latency() for k in ("ps", "pl", "ts", "tl")}
        try:
            logs = {}
            for name, count in (("small", s.scaling_small), ("large", s.scaling_large)):
                await engine.create_topic(name)
                logs[name] = engine.log(name)
                self.say(f"scaling: writing {count:,} records of 1 B")
                await workloads.fill(logs[name], scaling.tiny_batches(count, 100))
            rnd = self.rnd

            def variant(key: str, name: str, count: int, kind: str) -> Callable[[bool], Awaitable[None]]:
                async def go(record: bool) -> None:
                    out = lat[key].samples if record else []
                    targets = workloads.sample_offsets(rnd, 0, count, s.lookups)
                    if kind == "point":
                        await workloads.point_reads(logs[name], targets, out)
                    else:
                        await workloads.timestamp_reads(logs[name], [BASE_TIMESTAMP_MS + o for o in targets], out)

                return go

            await self._rounds("scaling", [
                variant("ps", "small", s.scaling_small, "point"),
                variant("pl", "large", s.scaling_large, "point"),
                variant("ts", "small", s.scaling_small, "ts"),
                variant("tl", "large", s.scaling_large, "ts"),
            ])
        finally:
            await engine.close()
            remove(directory)
        self.report.scaling.update(
            lookup_small_records=s.scaling_small,
            lookup_large_records=s.scaling_large,
            lookup_point_small_us=lat["ps"].p(50) * 1e6,
            lookup_point_large_us=lat["pl"].p(50) * 1e6,
            lookup_timestamp_small_us=lat["ts"].p(50) * 1e6,
            lookup_timestamp_large_us=lat["tl"].p(50) * 1e6,
        )

    # -------------------------------------------------------------------------------- follow

    async def follow(self) -> None:
        """A read-only follower in this process, a writer in another: append return -> subscribe yield."""
        count = self.sizes.follow
        for row, poll in (("follow_latency", False), ("follow_latency_poll", True)):
            directory = self.scratch.fresh("follow")
            try:
                got = await follow_latencies(
                    directory, count, gap_s=FOLLOW_GAP_S, poll=poll, interval_ms=FOLLOW_POLL_INTERVAL_MS
                )
            finally:
                remove(directory)
            latency = Latency(got.latencies_s)
            self.report.put(row, "seglog", latency.p(50) * 1e6, latency.p(99) * 1e6)
            how = "inotify" if got.notified else f"polling every {FOLLOW_POLL_INTERVAL_MS} ms"
            self.report.notes[row] = (
                f"{count:,} appends of one record, {FOLLOW_GAP_S * 1000:g} ms apart, follower driven by {how}; "
                f"{got.seen_before_return} yielded before the writer's append returned (counted as 0)"
            )
