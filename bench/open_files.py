"""Many partitions under a small descriptor limit, and what a read that must reopen its segment costs. Plain script.

    .venv/bin/python bench/open_files.py scale [--partitions 10000] [--nofile 1024] [--dir DIR]
    .venv/bin/python bench/open_files.py reopen [--partitions 64] [--reads 2000] [--rounds 7]

``scale`` lowers the process's descriptor limit (``RLIMIT_NOFILE``, soft and
hard) to ``--nofile``, writes three one-record segments to every partition
(1,000 partitions per topic), reopens the directory, reads every segment of
every partition and checks each record, appends to every other partition and
reads that back, and prints how many descriptors the process held at most
(Linux ``/proc/self/fd``, sampled after each partition) beside the budget. It
exits 1 on any error or wrong record. ``--dir`` defaults to ``/dev/shm``
where there is one: a new segment fsyncs its directory, which on a disk is
most of the time of a run of 10,000 partitions.

``reopen`` measures the cost of the open-file budget's reopen: with
``max_open_files=16``, a one-record read of a sealed segment whose
descriptor is open (two partitions read in turn) against the same read of a
segment whose descriptor the budget closed since its last read (``--partitions``
read in turn), in one run, rounds interleaved, and prints both medians and
their ratio, beside one bare executor round trip. Everything is in the page
cache: the difference is the executor hop a read without a descriptor takes,
the reopen (an ``open`` and two ``fstat``) and the close of the file the
budget gives up for it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record, run
from seglog.segments.fileio import in_thread

PARTITIONS_PER_TOPIC = 1000
SEGMENTS = 3
# One batch of one 100-byte record is about 170 bytes: a segment of 256 bytes holds one, so every
# append after the first rolls, and a partition of three records has three segments.
TINY = LogConfig(segment_bytes=256)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def value(topic: str, partition: int, n: int) -> bytes:
    return f"{topic}/{partition}/{n}".encode().ljust(100, b".")


def topics_of(partitions: int) -> list[tuple[str, int]]:
    full, rest = divmod(partitions, PARTITIONS_PER_TOPIC)
    sizes = [PARTITIONS_PER_TOPIC] * full + ([rest] if rest else [])
    return [(f"t{k}", size) for k, size in enumerate(sizes)]


async def scale(directory: Path, partitions: int) -> dict[str, float]:
    topics = topics_of(partitions)
    peak = open_descriptors()
    started = time.perf_counter()
    async with Engine.open(directory) as engine:
        await asyncio.gather(*(engine.create_topic(t, partitions=n, config=TINY) for t, n in topics))

        async def fill(topic: str, count: int) -> None:
            nonlocal peak
            for p in range(count):
                log = engine.log(topic, p)
                for n in range(SEGMENTS):
                    await log.append([Record(value=value(topic, p, n))])
                peak = max(peak, open_descriptors())

        await asyncio.gather(*(fill(t, n) for t, n in topics))
    written = time.perf_counter()
    async with Engine.open(directory) as engine:

        async def check(topic: str, count: int) -> None:
            nonlocal peak
            for p in range(count):
                log = engine.log(topic, p)
                for n in range(SEGMENTS):
                    got = await log.read(n, max_bytes=1 << 20)
                    if [r.value for r in got.records[:1]] != [value(topic, p, n)]:
                        raise AssertionError(f"{topic}-{p} offset {n}: {got.records[:1]}")
                if p % 2 == 0:
                    result = await log.append([Record(value=value(topic, p, SEGMENTS))])
                    got = await log.read(result.first_offset, max_bytes=1 << 20)
                    if [r.value for r in got.records] != [value(topic, p, SEGMENTS)]:
                        raise AssertionError(f"{topic}-{p} appended record: {got.records}")
                peak = max(peak, open_descriptors())

        await asyncio.gather(*(check(t, n) for t, n in topics))
    return {"write_s": written - started, "read_s": time.perf_counter() - written, "peak": peak}


async def reopen_cost(directory: Path, partitions: int, reads: int, rounds: int) -> tuple[float, float, float]:
    async with Engine.open(directory, max_open_files=16) as engine:
        await engine.create_topic("r", partitions=partitions, config=TINY)
        for p in range(partitions):
            for n in range(2):  # offset 0 in a sealed segment, offset 1 in the active one
                await engine.log("r", p).append([Record(value=value("r", p, n))])
        logs = [engine.log("r", p) for p in range(partitions)]
        for log in logs:  # every file in the page cache, every index mirror built
            await log.read(0, max_bytes=1 << 20)

        async def timed(among: int) -> list[float]:
            times = []
            for i in range(reads):
                log = logs[i % among]
                t = time.perf_counter_ns()
                got = await log.read(0, max_bytes=1 << 20)
                times.append(time.perf_counter_ns() - t)
                if got.records[0].offset != 0:
                    raise AssertionError(got)
            return times

        async def hops() -> list[float]:
            times = []
            for _ in range(reads):
                t = time.perf_counter_ns()
                await in_thread(int)
                times.append(time.perf_counter_ns() - t)
            return times

        warm: list[float] = []
        cold: list[float] = []
        hop: list[float] = []
        for _ in range(rounds):  # interleaved: the machine's noise falls on all alike
            warm.append(statistics.median(await timed(2)))
            cold.append(statistics.median(await timed(partitions)))
            hop.append(statistics.median(await hops()))
    return statistics.median(warm) / 1000, statistics.median(cold) / 1000, statistics.median(hop) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("scale")
    s.add_argument("--partitions", type=int, default=10_000)
    s.add_argument("--nofile", type=int, default=1024)
    s.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    r = sub.add_parser("reopen")
    r.add_argument("--partitions", type=int, default=64)
    r.add_argument("--reads", type=int, default=2000)
    r.add_argument("--rounds", type=int, default=7)
    r.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="seglog-open-files-", dir=args.dir) as scratch:
        if args.what == "scale":
            resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
            figures = run(scale(Path(scratch), args.partitions))
            print(f"{args.partitions} partitions x {SEGMENTS} segments under ulimit -n {args.nofile}: "
                  f"written in {figures['write_s']:.1f} s, every record read back (and half the partitions "
                  f"appended to) in {figures['read_s']:.1f} s; at most {figures['peak']:.0f} descriptors open")
        else:
            warm, cold, hop = run(reopen_cost(Path(scratch), args.partitions, args.reads, args.rounds))
            print(f"one-record read, p50 of {args.rounds} rounds x {args.reads} reads: descriptor open "
                  f"{warm:.1f} us, reopened {cold:.1f} us; ratio {cold / warm:.2f} "
                  f"(one executor round trip, for scale: {hop:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
