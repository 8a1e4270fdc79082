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
import errno
import hashlib
import json
import logging
import os
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import google_crc32c
import msgpack

from seglog.engine.errors import ClosedError, StorageError
from seglog.engine.validate import validate_group
from seglog.segments.fileio import FileOps, default_ops, in_thread

__all__ = [
    "GROUPS_DIR",
    "LOG_FILE",
    "GroupStore",
    "StoreImage",
    "read_store",
    "validate_group",
]

log = logging.getLogger("seglog")

GROUPS_DIR: Final = "consumer-offsets"
LOG_FILE: Final = "offsets.log"
COMPACTING_SUFFIX: Final = ".compacting"
FORMAT_VERSION: Final = 1  # part of the on-disk format
GROUP_FILE_VERSION: Final = 1  # the previous format's version (one JSON file per group)
_JSON_SUFFIX: Final = ".json"

# Frame kinds, part of the on-disk format.
HEADER: Final = 0
COMMIT: Final = 1
SNAPSHOT: Final = 2
DELETE: Final = 3

_FRAME_HEAD: Final = struct.Struct(">iI")  # length, CRC-32C of the payload
FRAME_HEAD_SIZE: Final = _FRAME_HEAD.size
# A frame holds one group's offsets: 10,000 partitions with long names and metadata stay well under.
MAX_FRAME_BYTES: Final = 64 << 20
# Kafka's offset.metadata.max.bytes: the longest metadata string a commit may carry.
MAX_METADATA_BYTES: Final = 4096
# Compaction runs when the log has grown past this many bytes and twice its size after the last compaction.
DEFAULT_COMPACT_MIN_BYTES: Final = 4 << 20

TopicPartition = tuple[str, int]
Snapshot = dict[str, Any]

_MAX_B64_NAME: Final = 200  # the previous format's file names stayed under NAME_MAX, temp suffix included


# -- frames -----------------------------------------------------------------------------------


def encode_frame(payload: Any) -> bytes:
    body: bytes = msgpack.packb(payload, use_bin_type=True)
    return _FRAME_HEAD.pack(len(body), google_crc32c.value(body)) + body


HEADER_FRAME: Final = encode_frame([HEADER, FORMAT_VERSION])


