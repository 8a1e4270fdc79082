"""The workload of test_full_disk.py, run in a child process: fill a small file system during appends.

Usage: ``python full_disk_workload.py LOG_DIR RESULT_JSON SCENARIO FLUSH_MESSAGES CLOSE_WHEN SEED``

Creates topic ``t`` in ``LOG_DIR`` (on a small tmpfs), fills the file system with a ballast file
until only the scenario's headroom is left, then appends records (1 B to 1 MiB) until appends fail
``FAILURES_TO_STOP`` times in a row. Checks in this process, where a failed check is a traceback and
exit code 1: every failure is a ``StorageError`` that names ENOSPC; a failed append leaves the log
end where it was; the engine still serves every acknowledged record. Then, with ``CLOSE_WHEN`` =
``after-free``: the ballast goes, appends must work again, and the engine closes cleanly; with
``while-full``: the engine closes while the disk is full (a ``StorageError`` from close is allowed)
and the ballast goes after. Writes what was acknowledged (offset -> digest of the value) and the
failure messages to ``RESULT_JSON`` for the parent, which reopens the directory.

A process killed by ``SIGBUS`` (a mapped write into a hole with no space behind it) never gets to
write the result: the parent sees a negative exit status.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sys
from pathlib import Path

from seglog.engine import Engine, LogConfig, Record, errors

MIB = 1 << 20
FAILURES_TO_STOP = 4
MAX_APPENDS = 20_000


def digest(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=8).hexdigest()


def value_for(seed: int, index: int, size: int) -> bytes:
    return random.Random(seed * 1_000_003 + index).randbytes(size)


def log_uniform_size(rnd: random.Random) -> int:
    return min(MIB, int(2 ** rnd.uniform(0, 20)))  # 1 B .. 1 MiB, as many small as large


# scenario -> (config, record sizes, free bytes left beside the ballast)
SCENARIOS: dict[str, tuple[dict[str, int | bool], str, int]] = {
    # The .log writes meet the full disk (segments roll on the way: 3 MiB each).
    "log-writes": ({"segment_bytes": 3 * MIB}, "1B-1MiB", 6 * MIB),
    # Preallocated .log: its writes need no space, so the indexes' growth is what meets the full
    # disk (an entry per append; 8 KiB are two pages, one for each index).
    "index-growth": ({"segment_bytes": 4 * MIB, "preallocate": True, "index_interval_bytes": 0}, "1B", 8 << 10),
    # Preallocated 1.5 MiB segments: the third roll finds no room for its new .log.
    "segment-rolls": ({"segment_bytes": 3 * MIB // 2, "preallocate": True}, "1B-1MiB", 4 * MIB),
}


def fill(directory: Path, headroom: int) -> Path:
    """A ballast file taking all free space of ``directory``'s file system but ``headroom`` bytes."""
    ballast = directory / "ballast"
    stat = os.statvfs(directory)
    size = stat.f_bavail * stat.f_frsize - headroom
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if size > 0:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return ballast


async def main(
    log_dir: Path, result_path: Path, scenario: str, flush_messages: int, close_when: str, seed: int
) -> None:
    overrides, sizes, headroom = SCENARIOS[scenario]
    config = LogConfig(max_message_bytes=MIB + 1024, flush_messages=flush_messages, **overrides)  # type: ignore[arg-type]
    rnd = random.Random(seed)
    acked: dict[int, str] = {}
    failures: list[str] = []
    index = 0

    async def append(log_end_check: bool = True) -> bool:
        nonlocal index
        size = 1 if sizes == "1B" else log_uniform_size(rnd)
        value = value_for(seed, index, size)
        index += 1
        end = log.log_end_offset
        try:
            result = await log.append([Record(value)])
        except errors.StorageError as exc:
            assert "ENOSPC" in str(exc), f"a StorageError that does not name ENOSPC: {exc}"
            assert log.log_end_offset == end, f"a failed append moved the log end from {end} to {log.log_end_offset}"
            failures.append(str(exc))
            return False
        assert result.first_offset == end, (result, end)
        acked[result.first_offset] = digest(value)
        return True

    engine = await Engine.open(log_dir)
    try:
        await engine.create_topic("t", partitions=1, config=config)  # kept in topic.json for the reopen
        log = engine.log("t", 0)
        ballast = fill(log_dir.parent, headroom)
        in_a_row = 0
        while in_a_row < FAILURES_TO_STOP and index < MAX_APPENDS:
            in_a_row = 0 if await append() else in_a_row + 1
        # Reads go on while the disk is full: every acknowledged record, as it was written.
        offset = 0
        while offset < log.log_end_offset:
            got = await log.read(offset, MIB)
            for record in got.records:
                assert digest(record.value or b"") == acked[record.offset], record.offset
            offset = got.next_offset
        assert offset == log.log_end_offset == len(acked)
        if close_when == "after-free":
            ballast.unlink()
            for _ in range(5):
                assert await append(), f"an append failed after space was freed: {failures[-1]}"
            await engine.close()
        else:
            try:
                await engine.close()
            except errors.StorageError as exc:  # its checkpoints may find no room: the next open recovers
                assert "ENOSPC" in str(exc), exc
                failures.append(f"close: {exc}")
            ballast.unlink()
    finally:
        if not engine.closed:
            await engine.close()
    result_path.write_text(json.dumps({"acked": acked, "failures": failures, "appends": index}))


if __name__ == "__main__":
    directory, result, name, flush, close, seed_text = sys.argv[1:]
    asyncio.run(main(Path(directory), Path(result), name, int(flush), close, int(seed_text)))
