"""An engine's background work: its tasks, the periodic passes, segments waiting to be deleted, checkpoints.

Owns the engine's task set (every task it starts is tracked, its failure
logged once, and cancelled and awaited at close), the periodic loops
(retention, ``flush.ms``, checkpoints: Kafka's broker schedulers) and the
delayed removal of segments retention deleted (renamed ``.deleted`` at once,
removed after ``file.delete.delay.ms`` -- Kafka's reason: readers that hold
the segment keep reading it meanwhile), and the files those passes and the
close write: the two offset checkpoints and the clean-shutdown record
(:class:`CheckpointFiles`).

Concurrency contract: everything runs on the engine's event loop.

Must not import: ``tools``, ``engine.engine``, ``engine.loader``, ``engine.follow``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from seglog.engine import _fs
from seglog.engine.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    format_checkpoint,
    format_clean_shutdown,
)
from seglog.engine.errors import ClosedError, SeglogError
from seglog.engine.log import PartitionLog, log_task_failure
from seglog.segments.fileio import in_thread, run_to_completion
from seglog.segments.files import DELETED_SUFFIX
from seglog.segments.segment import LogSegment

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL_MS",
    "DEFAULT_FLUSH_CHECK_INTERVAL_MS",
    "DEFAULT_RETENTION_CHECK_INTERVAL_MS",
    "BackgroundWork",
    "CheckpointFiles",
    "close_logs",
    "retention_pass",
]

log = logging.getLogger("seglog")

# Kafka's broker defaults for the background work (log.retention.check.interval.ms,
# log.flush.offset.checkpoint.interval.ms). flush.ms is checked once a second
# when any topic sets it (Kafka's log.flush.scheduler.interval.ms is "never").
DEFAULT_RETENTION_CHECK_INTERVAL_MS: Final = 300_000
DEFAULT_CHECKPOINT_INTERVAL_MS: Final = 60_000
DEFAULT_FLUSH_CHECK_INTERVAL_MS: Final = 1_000
# Partitions closed at once by close_logs: enough to keep the default executor's threads
# (min(32, cpus + 4)) busy. (Engine.open opens loader.LOAD_CHUNK partitions per hop.)
CLOSE_CONCURRENCY: Final = 8


async def retention_pass(logs: Iterable[PartitionLog], now_ms: int) -> tuple[int, SeglogError | None]:
    """One retention pass over ``logs``: the segments deleted, and the first partition's failure.

    A partition whose files fail (e.g. opened for the first time here) does not
    stop retention of the others: it is logged, and the caller raises the first
    failure once it has recorded what the pass deleted.
    """
    deleted = 0
    failed: SeglogError | None = None
    for plog in list(logs):
        try:
            deleted += await plog.enforce_retention(now_ms)
        except ClosedError:
            continue  # deleted or closed meanwhile
        except SeglogError as exc:
            log.error("%s-%d: retention failed: %s", plog.topic, plog.partition, exc)
            failed = failed or exc
    return deleted, failed


async def close_logs(logs: Iterable[PartitionLog], *, flush: bool) -> bool:
    """Close ``logs``, a few at once; whether every one closed cleanly (a failure is logged).

    Each drains the appends already queued, then (with ``flush``) fsyncs, then closes its files.
    """
    gate = asyncio.Semaphore(CLOSE_CONCURRENCY)

    async def close_one(plog: PartitionLog) -> bool:
        async with gate:
            try:
                await plog.close(flush=flush)
            except SeglogError as exc:
                log.error("%s-%d: close failed: %s", plog.topic, plog.partition, exc)
                return False
            return True

    return all(await asyncio.gather(*(close_one(plog) for plog in list(logs))))


class BackgroundWork:
    """The tasks of one engine and the segments it deletes later; ``where`` names the engine in logs."""

    def __init__(self, where: Path) -> None:
        self._where = where
        self._tasks: set[asyncio.Task[None]] = set()
        self._doomed: set[LogSegment] = set()  # renamed .deleted, waiting for file.delete.delay.ms
        self._stopped = False

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``coro`` as a tracked task: its failure is logged, and :meth:`stop` cancels it."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        log_task_failure(task, where=str(self._where))

    def every(self, interval_ms: int, work: Callable[[], Awaitable[Any]], name: str) -> None:
        """Run ``work`` every ``interval_ms`` until :meth:`stop` (or ``work`` raises ``ClosedError``)."""

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                if self._stopped:  # stopped while sleeping (stop() also cancels this task)
                    return
                try:
                    await work()
                except ClosedError:
                    return
                except SeglogError as exc:
                    # A failing disk must not kill the background loop; the next tick retries.
                    log.error("%s: background work failed: %s", self._where, exc)

        self.spawn(loop(), name)

    async def delete_segment_later(self, segment: LogSegment, delay_ms: int, name: str) -> None:
        """Rename the segment's files to ``.deleted`` now; remove them after ``delay_ms``.

        Readers that already hold the segment keep reading it meanwhile (Kafka's
        reason for the delay). Files still waiting at :meth:`remove_doomed` are
        removed then; after a crash, the next open removes leftover ``.deleted`` files.
        """
        self._doomed.add(segment)  # first: if the rename fails or is cancelled, close still releases it
        await run_to_completion(in_thread(segment.change_file_suffixes, "", DELETED_SUFFIX))

        async def remove_later() -> None:
            await asyncio.sleep(delay_ms / 1000)
            await self._remove(segment)

        self.spawn(remove_later(), f"seglog-delete-{name}")

    async def _remove(self, segment: LogSegment) -> None:
        if segment in self._doomed:
            self._doomed.discard(segment)
            await run_to_completion(in_thread(segment.delete))

    async def stop(self) -> None:
        """Cancel every task and wait for them to end. Idempotent."""
        self._stopped = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def remove_doomed(self) -> None:
        """Remove now the files of every segment still waiting for its delay (the engine closes)."""
        for segment in list(self._doomed):
            try:
                await self._remove(segment)
            except SeglogError as exc:
                log.warning("%s: cannot remove deleted segment: %s", segment, exc)


class CheckpointFiles:
    """The offset checkpoints and the clean-shutdown record of a log directory, from its partitions.

    Each file is replaced atomically (temp file, fsync, rename, directory
    fsync), one write at a time. A read-only engine writes none of them.
    """

    def __init__(self, path: Path, logs: Mapping[tuple[str, int], PartitionLog], *, read_only: bool) -> None:
        self._path = path
        self._logs = logs  # the engine's own dict: always its partitions of the moment
        self._read_only = read_only
        self._lock = asyncio.Lock()

    async def write_all(self) -> None:
        """Both checkpoints: every partition's recovery point, then its log start offset."""
        await self._write(RECOVERY_POINT_CHECKPOINT, {key: p.recovery_point for key, p in self._logs.items()})
        await self.write_log_start_offsets()

    async def write_log_start_offsets(self) -> None:
        await self._write(LOG_START_OFFSET_CHECKPOINT, {key: p.log_start_offset for key, p in self._logs.items()})

    async def write_clean_shutdown(self) -> None:
        """The ``.clean-shutdown`` marker with what each closed partition's next open needs (docs/FORMAT.md §8)."""
        if self._read_only:
            return
        record = format_clean_shutdown({key: p._closed_as for key, p in self._logs.items() if p._closed_as is not None})
        if len(record) > _fs.MAX_SMALL_FILE_BYTES:  # the next open could not read it
            record = b""  # a marker without a record: the next open opens every partition
        await _fs.atomic_write(self._path / _fs.CLEAN_SHUTDOWN_FILE, record)

    async def _write(self, name: str, offsets: dict[tuple[str, int], int]) -> None:
        if self._read_only:
            return
        async with self._lock:
            await _fs.atomic_write(self._path / name, format_checkpoint(offsets))