def commit_frame(group: str, rows: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> bytes:
    out: list[list[Any]] = []
    for (topic, partition), offset in rows.items():
        text = metadata.get((topic, partition), "")
        out.append([topic, partition, offset, text] if text else [topic, partition, offset])
    return encode_frame([COMMIT, group, out])


@dataclass(slots=True)
class _Scan:
    frames: list[tuple[int, Any]]  # (position, decoded payload) of each valid frame
    valid_bytes: int  # the log holds valid frames up to here; beyond: a torn or damaged tail
    problems: list[str]


def scan_frames(data: bytes | memoryview, name: str = LOG_FILE) -> _Scan:
    """Every valid frame of a log's bytes; never trusts a length or a CRC (see the module docstring)."""
    frames: list[tuple[int, Any]] = []
    problems: list[str] = []
    size = len(data)
    pos = 0
    valid = 0

    def frame_at(at: int) -> tuple[Any, int] | None:
        """The payload and end of a valid frame at ``at``, or ``None``."""
        if at + FRAME_HEAD_SIZE > size:
            return None
        length, crc = _FRAME_HEAD.unpack_from(data, at)
        end = at + FRAME_HEAD_SIZE + length
        if length <= 0 or length > MAX_FRAME_BYTES or end > size:
            return None
        body = bytes(data[at + FRAME_HEAD_SIZE : end])
        if google_crc32c.value(body) != crc:
            return None
        try:
            return msgpack.unpackb(body, raw=False, strict_map_key=False), end
        except Exception:  # msgpack raises many kinds on garbage; a CRC-valid frame that does not parse is skipped
            return ("unparsable", end)

    while pos < size:
        found = frame_at(pos)
        if found is not None:
            frames.append((pos, found[0]))
            pos = valid = found[1]
            continue
        # A damaged frame whose length is intact, followed by a valid frame (or the exact end): skip it alone.
        if pos + FRAME_HEAD_SIZE <= size:
            length = _FRAME_HEAD.unpack_from(data, pos)[0]
            nxt = pos + FRAME_HEAD_SIZE + length
            if 0 < length <= MAX_FRAME_BYTES and nxt <= size and (nxt == size or frame_at(nxt) is not None):
                problems.append(f"{name}: the frame at byte {pos} ({length} bytes) fails its CRC; skipped")
                pos = valid = nxt
                continue
        problems.append(
            f"{name}: bytes {pos}-{size} ({size - pos} bytes) do not hold a valid frame "
            "(a write cut short by a crash, or damage); the log ends at byte " + str(pos)
        )
        break
    return _Scan(frames, valid, problems)


# -- the in-memory image ----------------------------------------------------------------------


@dataclass(slots=True)
class StoreImage:
    """What a group store holds: offsets, their metadata strings and membership snapshots of every group."""

    offsets: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    metadata: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)
    snapshots: dict[str, Snapshot] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """What was skipped while reading (damaged frames, a torn tail, unreadable files of the old format)."""

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
        return False

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str]) -> None:
        current = self.offsets.setdefault(group, {})
        texts = self.metadata.get(group)
        for tp, offset in offsets.items():
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
        return existed

    def frames(self) -> Iterator[bytes]:
        """The live state as frames (what a compaction writes), header first."""
        yield HEADER_FRAME
        for group, offsets in self.offsets.items():
            yield commit_frame(group, offsets, self.metadata.get(group, {}))
        for group, snapshot in self.snapshots.items():
            yield encode_frame([SNAPSHOT, group, snapshot])


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
        raise _storage_error("list", directory, exc) from exc
    # The previous format first: the log, written later, holds anything newer.
    for name in names:
        if not is_legacy_group_file(name):
            continue
        path = directory / name
        try:
            group, offsets = decode_legacy_group_file(_read_file(ops, path))
            if legacy_group_file_name(group) != name:
                raise ValueError(f"the file holds group {group!r}, whose file name differs")
        except (OSError, ValueError) as exc:
            image.problems.append(f"{path}: unreadable consumer-group offsets ({exc}); the group starts over")
            continue
        image.commit(group, offsets, {})
        legacy.append(name)
    log_exists = LOG_FILE in names
    valid = 0
    if log_exists:
        path = directory / LOG_FILE
        try:
            data = _read_file(ops, path)
        except OSError as exc:
            raise _storage_error("read", path, exc) from exc
        scan = scan_frames(data, str(path))
        image.problems += scan.problems
        for position, payload in scan.frames:
            if position == 0 and not (isinstance(payload, list) and payload[:1] == [HEADER]):
                image.problems.append(f"{path}: no header frame at byte 0; reading its frames anyway")
            if not image.apply(payload):
                image.problems.append(f"{path}: the frame at byte {position} does not make sense; skipped")
        valid = scan.valid_bytes
    return _Loaded(image, valid, log_exists, legacy)


