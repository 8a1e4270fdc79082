"""The group store: committed offsets and membership snapshots of every consumer group, in one log.

Offsets committed through ``Engine.commit_offset``, by a library consumer
(``engine.consumer``) and by Kafka clients over the wire (``seglog serve``) all
land here: one store, one truth. Like Kafka's ``__consumer_offsets`` it is a
log of changes, compacted in the background, rather than one file per group:
a commit is one append (and one ``fdatasync``), and commits arriving together
share the write and the ``fdatasync`` (group commit). docs/OPERATIONS.md
("The group store") has the figures behind the choice.

Files::

    <log_dir>/consumer-offsets/offsets.log              the log (format below and in docs/FORMAT.md)
    <log_dir>/consumer-offsets/offsets.log.compacting   a compaction in progress; removed at open
    <log_dir>/consumer-offsets/<base64 group id>.json   the previous format, one file per group: read at
                                                        open, folded into the log by the first writable
                                                        open, then removed

The log is a sequence of frames (part of the on-disk format)::

    int32 length | uint32 CRC-32C of the payload | payload: a msgpack array of length bytes

    [0, 1]                                            header, the first frame: format version 1
    [1, group, [[topic, partition, offset], ...]]     a commit; a row may hold a 4th item, the
                                                      committed metadata string; offset -1 removes
                                                      the partition's commit (a deleted topic)
    [2, group, snapshot]                              the group's membership snapshot (a map), nil: none
    [3, group]                                        the group was deleted: its offsets and snapshot
    [4, group, producer_id, [[topic, partition, offset], ...]]
                                                      a transactional commit (TxnOffsetCommit): pending,
                                                      not visible until its transaction ends
    [5, group, producer_id, committed]                the producer's transaction ended (a marker): its
                                                      pending commits become the group's committed
                                                      offsets (true) or are dropped (false)

Durability: a commit returns once its frame is written and fdatasynced, so it
survives a crash of the process and of the machine. At open the log is read
frame by frame and never trusted: a frame whose length runs past the end of
the file or whose CRC fails ends the log there (a write cut short by a crash;
a writable open truncates it away), except that a damaged frame followed by a
valid one is skipped alone, so one flipped bit costs one commit, not all
later ones. A payload that parses but does not make sense is skipped too.

Compaction rewrites the live state (one commit frame per group holding all its
offsets, one frame per snapshot) into ``offsets.log.compacting`` while commits
go on, appends the frames committed meanwhile, and renames it over the log:
at any instant the log on disk holds every acknowledged commit.

Concurrency: one writer task appends what callers queued, in call order; the
in-memory view changes only after the frame is durable, so a reader never
sees an offset that a crash could take back.

Must not import: ``tools`` or ``server``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from seglog.engine.framestore import (
    COMPACTING_SUFFIX,
    DEFAULT_COMPACT_MIN_BYTES,
    FRAME_HEAD_SIZE,
    HEADER,
    MAX_FRAME_BYTES,
    FrameScan,
    FrameStore,
    encode_frame,
    fsync_dir,
    read_file,
    read_log,
    storage_error,
)
from seglog.engine.framestore import scan_frames as _scan_frames
from seglog.engine.validate import validate_group
from seglog.segments.fileio import FileOps, default_ops

__all__ = [
    "COMPACTING_SUFFIX",
    "DEFAULT_COMPACT_MIN_BYTES",
    "FRAME_HEAD_SIZE",
    "GROUPS_DIR",
    "GroupStore",
    "LOG_FILE",
    "MAX_FRAME_BYTES",
    "StoreImage",
    "encode_frame",
    "read_store",
    "scan_frames",
    "validate_group",
]

log = logging.getLogger("seglog")

GROUPS_DIR: Final = "consumer-offsets"
LOG_FILE: Final = "offsets.log"
FORMAT_VERSION: Final = 1  # part of the on-disk format
GROUP_FILE_VERSION: Final = 1  # the previous format's version (one JSON file per group)
_JSON_SUFFIX: Final = ".json"

# Frame kinds, part of the on-disk format.
COMMIT: Final = 1
SNAPSHOT: Final = 2
DELETE: Final = 3
TXN_COMMIT: Final = 4
TXN_END: Final = 5

# Kafka's offset.metadata.max.bytes: the longest metadata string a commit may carry.
MAX_METADATA_BYTES: Final = 4096

TopicPartition = tuple[str, int]
Snapshot = dict[str, Any]

_MAX_B64_NAME: Final = 200  # the previous format's file names stayed under NAME_MAX, temp suffix included


# -- frames -----------------------------------------------------------------------------------


HEADER_FRAME: Final = encode_frame([HEADER, FORMAT_VERSION])


def commit_frame(group: str, rows: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> bytes:
    out: list[list[Any]] = []
    for (topic, partition), offset in rows.items():
        text = metadata.get((topic, partition), "")
        out.append([topic, partition, offset, text] if text else [topic, partition, offset])
    return encode_frame([COMMIT, group, out])


def scan_frames(data: bytes | memoryview, name: str = LOG_FILE) -> FrameScan:
    """Every valid frame of a group store log's bytes (``seglog.engine.framestore.scan_frames``)."""
    return _scan_frames(data, name)


