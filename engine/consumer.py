"""``GroupConsumer``: a member of a consumer group, reading the partitions the group gives it (``engine.consumer``).

::

    async with engine.consumer("billing", ["orders"]) as consumer:
        async for record in consumer:        # ConsumerRecord: a Record plus .topic and .partition
            ...
            await consumer.commit()          # or enable_auto_commit=True (the default)

Its surface follows aiokafka's ``AIOKafkaConsumer`` where that fits:
``getone()``, ``getmany(timeout_ms=..., max_records=...)``, ``assignment()``,
``seek(topic, partition, offset)`` (aiokafka: ``seek(tp, offset)``),
``seek_to_beginning/end/committed``, ``position``, ``committed``,
``pause``/``resume``/``paused``, ``commit``, ``highwater``, and a rebalance
``listener`` with ``on_partitions_revoked``/``on_partitions_assigned``.
Differences: ``auto_offset_reset`` is ``"earliest"`` by default (an embedded
log is usually read from its start; aiokafka's is ``"latest"``), and
``start()`` (``async with``) returns once the consumer has its first
assignment.

Membership goes through the engine's group coordinator
(``engine.coordinator``) with Kafka's rules, so consumers of one group in one
engine share the partitions of their topics and rebalance as members join
and leave, and Kafka clients of ``seglog serve`` on the same engine can be
members of the same group: the subscriptions and assignments exchanged are
Kafka's consumer protocol, and the leader, library consumer or Kafka client,
runs the ``range`` or ``roundrobin`` assignment. Rebalances are eager (as
Kafka's range and roundrobin): every member gives up its partitions, with a
commit of its positions when ``enable_auto_commit``, then rejoins. An
in-process member hears of a rebalance at once (the coordinator calls it);
its heartbeats (a timer, every ``heartbeat_interval_ms``) keep it alive.

Records carry their topic and partition in ``ConsumerRecord``, a NamedTuple
with ``Record``'s five fields first (same names, same order) and then
``topic`` and ``partition``: reads build plain ``Record`` values as before,
and only what a consumer hands out is rebuilt, once per record.

Concurrency contract: use a consumer from the engine's event loop; iterate it
from one task at a time. Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import time
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, NamedTuple, Protocol, Self

from seglog.engine.assignors import (
    ASSIGNORS,
    CONSUMER_PROTOCOL_TYPE,
    assign,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from seglog.engine.coordinator import GroupCoordinator, GroupErrorCode, JoinResult
from seglog.engine.errors import (
    ClosedError,
    CommitFailedError,
    GroupError,
    InvalidConfigError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from seglog.engine.log import DEFAULT_FETCH_BYTES, PartitionLog
from seglog.engine.validate import validate_group, validate_offset, validate_topic
from seglog.segments.records import Header, Record

__all__ = ["ConsumerHost", "ConsumerRecord", "GroupConsumer", "RebalanceListener", "TopicPartition"]


class ConsumerHost(Protocol):
    """What a :class:`GroupConsumer` needs of the engine that owns it (``Engine`` is one).

    A narrow interface rather than the ``Engine`` itself, so that nothing inside
    ``engine`` imports the module that owns it (the import-linter contract).
    """

    @property
    def coordinator(self) -> GroupCoordinator: ...

    def partitions_for(self, topic: str) -> int: ...

    def log(self, topic: str, partition: int = 0) -> PartitionLog: ...

log = logging.getLogger("seglog.groups")

# aiokafka's and Kafka's consumer defaults.
DEFAULT_SESSION_TIMEOUT_MS: Final = 10_000
DEFAULT_HEARTBEAT_INTERVAL_MS: Final = 3_000
DEFAULT_REBALANCE_TIMEOUT_MS: Final = 300_000  # Kafka's max.poll.interval.ms, the JoinGroup rebalance timeout
DEFAULT_AUTO_COMMIT_INTERVAL_MS: Final = 5_000
CLIENT_HOST: Final = "in-process"
_RETRIABLE: Final = frozenset({
    GroupErrorCode.REBALANCE_IN_PROGRESS, GroupErrorCode.UNKNOWN_MEMBER_ID, GroupErrorCode.ILLEGAL_GENERATION,
})


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    """A record as a group consumer hands it out: ``Record``'s fields, then its topic and partition."""

    value: bytes | None
    key: bytes | None
    timestamp: int | None
    headers: tuple[Header, ...]
    offset: int
    topic: str
    partition: int

    def record(self) -> Record:
        """The plain ``Record`` (for appending it elsewhere)."""
        return Record(self.value, self.key, self.timestamp, self.headers, self.offset)