def _read_file(ops: FileOps, path: Path) -> bytes:
    fd = ops.open(str(path), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = ops.fstat_size(fd)
        chunks = []
        read = 0
        while read < size:
            chunk = ops.pread(fd, size - read, read)
            if not chunk:
                break
            chunks.append(chunk)
            read += len(chunk)
        return b"".join(chunks)
    finally:
        ops.close(fd)


def read_store(log_dir: Path) -> StoreImage:
    """The group store of a log directory, read without a lock and without writing (the offline tools).

    Raises:
        StorageError: the store's directory or log cannot be read.
    """
    return _load(log_dir / GROUPS_DIR, default_ops()).image


def _storage_error(what: str, path: Path, exc: OSError) -> StorageError:
    name = errno.errorcode.get(exc.errno or 0, f"errno {exc.errno}")
    advice = "; free disk space and retry" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return StorageError(f"{path}: {what} failed: {exc.strerror or exc} ({name}){advice}")


# -- the store ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Job:
    frame: bytes
    apply: Callable[[], Any]
    future: asyncio.Future[Any]


class _Swap:
    """A compaction ready to take the log's place (queued behind the commits before it)."""

    __slots__ = ("future", "path")

    def __init__(self, path: Path, future: asyncio.Future[None]) -> None:
        self.path = path
        self.future = future


class GroupStore:
    """The committed offsets and membership snapshots of every consumer group of one log directory.

    ``await load()`` once, then read with the plain methods (they answer from
    memory) and write with the async ones; ``await close()`` at the end. A
    read-only store (a follower engine) loads and never writes.
    """

    def __init__(
        self,
        directory: Path,
        *,
        read_only: bool,
        compact_min_bytes: int = DEFAULT_COMPACT_MIN_BYTES,
        ops: FileOps | None = None,
    ) -> None:
        self.directory = directory
        self.path = directory / LOG_FILE
        self._read_only = read_only
        self._ops = ops
        self.compact_min_bytes = compact_min_bytes
        self._image = StoreImage()
        self._fd: int | None = None
        self._size = 0  # bytes of the log on disk (valid frames only)
        self._queue: list[_Job | _Swap] = []
        self._writer: asyncio.Task[None] | None = None
        self._since: list[bytes] | None = None  # frames written since a compaction took its snapshot
        self._compaction: asyncio.Task[None] | None = None
        self._compacted_bytes = 0  # the log's size after the last compaction
        self._closed = False
        self.writes = 0  # executor hops that wrote commits (a test checks that commits share them)

    @property
    def ops(self) -> FileOps:
        return self._ops or default_ops()

    # -- open and close -------------------------------------------------------------------

    async def load(self) -> None:
        """Read the store (and, when writable, repair and open its log for appends).

        Raises:
            StorageError: the directory or the log cannot be read or written.
        """
        loaded = await in_thread(_load, self.directory, self.ops)
        for problem in loaded.image.problems:
            log.warning("%s", problem)
        loaded.image.problems.clear()
        self._image = loaded.image
        if self._read_only or not (loaded.log_exists or loaded.legacy):
            return  # a store with nothing in it yet is created by its first write
        self._fd, self._size = await in_thread(self._open_for_appends, loaded)
        self._compacted_bytes = self._size

    def _open_for_appends(self, loaded: _Loaded) -> tuple[int, int]:
        """(blocking) Remove a cut-short compaction, cut a torn tail, create the log, fold in the old format."""
        ops = self.ops
        directory = self.directory
        try:
            ops.makedirs(str(directory))
            with contextlib.suppress(FileNotFoundError):
                ops.unlink(str(self.path) + COMPACTING_SUFFIX)
            fd = ops.open(str(self.path), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise _storage_error("open", self.path, exc) from exc
        try:
            size = ops.fstat_size(fd)
            valid = loaded.log_bytes
            if size > valid:
                log.warning("%s: cutting %d bytes after the last valid frame at byte %d", self.path, size - valid,
                            valid)
                ops.ftruncate(fd, valid)
            if valid == 0:
                _write_all(ops, fd, HEADER_FRAME, 0)
                valid = len(HEADER_FRAME)
            if loaded.legacy:
                # Fold the previous format's files in: one commit frame per group, durable before they go.
                data = b"".join(commit_frame(g, o, {}) for g, o in self._image.offsets.items())
                _write_all(ops, fd, data, valid)
                valid += len(data)
            ops.fdatasync(fd)
            if not loaded.log_exists or loaded.legacy:
                _fsync_dir(ops, directory)
            for name in loaded.legacy:
                with contextlib.suppress(FileNotFoundError):
                    ops.unlink(str(directory / name))
            if loaded.legacy:
                _fsync_dir(ops, directory)
                log.info("%s: folded %d group file(s) of the previous format into the log", directory,
                         len(loaded.legacy))
            return fd, valid
        except OSError as exc:
            ops.close(fd)
            raise _storage_error("open for appends", self.path, exc) from exc
        except BaseException:
            ops.close(fd)
            raise

    async def close(self) -> None:
        """Finish the writes queued so far, stop a compaction, close the log. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._compaction is not None:
            # Not cancelled: its file write cannot be stopped half-way, and the writer swaps it in soon.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._compaction)
        if self._writer is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(self._writer)
        fd, self._fd = self._fd, None
        if fd is not None:
            ops = self.ops
            await in_thread(ops.close, fd)
            with contextlib.suppress(OSError):
                await in_thread(ops.unlink, str(self.path) + COMPACTING_SUFFIX)

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

    def _enqueue(self, frame: bytes, apply: Callable[[], Any]) -> asyncio.Future[Any]:
        if self._closed:
            raise ClosedError(f"{self.path}: the group store is closed")
        if self._read_only:
            raise StorageError(f"{self.path}: the group store is read-only (a follower engine writes nothing)")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.append(_Job(frame, apply, future))
        self._wake_writer()
        return future

    def _wake_writer(self) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write_queued())

    async def _write_queued(self) -> None:
        """The writer: appends what is queued, in order, one executor hop per run of commits."""
        while self._queue:
            item = self._queue[0]
            if isinstance(item, _Swap):
                self._queue.pop(0)
                await self._swap(item)
                continue
            jobs: list[_Job] = []
            while self._queue and isinstance(self._queue[0], _Job):
                job = self._queue.pop(0)
                assert isinstance(job, _Job)
                jobs.append(job)
            data = b"".join(job.frame for job in jobs)
            try:
                if self._fd is None:
                    self._fd, self._size = await in_thread(self._open_for_appends, _Loaded(StoreImage(), 0, False, []))
                await in_thread(self._append, data, self._size)
            except BaseException as exc:
                failure = exc if isinstance(exc, Exception) else ClosedError(f"{self.path}: the write was cancelled")
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(failure)
                        job.future.exception()  # a caller that stopped waiting must not leave it unretrieved
                if not isinstance(exc, Exception):
                    raise
                continue
            self._size += len(data)
            self.writes += 1
            if self._since is not None:
                self._since.append(data)
            for job in jobs:
                try:
                    result = job.apply()
                except Exception as exc:  # a bug in an apply function must not stop the writer
                    log.exception("%s: applying a group-store change failed", self.path)
                    if not job.future.done():
                        job.future.set_exception(exc)
                    continue
                if not job.future.done():
                    job.future.set_result(result)
            self._maybe_compact()

    def _append(self, data: bytes, position: int) -> None:
        """(blocking) Write ``data`` at ``position`` and fdatasync; on failure cut the file back to ``position``."""
        ops = self.ops
        fd = self._fd
        if fd is None:
            raise ClosedError(f"{self.path}: the group store is closed")
        try:
            _write_all(ops, fd, data, position)
            ops.fdatasync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                ops.ftruncate(fd, position)
            raise _storage_error("append", self.path, exc) from exc

    # -- compaction -----------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        if (
            self._compaction is not None
            or self._closed
            or self._size < self.compact_min_bytes
            or self._size < 2 * self._compacted_bytes
        ):
            return
        self._compaction = asyncio.get_running_loop().create_task(self._compact())

    async def _compact(self) -> None:
        """Rewrite the live state while commits go on; the writer swaps it in (see the module docstring)."""
        tmp = Path(str(self.path) + COMPACTING_SUFFIX)
        frames = b"".join(self._image.frames())  # the image equals the log right now: no write is half-applied
        self._since = []
        try:
            await in_thread(self._write_compacted, tmp, frames)
            swapped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._queue.append(_Swap(tmp, swapped))
            self._wake_writer()
            await swapped
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: compaction failed (%s); the log stays as it is and compaction is retried later",
                        self.path, exc)
            self._compacted_bytes = self._size  # retry once the log has doubled again
            with contextlib.suppress(OSError):
                await in_thread(self.ops.unlink, str(tmp))
        finally:
            self._since = None
            self._compaction = None

    def _write_compacted(self, tmp: Path, frames: bytes) -> None:
        ops = self.ops
        try:
            fd = ops.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
            try:
                _write_all(ops, fd, frames, 0)
                ops.fdatasync(fd)
            finally:
                ops.close(fd)
        except OSError as exc:
            raise _storage_error("compaction write", tmp, exc) from exc

    async def _swap(self, swap: _Swap) -> None:
        since = b"".join(self._since or ())
        try:
            fd, size = await in_thread(self._swap_files, swap.path, since)
        except Exception as exc:
            if not swap.future.done():
                swap.future.set_exception(exc)
            return
        old, self._fd = self._fd, fd
        self._size = self._compacted_bytes = size
        if old is not None:
            with contextlib.suppress(OSError):
                await in_thread(self.ops.close, old)
        log.info("%s: compacted to %d bytes", self.path, size)
        if not swap.future.done():
            swap.future.set_result(None)

    def _swap_files(self, tmp: Path, since: bytes) -> tuple[int, int]:
        """(blocking) Append the frames written meanwhile to the compacted file, then rename it over the log."""
        ops = self.ops
        try:
            fd = ops.open(str(tmp), os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise _storage_error("open", tmp, exc) from exc
        try:
            size = ops.fstat_size(fd)
            if since:
                _write_all(ops, fd, since, size)
                size += len(since)
                ops.fdatasync(fd)
            ops.replace(str(tmp), str(self.path))
            _fsync_dir(ops, self.directory)
            return fd, size
        except OSError as exc:
            ops.close(fd)
            raise _storage_error("compaction swap", tmp, exc) from exc


def _write_all(ops: FileOps, fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        written = ops.pwritev(fd, [view], position)
        if written <= 0:
            raise OSError(errno.EIO, "write returned no progress")
        view = view[written:]
        position += written


def _fsync_dir(ops: FileOps, directory: Path) -> None:
    fd = ops.open(str(directory), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        ops.fsync(fd)
    finally:
        ops.close(fd)