# -- the in-memory image ----------------------------------------------------------------------


@dataclass(slots=True)
class StoreImage:
    """What a group store holds: offsets, their metadata strings and membership snapshots of every group."""

    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    metadata: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """What was skipped while reading (damaged frames, a torn tail, unreadable files of the old format)."""
    pending: dict[str, dict[int, dict[TopicPartition, PendingOffset]]] = field(default_factory=dict)
    """Transactional commits not yet ended: group -> producer id -> partition -> offset (Kafka's
    ``pendingTransactionalOffsetCommits``)."""
    order: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    """When each committed offset was written (a counter of changes), to tell which of a committed offset
    and a pending one came later."""
    _tick: int = 0

    def apply(self, payload: Any) -> bool:
        """Apply one decoded frame; ``False`` when it does not make sense (it is then ignored)."""
        if not isinstance(payload, list) or not payload or not isinstance(payload[0], int):
            return False
        kind = payload[0]
        if kind == HEADER:
            return len(payload) == 2 and payload[1] == FORMAT_VERSION
        if len(payload) < 2 or not isinstance(payload[1], str) or not payload[1]:
            return False
        group: str = payload[1]
        if kind == COMMIT:
            if len(payload) != 3 or not isinstance(payload[2], list):
                return False
            rows = [_parse_row(row) for row in payload[2]]
            if any(row is None for row in rows):
                return False
            self.commit(group, {r[0]: r[1] for r in rows if r is not None},
                        {r[0]: r[2] for r in rows if r is not None})
            return True
        if kind == SNAPSHOT:
            if len(payload) != 3 or not (payload[2] is None or isinstance(payload[2], dict)):
                return False
            self.set_snapshot(group, payload[2])
            return True
        if kind == DELETE:
            self.delete(group)
            return len(payload) == 2
        if kind == TXN_COMMIT:
            if len(payload) != 4 or not _is_producer_id(payload[2]) or not isinstance(payload[3], list):
                return False
            rows = [_parse_row(row) for row in payload[3]]
            if any(row is None or row[1] < 0 for row in rows):
                return False
            self.txn_commit(group, payload[2], {r[0]: r[1] for r in rows if r is not None},
                            {r[0]: r[2] for r in rows if r is not None})
            return True
        if kind == TXN_END:
            if len(payload) != 4 or not _is_producer_id(payload[2]) or not isinstance(payload[3], bool):
                return False
            self.txn_end(group, payload[2], payload[3])
            return True
        return False

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> None:
        current = self.offsets.setdefault(group, {})
        texts = self.metadata.get(group)
        self._tick += 1
        order = self.order.setdefault(group, {})
        for tp, offset in offsets.items():
            order[tp] = self._tick
            if offset < 0:
                current.pop(tp, None)
                if texts is not None:
                    texts.pop(tp, None)
                continue
            current[tp] = offset
            text = metadata.get(tp, "")
            if text:
                self.metadata.setdefault(group, {})[tp] = text
                texts = self.metadata[group]
            elif texts is not None:
                texts.pop(tp, None)
        if not current:
            del self.offsets[group]
            self.metadata.pop(group, None)

    def set_snapshot(self, group: str, snapshot: Snapshot | None) -> None:
        if snapshot is None:
            self.snapshots.pop(group, None)
        else:
            self.snapshots[group] = snapshot

    def delete(self, group: str) -> bool:
        existed = group in self.offsets
        self.offsets.pop(group, None)
        self.metadata.pop(group, None)
        self.snapshots.pop(group, None)
        self.pending.pop(group, None)
        self.order.pop(group, None)
        return existed

    def txn_commit(
        self, group: str, producer_id: int, offsets: Mapping[TopicPartition, int],
        metadata: Mapping[TopicPartition, str],
    ) -> None:
        """Record a transactional commit of ``producer_id``: pending until :meth:`txn_end`."""
        self._tick += 1
        rows = self.pending.setdefault(group, {}).setdefault(producer_id, {})
        for tp, offset in offsets.items():
            rows[tp] = PendingOffset(offset, metadata.get(tp, ""), self._tick)

    def txn_end(self, group: str, producer_id: int, committed: bool) -> None:
        """End ``producer_id``'s transaction in ``group``: its pending commits become committed, or are dropped.

        A partition committed outside the transaction after the transactional
        commit was written keeps that later offset (Kafka's rule: the later
        write wins).
        """
        by_producer = self.pending.get(group)
        rows = by_producer.pop(producer_id, None) if by_producer is not None else None
        if by_producer is not None and not by_producer:
            del self.pending[group]
        if not rows or not committed:
            return
        order = self.order.get(group, {})
        winners = {tp: row for tp, row in rows.items() if order.get(tp, 0) < row.written}
        if not winners:
            return
        current = self.offsets.setdefault(group, {})
        texts = self.metadata.setdefault(group, {})
        order = self.order.setdefault(group, {})
        for tp, row in winners.items():
            current[tp] = row.offset
            order[tp] = row.written
            if row.metadata:
                texts[tp] = row.metadata
            else:
                texts.pop(tp, None)
        if not texts:
            del self.metadata[group]

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        """The partitions of ``group`` with a transactional commit not yet ended."""
        return {tp for rows in self.pending.get(group, {}).values() for tp in rows}

    def pending_producers(self, group: str) -> list[int]:
        return sorted(self.pending.get(group, {}))

    def frames(self) -> Iterator[bytes]:
        """The live state as frames (what a compaction writes), header first."""
        yield HEADER_FRAME
        for group, offsets in self.offsets.items():
            yield commit_frame(group, offsets, self.metadata.get(group, {}))
        for group, snapshot in self.snapshots.items():
            yield encode_frame([SNAPSHOT, group, snapshot])
        # Pending commits come after the committed offsets: drop the rows a later commit outside the
        # transaction already overrides, so that the order the reread log gives is the one that holds now.
        for group, by_producer in self.pending.items():
            order = self.order.get(group, {})
            for producer_id, rows in by_producer.items():
                live = [
                    [t, p, row.offset, row.metadata] if row.metadata else [t, p, row.offset]
                    for (t, p), row in rows.items()
                    if order.get((t, p), 0) < row.written
                ]
                if live:
                    yield encode_frame([TXN_COMMIT, group, producer_id, live])


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """A transactional commit's offset for one partition, waiting for its transaction to end."""

    offset: int
    metadata: str
    written: int  # when (the image's change counter)


