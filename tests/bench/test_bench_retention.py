"""The benchmark's records carry fixed timestamps from years ago: no section may lose them to retention.

The engine's retention check runs every 5 minutes by default, so a long
section used to have its logs rolled and deleted under it. These runs shorten
the check to 1 ms, so it runs between nearly every step of a section; the
sections check what they read (a fetch counts its records, a point read
checks its offset) and fail if anything was deleted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from seglog.tools.bench.data import RETENTION_CHECK_INTERVAL_MS, open_engine
from seglog.tools.bench.runner import BenchOptions, run_bench


def test_sections_keep_their_records_under_a_frequent_retention_check(tmp_path: Path) -> None:
    report = run_bench(
        BenchOptions(quick=True, only=("fetch", "lookup"), workdir=tmp_path, retention_check_interval_ms=1)
    )
    assert report.rows["fetch_sequential"]["seglog"] is not None
    assert report.rows["point_read"]["seglog"] is not None


def test_bench_engines_keep_records_of_any_age(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        token = RETENTION_CHECK_INTERVAL_MS.set(1)
        try:
            engine = await open_engine(tmp_path)
        finally:
            RETENTION_CHECK_INTERVAL_MS.reset(token)
        try:
            return engine.config.retention_ms, engine.retention_check_interval_ms
        finally:
            await engine.close()

    assert asyncio.run(main()) == (-1, 1)
