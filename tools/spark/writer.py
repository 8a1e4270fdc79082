"""The seglog source's batch writer: tasks stage encoded batches, the driver appends them at commit.

Protocol (nothing becomes visible before every task succeeded):

1. ``DataSource.writer()`` (driver) picks a job id and reads the partition
   count of every existing topic (rows without a ``partition`` are placed by
   key with Kafka's murmur2 partitioner, or round-robin without a key).
2. Each task (``write()``) encodes its rows into record batches with
   base offset 0 (``seglog.segments.batch.encode_batch``) and appends them to
   ``<log_dir>/.staging/<job>/<topic>-<partition>.<task>.<attempt>``, one file per
   topic-partition it saw, then returns the list of its files. A task that
   fails, or an attempt Spark retries, leaves a file no message names.
3. ``commit(messages)`` (driver) opens the ``Engine`` on the directory,
   creates missing topics, and, for ``overwrite``, deletes and recreates each
   written topic with its partition count and config overrides; then appends
   every named file in (topic, partition, task) order with
   ``PartitionLog.append_encoded``, which validates each batch and gives it its
   offsets; finally removes the job's staging directory.
4. ``abort(messages)`` removes the staging directory.

Within a task rows keep their order per topic-partition; the tasks of one
topic-partition are appended in task order, so ``repartition("topic",
"partition")`` (what ``seglog pipeline import`` does) gives each partition one
task and keeps the DataFrame's order. The commit holds the directory's lock
(an ``Engine`` is opened), so writes go to a directory no other Engine has open.

Must not import: ``seglog.tools.cli``. Imports pyspark and pyarrow (the ``spark`` extra).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from seglog.engine import errors, offline
from seglog.engine.names import validate_partition, validate_topic
from seglog.engine.partitioner import partition_for_key
from seglog.engine.runner import run
from seglog.segments.batch import HEADER_SIZE, TimestampType, encode_batch, read_header
from seglog.segments.records import Record
from seglog.tools.spark.arrow import batch_rows
from seglog.tools.spark.options import OptionError

__all__ = ["STAGING_DIR", "SeglogCommitMessage", "SeglogWriter", "StagedFile", "staged_chunks"]

STAGING_DIR: Final = ".staging"  # under the log directory; the engine ignores it (not a <topic>-<n> name)
# A batch closes at whichever comes first; 256 KiB keeps batches well under Kafka's default 1 MiB
# max_message_bytes, and 1000 records is what replay's plan uses too.
BATCH_RECORDS: Final = 1000
BATCH_BYTES: Final = 256 * 1024
APPEND_CHUNK_BYTES: Final = 8 << 20  # bytes of whole batches handed to one append_encoded call


@dataclass(frozen=True)
class StagedFile:
    """One staged file: whole encoded batches of one topic-partition, written by one task attempt."""

    topic: str
    partition: int
    task: int
    path: str
    records: int


@dataclass
class SeglogCommitMessage(WriterCommitMessage):
    """What one successful task staged."""

    files: list[StagedFile]


def staged_chunks(path: str, chunk_bytes: int = APPEND_CHUNK_BYTES) -> Iterator[bytes]:
    """The staged file's bytes in pieces of whole batches (at least one batch, at most about ``chunk_bytes``).

    Raises:
        CorruptRecordError: the file ends inside a batch (a staged file is written whole, so it is damaged).
    """
    data = Path(path).read_bytes()
    start = position = 0
    while position < len(data):
        size = read_header(data, position).size if len(data) - position >= HEADER_SIZE else len(data) + 1
        if position + size > len(data):
            raise errors.CorruptRecordError(f"{path}: staged batch at {position} is cut short")
        if position > start and position + size - start > chunk_bytes:
            yield data[start:position]
            start = position
        position += size
    if position > start:
        yield data[start:position]


class _Stager:
    """Per-task state: open staged files and the records waiting for their batch."""

    def __init__(self, directory: Path, task: int, attempt: int) -> None:
        self.directory, self.task, self.attempt = directory, task, attempt
        self.pending: dict[tuple[str, int], list[Record]] = {}
        self.pending_bytes: dict[tuple[str, int], int] = {}
        self.files: dict[tuple[str, int], Any] = {}
        self.counts: dict[tuple[str, int], int] = {}
        self.now_ms = int(time.time() * 1000)

    def add(self, tp: tuple[str, int], record: Record) -> None:
        batch = self.pending.setdefault(tp, [])
        batch.append(record)
        size = self.pending_bytes.get(tp, 0) + len(record.value or b"") + len(record.key or b"") + 16
        self.pending_bytes[tp] = size
        if len(batch) >= BATCH_RECORDS or size >= BATCH_BYTES:
            self.flush(tp)

    def flush(self, tp: tuple[str, int]) -> None:
        batch = self.pending.pop(tp, None)
        self.pending_bytes.pop(tp, None)
        if not batch:
            return
        data = encode_batch(0, batch, timestamp_type=TimestampType.CREATE_TIME, now_ms=self.now_ms)
        f = self.files.get(tp)
        if f is None:
            name = f"{tp[0]}-{tp[1]}.{self.task}.{self.attempt}"
            f = self.files[tp] = open(self.directory / name, "wb")  # noqa: SIM115 - closed in finish()
        f.write(data)
        self.counts[tp] = self.counts.get(tp, 0) + len(batch)

    def finish(self) -> list[StagedFile]:
        for tp in list(self.pending):
            self.flush(tp)
        out = []
        for (topic, partition), f in sorted(self.files.items()):
            f.flush()
            os.fsync(f.fileno())
            f.close()
            out.append(StagedFile(topic, partition, self.task, f.name, self.counts[(topic, partition)]))
        return out

    def close(self) -> None:
        for f in self.files.values():
            f.close()


class SeglogWriter(DataSourceArrowWriter):
    """``df.write.format("seglog").mode("append"|"overwrite").save(log_dir)``.

    Options: ``topic`` (for rows without a ``topic`` column, or to override
    it, as Kafka's sink), ``partitions`` (partition count of topics the write
    creates, default 1; at least the highest partition written + 1).
    """

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        path = options.get("path")
        if not path:
            raise OptionError("no log directory: use .save('<log_dir>') or .option('path', '<log_dir>')")
        names = set(schema.fieldNames())
        self.topic_option = options.get("topic")
        if "topic" not in names and not self.topic_option:
            raise OptionError("the DataFrame has no 'topic' column and no topic option is set")
        if "value" not in names:
            raise OptionError("the DataFrame has no 'value' column (binary or string)")
        try:
            self.new_partitions = int(options.get("partitions", "1"))
        except ValueError:
            raise OptionError(f"option partitions={options.get('partitions')!r} is not an integer") from None
        if self.new_partitions < 1:
            raise OptionError(f"option partitions={self.new_partitions} must be at least 1")
        self.path = os.path.abspath(path)  # resolved on the driver: executors run in a directory of their own
        self.overwrite = overwrite
        self.job = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"
        counts: dict[str, int] = {}
        for topic, partition in offline.list_partitions(self.path) if os.path.isdir(self.path) else []:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        self.partition_counts = counts
        # The driver makes the job's staging directory; tasks only create files in it, so a task still
        # running after abort() removed it fails to stage instead of leaving files behind.
        self.staging.mkdir(parents=True, exist_ok=True)

    @property
    def staging(self) -> Path:
        """This job's staging directory."""
        return Path(self.path) / STAGING_DIR / self.job

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SeglogCommitMessage:
        """Encode and stage this task's rows (runs on an executor)."""
        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        stager = _Stager(self.staging, task, attempt)
        round_robin = task
        checked: set[str] = set()  # topic names go into file names: each is validated once, before use
        try:
            for batch in iterator:
                for row_topic, row_partition, key, value, timestamp, headers in batch_rows(batch):
                    topic = self.topic_option or row_topic
                    if topic is None:
                        raise OptionError("a row has a null topic and no topic option is set")
                    if topic not in checked:
                        checked.add(validate_topic(topic))  # InvalidTopicError: no path traversal
                    partition = row_partition if row_partition is None else validate_partition(row_partition)
                    if partition is None:
                        count = self.partition_counts.get(topic, self.new_partitions)
                        if key is not None:
                            partition = partition_for_key(key, count)
                        else:
                            partition, round_robin = round_robin % count, round_robin + 1
                    stager.add((topic, partition), Record(value, key, timestamp, headers))
            return SeglogCommitMessage(stager.finish())
        finally:
            stager.close()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Append every staged file of the successful tasks, then drop the staging directory (driver)."""
        files = sorted(
            (f for m in messages if isinstance(m, SeglogCommitMessage) for f in m.files),
            key=lambda f: (f.topic, f.partition, f.task),
        )
        try:
            run(self._append(files))
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop everything staged; nothing was appended (driver)."""
        shutil.rmtree(self.staging, ignore_errors=True)

    async def _append(self, files: list[StagedFile]) -> None:
        from seglog.engine.engine import Engine

        needed: dict[str, int] = {}
        for f in files:
            needed[f.topic] = max(needed.get(f.topic, self.new_partitions), f.partition + 1)
        async with Engine.open(self.path) as engine:
            existing = set(engine.topics())
            for topic, count in sorted(needed.items()):
                if topic in existing and self.overwrite:
                    overrides = engine.topic_overrides(topic)
                    recreate = max(count, engine.partitions_for(topic))
                    await engine.delete_topic(topic)
                    await engine.create_topic(topic, partitions=recreate, config=overrides or None)
                elif topic not in existing:
                    await engine.create_topic(topic, partitions=count)
                elif engine.partitions_for(topic) < count:
                    raise errors.UnknownTopicOrPartitionError(
                        f"topic {topic!r} has {engine.partitions_for(topic)} partitions; the write has rows for "
                        f"partition {count - 1} (create the topic with more partitions first)"
                    )
            for f in files:
                log = engine.log(f.topic, f.partition)
                for chunk in staged_chunks(f.path):
                    await log.append_encoded(chunk)