def txn_commit_frame(
    group: str, producer_id: int, rows: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]
) -> bytes:
    out: list[list[Any]] = []
    for (topic, partition), offset in rows.items():
        text = metadata.get((topic, partition), "")
        out.append([topic, partition, offset, text] if text else [topic, partition, offset])
    return encode_frame([TXN_COMMIT, group, producer_id, out])


def _is_producer_id(value: Any) -> bool:
    return type(value) is int and 0 <= value < 2**63


def _parse_row(row: Any) -> tuple[TopicPartition, int, str] | None:
    if not isinstance(row, list) or len(row) not in (3, 4):
        return None
    topic, partition, offset = row[0], row[1], row[2]
    text = row[3] if len(row) == 4 else ""
    if (
        not isinstance(topic, str)
        or not topic
        or type(partition) is not int
        or partition < 0
        or type(offset) is not int
        or offset < -1
        or not isinstance(text, str)
    ):
        return None
    return (topic, partition), offset, text


# -- the previous format (one JSON file per group) ----------------------------------------------


def legacy_group_file_name(group: str) -> str:
    """The previous format's file name of ``group``: its id in URL-safe base64 (SHA-256 when too long)."""
    encoded = base64.urlsafe_b64encode(group.encode("utf-8")).decode("ascii").rstrip("=")
    if len(encoded) > _MAX_B64_NAME:
        encoded = "sha256-" + hashlib.sha256(group.encode("utf-8")).hexdigest()
    return encoded + _JSON_SUFFIX


def is_legacy_group_file(name: str) -> bool:
    return name.endswith(_JSON_SUFFIX) and not name.startswith(".")


