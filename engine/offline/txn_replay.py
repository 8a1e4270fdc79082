"""The aborted transactions a partition's log says its ``.txnindex`` files must hold, and the check of them.

The engine adds a ``.txnindex`` entry to the segment that receives an abort
marker, from its producer state just before the marker (Kafka's
``UnifiedLog.append`` → ``LogSegment.updateTxnIndex``): the producer id, the
first offset of the producer's open transaction (the marker's own offset when
none was open: Kafka writes the marker and the entry anyway), the marker's
offset, and the last stable offset (``ProducerStateManager.lastStableOffset``:
the first offset of the oldest transaction of another producer still open,
else the offset after the marker). :class:`TxnReplay` replays the
transactional batches of the segments, in order, through the engine's own
:class:`~seglog.engine.producer_state.ProducerStateManager` and gives the
entry each abort marker must have; :func:`txn_index_against_log` compares a
segment's entries with them, both ways.

The replay is exact when it starts where the state is known: at offset 0,
or from a snapshot that decodes at the first segment's base offset. Otherwise
(the head of the log deleted without a usable snapshot, or a segment not
scanned) a transaction may have begun before what was replayed: until its
producer ends one in the replay, its first offset is only bounded above,
and so is every last stable offset.

Must not import: ``tools``; nor ``seglog.engine.engine`` / ``seglog.engine.log``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from seglog.engine.offline.findings import Check, Finding, Severity
from seglog.engine.offline.segment_scan import TxnBatch
from seglog.engine.producer_state import ProducerStateEntry, ProducerStateManager
from seglog.indexes.transaction_index import ABORTED_TXN, AbortedTxn

__all__ = ["ExpectedAbort", "TxnReplay", "txn_index_against_log"]

# A .txnindex entry the engine does not rebuild: it trusts one that is well formed.
_REPAIR_HINT = "the engine trusts a well-formed .txnindex and does not rebuild it"


class ExpectedAbort(NamedTuple):
    """The ``.txnindex`` entry an abort marker must have; an inexact first offset or LSO is an upper bound."""

    txn: AbortedTxn
    first_exact: bool
    lso_exact: bool


class TxnReplay:
    """The transactional batches of a partition's segments replayed in offset order (:meth:`segment`)."""

    def __init__(self, start_offset: int, snapshot: Iterable[ProducerStateEntry] | None = None) -> None:
        self._producers = ProducerStateManager(start_offset)
        self._exact = snapshot is not None or start_offset == 0
        self._known: set[int] = set()  # producers whose open transaction is known (inexact replay)
        if snapshot is not None:
            self._producers.load_snapshot(snapshot, start_offset, now_ms=0, expiration_ms=1 << 62)

    def lose_track(self) -> None:
        """Batches were skipped (a segment not scanned or unreadable): what is open is no longer known."""
        self._producers.truncate_fully_and_start_at(0)
        self._exact = False
        self._known.clear()

    def segment(self, batches: Iterable[TxnBatch]) -> dict[int, ExpectedAbort]:
        """Replay one segment's transactional batches; the abort markers among them, by offset."""
        out: dict[int, ExpectedAbort] = {}
        producers = self._producers
        for batch in batches:
            h = batch.header
            if not h.is_control:
                producers.load_batch(h.producer_id, h.producer_epoch, h.base_sequence, h.base_offset,
                                     h.last_offset_delta, h.max_timestamp, is_transactional=True)
                continue
            if batch.marker is None:
                continue  # not a marker: reported by the deep check, ends nothing
            first_exact = self._exact or h.producer_id in self._known
            completed, lso = producers.load_marker(
                h.producer_id, h.producer_epoch, h.base_offset, h.max_timestamp,
                commit=batch.marker.commit, coordinator_epoch=batch.marker.coordinator_epoch,
            )
            self._known.add(h.producer_id)
            if completed.is_aborted:
                txn = AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso)
                # Inexact: a producer not yet seen ending a transaction may hold one open from before.
                out[h.base_offset] = ExpectedAbort(txn, first_exact, self._exact)
        return out


def txn_index_against_log(path: Path, entries: Sequence[AbortedTxn], expected: dict[int, ExpectedAbort],
                          batches: Iterable[TxnBatch]) -> list[Finding]:
    """A segment's ``.txnindex`` entries against the abort markers of its ``.log``, both ways.

    Each entry must be the one its marker (at its last offset) must have;
    each abort marker must have its entry. ``path``: the segment's
    ``.txnindex`` (``entries`` empty when it has none); ``expected``:
    :meth:`TxnReplay.segment`'s answer for this segment; ``batches``: its
    transactional batches.
    """
    by_offset = {b.header.base_offset: b for b in batches}
    out: list[Finding] = []
    matched: set[int] = set()
    for slot, txn in enumerate(entries):
        pid = txn.producer_id
        want = expected.get(txn.last_offset)
        problem = None
        if want is None:
            marker = by_offset.get(txn.last_offset)
            if marker is None or not marker.header.is_control:
                problem = f"last offset {txn.last_offset} is not a transaction marker (a control batch)"
            elif marker.marker is None:
                problem = f"the control batch at offset {txn.last_offset} is not a transaction marker"
            else:
                problem = f"the marker at offset {txn.last_offset} is a commit, not an abort"
        else:
            matched.add(txn.last_offset)
            w = want.txn
            if w.producer_id != pid:
                problem = f"the marker at offset {txn.last_offset} is producer {w.producer_id}'s, not {pid}'s"
            elif txn.first_offset != w.first_offset and (want.first_exact or txn.first_offset > w.first_offset):
                problem = (f"first offset {txn.first_offset} is not where producer {pid}'s transaction starts "
                           f"({'offset' if want.first_exact else 'at or before offset'} {w.first_offset})")
            elif txn.last_stable_offset != w.last_stable_offset and (
                    want.lso_exact or txn.last_stable_offset > w.last_stable_offset):
                problem = (f"last stable offset {txn.last_stable_offset} is not the one at its marker "
                           f"({'' if want.lso_exact else 'at most '}{w.last_stable_offset}: the first offset of "
                           "the oldest other transaction still open, else the offset after the marker)")
        if problem is not None:
            out.append(Finding(Severity.ERROR, Check.TXN_INDEX, path,
                               f"slot {slot} (producer {pid}, offsets {txn.first_offset}..{txn.last_offset}): "
                               f"{problem}; a read_committed read would hide the wrong records",
                               position=slot * ABORTED_TXN.size, offset=txn.last_offset))
    for offset, want in sorted(expected.items()):
        if offset in matched:
            continue
        w = want.txn
        first = f"{w.first_offset}" if want.first_exact else f"at most {w.first_offset}"
        lso = f"{w.last_stable_offset}" if want.lso_exact else f"at most {w.last_stable_offset}"
        out.append(Finding(Severity.ERROR, Check.TXN_INDEX, path,
                           f"the abort marker at offset {offset} (producer {w.producer_id}) has no entry: expected "
                           f"producer id {w.producer_id}, first offset {first}, last offset {offset}, last stable "
                           f"offset {lso}; a read_committed read would return the records of that aborted "
                           f"transaction ({_REPAIR_HINT})", offset=offset))
    return out
