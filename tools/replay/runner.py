"""The replay runner: drives a plan against an engine and measures what happened.

One asyncio task per producer stream runs its steps in order, each at its
absolute deadline (:class:`seglog.tools.replay.pacing.Pacer`). A produce step calls
``append`` for each of its batches at that moment, without waiting for the
producer's earlier appends (up to ``MAX_IN_FLIGHT_STEPS`` unacknowledged, like
a Kafka producer); appends to one partition are written in call order, so a
producer's order holds. A fetch step first waits for the producer's own
appends and for the produce steps of others it depends on (see
:mod:`seglog.tools.replay.plan`), then calls ``read`` or ``offset_for_timestamp``.
Optional tailing consumers (``subscribe``) split the partitions round robin
and timestamp every record they receive; end-to-end latency is receive time
minus the send time of the batch that carried it, joined after the run by
offset. Every send's start is compared with its intended time (schedule lag),
so a slow engine shows up as lag instead of silently turning the timed replay
into a closed loop (coordinated omission); ``append_corrected`` is completion
minus *intended* time, the latency a client on the recorded schedule would
have seen, and ``timer_lateness`` is the pacer's own precision.

After the run the log is read back through the public API: each partition
must hold exactly the planned records (count and checksum), each record the
content acknowledged at its offset, and each producer's records in its order.

Uses only ``engine``'s public API (``Record``, ``errors`` and the duck-typed
``Engine``/``PartitionLog`` methods of docs/API.md), plus a file-system listing
of the log directory for the storage figures.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import functools
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from seglog.engine import Record, errors, offline
from seglog.tools.replay.format import OP_FETCH
from seglog.tools.replay.pacing import Pacer
from seglog.tools.replay.plan import (
    Batch,
    FetchStep,
    ProduceStep,
    RecordSpec,
    ReplayPlan,
    Stream,
    TopicPartition,
    combine_checksum,
    record_digest,
)
from seglog.tools.replay.stats import Latency, Throughput, throughput_interval_ns

# Time between starting the tasks and the first intended send, so that the first
# sends are not late only because dozens of tasks were still being created.
START_LEAD_NS: Final = 20_000_000
# GIL switch interval during a paced replay (CPython's default is 5 ms). The pacer's
# spin keeps the loop thread busy; a thread that wants the GIL (the engine's file
# writes return through one) waits for the interval before it may take it, which
# shows up as append latency and delayed acknowledgements. Restored afterwards.
PACED_SWITCH_INTERVAL_S: Final = 0.001
# Unacknowledged steps per producer, Kafka's max.in.flight.requests.per.connection default (5).
MAX_IN_FLIGHT_STEPS: Final = 5
# Read size of the verification pass (the engine returns at least one record anyway).
VERIFY_READ_BYTES: Final = 1 << 20
# Kafka ListOffsets sentinels accepted as a recorded fetch offset.
EARLIEST_OFFSET: Final = -2
LATEST_OFFSET: Final = -1
# Most error messages kept verbatim in the report (the counts by type are complete).
MAX_ERROR_SAMPLES: Final = 20

class PartitionLogLike(Protocol):
    """The part of ``PartitionLog`` a replay uses (docs/API.md)."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    async def append(self, records: list[Record]) -> Any: ...
    async def read(self, offset: int, max_bytes: int = ...) -> Any: ...
    async def offset_for_timestamp(self, timestamp: int) -> Any: ...
    def subscribe(self, start_offset: int = ...) -> AsyncIterator[Record]: ...


class EngineLike(Protocol):
    """The part of ``Engine`` a replay uses (docs/API.md)."""

    async def create_topic(self, name: str, partitions: int = ..., config: Any = ...) -> Any: ...
    def topics(self) -> Iterable[str]: ...
    def log(self, topic: str, partition: int) -> Any: ...


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay. ``speed=None`` is as fast as possible; ``consumers`` tailing consumers."""

    speed: float | None = 1.0
    consumers: int = 0
    verify: bool = True
    # How long tailing consumers may take to catch up after the last send.
    drain_timeout_s: float = 10.0
    # How long a fetch waits for the produce steps it depends on before going ahead.
    dependency_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.speed is not None and not self.speed > 0:
            raise ValueError(f"speed must be > 0 or None (max), got {self.speed}")
        if self.consumers < 0:
            raise ValueError(f"consumers must be >= 0, got {self.consumers}")


@dataclass(slots=True)
class PartitionCheck:
    """Verification of one partition after the replay."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    expected_records: int
    actual_records: int
    expected_checksum: int
    actual_checksum: int
    content_mismatches: int = 0
    out_of_order: int = 0

    @property
    def ok(self) -> bool:
        return (
            self.expected_records == self.actual_records
            and self.expected_checksum == self.actual_checksum
            and self.content_mismatches == 0
            and self.out_of_order == 0
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "offsets": [self.start_offset, self.end_offset],
            "expected_records": self.expected_records,
            "actual_records": self.actual_records,
            "expected_checksum": f"{self.expected_checksum:016x}",
            "actual_checksum": f"{self.actual_checksum:016x}",
            "content_mismatches": self.content_mismatches,
            "out_of_order": self.out_of_order,
            "ok": self.ok,
        }


