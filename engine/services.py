"""The directory-wide state beside the partitions: consumer groups, producer ids, transactions.

Owns: the four stores of a log directory that are not partitions -- the group
store (``consumer-offsets/``) and its group coordinator, the producer-id block
(``producer-ids``), and the transaction log (``transaction-state/``) with its
transaction coordinator -- and the order in which they load, start, stop and
close. ``Engine`` holds one and drives it from its own open and close; what the
transaction coordinator needs of the partitions (writing a marker, whether a
partition exists) it is given as two callables, so nothing here imports a
partition log.

Concurrency contract: belongs to the engine's event loop.

Must not import: ``engine.engine``, ``engine.log``, ``tools``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from seglog.engine.coordinator import GroupCoordinator
from seglog.engine.errors import SeglogError
from seglog.engine.groups import GROUPS_DIR, GroupStore
from seglog.engine.producer_ids import ProducerIdManager
from seglog.engine.transactions import TRANSACTIONS_DIR, TransactionCoordinator, TransactionLog

__all__ = ["DirServices"]

log = logging.getLogger("seglog")


class DirServices:
    """A log directory's group store and coordinator, producer ids, transaction log and coordinator.

    ``write_txn_marker(topic, partition, producer_id, epoch, commit)`` writes a
    transaction marker to a partition; ``has_partition(topic, partition)`` says
    whether one exists.
    """

    __slots__ = ("coordinator", "groups", "producer_ids", "transactions", "txn_log")

    def __init__(
        self,
        path: Path,
        *,
        read_only: bool,
        write_txn_marker: Callable[[str, int, int, int, bool], Awaitable[None]],
        has_partition: Callable[[str, int], bool],
    ) -> None:
        self.groups = GroupStore(path / GROUPS_DIR, read_only=read_only)
        self.coordinator = GroupCoordinator(self.groups)
        self.producer_ids = ProducerIdManager(path)
        self.txn_log = TransactionLog(path / TRANSACTIONS_DIR, read_only=read_only)
        self.transactions = TransactionCoordinator(
            self.txn_log, self.producer_ids, self.coordinator, write_txn_marker, has_partition
        )

    async def load(self) -> None:
        """Read the group store and the transaction log.

        Raises:
            StorageError, CorruptRecordError: a store cannot be read.
        """
        await self.groups.load()
        await self.txn_log.load()

    def start(self) -> None:
        """Start the transaction coordinator: it finishes the transactions a crash left half-ended (the
        partitions must be open) and times out those left open."""
        self.transactions.start()

    async def stop(self) -> None:
        """The first step of a close, before the partitions close: group consumers stop, parked JoinGroup
        calls are answered, transaction markers in flight finish and timeouts stop."""
        await self.coordinator.close()
        await self.transactions.close()

    async def close(self) -> None:
        """The last step of a close, after the partitions closed: the queued commits and transaction states
        are written and the files closed. A store that fails is logged; the other still closes."""
        try:
            await self.groups.close()
        except SeglogError as exc:
            log.error("consumer-group store: close failed: %s", exc)
        try:
            await self.txn_log.close()
        except SeglogError as exc:
            log.error("transaction log: close failed: %s", exc)

    async def abort(self) -> None:
        """Close everything after a failed open, whatever state it reached; raises nothing."""
        for closing in (self.transactions.close, self.coordinator.close, self.groups.close, self.txn_log.close):
            with contextlib.suppress(Exception):
                await closing()
