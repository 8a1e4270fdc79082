"""Following a live writer: how a read-only ``Engine`` keeps its view of the files current.

Owns: the refresh of a read-only engine's view (new records, new segments,
the moving log end, segments retention deleted, topics created or deleted by
the writer, the log start offset) and what triggers it: inotify events where
the platform has them (``inotify_simple``, its descriptor read by the event
loop when readable, so nothing blocks), and a bounded poll always (the safety
net, and the only trigger elsewhere). Everything a refresh does to the view is
in this module; ``Engine`` and ``PartitionLog`` only call it. It knows the
engine only as the ``engine.loader.LogDirLoad`` the engine loaded its
directory with (path, topics, partitions), and opens a partition the way the
loader does.

Rules (docs/OPERATIONS.md, "Followers"):

* A follower's view of a segment ends at the last complete batch whose
  header, offsets and CRC-32C check out (``LogSegment.follow``).
  What follows — a batch the writer is still writing, preallocated zeros,
  garbage — is "not written yet": never corruption, never cut or repaired.
* It writes nothing, takes no lock the writer waits on, and maps no file
  (index snapshots and ``.log`` reads are ``pread``): a writer that trims or
  truncates a file cannot kill it with ``SIGBUS``.
* The writer's index files are trusted only up to where the follower
  checked them against the ``.log`` when it began following a segment;
  entries for what it validated later are its own, in memory.
* A file cut below what was validated, or a validated batch overwritten (the
  writer cut a write whose fsync failed and wrote again), makes the follower
  open that segment again and validate it from its start; its log end may
  then move back.

Must not import: ``tools``, ``engine.engine``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from seglog.engine import _fs, loader
from seglog.engine.checkpoints import LOG_START_OFFSET_CHECKPOINT
from seglog.engine.config import LogConfig
from seglog.engine.errors import SeglogError, UnknownTopicOrPartitionError
from seglog.engine.log import PartitionLog, segment_read
from seglog.engine.names import partition_dir_name
from seglog.engine.topics import TopicState
from seglog.segments.fileio import default_ops, in_thread
from seglog.segments.files import LOG_SUFFIX
from seglog.segments.segment import FollowScan, LogSegment

__all__ = ["DEFAULT_FOLLOW_INTERVAL_MS", "Follower", "inotify_available", "start_following_in_thread"]

log = logging.getLogger("seglog")

# The longest a follower goes without looking at the files, inotify or not: the bound of its delay
# where inotify is missing (or misses something: a network file system, a full event queue).
DEFAULT_FOLLOW_INTERVAL_MS: Final = 500
# Bytes of new batches one refresh validates per segment; a follower far behind catches up over
# several refreshes (each one executor hop), so readers are served in between.
FOLLOW_SCAN_BYTES: Final = 64 << 20
# Partitions whose files one executor hop looks at (as the open's loader.LOAD_CHUNK).
REFRESH_CHUNK: Final = 64
_UNLIMITED: Final = 1 << 62

try:  # Linux only; anywhere else (or without the package) the follower polls
    import inotify_simple
except ImportError:  # pragma: no cover - depends on the platform
    inotify_simple = None

# What makes a partition directory worth a look. Writes to a .log (MODIFY) are the hot path; the
# writer's index files are written through a mapping (no event) or pwrite (MODIFY, ignored by name).
_DIR_EVENTS: Final = 0x100 | 0x200 | 0x40 | 0x80 | 0x400 | 0x800  # CREATE DELETE MOVED_FROM MOVED_TO *_SELF
_MODIFY: Final = 0x2
_OVERFLOW: Final = 0x4000  # IN_Q_OVERFLOW: events were lost
_IGNORED: Final = 0x8000  # the watch is gone (its directory was deleted)


def inotify_available() -> bool:
    """Whether followers use inotify events (else they only poll).

    Linux with ``inotify_simple`` installed, unless the environment sets
    ``SEGLOG_FOLLOW_POLL=1``: inotify sees no write made on another machine
    (NFS and other network file systems), so there only the poll works.
    """
    return inotify_simple is not None and sys.platform == "linux" and os.environ.get("SEGLOG_FOLLOW_POLL") != "1"


def _max_batch_bytes(config: LogConfig) -> int:
    return max(config.max_message_bytes, config.segment_bytes)


def start_following_in_thread(segment: LogSegment, config: LogConfig) -> None:
    """Begin following a read-only engine's last segment at open and validate it to its end (blocking)."""
    segment.begin_follow(trust_indexes=True)
    scan = segment.follow(_max_batch_bytes(config), _UNLIMITED)
    if scan.restart:  # the index snapshot did not describe the .log: validate it all, trusting nothing
        segment.begin_follow(trust_indexes=False)
        scan = segment.follow(_max_batch_bytes(config), _UNLIMITED)
    if not scan.restart:  # (from the start nothing was validated before, so nothing can be undone)
        segment.apply_follow(scan)


