"""The engine's compound file-system operations, each one executor hop.

Built on ``seglog.segments.fileio`` (the only module that talks to aiofiles): the
log-directory scan at open, the directory lock, and tree removal of deleted
partitions. ``OSError`` is translated into ``StorageError`` here.

Must not import: ``tools``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT
from seglog.engine.errors import LogDirLockedError, StorageError
from seglog.engine.names import is_aside_dir_name, parse_partition_dir
from seglog.segments.fileio import (
    FileOps,
    atomic_write,
    atomic_write_sync,
    default_ops,
    fsync_dir,
    fsync_dir_sync,
    in_thread,
    make_dirs,
    read_small_file_sync,
    remove,
)
from seglog.segments.files import list_partition_dir, remove_leftovers_sync

__all__ = [
    "CREATE_DIR_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "DirLock",
    "LogDirEntries",
    "LogDirListing",
    "atomic_write",
    "fsync_dir",
    "describe_topics",
    "holds_records",
    "list_log_dir",
    "make_dir",
    "place_new_partition_dirs",
    "read_small",
    "remove_file",
    "remove_tree",
    "rename_dir",
    "rename_if_exists",
    "scan_log_dir",
    "scan_log_dir_sync",
    "scan_partition_dir",
    "scan_partition_dir_sync",
]

CLEAN_SHUTDOWN_FILE: Final = ".clean-shutdown"
TOPIC_FILE: Final = "topic.json"
DELETE_DIR_SUFFIX: Final = "-delete"  # Kafka's "<topic>-<p>.<uuid>-delete": a deleted partition
CREATE_DIR_SUFFIX: Final = "-create"  # "<topic>-<p>.<uuid>-create": a partition being built aside
MAX_SMALL_FILE_BYTES: Final = 64 << 20  # a checkpoint of ~1M partitions; anything larger is not ours


@dataclass(frozen=True, slots=True)
class LogDirEntries:
    """What a log directory holds, by name (one ``scandir``; no file is opened).

    ``partition_dirs``: each ``<topic>-<p>`` directory (a real directory, not a
    symlink) by ``(topic, partition)``, with its name. ``deleted_dirs`` and
    ``unfinished_dirs``: the ``-delete`` and ``-create`` directories set aside.
    ``names``: every name in the directory (the markers and checkpoints are
    looked up there).
    """

    names: frozenset[str]
    partition_dirs: dict[tuple[str, int], str]
    deleted_dirs: list[str]
    unfinished_dirs: list[str]


def list_log_dir(path: Path, *, ops: FileOps | None = None) -> LogDirEntries:
    """The one listing of a log directory: the open's, the follower's and the offline tools' (blocking).

    Raises:
        StorageError: the directory is missing, not a directory, or cannot be listed.
    """
    try:
        entries = (ops or default_ops()).scandir(str(path))
    except FileNotFoundError as exc:
        raise StorageError(f"{path}: no such log directory") from exc
    except OSError as exc:
        raise StorageError(f"{path}: cannot read the log directory: {exc}") from exc
    partition_dirs: dict[tuple[str, int], str] = {}
    deleted: list[str] = []
    unfinished: list[str] = []
    for name, is_dir in entries:
        if not is_dir:
            continue
        parsed = parse_partition_dir(name)
        if parsed is not None:
            partition_dirs[parsed] = name
        elif is_aside_dir_name(name, DELETE_DIR_SUFFIX):
            deleted.append(name)
        elif is_aside_dir_name(name, CREATE_DIR_SUFFIX):
            unfinished.append(name)
    return LogDirEntries(frozenset(name for name, _ in entries), partition_dirs, deleted, unfinished)


@dataclass(slots=True)
class LogDirListing:
    """What a log directory holds, read in one hop."""

    clean_shutdown: bool = False
    clean_shutdown_record: bytes = b""  # what the marker holds (engine.checkpoints.format_clean_shutdown)
    empty: bool = True
    files: dict[str, bytes] = field(default_factory=dict)
    # Each partition dir, with its topic.json for one dir per topic (every partition of a topic holds the
    # same file; reading 1000 of them was most of a clean open): None for the others.
    partition_dirs: dict[tuple[str, int], bytes | None] = field(default_factory=dict)
    deleted_dirs: list[str] = field(default_factory=list)
    unfinished_dirs: list[str] = field(default_factory=list)  # -create leftovers of a cut-short create_topic


def read_small(path: Path, ops: FileOps | None = None) -> bytes | None:
    """The content of a small file (a checkpoint, a marker, a topic.json), ``None`` if it does not exist; blocking.

    Raises:
        StorageError: it is larger than ``MAX_SMALL_FILE_BYTES``, or cannot be read.
    """
    data = read_small_file_sync(path, ops or default_ops(), max_bytes=MAX_SMALL_FILE_BYTES + 1)
    if data is not None and len(data) > MAX_SMALL_FILE_BYTES:
        raise StorageError(f"{path}: larger than {MAX_SMALL_FILE_BYTES} bytes; not a seglog file")
    return data


def describe_topics(
    path: Path, entries: LogDirEntries, skip: Collection[str] = (), *, strict: bool, ops: FileOps | None = None
) -> dict[tuple[str, int], bytes]:
    """One ``topic.json`` per topic not in ``skip``: of its lowest partition that has one (they all hold the same).

    A partition without the file is passed over for the next one. One that
    cannot be read raises with ``strict`` (the open); without (a follower,
    whose writer may be creating or deleting the directory meanwhile) it is
    passed over too.

    Raises:
        StorageError: with ``strict``, a ``topic.json`` exists but cannot be read.
    """
    described: dict[tuple[str, int], bytes] = {}
    topics: set[str] = set()
    for topic, partition in sorted(entries.partition_dirs):
        if topic in skip or topic in topics:
            continue
        try:
            meta = read_small(path / entries.partition_dirs[(topic, partition)] / TOPIC_FILE, ops)
        except StorageError:
            if strict:
                raise
            continue
        if meta is not None:
            described[(topic, partition)] = meta
            topics.add(topic)
    return described


def _scan(path: Path, create: bool) -> LogDirListing:
    ops = default_ops()
    if create:
        try:
            ops.makedirs(str(path))
        except OSError as exc:
            raise StorageError(f"{path}: cannot create the log directory: {exc}") from exc
    entries = list_log_dir(path, ops=ops)
    listing = LogDirListing(deleted_dirs=entries.deleted_dirs, unfinished_dirs=entries.unfinished_dirs)
    if CLEAN_SHUTDOWN_FILE in entries.names:
        listing.clean_shutdown = True
        try:
            listing.clean_shutdown_record = read_small(path / CLEAN_SHUTDOWN_FILE, ops) or b""
        except StorageError:  # its existence is the marker; the record is a hint
            listing.clean_shutdown_record = b""
    for name in (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
        if name in entries.names:
            data = read_small(path / name, ops)
            if data is not None:
                listing.files[name] = data
                listing.empty = False
    listing.partition_dirs = dict.fromkeys(entries.partition_dirs)
    listing.partition_dirs.update(describe_topics(path, entries, strict=True, ops=ops))
    if entries.partition_dirs:
        listing.empty = False
    return listing


def scan_log_dir_sync(path: Path, *, create: bool) -> LogDirListing:
    """The blocking form of :func:`scan_log_dir` (the dry run of recovery, in the caller's thread)."""
    return _scan(path, create)


async def scan_log_dir(path: Path, *, create: bool) -> LogDirListing:
    """List the log directory: clean-shutdown marker, checkpoints, partition dirs and their topic.json.

    Raises:
        StorageError: the directory is missing (``create=False``) or unreadable.
    """
    return await in_thread(_scan, path, create)


class DirLock:
    """An exclusive ``fcntl.flock`` on ``<log_dir>/.lock``, held while an Engine is open.

    ``flock`` locks belong to an open file description, so a second Engine in
    the same process conflicts just like one in another process; the kernel
    drops the lock when the process dies (kill -9 included), so a crash never
    leaves a stale lock. The holder's pid is written into the file for the
    error message of the next would-be holder.
    """

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    async def acquire(cls, path: Path) -> DirLock:
        """Take the lock or fail at once.

        Raises:
            LogDirLockedError: another engine holds it.
            StorageError: the lock file cannot be created.
        """
        return cls(path, await in_thread(_lock, path))

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            await in_thread(_unlock, fd)


def _lock(path: Path) -> int:
    # The descriptor's calls go through the file layer; flock itself is no file I/O (the kernel keeps it).
    ops = default_ops()
    try:
        ops.makedirs(str(path.parent))
        fd = ops.open(str(path), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise StorageError(f"{path.parent}: cannot create the log directory or its lock file: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = ""
        with contextlib.suppress(OSError, ValueError):
            pid = int(ops.pread(fd, 32, 0).decode("ascii").strip() or "0")
            holder = f" (pid {pid}{', this process' if pid == os.getpid() else ''})"
        ops.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise LogDirLockedError(
                f"{path.parent}: another seglog Engine holds this log directory{holder}; "
                "close it first, or open with read_only=True to inspect"
            ) from exc
        raise StorageError(f"{path}: cannot lock: {exc}") from exc
    try:
        ops.ftruncate(fd, 0)
        ops.pwritev(fd, [f"{os.getpid()}\n".encode("ascii")], 0)
    except OSError:
        pass  # the pid is only for the message; the lock is what matters
    return fd


def _unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    default_ops().close(fd)


async def make_dir(path: Path) -> None:
    """Create ``path`` (and parents), durably."""
    await make_dirs(path)


async def remove_file(path: Path, *, sync_dir: bool = False) -> bool:
    """Remove a file if present; optionally fsync its directory."""
    existed = await remove(path)
    if existed and sync_dir:
        await fsync_dir(path.parent)
    return existed


def _rename_if_exists(source: Path, target: Path) -> bool:
    try:
        default_ops().replace(str(source), str(target))
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"{source}: cannot rename to {target}: {exc}") from exc
    return True


def _rename_dir(source: Path, target: Path) -> None:
    try:
        default_ops().replace(str(source), str(target))
    except OSError as exc:
        raise StorageError(f"{source}: cannot rename to {target}: {exc}") from exc


async def rename_dir(source: Path, target: Path) -> None:
    """Rename a directory (or file).

    Raises:
        StorageError: the rename failed (``source`` missing included); nothing changed.
    """
    await in_thread(_rename_dir, source, target)


async def rename_if_exists(source: Path, target: Path) -> bool:
    """Rename a directory or file; ``False`` when ``source`` does not exist."""
    return await in_thread(_rename_if_exists, source, target)


def _place_new_partition_dirs(log_dir: Path, dirs: list[tuple[str, str, bytes]], ops: FileOps) -> None:
    """Build each partition directory aside with its topic.json, then rename it into place; one hop.

    ``dirs`` holds ``(aside name, partition dir name, topic.json)``. A partition
    directory thus appears complete or not at all: whatever instant a crash
    hits, every ``<topic>-<p>`` holds its ``topic.json``, and what is still
    aside (``-create``) is removed by the next open. On failure the directories
    still aside are removed; those already placed are the caller's to undo.
    """
    aside: list[Path] = []
    try:
        for aside_name, _, meta in dirs:
            directory = log_dir / aside_name
            ops.mkdir(str(directory), 0o755)
            aside.append(directory)
            atomic_write_sync(directory / TOPIC_FILE, meta, ops)  # synced, and so is its directory
        for aside_name, final_name, _ in dirs:
            target = log_dir / final_name
            if ops.lexists(str(target)):  # rename(2) would silently replace an empty directory
                raise FileExistsError(errno.EEXIST, "a partition directory of that name exists", str(target))
            ops.replace(str(log_dir / aside_name), str(target))
            aside.remove(log_dir / aside_name)
        fsync_dir_sync(ops, log_dir)  # the renames survive power loss
    except BaseException as exc:
        for directory in aside:
            with contextlib.suppress(OSError):
                ops.rmtree(str(directory))
        if isinstance(exc, OSError):
            raise StorageError(f"{exc.filename or log_dir}: cannot create the partition directory: {exc}") from exc
        raise


async def place_new_partition_dirs(log_dir: Path, dirs: list[tuple[str, str, bytes]]) -> None:
    """Create partition directories, each with its topic.json, atomically (see the sync form above).

    Raises:
        StorageError: the OS refused; no directory is left aside, placed ones stay.
    """
    await in_thread(_place_new_partition_dirs, log_dir, dirs, default_ops())


def _holds_records(directory: Path) -> bool:
    ops = default_ops()
    try:
        listing = list_partition_dir(directory, ops=ops)
    except StorageError:
        if not ops.exists(str(directory)):
            return False
        raise
    for segment in listing.segments:
        try:
            if ops.stat_size(str(segment.path(directory))) > 0:
                return True
        except (FileNotFoundError, IsADirectoryError):
            continue
        except OSError as exc:
            raise StorageError(f"{segment.path(directory)}: cannot stat: {exc}") from exc
    return False


async def holds_records(directory: Path) -> bool:
    """Whether a partition directory has a non-empty ``.log`` (it may hold records).

    Raises:
        StorageError: the directory cannot be listed.
    """
    return await in_thread(_holds_records, directory)


def _remove_tree(path: Path) -> None:
    try:
        default_ops().rmtree(str(path))
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(f"{path}: cannot remove: {exc}") from exc


async def remove_tree(path: Path) -> None:
    """Remove a directory tree (a deleted partition)."""
    await in_thread(_remove_tree, path)


def _scan_partition(directory: Path, cleanup: bool) -> list[tuple[int, bool, bool]]:
    listing = list_partition_dir(directory)
    if cleanup:
        remove_leftovers_sync(listing)
    return [(s.base_offset, s.has_offset_index, s.has_time_index) for s in listing.segments]


def scan_partition_dir_sync(directory: Path, *, cleanup: bool) -> list[tuple[int, bool, bool]]:
    """The blocking form of :func:`scan_partition_dir`, for a caller already in a thread."""
    return _scan_partition(directory, cleanup)


async def scan_partition_dir(directory: Path, *, cleanup: bool) -> list[tuple[int, bool, bool]]:
    """The segments of a partition directory: (base offset, .index exists, .timeindex exists), sorted.

    The listing is ``seglog.segments.files.list_partition_dir``'s. With ``cleanup``,
    leftovers of interrupted work (``.deleted``, ``.cleaned``, ``.swap``, ``.tmp``)
    and index files without a ``.log`` are removed first
    (``seglog.segments.files.remove_leftovers_sync``).

    Raises:
        StorageError: the directory cannot be listed or a leftover cannot be removed.
    """
    return await in_thread(_scan_partition, directory, cleanup)


LOCK_FILE_NAME: Final = ".lock"  # the Engine's lock file in a log directory


def lock_holder(log_dir: Path) -> int | None:
    """The pid of the process whose Engine holds ``log_dir`` now, ``0`` if held by an unknown pid, ``None`` if free.

    Read-only and race-free on Linux: ``/proc/locks`` lists every ``flock``
    with its file's device and inode. Elsewhere the lock is tried shared and
    dropped at once (an Engine opening in that instant would be refused).
    Only the pid is read through the file layer: the rest asks the kernel
    about locks, not about a file's content.
    """
    path = log_dir / LOCK_FILE_NAME
    try:
        st = os.stat(path)
    except OSError:
        return None
    held = False
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
            held = any(line.split()[5:6] == [wanted] and "FLOCK" in line for line in locks)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            held = True
        finally:
            os.close(fd)
    if not held:
        return None
    try:
        return int((read_small(path) or b"").decode("ascii").strip() or "0")
    except (StorageError, ValueError):
        return 0