class RebalanceListener(Protocol):
    """aiokafka's ``ConsumerRebalanceListener``: either method may be a coroutine function."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None: ...


class _Partition:
    """What the consumer knows of one assigned partition: its position, the records read ahead, pause."""

    __slots__ = ("buffer", "epoch", "paused", "position")

    def __init__(self, position: int) -> None:
        self.position = position  # the next offset to hand out; -1: none yet (auto_offset_reset "none")
        self.buffer: deque[Record] = deque()
        self.paused = False
        self.epoch = 0  # bumped by seek: a read started before it is dropped


class GroupConsumer:
    """A member of consumer group ``group_id`` reading ``topics`` (see the module docstring).

    Options (aiokafka's names): ``enable_auto_commit`` (commit positions every
    ``auto_commit_interval_ms``, before each rebalance and on stop),
    ``auto_offset_reset`` (``"earliest"``, ``"latest"`` or ``"none"``: where a
    partition without a committed offset, or with one outside the log,
    starts), ``session_timeout_ms``, ``heartbeat_interval_ms``,
    ``rebalance_timeout_ms``, ``max_partition_fetch_bytes``,
    ``partition_assignment_strategy`` (``("range", "roundrobin")``: the
    protocols offered, in order of preference), ``group_instance_id`` (static
    membership), ``client_id``, ``listener``.
    """

    def __init__(
        self,
        engine: ConsumerHost,
        group_id: str,
        topics: Sequence[str],
        *,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = DEFAULT_AUTO_COMMIT_INTERVAL_MS,
        auto_offset_reset: str = "earliest",
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS,
        max_partition_fetch_bytes: int = DEFAULT_FETCH_BYTES,
        partition_assignment_strategy: Sequence[str] = ASSIGNORS,
        group_instance_id: str | None = None,
        client_id: str = "seglog-consumer",
        listener: RebalanceListener | None = None,
    ) -> None:
        validate_group(group_id)
        if isinstance(topics, str) or not isinstance(topics, Sequence) or not topics:
            raise InvalidRecordError(f"topics must be a non-empty sequence of topic names, got {topics!r}")
        for topic in topics:
            validate_topic(topic)
        for name, value in (("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("session_timeout_ms", session_timeout_ms),
                            ("heartbeat_interval_ms", heartbeat_interval_ms),
                            ("rebalance_timeout_ms", rebalance_timeout_ms),
                            ("max_partition_fetch_bytes", max_partition_fetch_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidConfigError(f"{name} must be a positive int, got {value!r}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise InvalidConfigError(
                f"heartbeat_interval_ms ({heartbeat_interval_ms}) must be below session_timeout_ms "
                f"({session_timeout_ms}); Kafka's consumers use a third of it"
            )
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise InvalidConfigError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {auto_offset_reset!r}"
            )
        strategies = tuple(partition_assignment_strategy)
        if not strategies or any(s not in ASSIGNORS for s in strategies):
            raise InvalidConfigError(
                f"partition_assignment_strategy must name some of {', '.join(ASSIGNORS)}, got {strategies!r}"
            )
        if group_instance_id is not None:
            validate_group(group_instance_id)
        self._engine = engine
        self._coordinator = engine.coordinator
        self.group_id = group_id
        self._topics = tuple(dict.fromkeys(topics))
        self._auto_commit = bool(enable_auto_commit)
        self._auto_commit_interval = auto_commit_interval_ms / 1000
        self._reset = auto_offset_reset
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval = heartbeat_interval_ms / 1000
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._fetch_bytes = max_partition_fetch_bytes
        self._strategies = strategies
        self._instance_id = group_instance_id
        self._client_id = client_id
        self._listener = listener
        self.member_id = ""
        self.generation_id = -1
        self._assignment: dict[TopicPartition, _Partition] = {}
        self._turn = 0  # round-robin over partitions when handing records out
        self._assigned = asyncio.Event()  # the first assignment arrived (start() waits for it)
        self._rebalance = asyncio.Event()  # the coordinator asks this member to rejoin
        self._changed: asyncio.Future[None] | None = None  # wakes a getmany waiting for records
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._started = False
        self._stopped = False
        self._unregister: Callable[[], None] | None = None
        self._last_commit = time.monotonic()
        self._committed_positions: dict[TopicPartition, int] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Join the group; returns once this member has its first assignment (maybe empty).

        Raises:
            GroupError: the group refused the member (a protocol no member shares, a fenced static instance).
            ClosedError: the engine is closing.
        """
        if self._started:
            return
        self._coordinator.check_open()
        self._started = True
        self._unregister = self._coordinator.on_close(self.stop)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"seglog-consumer-{self.group_id}")
        assigned = asyncio.ensure_future(self._assigned.wait())
        try:
            await asyncio.wait([assigned, self._task], return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled while joining: leave nothing running behind
            await asyncio.shield(self.stop())
            raise
        finally:
            assigned.cancel()
        if self._failure is not None:
            await self.stop()
            raise self._failure
        if not self._assigned.is_set():
            await self.stop()
            raise ClosedError("the consumer was stopped, or its engine closed, while it joined its group")

    async def stop(self) -> None:
        """Commit (with ``enable_auto_commit``), leave the group, stop. Idempotent.

        A static member (``group_instance_id``) does not leave: its place and
        partitions wait for it until its session times out, as in Kafka.
        """
        if self._stopped:
            return
        self._stopped = True
        if self._unregister is not None:
            self._unregister()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._auto_commit and self._assignment and self.member_id:
            with contextlib.suppress(SeglogError):
                await self._commit_positions()
        revoked = set(self._assignment)
        self._assignment.clear()
        self._wake()
        if revoked:
            await self._call_listener("on_partitions_revoked", revoked)
        if self.member_id and self._instance_id is None:
            self._coordinator.leave(self.group_id, [(self.member_id, None)])
        self.member_id = ""

    close = stop

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def __repr__(self) -> str:
        return (f"<GroupConsumer group={self.group_id!r} member={self.member_id!r} generation={self.generation_id} "
                f"partitions={len(self._assignment)}>")

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if getattr(self, "_started", False) and not getattr(self, "_stopped", True):
            _warn(f"unstopped {self!r}: use 'async with engine.consumer(...)' or await stop()", ResourceWarning,
                  stacklevel=2, source=self)

    # -- membership (the background task) ------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not self._stopped:
                if not await self._join():
                    return
                await self._stay()
                if self._is_stopped():  # (stop() ran during the await)
                    return
                await self._revoke()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.error("group %s: consumer %s failed: %s", self.group_id, self.member_id, exc)
            self._failure = exc
            self._wake()

    def _is_stopped(self) -> bool:
        return self._stopped

    async def _join(self) -> bool:
        """Join and sync until this member has an assignment; ``False`` when the coordinator closed."""
        subscription = encode_subscription(self._topics)
        while True:
            self._rebalance.clear()
            joined = await self._coordinator.join(
                self.group_id, self.member_id, protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=[(name, subscription) for name in self._strategies],
                session_timeout_ms=self._session_timeout_ms, rebalance_timeout_ms=self._rebalance_timeout_ms,
                group_instance_id=self._instance_id, client_id=self._client_id, client_host=_pid_host(),
                on_rebalance=self._rebalance.set,
            )
            if joined.error is GroupErrorCode.COORDINATOR_NOT_AVAILABLE:
                return False
            if joined.error is GroupErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if joined.error is not GroupErrorCode.NONE:
                raise GroupError(f"group {self.group_id!r} refused to let this consumer join: "
                                 f"{joined.error.name}", joined.error.name)
            self.member_id, self.generation_id = joined.member_id, joined.generation_id
            assignments = self._assign(joined) if joined.leader_id == self.member_id else None
            synced = await self._coordinator.sync(
                self.group_id, self.generation_id, self.member_id, group_instance_id=self._instance_id,
                protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=joined.protocol_name, assignments=assignments,
            )
            if synced.error is GroupErrorCode.COORDINATOR_NOT_AVAILABLE:
                return False
            if synced.error in _RETRIABLE:
                if synced.error is GroupErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                continue
            if synced.error is not GroupErrorCode.NONE:
                raise GroupError(f"group {self.group_id!r} refused this consumer's sync: {synced.error.name}",
                                 synced.error.name)
            try:
                parts = decode_assignment(synced.assignment).topic_partitions()
            except ValueError as exc:
                log.error("group %s: the leader's assignment for %s does not decode (%s); taking nothing",
                          self.group_id, self.member_id, exc)
                parts = []
            await self._take(TopicPartition(t, p) for t, p in parts)
            return True

    def _assign(self, joined: JoinResult) -> dict[str, bytes]:
        """The leader's part: every member's share of the topics they subscribe to."""
        subscriptions: dict[str, tuple[str, ...]] = {}
        for member in sorted(joined.members, key=lambda m: (m.group_instance_id or m.member_id, m.member_id)):
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata).topics
            except ValueError as exc:
                log.warning("group %s: member %s's subscription does not decode (%s); it gets nothing",
                            self.group_id, member.member_id, exc)
                subscriptions[member.member_id] = ()
        counts: dict[str, int] = {}
        for topic in {t for topics in subscriptions.values() for t in topics}:
            with contextlib.suppress(SeglogError):
                counts[topic] = self._engine.partitions_for(topic)
        shares = assign(joined.protocol_name or self._strategies[0], subscriptions, counts)
        return {member: encode_assignment(share) for member, share in shares.items()}

    async def _take(self, partitions: Any) -> None:
        """Start reading ``partitions``: each from its committed offset, else as ``auto_offset_reset`` says."""
        assignment: dict[TopicPartition, _Partition] = {}
        for tp in partitions:
            committed = self._coordinator.committed(self.group_id, tp.topic, tp.partition)
            try:
                if committed is not None:
                    position = committed[0]
                else:
                    position = -1 if self._reset == "none" else self._reset_position(tp)
            except SeglogError as exc:
                log.warning("group %s: partition %s-%d assigned but unreadable (%s); skipped", self.group_id,
                            tp.topic, tp.partition, exc)
                continue
            assignment[tp] = _Partition(position)
        self._assignment = assignment
        self._committed_positions = {tp: state.position for tp, state in assignment.items()}
        self._assigned.set()
        self._wake()
        log.info("group %s: member %s of generation %d reads %s", self.group_id, self.member_id,
                 self.generation_id, ", ".join(f"{t}-{p}" for t, p in sorted(assignment)) or "nothing")
        await self._call_listener("on_partitions_assigned", set(assignment))

    def _reset_position(self, tp: TopicPartition) -> int:
        plog = self._engine.log(tp.topic, tp.partition)
        if self._reset == "earliest":
            return plog.log_start_offset
        if self._reset == "latest":
            return plog.log_end_offset
        raise OffsetOutOfRangeError(
            f"{tp.topic}-{tp.partition}: group {self.group_id!r} has no committed offset and auto_offset_reset "
            "is 'none'; seek() to a position first"
        )

    async def _stay(self) -> None:
        """Heartbeat (and auto-commit) until the group rebalances or the consumer stops."""
        while not self._stopped:
            wait = self._heartbeat_interval
            if self._auto_commit:
                wait = max(0.0, min(wait, self._last_commit + self._auto_commit_interval - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._rebalance.wait()
            if self._rebalance.is_set():
                return
            if self._auto_commit and time.monotonic() - self._last_commit >= self._auto_commit_interval:
                with contextlib.suppress(CommitFailedError):  # the group rebalances: the heartbeat below says so
                    await self._commit_positions()
            error = self._coordinator.heartbeat(self.group_id, self.member_id, self.generation_id,
                                                group_instance_id=self._instance_id)
            if error is GroupErrorCode.NONE:
                continue
            if error is GroupErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            if error in _RETRIABLE or error is GroupErrorCode.COORDINATOR_NOT_AVAILABLE:
                return
            raise GroupError(f"group {self.group_id!r}: heartbeat refused: {error.name}", error.name)

    async def _revoke(self) -> None:
        """Give up every partition before rejoining (eager rebalance), committing positions first."""
        if self._auto_commit and self._assignment:
            try:
                await self._commit_positions()
            except SeglogError as exc:
                log.warning("group %s: commit before the rebalance failed (%s); those records will be read again",
                            self.group_id, exc)
        revoked = set(self._assignment)
        self._assignment = {}
        self._wake()
        if revoked:
            await self._call_listener("on_partitions_revoked", revoked)

    async def _call_listener(self, name: str, partitions: set[TopicPartition]) -> None:
        if self._listener is None:
            return
        try:
            result = getattr(self._listener, name)(partitions)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("group %s: the rebalance listener's %s failed", self.group_id, name)

    # -- commits ------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Commit ``offsets`` (default: the position of every assigned partition) as this member.

        Raises:
            CommitFailedError: the group rebalanced since this member joined;
                those partitions may belong to another member now.
            InvalidRecordError: an offset that is not an int in [0, 2**63-1].
            StorageError: the group store could not write them.
        """
        if offsets is None:
            await self._commit_positions()
            return
        rows: dict[tuple[str, int], int] = {}
        for tp, offset in offsets.items():
            topic, partition = tp
            validate_offset(offset, "committed offset")
            rows[(topic, partition)] = offset
        await self._commit(rows)

    async def _commit_positions(self) -> None:
        positions = {(tp.topic, tp.partition): s.position for tp, s in self._assignment.items() if s.position >= 0}
        changed = {tp: o for tp, o in positions.items() if self._committed_positions.get(TopicPartition(*tp)) != o}
        self._last_commit = time.monotonic()
        if changed:
            await self._commit(changed)

    async def _commit(self, rows: dict[tuple[str, int], int]) -> None:
        error = await self._coordinator.commit_offsets(
            self.group_id, rows, member_id=self.member_id, generation_id=self.generation_id,
            group_instance_id=self._instance_id,
        )
        if error is not GroupErrorCode.NONE:
            raise CommitFailedError(
                f"group {self.group_id!r}: commit refused ({error.name}): the group rebalanced and these "
                "partitions may be another member's now; the records since the last commit will be read again",
                error.name,
            )
        for (topic, partition), offset in rows.items():
            self._committed_positions[TopicPartition(topic, partition)] = offset

    # -- reading ------------------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ConsumerRecord:
        if not self._started:
            self._check_running()  # raises: not started
        try:
            return await self.getone()
        except ClosedError:
            raise StopAsyncIteration from None

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record of the assigned (or the given) partitions, waiting for one.

        Raises:
            ClosedError: the consumer or its engine stopped.
            GroupError: the consumer lost its group for good (see ``stop``).
        """
        while True:
            got = await self.getmany(*partitions, timeout_ms=None, max_records=1)
            for records in got.values():
                return records[0]

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int | None = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned (or the given) partitions, by partition, waiting up to ``timeout_ms`` for some.

        ``timeout_ms=None`` waits until there are records. Paused partitions give none.

        Raises:
            ClosedError: the consumer or its engine stopped.
            GroupError: the consumer lost its group for good.
        """
        if max_records is not None and (isinstance(max_records, bool) or max_records < 1):
            raise InvalidRecordError(f"max_records must be a positive int or None, got {max_records!r}")
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + max(0, timeout_ms) / 1000
        while True:
            self._check_running()
            got = self._hand_out(partitions, max_records)
            if got:
                return got
            if await self._read_ahead(partitions):
                continue
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return {}
            await self._wait_for_records(partitions, remaining)

    def _check_running(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._stopped:
            raise ClosedError(f"the consumer of group {self.group_id!r} is stopped")
        if not self._started:
            raise ClosedError("the consumer is not started: use 'async with engine.consumer(...)' or await start()")

    def _wanted(self, partitions: tuple[TopicPartition, ...]) -> list[tuple[TopicPartition, _Partition]]:
        if partitions:
            return [(tp, self._assignment[tp]) for tp in partitions if tp in self._assignment]
        return list(self._assignment.items())

    def _hand_out(
        self, partitions: tuple[TopicPartition, ...], max_records: int | None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        wanted = [(tp, s) for tp, s in self._wanted(partitions) if s.buffer and not s.paused]
        if not wanted:
            return {}
        self._turn = (self._turn + 1) % len(wanted)
        wanted = wanted[self._turn :] + wanted[: self._turn]  # each call starts at another partition
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        left = max_records if max_records is not None else -1
        for tp, state in wanted:
            records: list[ConsumerRecord] = []
            buffer = state.buffer
            while buffer and left != 0:
                r = buffer.popleft()
                records.append(ConsumerRecord(r.value, r.key, r.timestamp, r.headers, r.offset, tp.topic,
                                              tp.partition))
                left -= 1
            if records:
                state.position = records[-1].offset + 1
                out[tp] = records
            if left == 0:
                break
        return out

    async def _read_ahead(self, partitions: tuple[TopicPartition, ...]) -> bool:
        """Read the next records of partitions with an empty buffer; whether any arrived."""
        found = False
        for tp, state in self._wanted(partitions):
            if state.buffer or state.paused:
                continue
            if state.position < 0:
                self._reset_position(tp)  # raises: no committed offset and auto_offset_reset "none"
            try:
                plog = self._engine.log(tp.topic, tp.partition)
                if state.position >= plog.log_end_offset:
                    continue
                epoch, position = state.epoch, state.position
                try:
                    got = await plog.read(position, self._fetch_bytes)
                except OffsetOutOfRangeError:
                    if self._reset == "none":
                        raise
                    moved = self._reset_position(tp)
                    log.warning("group %s: %s-%d offset %d is out of range; moving to %d (auto_offset_reset %s)",
                                self.group_id, tp.topic, tp.partition, position, moved, self._reset)
                    if self._assignment.get(tp) is state and state.epoch == epoch:
                        state.position = moved
                        state.epoch += 1
                    return True
            except (UnknownTopicOrPartitionError, ClosedError) as exc:
                if self._stopped:
                    raise ClosedError("the consumer stopped") from exc
                log.warning("group %s: %s-%d can no longer be read (%s); asking the group to rebalance",
                            self.group_id, tp.topic, tp.partition, exc)
                self._assignment.pop(tp, None)
                self._rebalance.set()
                continue
            # Re-check after the await: a rebalance or a seek meanwhile makes these records stale.
            if self._assignment.get(tp) is not state or state.epoch != epoch or state.buffer:
                continue
            records = [r for r in got.records if r.offset >= position]
            if records:
                state.buffer.extend(records)
                found = True
        return found

    async def _wait_for_records(self, partitions: tuple[TopicPartition, ...], seconds: float | None) -> None:
        """Until an append to a partition waited on, a change of assignment, seek, resume or stop, or ``seconds``."""
        changed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._changed = changed
        waits: list[asyncio.Future[Any]] = [changed]
        for tp, state in self._wanted(partitions):
            if state.paused:
                continue
            with contextlib.suppress(SeglogError):
                plog = self._engine.log(tp.topic, tp.partition)
                waits.append(asyncio.ensure_future(plog.wait_for_append(state.position)))
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self._changed is changed:
                self._changed = None
            for wait in waits[1:]:
                wait.cancel()
            await asyncio.gather(*waits[1:], return_exceptions=True)

    def _wake(self) -> None:
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)

    # -- positions --------------------------------------------------------------------------

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member reads now (empty during a rebalance)."""
        return set(self._assignment)

    def subscription(self) -> frozenset[str]:
        return frozenset(self._topics)

    def _state(self, topic: str, partition: int) -> _Partition:
        state = self._assignment.get(TopicPartition(topic, partition))
        if state is None:
            mine = ", ".join(f"{t}-{p}" for t, p in sorted(self._assignment)) or "none"
            raise InvalidRecordError(
                f"{topic}-{partition} is not assigned to this consumer of group {self.group_id!r} "
                f"(its partitions: {mine}); seek in a listener's on_partitions_assigned to set a start"
            )
        return state

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Read ``topic``/``partition`` from ``offset`` next (committed with the next commit).

        Raises:
            InvalidRecordError: the partition is not assigned to this member, or a bad offset.
        """
        validate_offset(offset, "offset")
        state = self._state(topic, partition)
        state.position = offset
        state.buffer.clear()
        state.epoch += 1
        self._wake()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            self.seek(tp.topic, tp.partition, self._engine.log(tp.topic, tp.partition).log_start_offset)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            self.seek(tp.topic, tp.partition, self._engine.log(tp.topic, tp.partition).log_end_offset)

    def seek_to_committed(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self._assignment):
            committed = self._coordinator.committed(self.group_id, tp.topic, tp.partition)
            self.seek(tp.topic, tp.partition, committed[0] if committed is not None else self._reset_position(tp))

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record this member hands out from ``tp``."""
        return self._state(tp.topic, tp.partition).position

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp`` (any partition, assigned or not), or ``None``."""
        found = self._coordinator.committed(self.group_id, tp.topic, tp.partition)
        return None if found is None else found[0]

    def highwater(self, tp: TopicPartition) -> int:
        """The log end offset of ``tp`` (Kafka's high watermark)."""
        return self._engine.log(tp.topic, tp.partition).high_watermark

    def pause(self, *partitions: TopicPartition) -> None:
        """Hand out no records of ``partitions`` until :meth:`resume` (they stay assigned)."""
        for tp in partitions:
            self._state(tp.topic, tp.partition).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            state = self._assignment.get(tp)
            if state is not None:
                state.paused = False
        self._wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._assignment.items() if state.paused}


def _pid_host() -> str:
    return f"{CLIENT_HOST} (pid {os.getpid()})"
