"""Consumer-group offsets: where each group will read next, durable across crashes.

Stored as one small JSON file per group in ``<log_dir>/consumer-offsets/``,
replaced atomically on every commit (temp file, fdatasync, rename, directory
fsync): after a crash a group's file holds either the previous or the new
commit, never a mix. The file name is the group id in URL-safe base64, so any
group id (slashes, dots, unicode) maps to one safe file name::

    {"version": 1, "group": "billing", "offsets": [["orders", 0, 42], ["orders", 1, 7]]}

An unreadable file is reported and skipped at load (the group starts over, as
Kafka's consumers do with ``auto.offset.reset``); it is never fatal.

Concurrency: commits of one group are serialised by a per-group lock; the
in-memory view changes only after the file was replaced.

Must not import: ``tools``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
from pathlib import Path
from typing import Final

from seglog.engine.validate import validate_group
from seglog.segments.fileio import atomic_write, in_thread, make_dirs, remove

__all__ = ["GroupOffsets", "validate_group"]

log = logging.getLogger("seglog")

GROUP_FILE_VERSION: Final = 1  # part of the on-disk format
_SUFFIX: Final = ".json"

TopicPartition = tuple[str, int]

# File names stay under the 255-byte limit of most file systems, temp suffix included: a group id
# whose base64 would be longer is named by its SHA-256 instead (the id itself is inside the file).
_MAX_B64_NAME: Final = 200


def group_file_name(group: str) -> str:
    encoded = base64.urlsafe_b64encode(group.encode("utf-8")).decode("ascii").rstrip("=")
    if len(encoded) > _MAX_B64_NAME:
        encoded = "sha256-" + hashlib.sha256(group.encode("utf-8")).hexdigest()
    return encoded + _SUFFIX


def is_group_file_name(name: str) -> bool:
    return name.endswith(_SUFFIX) and not name.startswith(".")


def group_from_file_name(name: str) -> str | None:
    """The group id a base64 file name encodes; ``None`` for a hashed name or anything else."""
    if not is_group_file_name(name) or name.startswith("sha256-"):
        return None
    stem = name[: -len(_SUFFIX)]
    try:
        return base64.urlsafe_b64decode(stem + "=" * (-len(stem) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def encode_group_file(group: str, offsets: dict[TopicPartition, int]) -> bytes:
    rows = [[topic, partition, offset] for (topic, partition), offset in sorted(offsets.items())]
    return json.dumps({"version": GROUP_FILE_VERSION, "group": group, "offsets": rows}).encode("utf-8")


def decode_group_file(data: bytes) -> tuple[str, dict[TopicPartition, int]]:
    """Parse a group file. Raises ``ValueError`` on anything unexpected."""
    meta = json.loads(data)
    if not isinstance(meta, dict) or meta.get("version") != GROUP_FILE_VERSION:
        raise ValueError("not a version-1 group offsets file")
    group = meta.get("group")
    rows = meta.get("offsets")
    if not isinstance(group, str) or not isinstance(rows, list):
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


def _load_dir(directory: Path) -> dict[str, dict[TopicPartition, int]]:
    out: dict[str, dict[TopicPartition, int]] = {}
    if not directory.is_dir():
        return out
    for path in sorted(directory.iterdir()):
        if not is_group_file_name(path.name):
            continue
        try:
            group, offsets = decode_group_file(path.read_bytes())
            if group_file_name(group) != path.name:
                raise ValueError(f"file holds group {group!r}, whose file name differs")
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable consumer-group offsets (%s); the group starts over", path, exc)
            continue
        out[group] = offsets
    return out


class GroupOffsets:
    """The committed offsets of every consumer group of one log directory."""

    def __init__(self, directory: Path, *, read_only: bool) -> None:
        self.directory = directory
        self._read_only = read_only
        self._offsets: dict[str, dict[TopicPartition, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._dir_ready = False

    async def load(self) -> None:
        self._offsets = await in_thread(_load_dir, self.directory)

    def committed(self, group: str, topic: str, partition: int) -> int | None:
        return self._offsets.get(group, {}).get((topic, partition))

    def offsets(self, group: str) -> dict[TopicPartition, int]:
        return dict(self._offsets.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self._offsets)

    async def commit(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            merged = dict(self._offsets.get(group, {}))
            merged.update(offsets)
            await self._write(group, merged)
            self._offsets[group] = merged

    async def delete(self, group: str) -> bool:
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            existed = self._offsets.pop(group, None) is not None
            await remove(self.directory / group_file_name(group))
            return existed

    async def forget_topic(self, topic: str) -> None:
        for group in list(self._offsets):
            if not any(t == topic for t, _ in self._offsets.get(group, {})):
                continue
            lock = self._locks.setdefault(group, asyncio.Lock())
            async with lock:
                current = self._offsets.get(group)
                if current is None:  # deleted while this waited for the lock
                    continue
                kept = {tp: o for tp, o in current.items() if tp[0] != topic}
                await self._write(group, kept)
                self._offsets[group] = kept

    async def _write(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        if not self._dir_ready:
            await make_dirs(self.directory)
            self._dir_ready = True
        await atomic_write(self.directory / group_file_name(group), encode_group_file(group, offsets))
