"""``Engine``: one log directory — its lock, topics, partitions, checkpoints and background work.

Owns: the public API of a log directory -- opening it (its options checked by
``engine.opening``; the lock, the clean-shutdown marker, then ``engine.loader``),
topics (``engine.topic_admin`` does their directories), producing, consumer
groups and transactions (the stores beside the partitions, held by
``engine.services``: group store and coordinator, producer ids, transaction log
and coordinator), retention and flush passes over every partition
(``engine.background``), the checkpoints, and closing.
What a ``PartitionLog`` needs of it, it gets through a narrow ``LogOwner``
(``_Owner`` below), never by calling the engine.

Files (see docs/FORMAT.md and docs/OPERATIONS.md)::

    <log_dir>/.lock                              fcntl.flock, held while open
    <log_dir>/.clean-shutdown                    written on clean close, removed on open
    <log_dir>/recovery-point-offset-checkpoint   Kafka's checkpoint format
    <log_dir>/log-start-offset-checkpoint
    <log_dir>/consumer-offsets/offsets.log       the group store: committed offsets, group membership
    <log_dir>/producer-ids                       the next block of producer ids (engine/producer_ids.py)
    <log_dir>/transaction-state/transactions.log the transaction coordinator's states (engine/transactions.py)
    <log_dir>/<topic>-<partition>/topic.json     the topic's partition count and config overrides
    <log_dir>/<topic>-<partition>/<20-digit base offset>.log|.index|.timeindex|.txnindex|.snapshot

Concurrency contract: an ``Engine`` belongs to the event loop it was opened
on; every method must be called from that loop. Blocking file work runs in the
default executor (one hop per logical operation).

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from seglog.engine import _fs, loader, topic_admin
from seglog.engine.background import (
    DEFAULT_CHECKPOINT_INTERVAL_MS,
    DEFAULT_FLUSH_CHECK_INTERVAL_MS,
    DEFAULT_RETENTION_CHECK_INTERVAL_MS,
    BackgroundWork,
    CheckpointFiles,
    close_logs,
    retention_pass,
)
from seglog.engine.config import LogConfig
from seglog.engine.consumer import GroupConsumer
from seglog.engine.coordinator import GroupCoordinator
from seglog.engine.errors import (
    ClosedError,
    InvalidConfigError,
    InvalidRecordError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.engine.follow import DEFAULT_FOLLOW_INTERVAL_MS, Follower, start_following_in_thread
from seglog.engine.loader import RecoveryProgress
from seglog.engine.log import LoadedLog, PartitionLog, Unopened
from seglog.engine.opening import Opening, OpenOptions
from seglog.engine.partitioner import KeyPartitioner
from seglog.engine.results import AppendResult, RecordMetadata
from seglog.engine.services import DirServices
from seglog.engine.topics import TopicState, check_partition_count, check_same_topic, resolve_config
from seglog.engine.transactions import (
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
    DEFAULT_TRANSACTIONS_CLEANUP_INTERVAL_MS,
    Transaction,
    TransactionCoordinator,
)
from seglog.engine.validate import (
    validate_group,
    validate_offset,
    validate_partition,
    validate_topic,
)
from seglog.indexes.handles import open_file_budget
from seglog.segments.fileio import in_thread
from seglog.segments.records import Record
from seglog.segments.segment import LogSegment

__all__ = ["Engine", "RecoveryProgress"]

log = logging.getLogger("seglog")

CLEAN_SHUTDOWN_FILE: Final = _fs.CLEAN_SHUTDOWN_FILE
LOCK_FILE: Final = ".lock"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Owner:
    """What every ``PartitionLog`` of an engine may ask of it (``engine.log.LogOwner``), and nothing more."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    async def open_files(
        self, topic: str, partition: int, directory: Path, config: LogConfig, unopened: Unopened
    ) -> LoadedLog:
        return (await loader.open_unopened(topic, partition, directory, config, unopened))[0]

    async def log_start_moved(self) -> None:
        await self._engine._checkpoints.write_log_start_offsets()

    async def delete_segment_later(self, segment: LogSegment, delay_ms: int, name: str) -> None:
        await self._engine._background.delete_segment_later(segment, delay_ms, name)


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
        self._topics: dict[str, TopicState] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock_handle: _fs.DirLock | None = None
        self._background = BackgroundWork(path)
        self._owner = _Owner(self)
        # What the loader (and a read-only engine's follower) fills in and works with.
        self._dir = loader.LogDirLoad(
            path, config, self._owner, read_only, self._topics, self._logs, self._background.spawn,
            # A read-only engine's view ends at the last complete, CRC-valid batch of each active segment,
            # and a follower goes on from there (engine/follow.py).
            on_active=start_following_in_thread if read_only else None,
        )
        self._partitioner = KeyPartitioner()
        self._services = DirServices(path, read_only=read_only, write_txn_marker=self._write_txn_marker,
                                     has_partition=lambda topic, partition: (topic, partition) in self._logs)
        self._groups = self._services.groups
        self._coordinator = self._services.coordinator
        self._transactions = self._services.transactions
        self.transactions_remove_expired_transaction_cleanup_interval_ms = DEFAULT_TRANSACTIONS_CLEANUP_INTERVAL_MS
        self._closed = False
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._admin_lock = asyncio.Lock()
        self._checkpoints = CheckpointFiles(path, self._logs, read_only=read_only)
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
        max_open_files: int | None = None,
        transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
        transactions_remove_expired_transaction_cleanup_interval_ms: int = DEFAULT_TRANSACTIONS_CLEANUP_INTERVAL_MS,
    ) -> Opening[Engine]:
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

        ``max_open_files`` bounds the descriptors (and index maps) that
        segments hold, as LevelDB's option of that name does: past it, the
        least recently used idle segment files close and reopen on their next
        use. The budget is per process, as the descriptor limit is, and this
        sets it for every engine in the process; ``None`` keeps it (by default
        half the soft ``RLIMIT_NOFILE``, at least 16).

        ``transactional_id_expiration_ms`` is Kafka's ``transactional.id.expiration.ms``
        (7 days): a transactional id with no transaction in flight that nothing
        used for that long is forgotten (a later producer of it starts afresh, at
        a new producer id). Expired ids are looked for every
        ``transactions_remove_expired_transaction_cleanup_interval_ms`` (Kafka's
        ``transactions.remove.expired.transaction.cleanup.interval.ms``, 1 hour).

        Raises:
            LogDirLockedError: another engine holds the directory.
            InvalidConfigError: ``path`` is not a str or os.PathLike, or holds
                NUL; ``config`` is not a ``LogConfig``, a flag is not a bool,
                ``on_progress`` is not callable, an interval is not positive,
                or ``auto_create_partitions`` is not a partition count,
                or ``max_open_files`` is not an int of at least 16.
            StorageError: the directory cannot be created or read.
        """
        options = OpenOptions.checked(
            path, config, on_progress, read_only=read_only, force_recovery=force_recovery,
            retention_check_interval_ms=retention_check_interval_ms, checkpoint_interval_ms=checkpoint_interval_ms,
            flush_check_interval_ms=flush_check_interval_ms, follow=follow, follow_interval_ms=follow_interval_ms,
            auto_create_topics=auto_create_topics, auto_create_partitions=auto_create_partitions,
            max_open_files=max_open_files, transactional_id_expiration_ms=transactional_id_expiration_ms,
            transactions_remove_expired_transaction_cleanup_interval_ms=(
                transactions_remove_expired_transaction_cleanup_interval_ms),
        )
        return Opening(lambda: Engine._open(options))

    @classmethod
    async def _open(cls, options: OpenOptions) -> Engine:
        if options.max_open_files is not None:
            # A smaller budget closes idle descriptors now: in a thread, not on the loop.
            await in_thread(open_file_budget().resize, options.max_open_files)
        engine = cls(options.path, options.config, read_only=options.read_only)
        engine._transactions.transactional_id_expiration_ms = options.transactional_id_expiration_ms
        engine.transactions_remove_expired_transaction_cleanup_interval_ms = (
            options.transactions_remove_expired_transaction_cleanup_interval_ms)
        engine.retention_check_interval_ms = options.retention_check_interval_ms
        engine.checkpoint_interval_ms = options.checkpoint_interval_ms
        engine.flush_check_interval_ms = options.flush_check_interval_ms
        engine.auto_create_topics = options.auto_create_topics
        engine.auto_create_partitions = options.auto_create_partitions
        try:
            await engine._load(options.on_progress, force_recovery=options.force_recovery)
            if options.read_only:
                engine._follower = Follower(engine._dir, options.follow_interval_ms)
                await engine._follower.start(follow=options.follow)
        except BaseException:
            await engine._abort_open()
            raise
        if not options.read_only:
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
        recovered = await loader.load_log_dir(
            self._dir, listing, force_recovery=force_recovery, on_progress=on_progress
        )
        if self.read_only:
            await self._services.load()
            self._services.start()
            return
        # A topic whose creation was cut short by a crash gets its missing partitions now.
        for state in list(self._topics.values()):
            missing = [p for p in range(state.partitions) if (state.name, p) not in self._logs]
            if missing:
                log.warning("topic %s: partition(s) %s of %d missing (a create_topic was cut short); creating them",
                            state.name, missing, state.partitions)
                await topic_admin.create_partitions(self.path, state, missing, self._logs, self._owner)
        await self._services.load()
        await _fs.remove_file(self.path / CLEAN_SHUTDOWN_FILE, sync_dir=True)
        self._services.start()  # finishes transactions a crash left half-ended
        if recovered:
            await self._checkpoints.write_all()

    async def _abort_open(self) -> None:
        if self._follower is not None:
            await self._follower.close()
        for plog in self._logs.values():
            with contextlib.suppress(Exception):
                await plog.close()
        self._logs.clear()
        await self._background.stop()
        await self._services.abort()
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
        check_partition_count("partitions", partitions)
        if not isinstance(exist_ok, bool):
            raise InvalidConfigError(f"exist_ok must be a bool, got {type(exist_ok).__name__} {exist_ok!r}")
        effective, overrides = resolve_config(self.config, config)
        async with self._admin_lock:
            self._check_writable()
            existing = self._topics.get(topic)
            if existing is not None:
                if exist_ok:
                    check_same_topic(existing, partitions, effective if config is not None else None)
                    return
                raise TopicExistsError(f"topic {topic!r} already exists with {existing.partitions} partition(s)")
            state = TopicState(topic, partitions, overrides, effective)
            self._topics[topic] = state
            try:
                await topic_admin.create_partitions(self.path, state, range(partitions), self._logs, self._owner)
            except BaseException:
                await self._drop_topic(topic)
                raise
        log.info("created topic %s with %d partition(s)", topic, partitions)

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
            await topic_admin.set_topic_aside(self.path, state, self._logs)
            await self._drop_topic(topic)
            await self._groups.forget_topic(topic)
            await self._checkpoints.write_all()
        log.info("deleted topic %s", topic)

    async def _drop_topic(self, topic: str) -> None:
        await topic_admin.drop_topic(self.path, topic, self._topics, self._logs, self._background.spawn)

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

    def _topic(self, topic: str) -> TopicState:
        self._check_open()
        if type(topic) is not str:
            validate_topic(topic)
        state = self._topics.get(topic)
        if state is None:
            validate_topic(topic)
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}; create it with create_topic()")
        return state

    # -- producing -----------------------------------------------------------------------------

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

    async def init_producer_id(self, producer_id: int = -1, producer_epoch: int = -1) -> tuple[int, int]:
        """``(producer id, epoch)`` for ``PartitionLog.append``'s idempotent producer (a new id with epoch 0,
        or, given its id and epoch, the next epoch: ``ProducerIdManager.init_producer_id``; docs/API.md).

        Raises:
            InvalidRecordError: not ints. ClosedError: closed or read-only. StorageError: ids not recorded.
        """
        self._check_writable()
        return await self._services.producer_ids.init_producer_id(producer_id, producer_epoch)

    # -- transactions ----------------------------------------------------------------------------

    @property
    def transactions(self) -> TransactionCoordinator:
        """The transaction coordinator of this engine: the Kafka front end and :meth:`transaction` share it."""
        return self._transactions

    def transaction(self, transactional_id: str, *, timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS) -> Transaction:
        """A transaction of ``transactional_id``; use ``async with``::

            async with engine.transaction("billing-1") as txn:
                await txn.append("orders", 0, [Record(b"v")])
                await txn.commit_offsets("billing", {("in", 0): 42})

        The block's normal end commits, an exception aborts (and is re-raised).
        Entering fences any earlier holder of the transactional id (its open
        transaction is aborted). The coordinator aborts a transaction still open
        ``timeout_ms`` after its first append or offset commit. docs/API.md
        ("Transactions") has the rules.

        Raises:
            InvalidRecordError: a bad transactional id.
            InvalidTransactionTimeoutError: ``timeout_ms`` is not in [1, 900000].
            ClosedError: the engine is closed or read-only.
        """
        self._check_writable()
        return Transaction(self._transactions, self.log, transactional_id, timeout_ms)

    async def _write_txn_marker(self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool) -> None:
        await self.log(topic, partition).write_txn_marker(producer_id, epoch, commit=commit)

    # -- consumer groups -------------------------------------------------------------------------

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Durably record ``offset`` as ``group``'s position in ``topic``/``partition``.

        The offset is the next record the group will read (Kafka's convention).
        It is fsynced before this returns. The group store is the one Kafka
        clients commit to over the wire and group consumers commit to: this is
        a commit from outside the group (Kafka's generation -1), accepted while
        the group has no active members.

        Raises:
            InvalidRecordError: a group id that breaks the rules of
                ``engine.validate`` (empty, not valid UTF-8, NUL, too long), or an
                offset that is not an int in [0, 2**63-1].
            InvalidTopicError: an invalid topic name or partition number.
            UnknownTopicOrPartitionError: no such topic or partition.
            NonEmptyGroupError: the group has active members (library consumers or Kafka clients).
        """
        self._check_writable()
        validate_group(group)
        self.log(topic, partition)
        validate_offset(offset, "committed offset")
        await self._coordinator.commit_outside_group(group, {(topic, partition): offset})

    async def commit_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Commit several positions of ``group`` atomically (one write to the group store).

        Raises:
            InvalidRecordError, InvalidTopicError, UnknownTopicOrPartitionError, NonEmptyGroupError:
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
        await self._coordinator.commit_outside_group(group, dict(offsets))

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
        """Forget ``group``'s committed offsets; returns whether it had any.

        Raises:
            NonEmptyGroupError: the group has active members.
        """
        self._check_writable()
        validate_group(group)
        return await self._coordinator.delete_group(group)

    @property
    def coordinator(self) -> GroupCoordinator:
        """The group coordinator of this engine: library consumers and the Kafka front end share it."""
        return self._coordinator

    def consumer(self, group_id: str, topics: Sequence[str], **options: Any) -> GroupConsumer:
        """A member of consumer group ``group_id`` reading ``topics``; use ``async with``.

        ``options`` are :class:`~seglog.engine.consumer.GroupConsumer`'s
        (``enable_auto_commit``, ``auto_offset_reset``, ``session_timeout_ms``, ...)::

            async with engine.consumer("billing", ["orders"]) as consumer:
                async for record in consumer:
                    ...
                    await consumer.commit()

        Raises:
            InvalidRecordError, InvalidTopicError, InvalidConfigError: a bad group id, topic name or option.
            StorageError: a read-only engine (a follower cannot commit).
        """
        self._check_writable()
        return GroupConsumer(self, group_id, topics, **options)

    # -- retention, flush, checkpoints ---------------------------------------------------------

    async def enforce_retention(self) -> int:
        """Run one retention pass over every partition now; returns the segments deleted."""
        self._check_writable()
        deleted, failed = await retention_pass(self._logs.values(), _now_ms())
        if deleted:
            await self._checkpoints.write_log_start_offsets()
        if failed is not None:
            raise failed
        return deleted

    async def flush(self) -> None:
        """fsync every partition and write the checkpoints."""
        self._check_writable()
        for plog in list(self._logs.values()):
            await plog.flush()
        await self._checkpoints.write_all()

    # -- background tasks -------------------------------------------------------------------------

    def _start_background(self) -> None:
        work = self._background
        work.every(self.retention_check_interval_ms, self.enforce_retention, "seglog-retention")
        work.every(self.checkpoint_interval_ms, self._checkpoints.write_all, "seglog-checkpoints")
        work.every(self.flush_check_interval_ms, self._flush_tick, "seglog-flush")
        work.every(self.transactions_remove_expired_transaction_cleanup_interval_ms,
                   self._transactions.remove_expired_transactional_ids, "seglog-transactional-id-expiry")

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
        await self._services.stop()  # group consumers and transaction timeouts stop
        await self._background.stop()
        # Each drains the appends already queued, then fsyncs, then closes its files.
        clean = await close_logs(self._logs.values(), flush=not self.read_only)
        await self._services.close()  # the commits and transaction states already queued are written first
        await self._background.remove_doomed()
        if not self.read_only:
            try:
                await self._checkpoints.write_all()
                if clean:
                    await self._checkpoints.write_clean_shutdown()
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
