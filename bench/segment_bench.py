"""Segment-layer benchmark: each seglog figure beside its raw denominator, measured in the same run.

    .venv/bin/python bench/segment_bench.py            # ~1M records of 100 B, 5 rounds
    .venv/bin/python bench/segment_bench.py --quick    # smoke test, a few seconds
    .venv/bin/python bench/segment_bench.py --json     # machine-readable results on stdout

Lines (records are 16-B keys + 100-B values unless --value-bytes says otherwise, 1000 per batch):

    encode      encode_batch()                 vs raw: Packer.pack([[offset, ts, key, value, headers], ...])
    decode      decode_batches() (CRC + body)  vs raw: msgpack.unpackb of those rows
    append      encode_batch + await LogSegment.append (uvloop, no fsync, one hop per batch)
                                               vs raw: pack rows + os.write (sync, in the loop thread)
                and, for information, vs packing the five columns seglog's body holds (FORMAT.md §2.2)
                + os.write: the same work as seglog's encode minus its checks, header and CRC
    append+pipe the same with the next batch encoded while the previous write is in flight
                (the GIL serialises the two: expect no gain on CPython)
    append x4   group commit: 4 encoded batches of 1000 records per LogSegment.append call (one hop)
    read        LogSegment.read(1 MiB) as the engine makes it (engine.log.segment_read: the page-cache
                attempt on the loop, else one hop) + FetchData.records() front to back
                                               vs raw: pread 1 MiB + msgpack.Unpacker streaming
    recovery    LogSegment.recover() in a hop  vs raw: pread 4 MiB chunks + CRC-32C of every byte

Variants are interleaved round by round (on a shared machine ratios from the same run are stable,
absolute numbers are not: docs/PERFORMANCE.md, "Method"); the median of --runs rounds is
reported after one discarded warm-up round. Acceptance (issue 3): append ≥ 65 % of raw,
recovery ≥ 50 % of raw.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import google_crc32c
import msgpack

from seglog.engine.log import segment_append, segment_read
from seglog.segments.batch import TimestampType, decode_batches, encode_batch
from seglog.segments.fileio import WouldBlock, in_thread
from seglog.segments.records import Record
from seglog.segments.segment import FetchData, LogSegment, batch_headers

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    uvloop = None

MAX_BATCH = 4 * 1024 * 1024


async def append(seg: LogSegment, batches: list[bytes]) -> int:
    # As the engine appends (engine.log.segment_append): one hop to the append threads.
    return await segment_append(seg, batches, batch_headers(batches))


def _read(seg: LogSegment, offset: int, nowait: bool) -> FetchData | WouldBlock | None:
    return seg.read(offset, 1 << 20, None, True, nowait=nowait)


def make_records(count: int, value_bytes: int, key_bytes: int) -> list[Record]:
    rnd = os.urandom
    base_ts = 1_700_000_000_000
    return [Record(rnd(value_bytes), rnd(key_bytes), base_ts + i) for i in range(count)]


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.batch_size = args.batch
        self.batches = args.records // args.batch
        self.records = make_records(args.batch, args.value_bytes, args.key_bytes)
        self.tmp = Path(tempfile.mkdtemp(prefix="seglog-segbench-"))
        self.packer = msgpack.Packer(use_bin_type=True)
        self.encoded = encode_batch(0, self.records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0)
        self.results: dict[str, list[float]] = {}

    def note(self, name: str, seconds: float, records: int) -> None:
        self.results.setdefault(name, []).append(records / seconds)

    # ---- encode / decode (pure, no I/O) -----------------------------------------------------

    def raw_rows(self, offset: int) -> list[list[Any]]:
        return [[offset + i, r.timestamp, r.key, r.value, r.headers] for i, r in enumerate(self.records)]

    def run_encode(self) -> None:
        n = max(1, self.batches // 4)
        t = time.perf_counter()
        for i in range(n):
            encode_batch(i * self.batch_size, self.records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0,
                         packer=self.packer)
        self.note("encode", time.perf_counter() - t, n * self.batch_size)
        t = time.perf_counter()
        for i in range(n):
            self.packer.pack(self.raw_rows(i * self.batch_size))
        self.note("encode.raw", time.perf_counter() - t, n * self.batch_size)

    def run_decode(self) -> None:
        n = max(1, self.batches // 4)
        buf, body = self.encoded, self.packer.pack(self.raw_rows(0))  # raw: the same records as rows
        t = time.perf_counter()
        for _ in range(n):
            decode_batches(buf, max_batch_bytes=MAX_BATCH)
        self.note("decode", time.perf_counter() - t, n * self.batch_size)
        t = time.perf_counter()
        for _ in range(n):
            msgpack.unpackb(body, raw=False)
        self.note("decode.raw", time.perf_counter() - t, n * self.batch_size)

    # ---- append -----------------------------------------------------------------------------

    def run_raw_append(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            t = time.perf_counter()
            for i in range(self.batches):
                os.write(fd, self.packer.pack(self.raw_rows(i * self.batch_size)))
            self.note("append.raw", time.perf_counter() - t, self.batches * self.batch_size)
        finally:
            os.close(fd)

    def run_raw_column_append(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            t = time.perf_counter()
            for _ in range(self.batches):
                values, keys, timestamps, _, _ = zip(*self.records, strict=True)
                deltas = [ts - timestamps[0] for ts in timestamps]
                os.write(fd, self.packer.pack((None, deltas, keys, values, None)))
            self.note("append.rawcol", time.perf_counter() - t, self.batches * self.batch_size)
        finally:
            os.close(fd)

    async def open_segment(self, directory: Path, *, exists: bool = False) -> LogSegment:
        return LogSegment.open(
            directory, 0, max_index_size=10 * 1024 * 1024, index_interval_bytes=4096, roll_jitter_ms=0,
            now_ms=0, file_already_exists=exists,
        )

    async def run_append(self, directory: Path, *, pipelined: bool = False, group: int = 1) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for f in directory.iterdir():
            f.unlink()
        seg = await self.open_segment(directory)
        try:
            size = self.batch_size
            t = time.perf_counter()
            if pipelined:
                in_flight: asyncio.Future[int] | None = None
                for i in range(self.batches):
                    b = encode_batch(i * size, self.records, timestamp_type=TimestampType.CREATE_TIME, now_ms=0,
                                     packer=self.packer)
                    if in_flight is not None:
                        await in_flight
                    in_flight = asyncio.ensure_future(append(seg, [b]))
                    await asyncio.sleep(0)  # let the append start: its write is then in flight while we encode
                if in_flight is not None:
                    await in_flight
            else:
                pending: list[bytes] = []
                for i in range(self.batches):
                    pending.append(encode_batch(i * size, self.records, timestamp_type=TimestampType.CREATE_TIME,
                                                now_ms=0, packer=self.packer))
                    if len(pending) == group:
                        await append(seg, pending)
                        pending = []
                if pending:
                    await append(seg, pending)
            name = "append+pipe" if pipelined else "append" if group == 1 else f"append x{group}"
            self.note(name, time.perf_counter() - t, self.batches * size)
        finally:
            seg.close()

    # ---- sequential read --------------------------------------------------------------------

    def run_raw_read(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            unpacker = msgpack.Unpacker(raw=False, max_buffer_size=64 * 1024 * 1024)
            t = time.perf_counter()
            count = position = 0
            while chunk := os.pread(fd, 1 << 20, position):
                position += len(chunk)
                unpacker.feed(chunk)
                for batch in unpacker:
                    count += len(batch)
            self.note("read.raw", time.perf_counter() - t, count)
        finally:
            os.close(fd)

    async def run_read(self, directory: Path) -> None:
        seg = await self.open_segment(directory, exists=True)
        try:
            t = time.perf_counter()
            offset = count = 0
            while (got := await segment_read(partial(_read, seg, offset))) is not None:
                records = got.records()
                count += len(records)
                offset = records[-1].offset + 1
            self.note("read", time.perf_counter() - t, count)
        finally:
            seg.close()

    # ---- recovery ---------------------------------------------------------------------------

    def run_raw_scan(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            t = time.perf_counter()
            position = 0
            while chunk := os.pread(fd, 4 << 20, position):
                position += len(chunk)
                google_crc32c.value(chunk)
            self.note("recovery.raw", time.perf_counter() - t, self.batches * self.batch_size)
        finally:
            os.close(fd)

    async def run_recovery(self, directory: Path) -> None:
        seg = await self.open_segment(directory, exists=True)
        try:
            t = time.perf_counter()
            truncated = await in_thread(seg.recover, MAX_BATCH)
            self.note("recovery", time.perf_counter() - t, self.batches * self.batch_size)
            assert truncated == 0
        finally:
            seg.close()

    # ---- driver -----------------------------------------------------------------------------

    async def round(self) -> None:
        seg_dir, raw_path = self.tmp / "seg", self.tmp / "raw.msgpack"
        self.run_encode()
        self.run_decode()
        self.run_raw_append(raw_path)
        await self.run_append(seg_dir, pipelined=False)
        self.run_raw_column_append(self.tmp / "rawcol.msgpack")
        self.run_raw_append(raw_path)
        await self.run_append(seg_dir, pipelined=True)
        self.run_raw_append(raw_path)
        await self.run_append(seg_dir, group=4)
        self.run_raw_read(raw_path)
        await self.run_read(seg_dir)
        self.run_raw_scan(seg_dir / "00000000000000000000.log")
        await self.run_recovery(seg_dir)

    async def main(self) -> dict[str, Any]:
        await self.round()  # warm-up, discarded
        self.results.clear()
        for _ in range(self.args.runs):
            await self.round()
        medians = {k: statistics.median(v) for k, v in self.results.items()}
        raw_append = medians["append.raw"]
        ratios = {
            "encode": medians["encode"] / medians["encode.raw"],
            "decode": medians["decode"] / medians["decode.raw"],
            "append": medians["append"] / raw_append,
            "append/rawcol": medians["append"] / medians["append.rawcol"],
            "append+pipe": medians["append+pipe"] / raw_append,
            "append x4": medians["append x4"] / raw_append,
            "read": medians["read"] / medians["read.raw"],
            "recovery": medians["recovery"] / medians["recovery.raw"],
        }
        bytes_per_record = len(self.encoded) / self.batch_size
        return {
            "config": {
                "records": self.batches * self.batch_size, "batch": self.batch_size,
                "value_bytes": self.args.value_bytes, "key_bytes": self.args.key_bytes, "runs": self.args.runs,
                "loop": "uvloop" if uvloop is not None else "asyncio", "python": sys.version.split()[0],
                "bytes_per_record_on_disk": round(bytes_per_record, 1),
            },
            "records_per_s": {k: round(v) for k, v in medians.items()},
            "mb_per_s": {k: round(v * bytes_per_record / 1e6, 1) for k, v in medians.items()},
            "ratio_to_raw": {k: round(v, 3) for k, v in ratios.items()},
            "acceptance": {
                "append >= 0.65 of raw msgpack+write": ratios["append"] >= 0.65,
                "recovery >= 0.50 of raw read+CRC": ratios["recovery"] >= 0.50,
            },
        }


def print_table(report: dict[str, Any]) -> None:
    cfg = report["config"]
    print(f"segment_bench: {cfg['records']:,} records x {cfg['value_bytes']} B values, {cfg['batch']}/batch, "
          f"{cfg['loop']}, median of {cfg['runs']} rounds ({cfg['bytes_per_record_on_disk']} B/record on disk)")
    rps, mbs, ratios = report["records_per_s"], report["mb_per_s"], report["ratio_to_raw"]
    print(f"{'line':<13}{'seglog rec/s':>14}{'MB/s':>9}{'raw rec/s':>14}{'MB/s':>9}{'ratio':>8}")
    raws = {"append+pipe": "append.raw", "append": "append.raw", "append x4": "append.raw"}
    for line in ("encode", "decode", "append", "append+pipe", "append x4", "read", "recovery"):
        raw = raws.get(line, f"{line}.raw")
        print(f"{line:<13}{rps[line]:>14,}{mbs[line]:>9}{rps[raw]:>14,}{mbs[raw]:>9}{ratios[line]:>8.0%}")
    print(f"  (append vs raw columnar pack + os.write {rps['append.rawcol']:,} rec/s: {ratios['append/rawcol']:.0%})")
    for name, ok in report["acceptance"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small and short: a smoke test")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--key-bytes", type=int, default=16)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        args.records, args.runs = min(args.records, 100_000), min(args.runs, 2)
    bench = Bench(args)
    runner = uvloop.run if uvloop is not None else asyncio.run
    try:
        report = runner(bench.main())
    finally:
        for f in sorted(bench.tmp.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        bench.tmp.rmdir()
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print_table(report)


if __name__ == "__main__":
    main()
