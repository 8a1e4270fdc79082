"""Transactions at one partition against a model of what each isolation level must return.

Hypothesis drives plain appends, transactional appends of two producers,
commits, aborts (markers written with ``write_txn_marker``), rolls, clean
reopens and crashes (the engine stopped with no flush, no checkpoint and no
clean-shutdown record, then recovered). After each step the log must agree with
the model: ``read_uncommitted`` returns every data record, ``read_committed``
only the committed ones below the LSO, markers are gaps in both, and the LSO
is the first offset of the oldest open transaction (else the log end).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from enginehelpers import read_pairs
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from machinehelpers import EngineMachine, machine_test

from seglog.engine import Engine, LogConfig, Record

CONFIG = LogConfig(segment_bytes=1024, segment_index_bytes=96, index_interval_bytes=64, file_delete_delay_ms=0)
PRODUCERS = (7, 8)

values = st.lists(st.binary(min_size=0, max_size=60), min_size=1, max_size=4)


@dataclass
class Producer:
    sequence: int = 0
    open_first: int | None = None  # first offset of its open transaction
    open_offsets: list[int] = field(default_factory=list)


class TransactionMachine(EngineMachine):
    CONFIG = CONFIG

    def __init__(self) -> None:
        super().__init__()
        self.end = 0
        self.data: dict[int, bytes] = {}  # every data record by offset
        self.aborted: set[int] = set()  # offsets of aborted transactions' records
        self.producers = {pid: Producer() for pid in PRODUCERS}

    def _take(self, batch: list[bytes], first: int) -> list[int]:
        assert first == self.end
        offsets = list(range(first, first + len(batch)))
        self.data.update(zip(offsets, batch, strict=True))
        self.end += len(batch)
        return offsets

    @rule(batch=values)
    def plain_append(self, batch: list[bytes]) -> None:
        res = self.run(self.log.append([Record(v) for v in batch]))
        self._take(batch, res.first_offset)

    @rule(pid=st.sampled_from(PRODUCERS), batch=values)
    def transactional_append(self, pid: int, batch: list[bytes]) -> None:
        producer = self.producers[pid]
        res = self.run(self.log.append([Record(v) for v in batch], producer_id=pid, producer_epoch=0,
                                       base_sequence=producer.sequence, transactional=True))
        producer.sequence += len(batch)
        offsets = self._take(batch, res.first_offset)
        if producer.open_first is None:
            producer.open_first = res.first_offset
        producer.open_offsets += offsets

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_transaction(self, pid: int, commit: bool) -> None:
        producer = self.producers[pid]
        marker = self.run(self.log.write_txn_marker(pid, 0, commit=commit))
        assert marker == self.end  # a marker takes one offset and holds no record
        self.end += 1
        if not commit:
            self.aborted.update(producer.open_offsets)
        producer.open_first, producer.open_offsets = None, []

    @rule()
    def clean_reopen(self) -> None:
        self.reopen_engine()

    @rule()
    def crash(self) -> None:
        # A kill -9: nothing flushed, no snapshot at close, no clean-shutdown record (the page cache keeps
        # every write, as it does for a killed process); the open recovers the partition.
        self.run(self.engine._abort_open())
        self.engine = self.run(Engine.open(self.dir, CONFIG))
        self.run(self.log.load_producer_state())  # rebuilt from the log on first need, or now

    @precondition(lambda self: self.end > 0)
    @rule(data=st.data())
    def read_from_anywhere(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(min_value=0, max_value=self.end))
        got = self.run(self.log.read(offset, 100, isolation="read_committed"))
        expected = self._committed(offset)
        assert [(r.offset, r.value) for r in got.records] == expected[: len(got.records)]
        assert got.records or not expected

    def _lso(self) -> int:
        opened = [p.open_first for p in self.producers.values() if p.open_first is not None]
        return min(opened, default=self.end)

    def _committed(self, start: int = 0) -> list[tuple[int, bytes]]:
        lso = self._lso()
        return [(o, v) for o, v in sorted(self.data.items()) if start <= o < lso and o not in self.aborted]

    @invariant()
    def isolation_levels_agree_with_the_model(self) -> None:
        log = self.log
        assert log.log_end_offset == self.end
        assert log.last_stable_offset == self._lso()
        assert self.run(read_pairs(self.log)) == sorted(self.data.items())
        assert self.run(read_pairs(self.log, "read_committed")) == self._committed()
        aborted_firsts = {(t.producer_id, t.first_offset) for t in log.aborted_transactions(0, self.end)}
        for offset in self.aborted:  # every aborted record is covered by an aborted transaction's range
            assert any(first <= offset for _, first in aborted_firsts)


test_transactions_against_a_model_of_both_isolations = machine_test(TransactionMachine, max_examples=20, steps=25)
