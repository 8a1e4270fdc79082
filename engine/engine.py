"""``Engine``: one log directory — its lock, topics, partitions, checkpoints and background work.

Owns: opening a log directory (lock, clean-shutdown marker, checkpoints,
loading and recovering every partition), topic creation and deletion with
per-topic config overrides, consumer-group offsets, the background tasks
(retention, ``flush.ms``, checkpoints, delayed file deletion) and closing.

Files (see docs/FORMAT.md and docs/OPERATIONS.md)::

    <log_dir>/.lock                              fcntl.flock, held while open
    <log_dir>/.clean-shutdown                    written on clean close, removed on open
    <log_dir>/recovery-point-offset-checkpoint   Kafka's checkpoint format
    <log_dir>/log-start-offset-checkpoint
    <log_dir>/consumer-offsets/<group>.json      committed offsets, one file per group
    <log_dir>/<topic>-<partition>/topic.json     the topic's partition count and config overrides
    <log_dir>/<topic>-<partition>/<20-digit base offset>.log|.index|.timeindex|.txnindex

Concurrency contract: an ``Engine`` belongs to the event loop it was opened
on; every method must be called from that loop. Blocking file work runs in the
default executor (one hop per logical operation).

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from seglog.engine import _fs
from seglog.engine.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    ClosedPartition,
    format_checkpoint,
    format_clean_shutdown,
    parse_checkpoint,
    parse_clean_shutdown,
)
from seglog.engine.config import LogConfig
from seglog.engine.errors import (
    ClosedError,
    CorruptionError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidRecordError,
    SeglogError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.engine.follow import DEFAULT_FOLLOW_INTERVAL_MS, Follower, start_following_in_thread
from seglog.engine.groups import GroupOffsets
from seglog.engine.log import PartitionLog, log_task_failure
from seglog.engine.names import aside_dir_name, is_aside_dir_of, partition_dir_name
from seglog.engine.partitioner import KeyPartitioner
from seglog.engine.results import AppendResult, RecordMetadata
from seglog.engine.validate import validate_group, validate_offset, validate_partition, validate_topic
from seglog.segments import files
from seglog.segments.fileio import in_thread
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment, LogSegments

__all__ = ["Engine", "RecoveryProgress"]

log = logging.getLogger("seglog")

CLEAN_SHUTDOWN_FILE: Final = ".clean-shutdown"
LOCK_FILE: Final = ".lock"
TOPIC_FILE: Final = "topic.json"
TOPIC_FILE_VERSION: Final = 1  # part of the on-disk format
DELETE_DIR_SUFFIX: Final = _fs.DELETE_DIR_SUFFIX  # Kafka's "<topic>-<p>.<uuid>-delete" for deleted partitions
DELETED_SUFFIX: Final = files.DELETED_SUFFIX

# Kafka's broker defaults for the background work (log.retention.check.interval.ms,
# log.flush.offset.checkpoint.interval.ms). flush.ms is checked once a second
# when any topic sets it (Kafka's log.flush.scheduler.interval.ms is "never").
DEFAULT_RETENTION_CHECK_INTERVAL_MS: Final = 300_000
DEFAULT_CHECKPOINT_INTERVAL_MS: Final = 60_000
DEFAULT_FLUSH_CHECK_INTERVAL_MS: Final = 1_000
# Partitions closed at once by Engine.close: enough to keep the default executor's threads
# (min(32, cpus + 4)) busy. (Engine.open uses LOAD_CHUNK and LOAD_CHUNKS_IN_FLIGHT below.)
LOAD_CONCURRENCY: Final = 8
# Partitions whose files one executor hop opens at Engine.open, and such hops in flight (see _load).
LOAD_CHUNK: Final = 64
LOAD_CHUNKS_IN_FLIGHT: Final = 1


@dataclass(frozen=True, slots=True)
class RecoveryProgress:
    """Progress of opening a log directory, reported to ``Engine.open(on_progress=...)``."""

    topic: str
    partition: int
    partitions_done: int
    partitions_total: int
    segments_recovered: int
    bytes_recovered: int
    bytes_truncated: int


@dataclass(slots=True)
class _Topic:
    name: str
    partitions: int
    overrides: dict[str, Any]
    config: LogConfig


def _check_same_topic(existing: _Topic, partitions: int, config: LogConfig | None) -> None:
    """Refuse ``create_topic(exist_ok=True)`` for a topic that exists with another shape.

    Raises:
        TopicExistsError: another partition count, or (``config`` given) another effective config.
    """
    if existing.partitions != partitions:
        raise TopicExistsError(
            f"topic {existing.name!r} already exists with {existing.partitions} partition(s), not the "
            f"{partitions} asked for; exist_ok=True accepts only the same partition count: pass "
            f"partitions={existing.partitions}, or delete the topic first"
        )
    if config is None:
        return
    have, want = existing.config.to_properties(), config.to_properties()
    if have != want:
        diff = ", ".join(f"{key} is {have[key]}, asked for {want[key]}" for key in sorted(have)
                         if have[key] != want[key])
        raise TopicExistsError(
            f"topic {existing.name!r} already exists with another config ({diff}); exist_ok=True accepts only "
            "the same config: pass config=None to take the stored one, or delete the topic first"
        )


def _check_partition_count(name: str, partitions: int) -> None:
    """Raises ``InvalidConfigError`` (or ``InvalidTopicError`` above Kafka's partition ids) for a bad count."""
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidConfigError(f"{name} must be a positive int, got {partitions!r}")
    validate_partition(partitions - 1)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Opening:
    """What ``Engine.open`` returns: await it, or use it as ``async with``."""

    __slots__ = ("_args", "_engine")

    def __init__(self, args: dict[str, Any]) -> None:
        self._args = args
        self._engine: Engine | None = None

    def __await__(self) -> Generator[Any, None, Engine]:
        return Engine._open(**self._args).__await__()

    async def __aenter__(self) -> Engine:
        self._engine = await Engine._open(**self._args)
        return self._engine

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._engine is not None:
            await self._engine.close()


def _open_partition_files(
    directory: Path, config: LogConfig, now_ms: int, writable: bool, clean: bool
) -> tuple[list[LogSegment], list[int]]:
    """List, clean up and open every segment of one partition (blocking: in an executor thread).

    Returns the segments and the base offsets of those missing an index file.
    After a clean stop (``clean``) the log end is found here too (it caches in
    the active segment). On failure whatever was opened is closed.
    """
    opened: list[LogSegment] = []
    missing: list[int] = []
    try:
        found = _fs.scan_partition_dir_sync(directory, cleanup=writable)
        for i, (base, has_offset_index, has_time_index) in enumerate(found):
            opened.append(
                LogSegment.open_existing_in_thread(
                    directory,
                    base,
                    max_index_size=config.segment_index_bytes,
                    index_interval_bytes=config.index_interval_bytes,
                    roll_jitter_ms=config.random_segment_jitter(),
                    now_ms=now_ms,
                    writable=writable,
                    index_files_existed=(has_offset_index, has_time_index),
                    read_first_batch=i == len(found) - 1,  # only the active segment rolls
                    # A sealed segment's descriptor is opened by its first read: 1000 partitions x 10
                    # segments hold ~2,000 descriptors after open (active .log + .timeindex), not ~11,000.
                    defer_open=i < len(found) - 1,
                )
            )
            if not (has_offset_index and has_time_index):
                missing.append(base)
        if opened and not writable:
            # Another process may be appending to the last segment: its view ends at the last complete,
            # CRC-valid batch, and a follower goes on from there (engine/follow.py).
            start_following_in_thread(opened[-1], config)
        elif opened and clean and opened[-1].base_offset not in missing:
            # Nothing to recover: find the log end in this same hop (it caches in the segment).
            try:
                opened[-1].read_next_offset_in_thread()
            except CorruptRecordError as exc:
                # A clean shutdown, yet the active segment does not parse to its end (a disk or
                # another program wrote there): recover it like after a crash.
                log.warning("%s: %s; recovering the active segment", directory, exc)
                missing.append(opened[-1].base_offset)
    except BaseException:
        _close_opened([(opened, missing)])
        raise
    return opened, missing


def _close_opened(results: Sequence[tuple[list[LogSegment], list[int]] | BaseException]) -> None:
    """Close the segments of partitions opened by :func:`_open_partition_files` (blocking)."""
    for result in results:
        if isinstance(result, tuple):
            for segment in result[0]:
                with contextlib.suppress(Exception):
                    segment.close_handlers_in_thread()


class Engine:
    """A seglog log directory: topics of partitions of segments.

    Open one per directory with ``await Engine.open(path)`` or
    ``async with Engine.open(path) as engine``; a second engine on the same
    directory, in this or another process, gets ``LogDirLockedError``.
    ``read_only=True`` takes no lock, writes nothing, maps no file and runs
    no recovery: a follower of the directory's writer, in this or another
    process, whose view ends at the last complete, CRC-valid batch of each
    partition (see ``engine/follow.py`` and docs/OPERATIONS.md, "Followers").
    """

    def __init__(self, path: Path, config: LogConfig, *, read_only: bool) -> None:
        # Use Engine.open(); the constructor only sets fields.
        self.path = path
        self.config = config
        self.read_only = read_only
        self._topics: dict[str, _Topic] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock_handle: _fs.DirLock | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._partitioner = KeyPartitioner()
        self._groups = GroupOffsets(path / "consumer-offsets", read_only=read_only)
        self._closed = False
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._admin_lock = asyncio.Lock()
        self._checkpoint_lock = asyncio.Lock()
        self._doomed: set[LogSegment] = set()  # renamed .deleted, waiting for file.delete.delay.ms
        self.retention_check_interval_ms = DEFAULT_RETENTION_CHECK_INTERVAL_MS
        self.checkpoint_interval_ms = DEFAULT_CHECKPOINT_INTERVAL_MS
        self.flush_check_interval_ms = DEFAULT_FLUSH_CHECK_INTERVAL_MS
        self.auto_create_topics = False
        self.auto_create_partitions = 1
        self.had_clean_shutdown = True
        self._follower: Follower | None = None  # a read-only engine's (engine/follow.py)

    # -- opening -------------------------------------------------------------------------

    @staticmethod
    def open(
        path: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        read_only: bool = False,
        on_progress: Callable[[RecoveryProgress], None] | None = None,
        force_recovery: bool = False,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        checkpoint_interval_ms: int = DEFAULT_CHECKPOINT_INTERVAL_MS,
        flush_check_interval_ms: int = DEFAULT_FLUSH_CHECK_INTERVAL_MS,
        follow: bool = True,
        follow_interval_ms: int = DEFAULT_FOLLOW_INTERVAL_MS,
        auto_create_topics: bool = False,
        auto_create_partitions: int = 1,
    ) -> _Opening:
        """Open (creating if needed) the log directory at ``path``.

        ``config`` is the default ``LogConfig`` for topics created without
        overrides (and the base that overrides apply to). After an unclean
        stop, every partition is recovered from its recovery point:
        ``on_progress`` is called after each partition. ``force_recovery``
        recovers every segment after the recovery point even after a clean
        shutdown (what ``seglog recover`` does).

        ``read_only=True`` opens a follower: no lock, no recovery, nothing
        written, and (with ``follow``, the default) a view that follows a live
        writer in this or another process — new records, segments, topics,
        retention's deletions — within about ``follow_interval_ms`` at most,
        at once where inotify reports the change (docs/OPERATIONS.md, "Followers").
        ``follow=False`` keeps the view as it was at open until :meth:`refresh`.

        ``auto_create_topics=True`` is Kafka's ``auto.create.topics.enable``:
        ``produce`` to a topic that does not exist creates it, with
        ``auto_create_partitions`` partitions (Kafka's ``num.partitions``) and
        ``config`` (see :meth:`log_or_create`). Off by default: a typo in a
        topic name should be an error, not a new topic.

        Raises:
            LogDirLockedError: another engine holds the directory.
            InvalidConfigError: ``path`` is not a str or os.PathLike, or holds
                NUL; ``config`` is not a ``LogConfig``, a flag is not a bool,
                ``on_progress`` is not callable, an interval is not positive,
                or ``auto_create_partitions`` is not a partition count.
            StorageError: the directory cannot be created or read.
        """
        if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
            raise InvalidConfigError(f"path must be a str or os.PathLike, got {type(path).__name__} {path!r}")
        text = os.fspath(path)
        if not isinstance(text, str) or "\x00" in text:
            raise InvalidConfigError(f"path must be a str path without NUL characters, got {text!r}")
        if config is None:
            config = LogConfig()
        if not isinstance(config, LogConfig):
            raise InvalidConfigError(f"config must be a LogConfig, got {type(config).__name__}")
        for flag, flag_value in (
            ("read_only", read_only),
            ("force_recovery", force_recovery),
            ("follow", follow),
            ("auto_create_topics", auto_create_topics),
        ):
            if not isinstance(flag_value, bool):
                raise InvalidConfigError(f"{flag} must be a bool, got {type(flag_value).__name__} {flag_value!r}")
        if on_progress is not None and not callable(on_progress):
            raise InvalidConfigError(f"on_progress must be callable or None, got {type(on_progress).__name__}")
        _check_partition_count("auto_create_partitions", auto_create_partitions)
        for name, value in (
            ("retention_check_interval_ms", retention_check_interval_ms),
            ("checkpoint_interval_ms", checkpoint_interval_ms),
            ("flush_check_interval_ms", flush_check_interval_ms),
            ("follow_interval_ms", follow_interval_ms),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidConfigError(f"{name} must be a positive int (milliseconds), got {value!r}")
        return _Opening(
            {
                "path": Path(os.path.abspath(text)),
                "config": config,
                "read_only": read_only,
                "on_progress": on_progress,
                "force_recovery": force_recovery,
                "intervals": (retention_check_interval_ms, checkpoint_interval_ms, flush_check_interval_ms),
                "follow": (follow, follow_interval_ms),
                "auto_create": (auto_create_topics, auto_create_partitions),
            }
        )

    @classmethod
    async def _open(
        cls,
        *,
        path: Path,
        config: LogConfig,
        read_only: bool,
        on_progress: Callable[[RecoveryProgress], None] | None,
        force_recovery: bool,
        intervals: tuple[int, int, int],
        follow: tuple[bool, int],
        auto_create: tuple[bool, int],
    ) -> Engine:
        engine = cls(path, config, read_only=read_only)
        (engine.retention_check_interval_ms, engine.checkpoint_interval_ms,
         engine.flush_check_interval_ms) = intervals
        engine.auto_create_topics, engine.auto_create_partitions = auto_create
        try:
            await engine._load(on_progress, force_recovery=force_recovery)
            if read_only:
                engine._follower = Follower(engine, follow[1])
                await engine._follower.start(follow=follow[0])
        except BaseException:
            await engine._abort_open()
            raise
        if not read_only:
            engine._start_background()
        return engine

    async def refresh(self) -> None:
        """A read-only engine: bring the view up to the files now (every complete batch, segment, topic).

        A follower does this by itself (see ``Engine.open``); call it to be sure
        the view holds what a writer's append that has returned wrote, or to
        move a ``follow=False`` view. On a writable engine it does nothing: its
        view is always current.

        Raises:
            ClosedError: the engine is closed.
            StorageError: the log directory cannot be read.
        """
        self._check_open()
        if self._follower is not None:
            await self._follower.refresh()

    async def _load(self, on_progress: Callable[[RecoveryProgress], None] | None, *, force_recovery: bool) -> None:
        if self.read_only:
            listing = await _fs.scan_log_dir(self.path, create=False)
        else:
            self._lock_handle = await _fs.DirLock.acquire(self.path / LOCK_FILE)
            listing = await _fs.scan_log_dir(self.path, create=True)
        self.had_clean_shutdown = listing.clean_shutdown or listing.empty
        recover = force_recovery or not self.had_clean_shutdown
        recovery_points = self._parse_checkpoint(RECOVERY_POINT_CHECKPOINT, listing)
        start_offsets = self._parse_checkpoint(LOG_START_OFFSET_CHECKPOINT, listing)
        # After a clean close the marker says where every partition ended: those partitions open
        # their files on first use (docs/OPERATIONS.md, "Opening"), so a clean open costs about a
        # listing of the directory. Read-only engines open everything now: another process may
        # be writing the directory, and a record read now could be stale by first use.
        closed = {} if recover or self.read_only else self._parse_clean_shutdown(listing)
        if not self.read_only:
            for stale in listing.deleted_dirs:
                self._spawn(_fs.remove_tree(self.path / stale), name="seglog-remove-deleted-topic")
            for unfinished in listing.unfinished_dirs:
                log.warning("%s: removing a partition directory a create_topic left unfinished", self.path / unfinished)
                await _fs.remove_tree(self.path / unfinished)
        partitions = sorted(listing.partition_dirs.items())
        for (topic, partition), meta_bytes in partitions:  # the one topic.json read per topic decides
            if meta_bytes is not None and topic not in self._topics:
                self._topics[topic] = self._parse_topic_file(topic, partition, meta_bytes)
        if not self.read_only:
            partitions = await self._remove_half_made_topics(partitions)
            partitions = await self._finish_cut_short_deletes(partitions, listing.deleted_dirs)
        loads: list[tuple[_Topic, int]] = []
        done = 0
        for (topic, partition), meta_bytes in partitions:
            # A topic.json was parsed (and any problem logged) by the loop above.
            meta = self._parse_topic_file(topic, partition, None if topic in self._topics else meta_bytes)
            topic_state = self._topics.setdefault(topic, meta)
            record = closed.get((topic, partition))
            if record is None:
                loads.append((topic_state, partition))
                continue
            first = record.base_offsets[0]
            self._logs[(topic, partition)] = PartitionLog(
                self,
                topic,
                partition,
                self.path / partition_dir_name(topic, partition),
                topic_state.config,
                LogSegments(),
                log_start_offset=min(max(start_offsets.get((topic, partition), first), first), record.log_end_offset),
                log_end_offset=record.log_end_offset,
                recovery_point=record.log_end_offset,  # a clean close flushed everything
                read_only=False,
                unopened=record,
            )
            done += 1
            if on_progress is not None:
                on_progress(RecoveryProgress(topic, partition, done, len(partitions), 0, 0, 0))
        now_ms = _now_ms()
        # The files of LOAD_CHUNK partitions are opened in one executor hop: a hop costs a good part
        # of what opening one partition's files does, and threads opening files concurrently mostly
        # fight over the GIL (one-partition hops in flight made the open of a large directory ~3x
        # slower). One chunk at a time: with two in flight the next chunk's thread contended with
        # this chunk's loop work for the GIL and the open got slower (docs/PERFORMANCE.md,
        # "Measurements behind the code").
        gate = asyncio.Semaphore(LOAD_CHUNKS_IN_FLIGHT)

        async def load_chunk(chunk: list[tuple[_Topic, int]]) -> None:
            nonlocal done
            async with gate:
                opened = await self._open_partitions(chunk, now_ms, clean=not recover)
                taken = 0  # opened[:taken] belong to a PartitionLog (or were closed by _load_partition)
                try:
                    for (topic_state, partition), files in zip(chunk, opened, strict=True):
                        key = (topic_state.name, partition)
                        taken += 1
                        if isinstance(files, BaseException):
                            raise files
                        plog, report = await self._load_partition(
                            topic_state,
                            partition,
                            recovery_point=recovery_points.get(key, 0) if recover else None,
                            log_start_offset=start_offsets.get(key, 0),
                            opened=files,
                            now_ms=now_ms,
                        )
                        self._logs[key] = plog
                        done += 1
                        if on_progress is not None:
                            on_progress(
                                RecoveryProgress(
                                    key[0], key[1], done, len(partitions), report[0], report[1], report[2]
                                )
                            )
                except BaseException:
                    await in_thread(_close_opened, opened[taken:])
                    raise

        chunks = [loads[i : i + LOAD_CHUNK] for i in range(0, len(loads), LOAD_CHUNK)]
        results = await asyncio.gather(*(load_chunk(chunk) for chunk in chunks), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        # A topic whose creation was cut short by a crash gets its missing partitions now.
        if not self.read_only:
            for topic_state in list(self._topics.values()):
                missing = [p for p in range(topic_state.partitions) if (topic_state.name, p) not in self._logs]
                if missing:
                    log.warning(
                        "topic %s: partition(s) %s of %d missing (a create_topic was cut short); creating them",
                        topic_state.name, missing, topic_state.partitions,
                    )
                    await self._create_partitions(topic_state, missing)
            await self._groups.load()
            await _fs.remove_file(self.path / CLEAN_SHUTDOWN_FILE, sync_dir=True)
            if recover:
                await self._write_checkpoints()
        else:
            await self._groups.load()

    async def _remove_half_made_topics(
        self, partitions: list[tuple[tuple[str, int], bytes | None]]
    ) -> list[tuple[tuple[str, int], bytes | None]]:
        """Remove topics no partition directory of which has a topic.json or a record; the rest of ``partitions``.

        What a create_topic cut short by a crash used to leave (it made the
        directory before writing its topic.json): taken for a topic, it had one
        partition and the default config, and blocked creating it again. Now a
        partition directory appears only with its topic.json. A directory that
        holds records is kept whatever it lacks.
        """
        described = set(self._topics)
        suspects: dict[str, list[int]] = {}
        for (topic, partition), _ in partitions:
            if topic not in described:
                suspects.setdefault(topic, []).append(partition)
        removed: set[str] = set()
        for topic, numbers in suspects.items():
            directories = [self.path / partition_dir_name(topic, p) for p in numbers]
            if any([await _fs.holds_records(d) for d in directories]):
                continue
            for directory in directories:
                log.warning("%s: removing a partition directory with no topic.json and no record "
                            "(a create_topic was cut short)", directory)
                await _fs.remove_tree(directory)
            removed.add(topic)
        if removed:
            await _fs.fsync_dir(self.path)
        return [item for item in partitions if item[0][0] not in removed]

    async def _finish_cut_short_deletes(
        self, partitions: list[tuple[tuple[str, int], bytes | None]], deleted_dirs: list[str]
    ) -> list[tuple[tuple[str, int], bytes | None]]:
        """Finish the delete_topic a crash cut short; the rest of ``partitions``.

        delete_topic renames partitions 0, 1, ... in turn, so a topic whose
        partition 0 has a ``-delete`` directory while higher partitions are
        still in place was being deleted (create_topic places partitions in the
        same order, so it never leaves partition 0 missing and a higher one in
        place). Without this, the next open made partition 0 anew, empty.
        """
        by_topic: dict[str, list[int]] = {}
        for (topic, partition), _ in partitions:
            by_topic.setdefault(topic, []).append(partition)
        finished: set[str] = set()
        for topic, numbers in by_topic.items():
            if 0 in numbers or not any(is_aside_dir_of(name, topic, 0, DELETE_DIR_SUFFIX) for name in deleted_dirs):
                continue
            log.warning("topic %s: a delete_topic was cut short (partition 0 is deleted, %s are not); finishing it",
                        topic, sorted(numbers))
            for partition in numbers:
                target = self.path / aside_dir_name(topic, partition, DELETE_DIR_SUFFIX)
                await _fs.rename_dir(self.path / partition_dir_name(topic, partition), target)
                self._spawn(_fs.remove_tree(target), name=f"seglog-remove-{target.name}")
            self._topics.pop(topic, None)
            finished.add(topic)
        if finished:
            await _fs.fsync_dir(self.path)
        return [item for item in partitions if item[0][0] not in finished]

    def _parse_checkpoint(self, name: str, listing: _fs.LogDirListing) -> dict[tuple[str, int], int]:
        data = listing.files.get(name)
        if data is None:
            return {}
        try:
            return parse_checkpoint(data, name=name)
        except CorruptionError as exc:
            # The safe fallback: recover every segment, keep every record.
            log.warning("%s: %s; ignoring it (recovering from offset 0)", self.path / name, exc)
            return {}

    def _parse_clean_shutdown(self, listing: _fs.LogDirListing) -> dict[tuple[str, int], ClosedPartition]:
        try:
            return parse_clean_shutdown(listing.clean_shutdown_record)
        except CorruptionError as exc:
            # The safe fallback: open every partition's files now.
            log.warning("%s: %s; opening every partition now", self.path / CLEAN_SHUTDOWN_FILE, exc)
            return {}

    def _parse_topic_file(self, topic: str, partition: int, data: bytes | None) -> _Topic:
        overrides: dict[str, Any] = {}
        partitions = partition + 1
        if data is not None:
            try:
                meta = json.loads(data)
                if not isinstance(meta, dict) or meta.get("topic") != topic:
                    raise ValueError("not a topic.json of this topic")
                partitions = int(meta.get("partitions", partitions))
                overrides = dict(meta.get("config", {}))
            except (ValueError, TypeError) as exc:
                where = self._topic_file(topic, partition)
                log.warning("%s: unreadable (%s); using the engine's default config", where, exc)
        existing = self._topics.get(topic)
        if existing is not None:  # the topic's config comes from the topic.json read first (not rebuilt)
            existing.partitions = max(existing.partitions, partitions, partition + 1)
            return existing
        try:
            config = LogConfig.from_properties(overrides, base=self.config)
        except InvalidConfigError as exc:
            log.warning("%s: %s; using the engine's default config", self._topic_file(topic, partition), exc)
            overrides, config = {}, self.config
        return _Topic(topic, max(partitions, partition + 1), overrides, config)

    def _topic_file(self, topic: str, partition: int) -> Path:
        return self.path / partition_dir_name(topic, partition) / TOPIC_FILE

    async def _open_partitions(
        self, chunk: list[tuple[_Topic, int]], now_ms: int, *, clean: bool
    ) -> list[tuple[list[LogSegment], list[int]] | BaseException]:
        """Open the segment files of every partition of ``chunk`` in ONE executor hop.

        Per partition: its opened segments and the base offsets of those missing
        an index file, or the exception that stopped it. If this task is
        cancelled, the thread's work is awaited and everything it opened closed.
        """
        writable = not self.read_only

        def open_all() -> list[tuple[list[LogSegment], list[int]] | BaseException]:
            results: list[tuple[list[LogSegment], list[int]] | BaseException] = []
            for topic, partition in chunk:
                directory = self.path / partition_dir_name(topic.name, partition)
                try:
                    results.append(_open_partition_files(directory, topic.config, now_ms, writable, clean))
                except Exception as exc:  # reported for this partition; the others of the chunk still open
                    results.append(exc)
            return results

        job = asyncio.ensure_future(in_thread(open_all))
        try:
            return await asyncio.shield(job)
        except asyncio.CancelledError:
            # The thread goes on opening files after a cancellation: release what it opened.
            with contextlib.suppress(BaseException):
                await in_thread(_close_opened, await job)
            raise

    async def _load_partition(
        self,
        topic: _Topic,
        partition: int,
        *,
        recovery_point: int | None,
        log_start_offset: int,
        opened: tuple[list[LogSegment], list[int]],
        now_ms: int,
    ) -> tuple[PartitionLog, tuple[int, int, int]]:
        """Make a PartitionLog of one partition's opened segments; recover those from ``recovery_point`` on."""
        segments, log_end_offset, first_recovered, report = await self._load_segments(
            topic, partition, recovery_point=recovery_point, log_start_offset=log_start_offset, opened=opened,
            now_ms=now_ms,
        )
        first_segment = segments.first_segment
        assert first_segment is not None
        start = min(max(log_start_offset, first_segment.base_offset), log_end_offset)
        plog = PartitionLog(
            self,
            topic.name,
            partition,
            self.path / partition_dir_name(topic.name, partition),
            topic.config,
            segments,
            log_start_offset=start,
            log_end_offset=log_end_offset,
            # Recovered segments are durable only after the flush below: start the recovery point at
            # the first of them so that flush() syncs them all before it moves past them.
            recovery_point=min(first_recovered, log_end_offset),
            read_only=self.read_only,
        )
        if report[0]:
            # Recovered bytes may still be only in the page cache; make them durable before the
            # recovery point (and so the checkpoint) moves past them.
            try:
                await plog.flush()
            except BaseException:
                # Not in self._logs yet, so _abort_open would not close it: a failed or cancelled
                # flush must not leave the partition's files open.
                await asyncio.shield(plog.close(flush=False))
                raise
        return plog, report

    async def _open_unopened(self, plog: PartitionLog) -> tuple[LogSegments[LogSegment], int, int, bool]:
        """Open the files of a partition a clean open left unopened (its first use); see PartitionLog._open.

        Returns its segments, log end offset, the base offset of the first
        recovered segment still to be fsynced (an index file was missing or the
        active segment did not parse to its end) and whether any was recovered.
        """
        # Not from self._topics: a delete_topic pops the topic before it closes the partitions.
        topic = _Topic(plog.topic, plog.partition + 1, {}, plog.config)
        now_ms = _now_ms()
        opened = (await self._open_partitions([(topic, plog.partition)], now_ms, clean=True))[0]
        if isinstance(opened, BaseException):
            raise opened
        segments, log_end_offset, first_recovered, report = await self._load_segments(
            topic, plog.partition, recovery_point=None, log_start_offset=plog.log_start_offset, opened=opened,
            now_ms=now_ms,
        )
        return segments, log_end_offset, first_recovered, report[0] > 0

    async def _load_segments(
        self,
        topic: _Topic,
        partition: int,
        *,
        recovery_point: int | None,
        log_start_offset: int,
        opened: tuple[list[LogSegment], list[int]],
        now_ms: int,
    ) -> tuple[LogSegments[LogSegment], int, int, tuple[int, int, int]]:
        """One partition's opened segments, recovered from ``recovery_point`` on; its log end offset.

        Also the base offset of the first recovered segment not yet fsynced
        (recovered sealed segments are fsynced and released here) and the report
        (segments recovered, their bytes, bytes truncated). ``opened`` comes
        from :meth:`_open_partitions` (``None`` recovery point: a clean stop).
        Kafka's LogLoader rules: leftovers of interrupted
        deletions and atomic writes are removed (when the files are opened); a
        segment missing an index file is recovered (its indexes rebuilt from
        the ``.log``) even after a clean shutdown; after an unclean one, every
        segment from the one holding the recovery point on is recovered, and
        when one of them had to be truncated, the segments after it are deleted
        (their offsets would no longer follow on). On failure every segment of
        ``opened`` is closed.
        """
        directory = self.path / partition_dir_name(topic.name, partition)
        config = topic.config
        opened_segments, missing_index = opened
        segments: LogSegments[LogSegment] = LogSegments()
        for segment in opened_segments:
            segments.add(segment)
        try:
            recovered = recovered_bytes = truncated_total = 0
            first_recovered = 2**63 - 1  # base offset of the first recovered segment not yet fsynced
            if not self.read_only:
                max_batch = max(config.max_message_bytes, config.segment_bytes)
                to_recover: list[LogSegment] = []
                if recovery_point is not None:
                    floor = segments.floor_segment(recovery_point)
                    first = floor.base_offset if floor is not None else 0
                    to_recover = [s for s in segments.values() if s.base_offset >= first]
                unclean = {s.base_offset for s in to_recover}
                to_recover += [s for s in segments.values() if s.base_offset in missing_index
                               and s.base_offset not in unclean]
                to_recover.sort(key=lambda s: s.base_offset)
                for segment in to_recover:
                    if segment.base_offset not in segments:
                        continue  # deleted below, after an earlier truncation
                    size = segment.size
                    cut = await segment.recover(max_batch)
                    recovered += 1
                    recovered_bytes += size
                    truncated_total += cut
                    if cut and segment.base_offset in unclean:
                        log.warning(
                            "%s: truncated %d byte(s) of a torn or corrupt tail in segment %d",
                            directory, cut, segment.base_offset,
                        )
                        for later in segments.higher_segments(segment.base_offset):
                            segments.remove(later.base_offset)
                            log.warning("%s: deleting segment %d after the truncation", directory,
                                        later.base_offset)
                            await later.delete()
                    if segment is not segments.active_segment:
                        # A recovered sealed segment holds three descriptors (its .log, and the one
                        # Python's mmap keeps per mapped index): 10,000 of them exhausted a 20,000
                        # ulimit. Make it durable, close it, and open it again as a clean open opens a
                        # sealed segment (nothing mapped, the .log opened by its first read).
                        await segment.flush()
                        await segment.close()
                        segments.add(await self._reopen_sealed(directory, config, segment.base_offset, now_ms))
                        continue
                    first_recovered = min(first_recovered, segment.base_offset)
            if segments.is_empty:
                if self.read_only:
                    raise UnknownTopicOrPartitionError(f"{directory}: holds no segment")
                log.warning("%s: holds no segment (a create_topic was cut short?); starting an empty one", directory)
                segments.add(await self._new_segment(directory, config, max(log_start_offset, 0), now_ms))
            active = segments.active_segment
            assert active is not None
            log_end_offset = await active.read_next_offset()
        except BaseException:
            for segment in segments.values():
                with contextlib.suppress(Exception):
                    await segment.close()
            raise
        return segments, log_end_offset, first_recovered, (recovered, recovered_bytes, truncated_total)

    async def _reopen_sealed(self, directory: Path, config: LogConfig, base_offset: int, now_ms: int) -> LogSegment:
        return await in_thread(
            LogSegment.open_existing_in_thread,
            directory,
            base_offset,
            max_index_size=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            roll_jitter_ms=config.random_segment_jitter(),
            now_ms=now_ms,
            index_files_existed=(True, True),
            read_first_batch=False,
            defer_open=True,
        )

    async def _new_segment(self, directory: Path, config: LogConfig, base_offset: int, now_ms: int) -> LogSegment:
        segment = await LogSegment.open(
            directory,
            base_offset,
            max_index_size=config.segment_index_bytes,
            index_interval_bytes=config.index_interval_bytes,
            roll_jitter_ms=config.random_segment_jitter(),
            now_ms=now_ms,
            preallocate_bytes=config.initial_segment_size,
        )
        # The new file's directory entry must survive power loss as well as its bytes.
        try:
            await _fs.fsync_dir(directory)
        except BaseException:
            await segment.close()
            raise
        return segment

    async def _open_segment(self, plog: PartitionLog, base_offset: int, *, now_ms: int) -> LogSegment:
        return await self._new_segment(plog.directory, plog.config, base_offset, now_ms)

    async def _abort_open(self) -> None:
        if self._follower is not None:
            await self._follower.close()
        for plog in self._logs.values():
            with contextlib.suppress(Exception):
                await plog.close()
        self._logs.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._lock_handle is not None:
            await self._lock_handle.release()
            self._lock_handle = None
        self._closed = True

    # -- topics ----------------------------------------------------------------------------

    def topics(self) -> list[str]:
        """The names of the topics in this log directory, sorted."""
        self._check_open()
        return sorted(self._topics)

    def partitions_for(self, topic: str) -> int:
        """How many partitions ``topic`` has.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        return self._topic(topic).partitions

    def topic_config(self, topic: str) -> LogConfig:
        """The effective ``LogConfig`` of ``topic`` (engine default plus its overrides)."""
        return self._topic(topic).config

    def topic_overrides(self, topic: str) -> dict[str, Any]:
        """The config keys ``topic`` overrides, in Kafka's dotted form."""
        return dict(self._topic(topic).overrides)

    async def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        config: LogConfig | Mapping[str, Any] | None = None,
        *,
        exist_ok: bool = False,
    ) -> None:
        """Create ``topic`` with ``partitions`` partitions.

        ``config`` is a full ``LogConfig`` for this topic, or a mapping of
        overrides (Kafka's dotted keys or snake_case field names) applied to the
        engine's default config. The overrides are stored in each partition's
        ``topic.json``.

        ``exist_ok=True`` returns quietly when the topic exists already *as asked
        for*: with the same partition count and, when ``config`` is given, the
        same effective config (``config=None`` accepts whatever config it has).
        A topic that exists with another shape is still an error, so a service
        never runs against a topic it did not expect.

        Raises:
            InvalidTopicError: an illegal topic name or partition count.
            TopicExistsError: the topic exists already (with ``exist_ok=True``:
                with another partition count or config; the message names both).
            InvalidConfigError: a config key or value is invalid.
        """
        self._check_writable()
        validate_topic(topic)
        _check_partition_count("partitions", partitions)
        if not isinstance(exist_ok, bool):
            raise InvalidConfigError(f"exist_ok must be a bool, got {type(exist_ok).__name__} {exist_ok!r}")
        effective, overrides = self._resolve_config(config)
        async with self._admin_lock:
            self._check_writable()
            existing = self._topics.get(topic)
            if existing is not None:
                if exist_ok:
                    _check_same_topic(existing, partitions, effective if config is not None else None)
                    return
                raise TopicExistsError(f"topic {topic!r} already exists with {existing.partitions} partition(s)")
            state = _Topic(topic, partitions, overrides, effective)
            self._topics[topic] = state
            try:
                await self._create_partitions(state, range(partitions))
            except BaseException:
                await self._drop_topic(topic)
                raise
        log.info("created topic %s with %d partition(s)", topic, partitions)

    def _resolve_config(self, config: LogConfig | Mapping[str, Any] | None) -> tuple[LogConfig, dict[str, Any]]:
        if config is None:
            return self.config, {}
        if isinstance(config, LogConfig):
            effective = config
        elif isinstance(config, Mapping):
            props = {str(k).replace("_", "."): v for k, v in config.items()}
            effective = LogConfig.from_properties(props, base=self.config)
        else:
            raise InvalidConfigError(
                f"config must be a LogConfig or a mapping of overrides, got {type(config).__name__}"
            )
        base_props = self.config.to_properties()
        overrides = {k: v for k, v in effective.to_properties().items() if base_props[k] != v}
        return effective, overrides

    async def _create_partitions(self, topic: _Topic, partitions: Sequence[int]) -> None:
        """Create ``partitions`` of ``topic``: each directory complete with its topic.json, or not at all.

        Each directory is built aside (``<topic>-<p>.<uuid>-create``) and renamed
        into place only once its ``topic.json`` is durable, so a crash at any
        instant leaves every ``<topic>-<p>`` directory with its topic's config
        and partition count. The next open removes what is still aside and
        creates the partitions a topic.json names but no directory holds
        (docs/OPERATIONS.md, "Creating and deleting topics").
        """
        placed = [
            (
                aside_dir_name(topic.name, partition, _fs.CREATE_DIR_SUFFIX),
                partition_dir_name(topic.name, partition),
                json.dumps(
                    {
                        "version": TOPIC_FILE_VERSION,
                        "topic": topic.name,
                        "partition": partition,
                        "partitions": topic.partitions,
                        "config": topic.overrides,
                    },
                    indent=2,
                    sort_keys=True,
                ).encode()
                + b"\n",
            )
            for partition in partitions
        ]
        await _fs.place_new_partition_dirs(self.path, placed)
        now_ms = _now_ms()
        for partition in partitions:
            directory = self.path / partition_dir_name(topic.name, partition)
            segments: LogSegments[LogSegment] = LogSegments()
            segments.add(await self._new_segment(directory, topic.config, 0, now_ms))
            self._logs[(topic.name, partition)] = PartitionLog(
                self, topic.name, partition, directory, topic.config, segments,
                log_start_offset=0, log_end_offset=0, recovery_point=0, read_only=False, active_is_new=True,
            )

    async def delete_topic(self, topic: str) -> None:
        """Delete ``topic``: its partitions close at once and their files are removed in the background.

        Subscribers of its partitions stop; committed group offsets of the topic
        are dropped (as Kafka does). Every partition directory is first renamed
        to ``<topic>-<p>.<uuid>-delete`` (the topic part cut short to fit 255
        bytes, as Kafka does) while the partitions stay open; only when every
        rename succeeded is the topic gone. A failure undoes the renames and
        leaves the topic as it was, fully usable.

        Raises:
            UnknownTopicOrPartitionError: no such topic.
            StorageError: a directory could not be renamed; the topic is unchanged.
        """
        self._check_writable()
        validate_topic(topic)
        async with self._admin_lock:
            state = self._topic(topic)
            await self._set_topic_aside(state)
            await self._drop_topic(topic)
            await self._groups.forget_topic(topic)
            await self._write_checkpoints()
        log.info("deleted topic %s", topic)

    async def _set_topic_aside(self, state: _Topic) -> None:
        """Rename every partition directory of ``state`` to a ``-delete`` name, or none (admin lock held).

        Each partition's lock is held meanwhile, so no append, roll or retention
        pass creates or renames a file in a directory being moved, and each
        partition's open files follow their directory at once (Kafka's
        ``LocalLog.renameDir``). A partition a clean open left unopened has no
        file to follow; an open of its files already under way is waited for
        (one that a read starts meanwhile fails, and the next read retries).

        Raises:
            StorageError: a rename failed; those done were undone.
        """
        plogs = [self._logs[(state.name, p)] for p in range(state.partitions) if (state.name, p) in self._logs]
        opening = {plog._opening for plog in plogs if plog._opening is not None}
        if opening:
            await asyncio.wait(opening)
        moved: list[tuple[PartitionLog, Path]] = []
        async with contextlib.AsyncExitStack() as held:
            for plog in plogs:
                await held.enter_async_context(plog._lock)
            try:
                for plog in plogs:
                    source = plog.directory
                    target = self.path / aside_dir_name(state.name, plog.partition, DELETE_DIR_SUFFIX)
                    await _fs.rename_dir(source, target)
                    plog._move_to(target)
                    moved.append((plog, source))
                await _fs.fsync_dir(self.path)
            except BaseException:
                for plog, source in reversed(moved):
                    try:
                        await _fs.rename_dir(plog.directory, source)
                    except StorageError as exc:
                        log.error("%s-%d: cannot undo the rename of a topic being deleted: %s",
                                  plog.topic, plog.partition, exc)
                        continue
                    plog._move_to(source)
                raise
            for plog in plogs:
                plog._mark_deleted()  # before the locks go: queued appends must not start

    async def _drop_topic(self, topic: str) -> None:
        """Forget ``topic``, close its partitions, and remove its directories in the background.

        Directories not renamed yet (a create_topic being rolled back) are renamed now.
        """
        state = self._topics.pop(topic, None)
        if state is None:
            return
        for partition in range(state.partitions):  # all of them first: their closes take turns below
            plog = self._logs.get((topic, partition))
            if plog is not None:
                plog._mark_deleted()
        for partition in range(state.partitions):
            plog = self._logs.pop((topic, partition), None)
            if plog is not None:
                try:
                    await plog.close()
                except SeglogError as exc:  # the files are released anyway; they are removed below
                    log.warning("%s-%d: close of a deleted partition failed: %s", topic, partition, exc)
            source = self.path / partition_dir_name(topic, partition) if plog is None else plog.directory
            if source.name.endswith(DELETE_DIR_SUFFIX):  # set aside by delete_topic already
                target = source
            else:
                target = self.path / aside_dir_name(topic, partition, DELETE_DIR_SUFFIX)
                if not await _fs.rename_if_exists(source, target):
                    continue
            self._spawn(_fs.remove_tree(target), name=f"seglog-remove-{target.name}")
        await _fs.fsync_dir(self.path)

    def log(self, topic: str, partition: int = 0) -> PartitionLog:
        """The ``PartitionLog`` of ``topic``'s partition ``partition``.

        Raises:
            InvalidTopicError: ``topic`` is not a valid topic name, or
                ``partition`` is not an int in [0, 1,000,000) (a ``bool`` or
                ``1.0`` would otherwise find partition 1: they hash as 1).
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        self._check_open()
        if type(partition) is not int or type(topic) is not str:  # exact types: the common case costs nothing
            validate_topic(topic)
            validate_partition(partition)
        plog = self._logs.get((topic, partition))
        if plog is None:
            validate_topic(topic)
            validate_partition(partition)
            if topic in self._topics:
                raise UnknownTopicOrPartitionError(
                    f"topic {topic!r} has {self._topics[topic].partitions} partition(s); there is no partition "
                    f"{partition!r}"
                )
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}; create it with create_topic()")
        return plog

    async def log_or_create(self, topic: str, partition: int = 0, *, partitions: int | None = None) -> PartitionLog:
        """The ``PartitionLog`` of ``topic``'s partition ``partition``, creating the topic if it does not exist.

        What a Kafka broker does for a producer or a metadata request when
        ``auto.create.topics.enable`` is on, and what ``produce`` calls on an
        engine opened with ``auto_create_topics=True``; callable on any
        writable engine. A new topic gets ``partitions`` partitions (default:
        the engine's ``auto_create_partitions``) and the engine's default
        config. A topic that exists is used as it is, whatever its partition
        count; concurrent callers create it once.

        Raises:
            InvalidTopicError: an illegal topic name.
            UnknownTopicOrPartitionError: the topic exists (or was created)
                without partition ``partition``.
            ClosedError: the topic does not exist and the engine is read-only
                or closed.
            InvalidConfigError: ``partitions`` is not a positive int.
        """
        self._check_open()
        await self._ensure_topic(topic, self.auto_create_partitions if partitions is None else partitions)
        return self.log(topic, partition)

    async def _ensure_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` unless it exists; return once all of its partitions are registered."""
        if type(topic) is not str:  # an unhashable or non-str name must not reach the dict lookup
            validate_topic(topic)
        state = self._topics.get(topic)
        if state is None:
            with contextlib.suppress(TopicExistsError):  # a concurrent caller created it meanwhile: use it
                await self.create_topic(topic, partitions)
        elif (topic, state.partitions - 1) not in self._logs:
            # A create_topic in flight registers the topic before its partitions (they are made in
            # order): wait for it to finish rather than report a partition it is about to create.
            async with self._admin_lock:
                pass

    def logs(self) -> list[PartitionLog]:
        """Every partition log, sorted by topic and partition."""
        self._check_open()
        return [self._logs[key] for key in sorted(self._logs)]

    def _topic(self, topic: str) -> _Topic:
        self._check_open()
        if type(topic) is not str:
            validate_topic(topic)
        state = self._topics.get(topic)
        if state is None:
            validate_topic(topic)
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}; create it with create_topic()")
        return state

    # -- producing convenience -----------------------------------------------------------------

    async def produce(
        self,
        topic: str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Sequence[tuple[str, bytes]] = (),
    ) -> RecordMetadata:
        """Append one record to ``topic``, choosing the partition like Kafka's default partitioner.

        With a key, the partition is ``murmur2(key) % partitions`` (the same as a
        Kafka producer's); without one, partitions take turns. Concurrent
        ``produce`` calls to one partition are written together (group commit).
        On an engine opened with ``auto_create_topics=True`` a missing topic is
        created first (:meth:`log_or_create`).

        Raises:
            InvalidTopicError: an invalid topic name or partition number.
            UnknownTopicOrPartitionError: no such topic or partition.
            InvalidRecordError, RecordTooLargeError, StorageError: as ``PartitionLog.append``.
        """
        if self.auto_create_topics:
            await self._ensure_topic(topic, self.auto_create_partitions)
        state = self._topic(topic)
        given: object = headers  # callers may pass anything; check before trusting the annotation
        if isinstance(given, str | bytes) or not isinstance(given, Sequence):
            raise InvalidRecordError(f"headers must be a sequence of (str, bytes) pairs, got {type(given).__name__}")
        if partition is None:
            if key is not None and not isinstance(key, bytes):
                raise InvalidRecordError(f"key must be bytes or None, got {type(key).__name__}")
            partition = self._partitioner.partition(key, state.partitions)
        result: AppendResult = await self.log(topic, partition).append(
            [Record(value, key, timestamp, tuple(headers))]
        )
        return RecordMetadata(topic, partition, result.first_offset, result.max_timestamp)

    # -- consumer groups -------------------------------------------------------------------------

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Durably record ``offset`` as ``group``'s position in ``topic``/``partition``.

        The offset is the next record the group will read (Kafka's convention).
        It is fsynced before this returns.

        Raises:
            InvalidRecordError: a group id that breaks the rules of
                ``engine.validate`` (empty, not valid UTF-8, NUL, too long), or an
                offset that is not an int in [0, 2**63-1].
            InvalidTopicError: an invalid topic name or partition number.
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        self._check_writable()
        validate_group(group)
        self.log(topic, partition)
        validate_offset(offset, "committed offset")
        await self._groups.commit(group, {(topic, partition): offset})

    async def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit several positions of ``group`` atomically (one file write).

        Raises:
            InvalidRecordError, InvalidTopicError, UnknownTopicOrPartitionError:
                as :meth:`commit_offset`, for any entry; nothing is committed then.
        """
        self._check_writable()
        validate_group(group)
        if not isinstance(offsets, Mapping):
            raise InvalidRecordError(
                f"offsets must be a mapping of (topic, partition) to offset, got {type(offsets).__name__}"
            )
        for key, offset in offsets.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise InvalidRecordError(f"offsets keys must be (topic, partition) pairs, got {key!r}")
            self.log(*key)
            validate_offset(offset, "committed offset")
        await self._groups.commit(group, dict(offsets))

    async def committed(self, group: str, topic: str, partition: int) -> int | None:
        """``group``'s committed offset in ``topic``/``partition``, or ``None``.

        Raises:
            InvalidRecordError: an invalid group id.
            InvalidTopicError: an invalid topic name or partition number.
        """
        self._check_open()
        validate_group(group)
        validate_topic(topic)
        validate_partition(partition)
        return self._groups.committed(group, topic, partition)

    def groups(self) -> list[str]:
        """Consumer groups with committed offsets, sorted."""
        self._check_open()
        return self._groups.groups()

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of ``group``."""
        self._check_open()
        validate_group(group)
        return self._groups.offsets(group)

    async def delete_group(self, group: str) -> bool:
        """Forget ``group``'s committed offsets; returns whether it had any."""
        self._check_writable()
        validate_group(group)
        return await self._groups.delete(group)

    # -- retention, flush, checkpoints ---------------------------------------------------------

    async def enforce_retention(self) -> int:
        """Run one retention pass over every partition now; returns the segments deleted."""
        self._check_writable()
        now_ms = _now_ms()
        deleted = 0
        failed: SeglogError | None = None
        for plog in list(self._logs.values()):
            try:
                deleted += await plog.enforce_retention(now_ms)
            except ClosedError:
                continue  # deleted or closed meanwhile
            except SeglogError as exc:
                # One partition whose files fail (e.g. opened for the first time here) must not stop
                # retention of the others; the first failure is raised after the pass.
                log.error("%s-%d: retention failed: %s", plog.topic, plog.partition, exc)
                failed = failed or exc
        if deleted:
            await self._checkpoint_log_start_offsets()
        if failed is not None:
            raise failed
        return deleted

    async def flush(self) -> None:
        """fsync every partition and write the checkpoints."""
        self._check_writable()
        for plog in list(self._logs.values()):
            await plog.flush()
        await self._write_checkpoints()

    async def _schedule_segment_deletion(self, plog: PartitionLog, segment: LogSegment) -> None:
        """Rename the segment's files to ``.deleted`` now; remove them after ``file.delete.delay.ms``.

        Readers that already hold the segment keep reading it meanwhile (Kafka's
        reason for the delay). Files still waiting at close are removed then;
        after a crash, the next open removes leftover ``.deleted`` files.
        """
        self._doomed.add(segment)  # first: if the rename fails or is cancelled, close still releases it
        await segment.change_file_suffixes("", DELETED_SUFFIX)
        delay_s = plog.config.file_delete_delay_ms / 1000

        async def remove_later() -> None:
            await asyncio.sleep(delay_s)
            await self._remove_segment(segment)

        self._spawn(remove_later(), name=f"seglog-delete-{plog.topic}-{plog.partition}-{segment.base_offset}")

    async def _remove_segment(self, segment: LogSegment) -> None:
        if segment in self._doomed:
            self._doomed.discard(segment)
            await segment.delete()

    async def _checkpoint_log_start_offsets(self) -> None:
        offsets = {key: plog.log_start_offset for key, plog in self._logs.items()}
        await self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, offsets)

    async def _write_checkpoints(self) -> None:
        if self.read_only:
            return
        await self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, {k: p.recovery_point for k, p in self._logs.items()})
        await self._checkpoint_log_start_offsets()

    async def _write_checkpoint(self, name: str, offsets: dict[tuple[str, int], int]) -> None:
        if self.read_only:
            return
        async with self._checkpoint_lock:
            await _fs.atomic_write(self.path / name, format_checkpoint(offsets))

    # -- background tasks -------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None], *, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        log_task_failure(task, where=str(self.path))

    def _start_background(self) -> None:
        self._spawn(self._every(self.retention_check_interval_ms, self._retention_tick), name="seglog-retention")
        self._spawn(self._every(self.checkpoint_interval_ms, self._write_checkpoints), name="seglog-checkpoints")
        self._spawn(self._every(self.flush_check_interval_ms, self._flush_tick), name="seglog-flush")

    async def _every(self, interval_ms: int, work: Callable[[], Awaitable[Any]]) -> None:
        while not self._closed:
            await asyncio.sleep(interval_ms / 1000)
            if self.closed:  # closed while sleeping
                return
            try:
                await work()
            except ClosedError:
                return
            except SeglogError as exc:
                # A failing disk must not kill the background loop; the next tick retries.
                log.error("%s: background work failed: %s", self.path, exc)

    async def _retention_tick(self) -> None:
        await self.enforce_retention()

    async def _flush_tick(self) -> None:
        now_ms = _now_ms()
        for plog in list(self._logs.values()):
            await plog.maybe_flush_for_time(now_ms)

    # -- closing -------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        """Finish appends in flight, flush, checkpoint, mark a clean shutdown, release the lock.

        Idempotent. The work runs in a task of its own: a caller cancelled while
        waiting does not stop it half way (the lock would stay held and files
        open), and a later ``close()`` waits for the same task.
        """
        if self._closed:
            return
        if self._close_task is None:
            self._close_task = asyncio.get_running_loop().create_task(self._close(), name="seglog-close")
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        self._closing = True  # admin calls from now on are refused
        try:
            async with self._admin_lock:  # a create_topic or delete_topic in progress finishes first
                await self._close_locked()
        finally:
            self._closed = True

    async def _close_locked(self) -> None:
        if self._follower is not None:
            await self._follower.close()  # no refresh touches a partition from here on
        background = list(self._tasks)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        gate = asyncio.Semaphore(LOAD_CONCURRENCY)

        async def close_one(plog: PartitionLog) -> bool:
            async with gate:
                try:
                    # Drains the appends already queued, then fsyncs, then closes the files.
                    await plog.close(flush=not self.read_only)
                except SeglogError as exc:
                    log.error("%s-%d: close failed: %s", plog.topic, plog.partition, exc)
                    return False
                return True

        clean = all(await asyncio.gather(*(close_one(p) for p in list(self._logs.values()))))
        for segment in list(self._doomed):
            try:
                await self._remove_segment(segment)
            except SeglogError as exc:
                log.warning("%s: cannot remove deleted segment: %s", segment, exc)
        if not self.read_only:
            try:
                await self._write_checkpoints()
                if clean:
                    record = format_clean_shutdown(
                        {key: p._closed_as for key, p in self._logs.items() if p._closed_as is not None}
                    )
                    if len(record) > _fs.MAX_SMALL_FILE_BYTES:  # the next open could not read it
                        record = b""  # a marker without a record: the next open opens every partition
                    await _fs.atomic_write(self.path / CLEAN_SHUTDOWN_FILE, record)
            finally:
                if self._lock_handle is not None:
                    await self._lock_handle.release()
                    self._lock_handle = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"the engine on {self.path} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._closing:
            raise ClosedError(f"the engine on {self.path} is closing")
        if self.read_only:
            raise ClosedError(f"the engine on {self.path} is open read-only")

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("read-only" if self.read_only else "open")
        return f"<Engine {self.path} {state} topics={len(self._topics)}>"

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if not getattr(self, "_closed", True):
            _warn(f"unclosed {self!r}; use 'async with Engine.open(...)' or await engine.close()",
                  ResourceWarning, stacklevel=2, source=self)
