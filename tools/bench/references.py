"""The denominators: raw references (what the machine does with no engine) and the peers users would pick.

Raw references (docs/PERFORMANCE.md, "Method"): msgpack + ``os.write`` per batch,
read + streaming unpack, one executor round trip, read + CRC-32C. Peers do the
same work as seglog: sqlite3 in WAL mode (``synchronous=NORMAL`` and ``FULL``,
``executemany`` of one batch per transaction, ``INTEGER PRIMARY KEY``) and
diskcache (``Index``, one ``transact()`` per batch).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import google_crc32c
import msgpack

from seglog.tools.bench.timing import now

READ_CHUNK: Final = 1 << 20  # bench/pipeline.py C1 reads 1 MiB at a time
SCAN_CHUNK: Final = 4 << 20  # the engine's recovery reads 4 MiB chunks


# ----------------------------------------------------------------------------------------- raw


def raw_produce(path: Path, batches: Sequence[Sequence[list[object]]], *, fsync: bool) -> float:
    """P0: ``Packer().pack`` each record, ``b"".join``, one ``os.write`` per batch (+ ``fdatasync``); seconds."""
    pack = msgpack.Packer().pack
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = now()
        if fsync:
            for batch in batches:
                os.write(fd, b"".join([pack(r) for r in batch]))
                os.fdatasync(fd)
        else:
            for batch in batches:
                os.write(fd, b"".join([pack(r) for r in batch]))
        return now() - start
    finally:
        os.close(fd)


def write_raw_file(path: Path, rows: Sequence[list[object]]) -> list[int]:
    """Write ``rows`` as back-to-back msgpack; returns each record's position plus the end position."""
    pack = msgpack.Packer().pack
    positions = [0]
    parts = []
    for row in rows:
        data = pack(row)
        parts.append(data)
        positions.append(positions[-1] + len(data))
    path.write_bytes(b"".join(parts))
    return positions


def raw_sequential_read(path: Path, expected: int) -> float:
    """C1: ``readinto``-style 1 MiB reads + a streaming ``Unpacker``; seconds for the whole file."""
    start = now()
    unpacker = msgpack.Unpacker()
    count = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        while chunk := os.pread(fd, READ_CHUNK, position):
            position += len(chunk)
            unpacker.feed(chunk)
            for _ in unpacker:
                count += 1
    finally:
        os.close(fd)
    elapsed = now() - start
    if count != expected:
        raise RuntimeError(f"raw read found {count} records, expected {expected}")
    return elapsed


def raw_point_reads(path: Path, positions: Sequence[int], targets: Sequence[int], out: list[float]) -> None:
    """``pread`` + ``unpackb`` of one record whose position is known (an in-memory index): the floor."""
    fd = os.open(path, os.O_RDONLY)
    unpackb, pread = msgpack.unpackb, os.pread
    try:
        for target in targets:
            start = now()
            position = positions[target]
            record = unpackb(pread(fd, positions[target + 1] - position, position))
            out.append(now() - start)
            if record[0] != target:
                raise RuntimeError("raw point read found the wrong record")
    finally:
        os.close(fd)


def _noop() -> None:
    return None


async def hop_latencies(count: int, out: list[float]) -> None:
    """One executor round trip: ``await loop.run_in_executor(None, noop)``, one sample each."""
    loop = asyncio.get_running_loop()
    run_in_executor = loop.run_in_executor
    for _ in range(count):
        start = now()
        await run_in_executor(None, _noop)
        out.append(now() - start)


async def one_record_per_hop(path: Path, rows: Sequence[list[object]]) -> float:
    """Each record packed and written with its own executor hop, one after another; seconds."""
    loop = asyncio.get_running_loop()
    pack = msgpack.Packer().pack
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = now()
        for row in rows:
            await loop.run_in_executor(None, os.write, fd, pack(row))
        return now() - start
    finally:
        os.close(fd)