def _open_followed_in_thread(directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    # A segment that appeared (a roll) or must be validated again: followed from its start, its
    # index files (written by the writer as it goes) never read.
    segment = LogSegment.open(
        directory,
        base_offset,
        max_index_size=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        roll_jitter_ms=0,
        now_ms=now_ms,
        file_already_exists=True,
        writable=False,
        index_files_existed=(False, False),
        read_first_batch=False,
    )
    try:
        segment.begin_follow(trust_indexes=False)
    except BaseException:
        segment.close_handlers()
        raise
    return segment


@dataclass(slots=True)
class _PartitionLook:
    """What one look at a partition's files found (made in a thread, applied on the loop)."""

    gone: bool = False  # the directory is gone, or is another one now (the topic was deleted)
    removed: list[int] = field(default_factory=list)  # base offsets no longer listed
    opened: list[LogSegment] = field(default_factory=list)  # new (or re-opened) segments, already validated
    scans: list[tuple[LogSegment, FollowScan]] = field(default_factory=list)  # of segments already in view
    more: bool = False  # a scan stopped at its byte limit


def _look_at_partition(
    directory: Path, segments: Sequence[LogSegment], inode: int | None, config: LogConfig, *, listing: bool
) -> _PartitionLook:
    """List a partition directory and validate what its followed segments grew by (blocking)."""
    look = _PartitionLook()
    try:
        if inode is not None and default_ops().inode(str(directory)) != inode:
            look.gone = True
            return look
        found = [base for base, _, _ in _fs.scan_partition_dir_sync(directory, cleanup=False)] if listing else None
    except (OSError, SeglogError):
        look.gone = not default_ops().is_dir(str(directory))
        if look.gone:
            return look
        raise
    now_ms = time.time_ns() // 1_000_000
    max_batch = _max_batch_bytes(config)
    current = {s.base_offset: s for s in segments}
    listed = set(found) if found is not None else set(current)
    if not listed:
        look.gone = True  # no segment: not a partition (yet, or any more)
        return look
    look.removed = [base for base in current if base not in listed]
    # Listed before these scans: every segment but the last one listed was sealed by then, so its
    # scan now reaches its true end, in one go (a later look scans only the last segment again).
    newest = max(listed)

    def limit(base: int) -> int:
        return FOLLOW_SCAN_BYTES if base == newest else _UNLIMITED

    try:
        last_base = max(current) if current else -1
        for segment in segments:
            if segment.base_offset < last_base or segment.base_offset not in listed or not segment.followed:
                continue
            scan = segment.follow(max_batch, limit(segment.base_offset))
            if scan.restart:
                look.removed.append(segment.base_offset)
                look.opened.append(_open_followed_in_thread(directory, segment.base_offset, config, now_ms))
            else:
                look.scans.append((segment, scan))
                look.more = look.more or scan.more
        for base in sorted(listed - set(current)):
            fresh = _open_followed_in_thread(directory, base, config, now_ms)
            look.opened.append(fresh)
        for fresh in look.opened:  # not visible to readers yet: applied here
            scan = fresh.follow(max_batch, limit(fresh.base_offset))
            if not scan.restart:
                fresh.apply_follow(scan)
                look.more = look.more or scan.more
    except BaseException:
        _release(look.opened)
        raise
    return look


def _list_log_dir(path: Path, known_topics: set[str]) -> _fs.LogDirListing:
    """The partition directories and the log start checkpoint (blocking; a follower's look at the log dir).

    The open's listing (``_fs.list_log_dir``), but reads ``topic.json`` only for
    topics not known yet (one per topic, of its lowest partition directory that has one).
    """
    entries = _fs.list_log_dir(path)
    listing = _fs.LogDirListing(partition_dirs=dict.fromkeys(entries.partition_dirs))
    if LOG_START_OFFSET_CHECKPOINT in entries.names:
        data = _fs.read_small(path / LOG_START_OFFSET_CHECKPOINT)
        if data is not None:
            listing.files[LOG_START_OFFSET_CHECKPOINT] = data
    listing.partition_dirs.update(_fs.describe_topics(path, entries, known_topics, strict=False))
    return listing


def _release(segments: Sequence[LogSegment]) -> None:
    for segment in segments:
        with contextlib.suppress(Exception):
            segment.close_handlers()


class _Notifier:
    """inotify watches on the log directory and each partition directory; events mark what to refresh."""

    def __init__(self, on_event: Callable[[tuple[str, int] | None, bool], None]) -> None:
        assert inotify_simple is not None
        self._on_event = on_event  # (partition or None for the log directory, whether to list it)
        self._inotify = inotify_simple.INotify(nonblocking=True)
        self._watches: dict[int, tuple[str, int] | None] = {}
        self._by_key: dict[tuple[str, int] | None, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warned = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        loop.add_reader(self._inotify.fileno(), self._read)

    def watch_in_thread(self, key: tuple[str, int] | None, directory: Path) -> None:
        """Watch ``directory`` for ``key`` (None: the log directory); blocking (a path lookup)."""
        mask = _DIR_EVENTS if key is None else _DIR_EVENTS | _MODIFY
        try:
            wd = self._inotify.add_watch(directory, mask)
        except OSError as exc:  # e.g. fs.inotify.max_user_watches reached: the poll still covers it
            if not self._warned:
                self._warned = True
                log.warning("%s: cannot watch with inotify (%s); following it by polling", directory, exc)
            return
        self._watches[wd] = key
        self._by_key[key] = wd

    def unwatch(self, key: tuple[str, int]) -> None:
        wd = self._by_key.pop(key, None)
        if wd is not None and self._watches.pop(wd, None) is not None:
            with contextlib.suppress(OSError):  # gone with its directory already
                self._inotify.rm_watch(wd)

    def _read(self) -> None:
        # On the loop, called only when the descriptor is readable: a non-blocking read of what is queued.
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            return
        for event in events:
            if event.mask & _OVERFLOW:
                self._on_event(None, True)
                continue
            if event.wd not in self._watches:
                continue  # a watch just removed (or not recorded yet: the poll and its first look cover it)
            key = self._watches[event.wd]
            if event.mask & _IGNORED:
                self._watches.pop(event.wd, None)
                if self._by_key.get(key) == event.wd:
                    self._by_key.pop(key, None)
                self._on_event(None, True)
                continue
            if key is None:
                self._on_event(None, True)
            elif event.mask & _DIR_EVENTS:
                if LOG_SUFFIX in event.name or not event.name:  # a segment appeared or went; or the directory
                    self._on_event(key, True)
            elif event.name.endswith(LOG_SUFFIX):
                self._on_event(key, False)

    def close(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()


class Follower:
    """Keeps a read-only ``Engine``'s view of its log directory current while a writer works in it.

    One refresh pass at a time (``_pass_lock``): a pass lists what changed,
    validates new batches in executor threads (``REFRESH_CHUNK`` partitions a
    hop) and applies the result on the loop, then wakes the subscribers of
    every partition whose log end moved. Passes run when inotify reports a
    change (only the partitions it names), every ``interval_ms`` (all of
    them), and when :meth:`refresh` is called.
    """

    def __init__(self, load: loader.LogDirLoad, interval_ms: int) -> None:
        self._load = load
        self._interval_s = interval_ms / 1000
        self._notifier: _Notifier | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._dirty: dict[tuple[str, int], bool] = {}  # partition -> whether to list its directory
        self._dir_dirty = False
        self._all_dirty = False
        self._pass_lock = asyncio.Lock()
        self._inodes: dict[tuple[str, int], int] = {}
        self._start_offsets: dict[tuple[str, int], int] = {}
        self._retired: set[LogSegment] = set()  # segments gone from the view, closed after a delay
        self._timers: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def notified(self) -> bool:
        """Whether inotify events trigger refreshes (else only the poll does)."""
        return self._notifier is not None

    async def start(self, *, follow: bool, notify: bool = True) -> None:
        """With ``follow``, watch the files (inotify when ``notify`` and available) and start the refresh loop.

        Without it nothing runs: the view changes only when :meth:`refresh` is called.
        """
        if not follow:
            await in_thread(self._record_inodes, list(self._load.logs))
            return
        if notify and inotify_available():
            try:
                self._notifier = _Notifier(self._mark)
            except OSError as exc:  # e.g. fs.inotify.max_user_instances reached
                log.warning("%s: inotify unavailable (%s); following the writer by polling", self._load.path, exc)
        if self._notifier is not None:
            self._notifier.start(asyncio.get_running_loop())
            await self._watch([None, *self._load.logs])
        await in_thread(self._record_inodes, list(self._load.logs))
        # Whatever was written between the open's look and the watches is caught by a first full pass.
        self._mark(None, True)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"seglog-follow-{self._load.path}")

    def _record_inodes(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            with contextlib.suppress(OSError):
                self._inodes[key] = default_ops().inode(str(self._load.path / partition_dir_name(*key)))

    async def _watch(self, keys: list[tuple[str, int] | None]) -> None:
        notifier = self._notifier
        if notifier is None:
            return
        path = self._load.path

        def work() -> None:
            for key in keys:
                notifier.watch_in_thread(key, path if key is None else path / partition_dir_name(*key))

        await in_thread(work)

    def _mark(self, key: tuple[str, int] | None, listing: bool) -> None:
        if key is None:
            self._dir_dirty = True
            self._all_dirty = self._all_dirty or listing
        else:
            self._dirty[key] = self._dirty.get(key, False) or listing
        self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_full = loop.time()
        while not self._closed:
            # The full look is due every interval even while events keep coming (a writer busy on one
            # partition must not keep the others, or a missed event, waiting).
            due = last_full + self._interval_s - loop.time()
            if due > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(due):
                        await self._wake.wait()
            if loop.time() >= last_full + self._interval_s:
                self._all_dirty = self._dir_dirty = True
                last_full = loop.time()
            self._wake.clear()
            try:
                for key in await self._pass():
                    self._mark(key, False)  # far behind: go on at once, after the loop served its readers
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failing look must not end the follow: the next pass retries
                log.error("%s: follower refresh failed: %s", self._load.path, exc, exc_info=exc)

    async def refresh(self) -> None:
        """Look at every partition and the log directory now, until the view holds every complete batch."""
        if self._closed:
            return  # the engine is closing: its partitions are closed next
        self._all_dirty = self._dir_dirty = True
        behind = await self._pass()
        while behind:  # partitions whose new bytes exceeded one look's limit
            for key in behind:
                self._mark(key, False)
            behind = await self._pass()

    async def _pass(self) -> list[tuple[str, int]]:
        """One refresh pass over what is marked (see :meth:`_mark`); returns the partitions still behind."""
        async with self._pass_lock:
            all_dirty, dir_dirty, dirty = self._all_dirty, self._dir_dirty, self._dirty
            self._all_dirty = self._dir_dirty = False
            self._dirty = {}
            if dir_dirty:
                await self._refresh_log_dir()
            logs = self._load.logs
            if all_dirty:
                todo = {key: True for key in logs}
            else:
                todo = {key: listing for key, listing in dirty.items() if key in logs}
            return await self._refresh_partitions(todo)

    async def _refresh_log_dir(self) -> None:
        """Topics that appeared or went, and the log start checkpoint."""
        load = self._load
        listing = await in_thread(_list_log_dir, load.path, set(load.topics))
        self._start_offsets = loader.parse_checkpoint_file(listing, LOG_START_OFFSET_CHECKPOINT, load.path)
        for key in [k for k in load.logs if k not in listing.partition_dirs]:
            await self._drop_partition(key)
        added = [key for key in sorted(listing.partition_dirs) if key not in load.logs]
        for topic, partition in added:
            meta = listing.partition_dirs.get((topic, partition))
            if topic not in load.topics and meta is None:
                continue  # its topic.json is not written yet (it comes before the first segment)
            await self._add_partition(loader.topic_of(load, topic, partition, meta), partition)
        for key, plog in load.logs.items():
            self._apply_log_start(key, plog)

    async def _add_partition(self, topic: TopicState, partition: int) -> None:
        load = self._load
        key = (topic.name, partition)
        directory = load.path / partition_dir_name(*key)
        await self._watch([key])  # first: a write after the look below is then reported
        now_ms = time.time_ns() // 1_000_000
        files = (await loader.open_files_in_chunk([(directory, topic.config)], now_ms, writable=False,
                                                  read_active_end=False, on_active=start_following_in_thread))[0]
        if isinstance(files, BaseException):
            if self._notifier is not None:
                self._notifier.unwatch(key)
            log.debug("%s: not followed yet: %s", partition_dir_name(*key), files)
            return
        try:
            loaded, _ = await loader.load_partition(
                directory, topic.config, files, topic=topic.name, partition=partition, unclean=False,
                recovery_point=None, log_start_checkpoint=self._start_offsets.get(key), read_only=True,
                now_ms=now_ms,
            )
        except UnknownTopicOrPartitionError:  # created, but no segment yet: the next pass looks again
            if self._notifier is not None:
                self._notifier.unwatch(key)
            return
        load.topics.setdefault(topic.name, topic)
        topic.partitions = max(topic.partitions, partition + 1)
        load.logs[key] = PartitionLog(topic.name, partition, directory, topic.config, load.owner, loaded=loaded,
                                      read_only=True)
        await in_thread(self._record_inodes, [key])
        log.info("%s: following partition %s-%d", load.path, topic.name, partition)

    async def _drop_partition(self, key: tuple[str, int]) -> None:
        load = self._load
        plog = load.logs.pop(key, None)
        if self._notifier is not None:
            self._notifier.unwatch(key)
        self._inodes.pop(key, None)
        if plog is not None:
            plog._mark_deleted()
            await plog.close()  # its subscribers end, as on the writer's delete_topic
        if not any(k[0] == key[0] for k in load.logs):
            load.topics.pop(key[0], None)
        log.info("%s: partition %s-%d is gone", load.path, *key)

    async def _refresh_partitions(self, todo: dict[tuple[str, int], bool]) -> list[tuple[str, int]]:
        logs, path = self._load.logs, self._load.path
        keys = sorted(todo)
        more: list[tuple[str, int]] = []
        for i in range(0, len(keys), REFRESH_CHUNK):
            chunk = [(key, logs[key]) for key in keys[i : i + REFRESH_CHUNK] if key in logs]
            jobs = [
                (plog.directory, plog._segments.values(), self._inodes.get(key), plog.config, todo[key])
                for key, plog in chunk
            ]

            def look_all(jobs: list[tuple[Path, list[LogSegment], int | None, LogConfig, bool]] = jobs) -> list[
                _PartitionLook | Exception
            ]:
                out: list[_PartitionLook | Exception] = []
                for directory, segments, inode, config, listing in jobs:
                    try:
                        out.append(_look_at_partition(directory, segments, inode, config, listing=listing))
                    except Exception as exc:  # this partition only; the next pass retries it
                        out.append(exc)
                return out

            job = asyncio.ensure_future(in_thread(look_all))
            try:
                looks = await asyncio.shield(job)
            except asyncio.CancelledError:
                # The thread goes on after a cancellation: release the segments it opened.
                with contextlib.suppress(BaseException):
                    done = await job
                    await in_thread(_release, [s for x in done if isinstance(x, _PartitionLook)
                                                       for s in x.opened])
                raise
            for (key, plog), look in zip(chunk, looks, strict=True):
                if isinstance(look, Exception):
                    log.warning("%s: cannot follow %s-%d: %s", path, key[0], key[1], look)
                    continue
                if await self._apply(key, plog, look):
                    more.append(key)
        return more

    async def _apply(self, key: tuple[str, int], plog: PartitionLog, look: _PartitionLook) -> bool:
        """Make a look at one partition visible (on the loop); returns whether more is waiting to be read."""
        if plog.closed or self._load.logs.get(key) is not plog:  # dropped or closed while the thread looked
            await in_thread(_release, look.opened)
            return False
        if look.gone:
            await self._drop_partition(key)
            self._mark(None, True)  # a new incarnation of the topic may be there: the log dir pass adds it
            return False
        # Under the partition's lock, which a first load of the producer state (a read_committed
        # read's) holds from its start to its end: the segments and the end it loads from stay put.
        async with plog._lock:
            if plog.closed:  # closed while this waited for the lock
                await in_thread(_release, look.opened)  # type: ignore[unreachable]
                return False
            segments = plog._segments
            if look.removed or any(segments.get(fresh.base_offset) is not None for fresh in look.opened):
                # Segments deleted or replaced under the view (retention, another writer's recovery):
                # the producer state is reloaded from the files on its next use.
                plog._producers_loaded = False
            for base in look.removed:
                gone = segments.remove(base)
                if gone is not None:
                    self._retire(gone, plog.config.file_delete_delay_ms)
            for segment, scan in look.scans:
                if segments.get(segment.base_offset) is segment:
                    segment.apply_follow(scan)
            for fresh in look.opened:
                replaced = segments.add(fresh)
                if replaced is not None:
                    self._retire(replaced, plog.config.file_delete_delay_ms)
            if segments.is_empty:  # everything listed was removed meanwhile: the next pass decides
                self._mark(key, True)
                return False
            active = segments.active_segment
            assert active is not None
            end = await segment_read(lambda nowait: active.read_next_offset(nowait=nowait))  # known: no I/O
            moved = end != plog._log_end_offset
            # A loaded producer state is replayed over what grew before the new end is visible: the
            # last stable offset must never run ahead of it (a transaction the writer opened past the
            # old end would read as committed). Kafka's follower replicas update theirs as they append.
            await plog._follow_producers(end)
            plog._log_end_offset = end
        plog._recovery_point = end  # nothing to flush in a read-only view
        moved = self._apply_log_start(key, plog) or moved
        if moved:
            plog._wake_readers()
        return look.more

    def _apply_log_start(self, key: tuple[str, int], plog: PartitionLog) -> bool:
        first = plog._segments.first_segment
        if first is None:
            return False
        start = max(plog._log_start_offset, first.base_offset, self._start_offsets.get(key, 0))
        start = min(start, plog._log_end_offset)
        moved = start != plog._log_start_offset
        plog._log_start_offset = start
        return moved

    def _retire(self, segment: LogSegment, delay_ms: int) -> None:
        # A reader may still be reading it (as the writer keeps deleted files for file.delete.delay.ms);
        # the writer removes the files about when this closes them, and the disk space is freed then.
        self._retired.add(segment)

        async def later() -> None:
            await asyncio.sleep(delay_ms / 1000)
            if segment in self._retired:
                self._retired.discard(segment)
                await in_thread(_release, [segment])

        task = asyncio.get_running_loop().create_task(later())
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def close(self) -> None:
        """Stop watching and refreshing; close the segments retired from the view. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._notifier is not None:
            self._notifier.close()
        tasks = [t for t in (self._task, *self._timers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with self._pass_lock:  # a refresh() of a caller finishes first
            retired, self._retired = list(self._retired), set()
            await in_thread(_release, retired)
