"""The partition log against a list model: append, read, time lookup, roll, reopen, retention, delete.

Hypothesis drives random sequences of public-API calls; after each one the log
must agree with a plain Python list of (offset, value, timestamp).
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from machinehelpers import EngineMachine, machine_test

from seglog.engine import LogConfig, OffsetAndTimestamp, Record, errors

CONFIG = LogConfig(
    segment_bytes=1024,
    segment_index_bytes=96,  # 12 offset entries / 8 time entries: index-full rolls happen too
    index_interval_bytes=64,
    retention_bytes=-1,
    file_delete_delay_ms=0,
)

values = st.binary(min_size=0, max_size=120)
timestamps = st.integers(min_value=0, max_value=2_000)


class LogMachine(EngineMachine):
    CONFIG = CONFIG

    def __init__(self) -> None:
        super().__init__()
        self.model: list[tuple[int, bytes, int]] = []  # (offset, value, timestamp)
        self.start = 0

    @rule(batch=st.lists(st.tuples(values, timestamps), min_size=1, max_size=6))
    def append(self, batch: list[tuple[bytes, int]]) -> None:
        res = self.run(self.log.append([Record(v, timestamp=ts) for v, ts in batch]))
        first = len(self.model)
        assert res.first_offset == first and res.last_offset == first + len(batch) - 1
        self.model += [(first + i, v, ts) for i, (v, ts) in enumerate(batch)]

    @rule(
        calls=st.lists(st.lists(st.tuples(values, timestamps), min_size=1, max_size=4), min_size=2, max_size=8),
        bad=st.sets(st.integers(min_value=0, max_value=7), max_size=2),
    )
    def concurrent_appends(self, calls: list[list[tuple[bytes, int]]], bad: set[int]) -> None:
        # Small appends in flight together share batches (OPERATIONS.md); each caller must still get
        # its own contiguous offsets, and a caller with an invalid record fails alone.
        async def one(i: int, batch: list[tuple[bytes, int]]) -> object:
            records = [Record(v, timestamp=ts) for v, ts in batch]
            if i in bad:
                records.append(Record(b"bad", timestamp=-1))  # refused by the encoder
            return await self.log.append(records)

        async def together() -> list[object]:
            return await asyncio.gather(*(one(i, b) for i, b in enumerate(calls)), return_exceptions=True)

        results = self.run(together())
        written = []
        for i, (batch, res) in enumerate(zip(calls, results, strict=True)):
            if i in bad:
                assert isinstance(res, errors.InvalidRecordError)
                continue
            assert not isinstance(res, BaseException), res
            assert res.last_offset - res.first_offset + 1 == len(batch)
            written.append((res.first_offset, batch))
        for first, batch in sorted(written, key=lambda item: item[0]):
            assert first == len(self.model)  # contiguous, no gaps between callers
            self.model += [(first + j, v, ts) for j, (v, ts) in enumerate(batch)]

    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        end = len(self.model)
        offset = data.draw(st.integers(min_value=self.start, max_value=end))
        max_bytes = data.draw(st.sampled_from([0, 1, 100, 1 << 20]))
        got = self.run(self.log.read(offset, max_bytes))
        if offset == end:
            assert got.records == []
            return
        assert got.records, "min one message"
        expect = self.model[offset : offset + len(got.records)]
        assert [(r.offset, r.value, r.timestamp) for r in got.records] == expect
        assert got.next_offset == got.records[-1].offset + 1

    @rule(offset=st.integers(min_value=-5, max_value=400))
    def read_out_of_range(self, offset: int) -> None:
        if self.start <= offset <= len(self.model):
            return
        with pytest.raises(errors.OffsetOutOfRangeError):
            self.run(self.log.read(offset))

    @rule(wanted=st.integers(min_value=0, max_value=2_100))
    def time_lookup(self, wanted: int) -> None:
        hit = self.run(self.log.offset_for_timestamp(wanted))
        expect = next(((o, ts) for o, _, ts in self.model[self.start :] if ts >= wanted), None)
        assert hit == (None if expect is None else OffsetAndTimestamp(*expect))

    @rule()
    def reopen(self) -> None:
        self.reopen_engine()

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def delete_records_before(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(min_value=0, max_value=len(self.model)))
        new_start = self.run(self.log.delete_records_before(offset))
        self.start = max(self.start, offset)
        assert new_start == self.start

    @rule(limit=st.integers(min_value=0, max_value=3000))
    def retention_by_size(self, limit: int) -> None:
        # Retention may delete whole segments from the front: the model's start follows the log's.
        plog = self.log
        plog.config = plog.config.with_overrides(retention_bytes=limit)
        try:
            self.run(plog.enforce_retention(0))
        finally:
            plog.config = plog.config.with_overrides(retention_bytes=-1)
        assert plog.log_start_offset >= self.start
        self.start = plog.log_start_offset

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == len(self.model)
        assert self.log.log_start_offset == self.start


test_partition_log_against_a_list = machine_test(LogMachine, max_examples=25, steps=30)
