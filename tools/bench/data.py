"""Input data of ``seglog bench``: the same records for seglog, the raw references and the peers."""

from __future__ import annotations

import contextvars
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from seglog.engine import Engine, LogConfig, Record

KEY_BYTES: Final = 16  # the benchmark's record shape: 16-B key, 100-B value, int timestamp
# Fixed, so that time lookups hit known records run after run. They lie in the past, so every engine the
# benchmark opens must keep records whatever their age: see open_engine.
BASE_TIMESTAMP_MS: Final = 1_700_000_000_000
# How often the engines the benchmark opens check retention (None: the engine's default). A run sets it from
# BenchOptions; the tests shorten it to show that no section loses records to retention.
RETENTION_CHECK_INTERVAL_MS: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "seglog_bench_retention_check_interval_ms", default=None
)


def bench_config(config: LogConfig | None = None) -> LogConfig:
    """``config`` (default: the engine's defaults) with retention by time off (``retention.ms`` -1).

    The records' timestamps start at ``BASE_TIMESTAMP_MS``, long past the
    default 7 days of ``retention.ms``: with it on, the engine's periodic
    retention check would roll and delete the logs a section is measuring.
    """
    return (config or LogConfig()).with_overrides(retention_ms=-1)


async def open_engine(path: Path, config: LogConfig | None = None, **options: Any) -> Engine:
    """``Engine.open(path, bench_config(config), **options)``: how every benchmark section opens an engine."""
    interval = RETENTION_CHECK_INTERVAL_MS.get()
    if interval is not None:
        options.setdefault("retention_check_interval_ms", interval)
    return await Engine.open(path, bench_config(config), **options)


class Dataset:
    """``count`` records of ``value_bytes`` values: ``Record`` objects and ``[offset, ts, key, value, []]`` rows.

    Values are slices of one random pool (incompressible, distinct, cheap to
    make); timestamps increase by 1 ms per record from ``BASE_TIMESTAMP_MS``.
    """

    def __init__(self, count: int, value_bytes: int, seed: int = 1) -> None:
        rnd = random.Random(seed)
        pool = rnd.randbytes(value_bytes * 64 + KEY_BYTES * 64 + 1)
        span = len(pool) - value_bytes
        keys = [pool[j * KEY_BYTES : (j + 1) * KEY_BYTES] for j in range(64)]
        self.count = count
        self.value_bytes = value_bytes
        self.records: list[Record] = []
        self.rows: list[list[object]] = []
        for i in range(count):
            start = (i * 7) % span
            value = pool[start : start + value_bytes]
            ts = BASE_TIMESTAMP_MS + i
            self.records.append(Record(value, keys[i % 64], ts))
            self.rows.append([i, ts, keys[i % 64], value, []])

    def batches(self, size: int, count: int | None = None) -> list[list[Record]]:
        """The first ``count`` records (default all) in lists of ``size``."""
        n = self.count if count is None else min(count, self.count)
        return [self.records[i : min(i + size, n)] for i in range(0, n, size)]

    def row_batches(self, size: int, count: int | None = None) -> list[list[list[object]]]:
        n = self.count if count is None else min(count, self.count)
        return [self.rows[i : min(i + size, n)] for i in range(0, n, size)]


class Scratch:
    """A fresh directory under the system temp dir (or ``root``), removed by :meth:`cleanup`."""

    def __init__(self, root: Path | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=root))
        self._n = 0

    def fresh(self, tag: str) -> Path:
        """A new, empty sub-directory."""
        self._n += 1
        path = self.path / f"{tag}-{self._n}"
        path.mkdir()
        return path

    def cleanup(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


@contextmanager
def scratch_dir(root: Path | None = None) -> Iterator[Scratch]:
    scratch = Scratch(root)
    try:
        yield scratch
    finally:
        scratch.cleanup()


def remove(path: Path) -> None:
    """Remove a file or directory tree if it exists."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        os.unlink(path)