@dataclass(slots=True)
class _SentBatch:
    tp: TopicPartition
    first_offset: int
    last_offset: int
    send_ns: int
    producer: str
    records: list[RecordSpec]


@dataclass(slots=True)
class ReplayMetrics:
    """Everything a replay measured; :mod:`seglog.tools.replay.report` turns it into the report."""

    speed: float | None
    throughput: Throughput
    append: Latency = field(default_factory=Latency)
    append_corrected: Latency = field(default_factory=Latency)
    fetch: Latency = field(default_factory=Latency)
    fetch_time: Latency = field(default_factory=Latency)
    end_to_end: Latency = field(default_factory=Latency)
    schedule_lag: Latency = field(default_factory=Latency)
    interarrival_error: Latency = field(default_factory=Latency)
    # How late the pacer woke for each step: the replay tool's own precision, without
    # the wait behind the producer's previous append that schedule_lag also holds.
    timer_lateness: Latency = field(default_factory=Latency)
    sent_records: int = 0
    acked_records: int = 0
    failed_records: int = 0
    acked_bytes: int = 0
    batches: int = 0
    fetches: int = 0
    fetched_records: int = 0
    consumed_records: int = 0
    reordered: int = 0
    dependency_waits: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    duration_ns: int = 0
    started_unix_s: float = 0.0
    topics_created: list[str] = field(default_factory=list)
    per_partition_acked: Counter[TopicPartition] = field(default_factory=Counter)
    checks: list[PartitionCheck] = field(default_factory=list)
    verified: bool | None = None

    def error(self, kind: str, message: str) -> None:
        self.errors[kind] += 1
        if len(self.error_samples) < MAX_ERROR_SAMPLES:
            self.error_samples.append(f"{kind}: {message}")


async def ensure_topics(engine: EngineLike, partitions: dict[str, int]) -> list[str]:
    """Create the workload's topics that do not exist; returns the names created.

    Raises:
        tools.replay.format.WorkloadError: an existing topic has fewer partitions than the workload uses.
    """
    from seglog.tools.replay.format import Finding, WorkloadError

    existing = set(engine.topics())
    created = []
    for name, n in sorted(partitions.items()):
        if name in existing:
            have = count_partitions(engine, name)
            if have < n:
                raise WorkloadError(
                    "<log dir>",
                    [Finding(None, "partition", f"topic {name!r} exists with {have} partition(s); "
                                                f"the workload writes {n}: replay into a fresh --log-dir")],
                )
            continue
        try:
            await engine.create_topic(name, partitions=n)
        except errors.TopicExistsError:
            continue  # created concurrently by someone else; the check above applies next time
        created.append(name)
    return created


def count_partitions(engine: EngineLike, topic: str, limit: int = 1 << 16) -> int:
    """Number of partitions of an existing topic, found by asking for each in turn."""
    n = 0
    while n < limit:
        try:
            engine.log(topic, n)
        except errors.UnknownTopicOrPartitionError:
            break
        n += 1
    return n


