"""Producer ids of a log directory, never handed out twice (Kafka's ``ProducerIdManager`` on one node).

An idempotent producer's batches are told apart by its producer id: an id
given to two producers would make one's batches look like retries of the
other's. Ids are therefore allocated in blocks of 1000 (Kafka's block size),
and the end of a block is written durably to ``<log_dir>/producer-ids`` before
the first id of that block is handed out; a restart starts at the next block,
leaving the unused rest of the old one (Kafka does the same). The file is
Kafka's checkpoint text: a version line ``0`` and the first id of the next
block.

A file that does not parse is not trusted to start at 0: the next block then
starts at the time in microseconds, far above any block written before
(unless a directory handed out ids faster than a million a second), with a
warning.

Must not import: ``tools``, ``server``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Final

from seglog.engine.errors import ClosedError, InvalidRecordError
from seglog.engine.producer_state import MAX_PRODUCER_EPOCH
from seglog.segments.fileio import atomic_write, read_small_file

__all__ = ["BLOCK_SIZE", "PRODUCER_IDS_FILE", "ProducerIdManager", "parse_producer_ids"]

log = logging.getLogger("seglog")

PRODUCER_IDS_FILE: Final = "producer-ids"  # part of the on-disk layout
BLOCK_SIZE: Final = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
_VERSION: Final = 0  # part of the format
_MAX_ID: Final = 2**63 - 1


def parse_producer_ids(data: bytes) -> int | None:
    """The next block's first id in a ``producer-ids`` file, or ``None`` when it does not parse."""
    try:
        lines = data.decode("ascii").split("\n")
    except UnicodeDecodeError:
        return None
    if len(lines) != 3 or lines[2] != "" or lines[0] != str(_VERSION):
        return None
    text = lines[1]
    if not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if value <= _MAX_ID - BLOCK_SIZE else None


def format_producer_ids(next_block: int) -> bytes:
    return f"{_VERSION}\n{next_block}\n".encode("ascii")


class ProducerIdManager:
    """Hands out the producer ids of one log directory (one per engine; not for read-only engines)."""

    def __init__(self, log_dir: Path) -> None:
        self._path = log_dir / PRODUCER_IDS_FILE
        self._lock = asyncio.Lock()
        self._next = 0
        self._block_end = 0  # nothing allocated in this run yet
        self._persisted: int | None = None  # the file's value once read

    async def init_producer_id(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """``(producer id, epoch)`` for an idempotent producer (Kafka's InitProducerId without a transactional id).

        A new id, never handed out before by this log directory, with epoch 0.
        A producer that presents the id and epoch it has (KIP-360; ``-1, -1``
        when it has none), for an id this directory handed out and an epoch
        below 32766, gets the same id with the next epoch: its batches of the
        older epoch are fenced from then on.

        Raises:
            InvalidRecordError: ``producer_id`` or ``producer_epoch`` is not an int.
            StorageError: the id block could not be recorded.
            ClosedError: the ids ran out.
        """
        if type(producer_id) is not int or type(producer_epoch) is not int:
            raise InvalidRecordError(
                f"producer_id and producer_epoch must be ints, got {producer_id!r} and {producer_epoch!r}"
            )
        # Kafka moves to a new id once the epoch is exhausted (32766 and above).
        if 0 <= producer_epoch < MAX_PRODUCER_EPOCH - 1 and await self.issued(producer_id):
            return producer_id, producer_epoch + 1
        return await self.generate(), 0

    async def generate(self) -> int:
        """A producer id never handed out before by this log directory.

        Raises:
            StorageError: the next block could not be recorded (no id is handed out then).
            ClosedError: the ids ran out (2**63 of them).
        """
        async with self._lock:
            if self._next >= self._block_end:
                start = await self._next_block_start()
                if start > _MAX_ID - BLOCK_SIZE:
                    raise ClosedError(f"{self._path}: producer ids are exhausted at {start}")
                await atomic_write(self._path, format_producer_ids(start + BLOCK_SIZE))
                self._persisted = start + BLOCK_SIZE
                self._next, self._block_end = start, start + BLOCK_SIZE
            producer_id = self._next
            self._next += 1
            return producer_id

    async def issued(self, producer_id: int) -> bool:
        """Whether ``producer_id`` is one this directory may have handed out (below every recorded block's end).

        Raises:
            StorageError: the file could not be read.
        """
        async with self._lock:
            end = self._block_end if self._block_end else await self._next_block_start()
            return 0 <= producer_id < end

    async def _next_block_start(self) -> int:
        if self._persisted is not None:
            return self._persisted
        data = await read_small_file(self._path)
        if data is None:
            return 0
        parsed = parse_producer_ids(data)
        if parsed is not None:
            return parsed
        fallback = time.time_ns() // 1000
        log.warning(
            "%s does not parse (%d bytes); producer ids continue from %d (the time in microseconds), above any "
            "handed out before",
            self._path, len(data), fallback,
        )
        return fallback
