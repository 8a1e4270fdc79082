"""Creating and deleting a topic's partition directories, all or nothing (docs/OPERATIONS.md, "Creating and
deleting topics").

Owns the directory work of ``Engine.create_topic`` and ``Engine.delete_topic``:
partition directories built aside and renamed into place with their
``topic.json`` (``-create``), renamed aside before they are removed
(``-delete``, Kafka's), and undone when a step fails. The engine's admin lock
is held by the caller throughout.

Must not import: ``tools``, ``engine.engine``, ``engine.loader``, ``engine.follow``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from seglog.engine import _fs
from seglog.engine.errors import SeglogError, StorageError
from seglog.engine.log import LoadedLog, LogOwner, PartitionLog, new_segment
from seglog.engine.names import aside_dir_name, partition_dir_name
from seglog.engine.topics import TopicState, topic_file_bytes
from seglog.segments.segment import LogSegment, LogSegments

__all__ = ["create_partitions", "drop_topic", "set_topic_aside"]

log = logging.getLogger("seglog")


async def create_partitions(
    path: Path,
    topic: TopicState,
    partitions: Sequence[int],
    logs: dict[tuple[str, int], PartitionLog],
    owner: LogOwner,
) -> None:
    """Create ``partitions`` of ``topic``: each directory complete with its topic.json, or not at all.

    Each directory is built aside (``<topic>-<p>.<uuid>-create``) and renamed
    into place only once its ``topic.json`` is durable, so a crash at any
    instant leaves every ``<topic>-<p>`` directory with its topic's config
    and partition count. The next open removes what is still aside and
    creates the partitions a topic.json names but no directory holds. The new
    ``PartitionLog`` of each goes into ``logs``.
    """
    placed = [
        (
            aside_dir_name(topic.name, partition, _fs.CREATE_DIR_SUFFIX),
            partition_dir_name(topic.name, partition),
            topic_file_bytes(topic, partition),
        )
        for partition in partitions
    ]
    await _fs.place_new_partition_dirs(path, placed)
    now_ms = time.time_ns() // 1_000_000
    for partition in partitions:
        directory = path / partition_dir_name(topic.name, partition)
        segments: LogSegments[LogSegment] = LogSegments()
        segments.add(await new_segment(directory, topic.config, 0, now_ms))
        logs[(topic.name, partition)] = PartitionLog(
            topic.name, partition, directory, topic.config, owner, loaded=LoadedLog(segments, 0, 0, 0),
            read_only=False, active_is_new=True,
        )


async def set_topic_aside(path: Path, state: TopicState, logs: dict[tuple[str, int], PartitionLog]) -> None:
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
    plogs = [logs[(state.name, p)] for p in range(state.partitions) if (state.name, p) in logs]
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
                target = path / aside_dir_name(state.name, plog.partition, _fs.DELETE_DIR_SUFFIX)
                await _fs.rename_dir(source, target)
                plog._move_to(target)
                moved.append((plog, source))
            await _fs.fsync_dir(path)
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


async def drop_topic(
    path: Path,
    topic: str,
    topics: dict[str, TopicState],
    logs: dict[tuple[str, int], PartitionLog],
    spawn: Callable[[Coroutine[Any, Any, None], str], None],
) -> None:
    """Forget ``topic``, close its partitions, and remove its directories in the background.

    Directories not renamed yet (a create_topic being rolled back) are renamed now.
    """
    state = topics.pop(topic, None)
    if state is None:
        return
    for partition in range(state.partitions):  # all of them first: their closes take turns below
        plog = logs.get((topic, partition))
        if plog is not None:
            plog._mark_deleted()
    for partition in range(state.partitions):
        plog = logs.pop((topic, partition), None)
        if plog is not None:
            try:
                await plog.close()
            except SeglogError as exc:  # the files are released anyway; they are removed below
                log.warning("%s-%d: close of a deleted partition failed: %s", topic, partition, exc)
        source = path / partition_dir_name(topic, partition) if plog is None else plog.directory
        if source.name.endswith(_fs.DELETE_DIR_SUFFIX):  # set aside by delete_topic already
            target = source
        else:
            target = path / aside_dir_name(topic, partition, _fs.DELETE_DIR_SUFFIX)
            if not await _fs.rename_if_exists(source, target):
                continue
        spawn(_fs.remove_tree(target), f"seglog-remove-{target.name}")
    await _fs.fsync_dir(path)