class Replayer:
    """Runs one plan against an open engine and collects :class:`ReplayMetrics`.

    Concurrency: every task it starts (one per producer, one per append, one
    per tailing consumer's partition) runs on the caller's event loop; no
    threads of its own. While a paced run lasts it lowers the process's GIL
    switch interval (restored after). Not reusable: one :meth:`run` per instance.
    """

    def __init__(
        self,
        engine: EngineLike,
        plan: ReplayPlan,
        options: ReplayOptions,
        *,
        progress: Callable[[int], None] | None = None,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.options = options
        self.progress = progress
        self.clock_ns = clock_ns
        self.pacer = Pacer(options.speed, clock_ns=clock_ns)
        expected_s = plan.span_ns / 1e9 / options.speed if options.speed else 2.0
        self.metrics = ReplayMetrics(options.speed, Throughput(throughput_interval_ns(expected_s)))
        self._logs: dict[TopicPartition, PartitionLogLike] = {}
        self._start_end: dict[TopicPartition, int] = {}
        self._sent: list[_SentBatch] = []
        self._step_times: list[tuple[int, int]] = []  # (deadline, start) of every paced step
        self._done_steps: dict[str, int] = {s.producer: 0 for s in plan.streams}
        self._pending_done: dict[str, set[int]] = {s.producer: set() for s in plan.streams}
        self._progress = asyncio.Event()  # replaced after each wake-up: a broadcast to waiting fetches
        self._waiting = 0
        self._last_send: dict[tuple[str, TopicPartition | None], tuple[int, int]] = {}
        self._received: dict[TopicPartition, list[tuple[int, int]]] = {}
        self._consumed_to: dict[TopicPartition, int] = {}

    async def run(self) -> ReplayMetrics:
        """Create topics, replay every stream, drain consumers, verify. Returns the metrics.

        Raises:
            tools.replay.format.WorkloadError: an existing topic is too small for the workload.
            errors.SeglogError: the engine refused to create a topic or to open a partition.
        """
        m = self.metrics
        m.started_unix_s = time.time()
        m.topics_created = await ensure_topics(self.engine, self.plan.partitions)
        for tp in self.plan.topic_partitions:
            log = self.engine.log(*tp)
            self._logs[tp] = log
            self._start_end[tp] = log.log_end_offset
        consumers = self._start_consumers()
        switch_interval = sys.getswitchinterval()
        if self.pacer.paced:
            sys.setswitchinterval(min(switch_interval, PACED_SWITCH_INTERVAL_S))
        origin = self.pacer.start(START_LEAD_NS)
        try:
            async with asyncio.TaskGroup() as tg:
                for stream in self.plan.streams:
                    tg.create_task(self._run_stream(stream), name=f"replay:{stream.producer}")
            m.duration_ns = self.clock_ns() - origin
            await self._drain(consumers)
        finally:
            sys.setswitchinterval(switch_interval)
            for task in consumers:
                task.cancel()
            await asyncio.gather(*consumers, return_exceptions=True)
        self._join_end_to_end()
        self._count_reordered()
        if self.options.verify:
            await self._verify()
        return m

    # ------------------------------------------------------------------ producers

    async def _run_stream(self, stream: Stream) -> None:
        """Dispatch a producer's steps at their deadlines.

        Like a Kafka producer (``max.in.flight.requests.per.connection=5``), a
        producer does not wait for one append to be acknowledged before it
        sends the next: each step's appends are called at the step's deadline,
        in the producer's order, and up to ``MAX_IN_FLIGHT_STEPS`` steps may be
        unacknowledged. The order holds because ``PartitionLog.append`` queues
        a batch when it is called, so calls made in order are written in order
        (the verification checks it). A fetch step first waits for all of the
        producer's own appends (a session reads its own writes), then for the
        other producers' steps it depends on.
        """
        pacer, producer = self.pacer, stream.producer
        in_flight: collections.deque[asyncio.Task[None]] = collections.deque()
        try:
            for n, step in enumerate(stream.steps):
                deadline = pacer.deadline_ns(step.due_ns)
                woke = await pacer.wait_until(deadline)
                if pacer.paced:
                    self.metrics.timer_lateness.record_ns(woke - deadline)
                if isinstance(step, ProduceStep):
                    while len(in_flight) >= MAX_IN_FLIGHT_STEPS:
                        await in_flight.popleft()
                    in_flight.append(asyncio.create_task(self._send_step(step, producer, n, deadline)))
                else:
                    while in_flight:
                        await in_flight.popleft()
                    if step.deps:
                        await self._wait_for(step.deps)
                    self._note_send(producer, None, deadline)
                    await self._fetch(step)
                    self._step_done(producer, n)
                if self.progress is not None:
                    self.progress(step.rows)
            while in_flight:
                await in_flight.popleft()
        finally:
            for task in in_flight:  # only when cancelled or failing: do not leave appends behind
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    def _note_send(self, producer: str, tp: TopicPartition | None, deadline: int) -> None:
        """Schedule lag and inter-arrival error of one send (per producer and partition; fetches apart)."""
        if not self.pacer.paced:
            return
        start = self.clock_ns()
        m = self.metrics
        m.schedule_lag.record_ns(start - deadline)
        self._step_times.append((deadline, start))
        key = (producer, tp)
        prev = self._last_send.get(key)
        if prev is not None:
            m.interarrival_error.record_ns(abs((start - prev[1]) - (deadline - prev[0])))
        self._last_send[key] = (deadline, start)

    def _step_done(self, producer: str, n: int) -> None:
        """Record that step ``n`` of ``producer`` finished; wake fetches waiting for it."""
        pending = self._pending_done[producer]
        pending.add(n)
        done = self._done_steps[producer]
        while done in pending:  # steps finish out of order across partitions; count the finished prefix
            pending.discard(done)
            done += 1
        self._done_steps[producer] = done
        if self._waiting:
            event, self._progress = self._progress, asyncio.Event()
            event.set()

    async def _wait_for(self, deps: Sequence[tuple[str, int]]) -> bool:
        """Wait until the producers in ``deps`` finished those steps; returns whether it had to wait."""
        done = self._done_steps

        def ready() -> bool:
            return all(done[p] > idx for p, idx in deps)

        if ready():
            return False
        self.metrics.dependency_waits += 1
        self._waiting += 1
        try:
            async with asyncio.timeout(self.options.dependency_timeout_s):
                while not ready():
                    await self._progress.wait()
        except TimeoutError:
            self.metrics.error("DependencyTimeout", f"a fetch waited {self.options.dependency_timeout_s} s "
                                                    "for earlier produce steps and went ahead")
        finally:
            self._waiting -= 1
        return True

    async def _send_step(self, step: ProduceStep, producer: str, n: int, deadline: int) -> None:
        """Call ``append`` for every batch of the step now, in order; then collect the results.

        The calls happen in this task's first run, before its first ``await``,
        so the steps of one producer reach the engine in dispatch order.
        """
        m = self.metrics
        calls: list[tuple[Batch, int, asyncio.Future[Any]]] = []
        for chain in step.chains:
            tp = (chain[0].topic, chain[0].partition)
            log = self._logs[tp]
            self._note_send(producer, tp, deadline)
            for batch in chain:
                records = [
                    Record(value=r.value, key=r.key, timestamp=r.timestamp_ms, headers=r.headers)
                    for r in batch.records
                ]
                m.sent_records += len(records)
                t0 = self.clock_ns()
                task = asyncio.ensure_future(log.append(records))
                task.add_done_callback(functools.partial(self._appended, batch, producer, t0, deadline))
                calls.append((batch, t0, task))
        try:
            await asyncio.gather(*(call for _, _, call in calls), return_exceptions=True)
        finally:
            self._step_done(producer, n)
        for _, _, call in calls:
            exc = None if call.cancelled() else call.exception()
            if exc is not None and not isinstance(exc, errors.SeglogError):
                raise exc  # a bug, not a refusal by the engine: stop the replay

    def _appended(self, batch: Batch, producer: str, t0: int, deadline: int, fut: asyncio.Future[Any]) -> None:
        """Done-callback of one append: latency, throughput, offsets; a refusal is counted by type."""
        t1 = self.clock_ns()
        if fut.cancelled():
            return
        m = self.metrics
        n = len(batch.records)
        exc = fut.exception()
        if exc is not None:
            if isinstance(exc, errors.SeglogError):
                m.failed_records += n
                m.error(type(exc).__name__, str(exc))
            return
        res = fut.result()
        tp = (batch.topic, batch.partition)
        m.batches += 1
        m.acked_records += n
        m.acked_bytes += batch.size_bytes
        m.per_partition_acked[tp] += n
        m.append.record_ns(t1 - t0)
        if self.pacer.paced:
            m.append_corrected.record_ns(t1 - deadline)
        m.throughput.add(t1 - self.pacer.origin_ns, n, batch.size_bytes)
        self._sent.append(_SentBatch(tp, res.first_offset, res.last_offset, t0, producer, batch.records))

    async def _fetch(self, step: FetchStep) -> None:
        m = self.metrics
        log = self._logs[(step.topic, step.partition)]
        m.fetches += 1
        t0 = self.clock_ns()
        try:
            if step.op == OP_FETCH:
                assert step.offset is not None  # the validator requires it
                offset = step.offset
                if offset == EARLIEST_OFFSET:
                    offset = log.log_start_offset
                elif offset == LATEST_OFFSET:
                    offset = log.log_end_offset
                got = await log.read(offset, max_bytes=step.max_bytes)
                m.fetch.record_ns(self.clock_ns() - t0)
                m.fetched_records += len(got.records)
            else:
                assert step.timestamp_ms is not None  # the validator requires it
                await log.offset_for_timestamp(step.timestamp_ms)
                m.fetch_time.record_ns(self.clock_ns() - t0)
        except errors.SeglogError as exc:
            m.error(type(exc).__name__, f"row {step.row} ({step.op} {step.topic}-{step.partition}): {exc}")

    # ------------------------------------------------------------------ consumers

    def _start_consumers(self) -> list[asyncio.Task[None]]:
        n = self.options.consumers
        if n == 0:
            return []
        tasks = []
        for i, tp in enumerate(self.plan.topic_partitions):
            self._received[tp] = []
            self._consumed_to[tp] = self._start_end[tp]
            tasks.append(asyncio.create_task(self._consume(tp), name=f"consumer-{i % n}:{tp[0]}-{tp[1]}"))
        return tasks

    async def _consume(self, tp: TopicPartition) -> None:
        received = self._received[tp]
        it = self._logs[tp].subscribe(start_offset=self._start_end[tp])
        try:
            async for rec in it:
                received.append((rec.offset, self.clock_ns()))
                self._consumed_to[tp] = rec.offset + 1
        finally:
            aclose: Callable[[], Awaitable[None]] | None = getattr(it, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _drain(self, consumers: list[asyncio.Task[None]]) -> None:
        if not consumers:
            return
        ends = {tp: log.log_end_offset for tp, log in self._logs.items()}
        limit = self.clock_ns() + int(self.options.drain_timeout_s * 1e9)
        while any(self._consumed_to[tp] < end for tp, end in ends.items()):
            if self.clock_ns() > limit:
                behind = [f"{t}-{p}" for (t, p), end in ends.items() if self._consumed_to[(t, p)] < end]
                self.metrics.error("ConsumerDrainTimeout",
                                   f"consumers still behind after {self.options.drain_timeout_s} s on "
                                   + ", ".join(behind[:5]))
                break
            if any(t.done() for t in consumers):
                for t in consumers:
                    if t.done() and not t.cancelled() and (exc := t.exception()) is not None:
                        self.metrics.error(type(exc).__name__, f"tailing consumer failed: {exc}")
                break
            await asyncio.sleep(0.005)
        self.metrics.consumed_records = sum(len(v) for v in self._received.values())

    def _join_end_to_end(self) -> None:
        by_tp: dict[TopicPartition, list[_SentBatch]] = {}
        for b in self._sent:
            by_tp.setdefault(b.tp, []).append(b)
        for tp, received in self._received.items():
            batches = sorted(by_tp.get(tp, []), key=lambda b: b.first_offset)
            firsts = [b.first_offset for b in batches]
            for offset, at in received:
                k = bisect.bisect_right(firsts, offset) - 1
                if k >= 0 and batches[k].first_offset <= offset <= batches[k].last_offset:
                    self.metrics.end_to_end.record_ns(at - batches[k].send_ns)

    def _count_reordered(self) -> None:
        """Steps that started before a step intended strictly earlier (paced runs only)."""
        times = sorted(self._step_times)
        latest_start = None
        latest_deadline = None
        count = 0
        for deadline, start in times:
            if latest_start is not None and latest_deadline is not None and deadline > latest_deadline \
                    and start < latest_start:
                count += 1
            if latest_start is None or start > latest_start:
                latest_start, latest_deadline = start, deadline
        self.metrics.reordered = count

    # ------------------------------------------------------------------ verification

    async def _verify(self) -> None:
        sent_at: dict[TopicPartition, dict[int, tuple[str, RecordSpec]]] = {}
        collisions: Counter[TopicPartition] = Counter()
        for b in self._sent:
            slots = sent_at.setdefault(b.tp, {})
            for i, spec in enumerate(b.records):
                if b.first_offset + i in slots:
                    collisions[b.tp] += 1  # two appends acknowledged with the same offset
                slots[b.first_offset + i] = (b.producer, spec)
        checks = []
        for tp, exp in self.plan.expected.items():
            log = self._logs[tp]
            start, end = self._start_end[tp], log.log_end_offset
            check = PartitionCheck(tp[0], tp[1], start, end, exp.records, 0, exp.checksum, 0,
                                   content_mismatches=collisions[tp])
            slots = sent_at.get(tp, {})
            last_position: dict[str, int] = {}
            async for rec in _read_range(log, start, end):
                check.actual_records += 1
                sent = slots.get(rec.offset)
                ts = rec.timestamp if sent is None or sent[1].timestamp_ms is not None else None
                digest = record_digest(rec.key, rec.value, ts, tuple(rec.headers))
                check.actual_checksum = combine_checksum(check.actual_checksum, digest)
                if sent is None:
                    check.content_mismatches += 1
                    continue
                producer, spec = sent
                if digest != record_digest(spec.key, spec.value, spec.timestamp_ms, spec.headers):
                    check.content_mismatches += 1
                if last_position.get(producer, -1) > spec.position:
                    check.out_of_order += 1
                last_position[producer] = spec.position
            checks.append(check)
        self.metrics.checks = checks
        self.metrics.verified = all(c.ok for c in checks)


async def _read_range(log: PartitionLogLike, start: int, end: int) -> AsyncIterator[Record]:
    """Records with ``start <= offset < end``, read with the public ``read``."""
    offset = start
    while offset < end:
        got = await log.read(offset, max_bytes=VERIFY_READ_BYTES)
        if not got.records:
            return
        for rec in got.records:
            if rec.offset >= end:
                return
            if rec.offset >= offset:
                yield rec
        nxt = got.next_offset
        offset = nxt if nxt > offset else got.records[-1].offset + 1


# ---------------------------------------------------------------------- storage


@dataclass(frozen=True, slots=True)
class StorageSnapshot:
    """Segment files and bytes of the partitions a replay touches."""

    segments: dict[str, int]
    log_bytes: int
    allocated_bytes: int

    def to_json(self) -> dict[str, int]:
        return {
            "segments": sum(self.segments.values()),
            "log_bytes": self.log_bytes,
            "bytes_on_disk": self.allocated_bytes,
        }


def storage_snapshot(log_dir: str | os.PathLike[str], topic_partitions: Iterable[TopicPartition]) -> StorageSnapshot:
    """Count ``.log`` segments and bytes under ``<log_dir>/<topic>-<partition>/`` (docs/OPERATIONS.md §1).

    ``allocated_bytes`` counts allocated blocks, so a preallocated, sparse index
    file weighs what it really uses.
    """
    segments: dict[str, int] = {}
    log_bytes = allocated = 0
    root = Path(log_dir)
    for topic, partition in topic_partitions:
        name = f"{topic}-{partition}"
        d = root / name
        if not d.is_dir():
            segments[name] = 0
            continue
        listed = offline.list_segments(d)  # the engine's own listing of the segments
        segments[name] = len(listed)
        log_bytes += sum(s.size_bytes for s in listed)
        for entry in os.scandir(d):  # every file's allocated blocks, indexes and leftovers included
            if entry.is_file(follow_symlinks=False):
                allocated += entry.stat(follow_symlinks=False).st_blocks * 512
    return StorageSnapshot(segments, log_bytes, allocated)


def segments_rolled(before: StorageSnapshot, after: StorageSnapshot) -> int:
    """New segments during the run; a partition's first segment is not a roll."""
    rolled = 0
    for name, count in after.segments.items():
        rolled += max(0, count - max(before.segments.get(name, 0), 1))
    return rolled


@dataclass(slots=True)
class ReplayOutcome:
    """A finished replay: metrics plus storage figures. ``ok`` decides the exit code."""

    metrics: ReplayMetrics
    storage_before: StorageSnapshot
    storage_after: StorageSnapshot

    @property
    def ok(self) -> bool:
        return self.metrics.verified is not False and not self.metrics.errors


async def replay_into(
    log_dir: str | os.PathLike[str],
    plan: ReplayPlan,
    options: ReplayOptions,
    *,
    config: Any = None,
    progress: Callable[[int], None] | None = None,
) -> ReplayOutcome:
    """Open (or create) the log directory, replay ``plan`` into it, close it.

    Storage figures are taken before opening and after closing (when the
    engine has trimmed its preallocated indexes).

    Raises:
        errors.SeglogError: the engine cannot open the directory (locked, corrupt) or refuses a topic.
        tools.replay.format.WorkloadError: an existing topic is too small for the workload.
    """
    from seglog.engine import Engine, LogConfig

    before = storage_snapshot(log_dir, plan.topic_partitions)
    async with Engine.open(log_dir, config=config if config is not None else LogConfig()) as engine:
        metrics = await Replayer(engine, plan, options, progress=progress).run()
    after = storage_snapshot(log_dir, plan.topic_partitions)
    return ReplayOutcome(metrics, before, after)