def read_and_crc(paths: Sequence[Path]) -> tuple[float, int]:
    """``pread`` 4 MiB chunks + CRC-32C of every byte of ``paths``: (seconds, bytes)."""
    total = 0
    start = now()
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            position = 0
            while chunk := os.pread(fd, SCAN_CHUNK, position):
                google_crc32c.value(chunk)
                position += len(chunk)
        finally:
            os.close(fd)
        total += position
    return now() - start, total


def list_log_dir(root: Path) -> tuple[float, int]:
    """List a log directory as a minimal loader must: the top level, then every partition directory."""
    start = now()
    names = 0
    with os.scandir(root) as entries:
        dirs = [e.path for e in entries if e.is_dir()]
    for directory in dirs:
        names += len(os.listdir(directory))
    return now() - start, names


# ----------------------------------------------------------------------------------------- peers


class SqlitePeer:
    """sqlite3, WAL, ``synchronous=NORMAL|FULL``, table ``log(seq INTEGER PRIMARY KEY, ts, key, value)``."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute("CREATE TABLE log (seq INTEGER PRIMARY KEY, ts INTEGER NOT NULL, key BLOB, value BLOB)")

    def append(self, batches: Sequence[Sequence[list[Any]]]) -> float:
        """One transaction of ``executemany`` per batch; seconds."""
        execute, executemany = self.conn.execute, self.conn.executemany
        sql = "INSERT INTO log VALUES (?,?,?,?)"
        start = now()
        for batch in batches:
            execute("BEGIN")
            executemany(sql, [(r[0], r[1], r[2], r[3]) for r in batch])
            execute("COMMIT")
        return now() - start

    def sequential(self, expected: int) -> float:
        start = now()
        count = sum(1 for _ in self.conn.execute("SELECT seq, ts, key, value FROM log ORDER BY seq"))
        elapsed = now() - start
        if count != expected:
            raise RuntimeError(f"sqlite read {count} rows, expected {expected}")
        return elapsed

    def point_reads(self, targets: Sequence[int], out: list[float]) -> None:
        execute = self.conn.execute
        sql = "SELECT seq, ts, key, value FROM log WHERE seq=?"
        for target in targets:
            start = now()
            row = execute(sql, (target,)).fetchone()
            out.append(now() - start)
            if row[0] != target:
                raise RuntimeError("sqlite point read found the wrong row")

    def index_timestamps(self) -> None:
        self.conn.execute("CREATE INDEX log_ts ON log(ts)")

    def timestamp_reads(self, timestamps: Sequence[int], out: list[float]) -> None:
        """The earliest row with ``ts >= target`` (an index on ``ts``), as ``offset_for_timestamp`` + read."""
        execute = self.conn.execute
        sql = "SELECT seq, ts, key, value FROM log WHERE ts >= ? ORDER BY ts LIMIT 1"
        for ts in timestamps:
            start = now()
            row = execute(sql, (ts,)).fetchone()
            out.append(now() - start)
            if row[1] != ts:
                raise RuntimeError("sqlite timestamp lookup found the wrong row")

    def close(self) -> None:
        self.conn.close()


class DiskcachePeer:
    """``diskcache.Index`` with int keys and msgpack values, one ``transact()`` per batch."""

    def __init__(self, path: Path) -> None:
        import diskcache

        self.index = diskcache.Index(str(path))
        self._pack = msgpack.Packer().pack

    def append(self, batches: Sequence[Sequence[list[Any]]]) -> float:
        index, pack = self.index, self._pack
        start = now()
        for batch in batches:
            with index.transact():
                for row in batch:
                    index[row[0]] = pack(row)
        return now() - start

    def sequential(self, expected: int) -> float:
        start = now()
        count = sum(1 for _ in map(msgpack.unpackb, self.index.values()))
        elapsed = now() - start
        if count != expected:
            raise RuntimeError(f"diskcache read {count} items, expected {expected}")
        return elapsed

    def point_reads(self, targets: Sequence[int], out: list[float]) -> None:
        index, unpackb = self.index, msgpack.unpackb
        for target in targets:
            start = now()
            row = unpackb(index[target])
            out.append(now() - start)
            if row[0] != target:
                raise RuntimeError("diskcache point read found the wrong item")

    def close(self) -> None:
        self.index.cache.close()