def encode_legacy_group_file(group: str, offsets: dict[TopicPartition, int]) -> bytes:
    """A group file of the previous format (tests of the migration use it)."""
    rows = [[topic, partition, offset] for (topic, partition), offset in sorted(offsets.items())]
    return json.dumps({"version": GROUP_FILE_VERSION, "group": group, "offsets": rows}).encode("utf-8")


def decode_legacy_group_file(data: bytes) -> tuple[str, dict[TopicPartition, int]]:
    """Parse a group file of the previous format. Raises ``ValueError`` on anything unexpected."""
    meta = json.loads(data)
    if not isinstance(meta, dict) or meta.get("version") != GROUP_FILE_VERSION:
        raise ValueError("not a version-1 group offsets file")
    group = meta.get("group")
    rows = meta.get("offsets")
    if not isinstance(group, str) or not group or not isinstance(rows, list):
        raise ValueError("missing group or offsets")
    offsets: dict[TopicPartition, int] = {}
    for row in rows:
        if (
            not isinstance(row, list)
            or len(row) != 3
            or not isinstance(row[0], str)
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in row[1:])
        ):
            raise ValueError(f"bad offset row {row!r}")
        offsets[(row[0], row[1])] = row[2]
    return group, offsets


# -- reading a store (blocking; the engine runs it in a thread, the offline tools directly) -------


@dataclass(slots=True)
class _Loaded:
    image: StoreImage
    log_bytes: int  # valid bytes of offsets.log (0: none)
    log_exists: bool
    legacy: list[str]  # names of the previous format's files read


def _load(directory: Path, ops: FileOps) -> _Loaded:
    image = StoreImage()
    legacy: list[str] = []
    try:
        names = sorted(ops.listdir(str(directory)))
    except FileNotFoundError:
        return _Loaded(image, 0, False, legacy)
    except OSError as exc:
        raise storage_error("list", directory, exc) from exc
    # The previous format first: the log, written later, holds anything newer.
    for name in names:
        if not is_legacy_group_file(name):
            continue
        path = directory / name
        try:
            group, offsets = decode_legacy_group_file(read_file(ops, path))
            if legacy_group_file_name(group) != name:
                raise ValueError(f"the file holds group {group!r}, whose file name differs")
        except (OSError, ValueError) as exc:
            image.problems.append(f"{path}: unreadable consumer-group offsets ({exc}); the group starts over")
            continue
        image.commit(group, offsets, {})
        legacy.append(name)
    log_exists, valid = read_log(image, directory / LOG_FILE, ops)
    return _Loaded(image, valid, log_exists, legacy)


def read_store(log_dir: Path) -> StoreImage:
    """The group store of a log directory, read without a lock and without writing (the offline tools).

    Raises:
        StorageError: the store's directory or log cannot be read.
    """
    return _load(log_dir / GROUPS_DIR, default_ops()).image


# -- the store ----------------------------------------------------------------------------------


