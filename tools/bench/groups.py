"""``seglog bench --only groups``: consumer-group commits, many groups at once, beside sqlite3 doing the same upserts.

The workload: G groups (1,000; 50 with ``--quick``) each commit the offsets
of 10 partitions, every commit durable before it returns. Measured, variants
interleaved round by round:

* **seglog** — ``Engine.commit_offsets`` (the group coordinator's path into
  the group store: one log of commits, one ``fdatasync`` shared by the
  commits queued together), the groups one after another (one commit in
  flight: latency-bound) and all at once (1,000 groups committing together);
* **file per group** — the previous store: each commit replaces its group's
  JSON file (write a temp file, ``fdatasync``, rename, fsync the directory),
  one after another and all at once (the default executor's threads);
* **sqlite3** — WAL, one transaction of 10 upserts
  (``INSERT ... ON CONFLICT DO UPDATE``) per commit, ``synchronous=FULL``
  (durable on return, like the others) and ``NORMAL`` (not fsynced per
  commit: survives a process crash only).

docs/OPERATIONS.md ("The group store") explains the choice these figures made.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from seglog.segments.fileio import atomic_write
from seglog.tools.bench.data import open_engine, remove
from seglog.tools.bench.timing import Rate, Rounds, interleave, now

PARTITIONS: Final = 10
TOPIC: Final = "orders"


@dataclass(frozen=True, slots=True)
class GroupSizes:
    groups: int


GROUPS_FULL: Final = GroupSizes(groups=1_000)
GROUPS_QUICK: Final = GroupSizes(groups=50)

ROWS: Final = {
    "sequential": "commits of 10 offsets, one group after another",
    "concurrent": "commits of 10 offsets, every group at once",
}
COLUMNS: Final = ("seglog", "file_per_group", "sqlite_full", "sqlite_normal")


def _offsets(group: int, round_no: int) -> dict[tuple[str, int], int]:
    return {(TOPIC, p): round_no * 1000 + group + p for p in range(PARTITIONS)}


class _FilePerGroup:
    """The previous store: one JSON file per group, replaced atomically and durably on every commit."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    async def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        rows = [[t, p, o] for (t, p), o in sorted(offsets.items())]
        data = json.dumps({"version": 1, "group": group, "offsets": rows}).encode()
        await atomic_write(self.directory / f"{group}.json", data)


class _Sqlite:
    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute(
            "CREATE TABLE offsets (grp TEXT, topic TEXT, part INTEGER, offset INTEGER, PRIMARY KEY (grp, topic, part))"
        )

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.conn.execute("BEGIN")
        self.conn.executemany(
            "INSERT INTO offsets VALUES (?,?,?,?) ON CONFLICT (grp, topic, part) DO UPDATE SET offset=excluded.offset",
            [(group, t, p, o) for (t, p), o in offsets.items()],
        )
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


async def run_section(sizes: GroupSizes, rounds: Rounds, directory: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the variants round by round; the rows (commits/s) and ratios of the report."""
    groups = [f"group-{i:04d}" for i in range(sizes.groups)]
    rates = {(row, col): Rate() for row in ROWS for col in COLUMNS}
    engine = await open_engine(directory / "seglog")
    files = _FilePerGroup(directory / "file-per-group")
    full = _Sqlite(directory / "full.sqlite", "FULL")
    normal = _Sqlite(directory / "normal.sqlite", "NORMAL")
    round_no = [0]
    try:
        await engine.create_topic(TOPIC, partitions=PARTITIONS)

        async def seglog_sequential(record: bool) -> None:
            start = now()
            for i, group in enumerate(groups):
                await engine.commit_offsets(group, _offsets(i, round_no[0]))
            if record:
                rates[("sequential", "seglog")].add(len(groups), now() - start)

        async def seglog_concurrent(record: bool) -> None:
            start = now()
            await asyncio.gather(*(engine.commit_offsets(g, _offsets(i, round_no[0])) for i, g in enumerate(groups)))
            if record:
                rates[("concurrent", "seglog")].add(len(groups), now() - start)

        async def files_sequential(record: bool) -> None:
            start = now()
            for i, group in enumerate(groups):
                await files.commit(group, _offsets(i, round_no[0]))
            if record:
                rates[("sequential", "file_per_group")].add(len(groups), now() - start)

        async def files_concurrent(record: bool) -> None:
            start = now()
            await asyncio.gather(*(files.commit(g, _offsets(i, round_no[0])) for i, g in enumerate(groups)))
            if record:
                rates[("concurrent", "file_per_group")].add(len(groups), now() - start)

        def sqlite(peer: _Sqlite, column: str) -> Callable[[bool], Any]:
            async def run(record: bool) -> None:
                start = now()
                for i, group in enumerate(groups):
                    peer.commit(group, _offsets(i, round_no[0]))
                if record:
                    rates[("sequential", column)].add(len(groups), now() - start)
            return run

        async def tick(record: bool) -> None:
            round_no[0] += 1
            say(f"groups: round {round_no[0]}")

        await interleave(rounds, [seglog_sequential, seglog_concurrent, files_sequential, files_concurrent,
                                  sqlite(full, "sqlite_full"), sqlite(normal, "sqlite_normal"), tick])
        store_bytes = (directory / "seglog" / "consumer-offsets" / "offsets.log").stat().st_size
    finally:
        await engine.close()
        full.close()
        normal.close()
        remove(directory)
    figures = {key: rate.per_second for key, rate in rates.items() if rate.seconds}
    rows: dict[str, dict[str, Any]] = {
        row: {"label": label, **{col: figures[(row, col)] for col in COLUMNS if (row, col) in figures}}
        for row, label in ROWS.items()
    }

    def ratio(label: str, a: tuple[str, str], b: tuple[str, str]) -> dict[str, Any]:
        x, y = figures.get(a), figures.get(b)
        return {"label": label, "value": None if not x or not y else round(x / y, 3)}

    return {
        "groups": sizes.groups,
        "partitions_per_commit": PARTITIONS,
        "store_bytes_after_run": store_bytes,
        "rows": rows,
        "ratios": {
            "sequential_vs_sqlite_full": ratio("seglog / sqlite FULL, one commit at a time",
                                               ("sequential", "seglog"), ("sequential", "sqlite_full")),
            "concurrent_vs_sqlite_full": ratio("seglog, every group at once / sqlite FULL",
                                               ("concurrent", "seglog"), ("sequential", "sqlite_full")),
            "sequential_vs_file_per_group": ratio("seglog / file per group, one commit at a time",
                                                  ("sequential", "seglog"), ("sequential", "file_per_group")),
            "concurrent_vs_file_per_group": ratio("seglog / file per group, every group at once",
                                                  ("concurrent", "seglog"), ("concurrent", "file_per_group")),
        },
    }