class GroupStore(FrameStore[StoreImage]):
    """The committed offsets and membership snapshots of every consumer group of one log directory.

    ``await load()`` once, then read with the plain methods (they answer from
    memory) and write with the async ones; ``await close()`` at the end. A
    read-only store (a follower engine) loads and never writes. The machinery
    (durable before visible, group commit, compaction) is ``FrameStore``'s.
    """

    what = "group store"

    def __init__(
        self,
        directory: Path,
        *,
        read_only: bool,
        compact_min_bytes: int = DEFAULT_COMPACT_MIN_BYTES,
        ops: FileOps | None = None,
    ) -> None:
        super().__init__(
            directory, LOG_FILE, StoreImage(), HEADER_FRAME, read_only=read_only,
            compact_min_bytes=compact_min_bytes, ops=ops,
        )
        self._legacy: list[str] = []  # the previous format's files read at load

    # -- open: the previous format is folded in ---------------------------------------------

    def _fresh_image(self) -> StoreImage:
        return StoreImage()

    def _read_blocking(self) -> tuple[StoreImage, bool, int]:
        loaded = _load(self.directory, self.ops)
        self._legacy = loaded.legacy
        return loaded.image, loaded.log_exists, loaded.log_bytes

    def _has_extra_frames(self) -> bool:
        return bool(self._legacy)

    def _extra_frames(self) -> bytes:
        # Fold the previous format's files in: one commit frame per group, durable before they go.
        return b"".join(commit_frame(g, o, {}) for g, o in self._image.offsets.items()) if self._legacy else b""

    def _after_open(self) -> None:
        if not self._legacy:
            return
        ops = self.ops
        for name in self._legacy:
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(str(self.directory / name))
        fsync_dir(ops, self.directory)
        log.info("%s: folded %d group file(s) of the previous format into the log", self.directory,
                 len(self._legacy))
        self._legacy = []

    # -- reads (from memory) --------------------------------------------------------------

    def committed(self, group: str, topic: str, partition: int) -> int | None:
        return self._image.offsets.get(group, {}).get((topic, partition))

    def committed_metadata(self, group: str, topic: str, partition: int) -> str:
        return self._image.metadata.get(group, {}).get((topic, partition), "")

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        return dict(self._image.offsets.get(group, {}))

    def has_offsets(self, group: str) -> bool:
        return group in self._image.offsets

    def groups(self) -> list[str]:
        """Groups with committed offsets, sorted."""
        return sorted(self._image.offsets)

    def snapshot(self, group: str) -> Snapshot | None:
        return self._image.snapshots.get(group)

    def snapshot_groups(self) -> list[str]:
        return sorted(self._image.snapshots)

    # -- writes -------------------------------------------------------------------------

    async def commit(
        self, group: str, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Durably record ``offsets`` (and their metadata strings) as ``group``'s committed offsets.

        Raises:
            StorageError: the write failed; nothing changed.
            ClosedError: the store is closed.
        """
        rows = dict(offsets)
        texts = dict(metadata or {})
        await self._submit(commit_frame(group, rows, texts), lambda: self._image.commit(group, rows, texts))

    async def txn_commit(
        self, group: str, producer_id: int, offsets: Mapping[TopicPartition, int],
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Durably record a transactional commit of ``producer_id``: pending, not visible until :meth:`txn_end`.

        Raises:
            StorageError, ClosedError: as :meth:`commit`.
        """
        rows = dict(offsets)
        texts = dict(metadata or {})
        await self._submit(txn_commit_frame(group, producer_id, rows, texts),
                           lambda: self._image.txn_commit(group, producer_id, rows, texts))

    async def txn_end(self, group: str, producer_id: int, committed: bool) -> None:
        """Durably end ``producer_id``'s transaction in ``group``: its pending commits become visible or go.

        Writes the frame even when nothing is pending (the end of a transaction
        is idempotent; finishing one after a crash writes it again).

        Raises:
            StorageError, ClosedError: as :meth:`commit`.
        """
        await self._submit(encode_frame([TXN_END, group, producer_id, committed]),
                           lambda: self._image.txn_end(group, producer_id, committed))

    def pending_partitions(self, group: str) -> set[TopicPartition]:
        """Partitions of ``group`` with a transactional commit whose transaction has not ended."""
        return self._image.pending_partitions(group)

    def pending_producers(self, group: str) -> list[int]:
        """Producer ids with a transactional commit pending in ``group``."""
        return self._image.pending_producers(group)

    async def delete(self, group: str) -> bool:
        """Forget ``group``'s offsets and snapshot; whether it had offsets.

        Raises:
            StorageError, ClosedError: as :meth:`commit`.
        """
        result: bool = await self._submit(encode_frame([DELETE, group]), lambda: self._image.delete(group))
        return result

    async def forget_topic(self, topic: str) -> None:
        """Remove every group's commits of ``topic`` (the topic was deleted).

        Raises:
            StorageError, ClosedError: as :meth:`commit`.
        """
        waits = []
        for group, offsets in list(self._image.offsets.items()):
            gone = {tp: -1 for tp in offsets if tp[0] == topic}
            if gone:
                waits.append(self._submit(commit_frame(group, gone, {}), self._committer(group, gone)))
        if waits:
            await asyncio.gather(*waits)

    def _committer(self, group: str, rows: dict[TopicPartition, int]) -> Callable[[], None]:
        return lambda: self._image.commit(group, rows, {})

    def put_snapshot(self, group: str, snapshot: Snapshot | None) -> asyncio.Future[Any]:
        """Queue ``group``'s membership snapshot (``None``: remove it); the future resolves once it is durable.

        Not a coroutine: callers that must not wait (the coordinator, inside a
        state change) queue it in order and move on.
        """
        frame = encode_frame([SNAPSHOT, group, snapshot])
        return self._enqueue(frame, lambda: self._image.set_snapshot(group, snapshot))

    async def _submit(self, frame: bytes, apply: Callable[[], Any]) -> Any:
        return await self._enqueue(frame, apply)
