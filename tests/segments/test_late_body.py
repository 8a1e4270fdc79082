"""Planned batches: the body is written by the thread that writes it to the file (``plan_batch_parts``).

A planned batch must be byte for byte the batch ``encode_batch_parts`` makes (CRC included), and a
late buffer that cannot be made must leave the file untouched.
"""

from __future__ import annotations

import array
import errno
import gc
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from seghelpers import append_file

import seglog.segments.batch as batch_module
from seglog.indexes.errors import StorageError
from seglog.segments.batch import (
    LateBody,
    TimestampType,
    decode_batch,
    encode_batch_parts,
    plan_batch_parts,
    read_header,
    verify_crc,
)
from seglog.segments.faults import FailingOps
from seglog.segments.fileio import SegmentFile
from seglog.segments.records import Record

_HEADER_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)  # valid keys: no NUL

needs_c = pytest.mark.skipif(bool(os.environ.get("SEGLOG_PURE_PYTHON")), reason="SEGLOG_PURE_PYTHON=1: no C module")

records_strategy = st.builds(
    Record,
    value=st.one_of(st.none(), st.binary(max_size=300), st.just(b"v" * 70_000)),
    key=st.one_of(st.none(), st.binary(max_size=40)),
    timestamp=st.one_of(st.none(), st.integers(0, 2**62)),
    headers=st.one_of(st.just(()), st.lists(st.tuples(_HEADER_KEYS, st.binary(max_size=30)), max_size=3).map(
        tuple
    )),
)


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(records_strategy, min_size=1, max_size=40),
    st.sampled_from(list(TimestampType)),
    st.integers(0, 2**62),
    st.integers(0, 2**40),
)
def test_a_planned_batch_is_the_encoded_batch(
    records: list[Record], ts_type: TimestampType, now_ms: int, base_offset: int
) -> None:
    planned = plan_batch_parts(base_offset, records, timestamp_type=ts_type, now_ms=now_ms)
    assert planned is not None
    head, body = planned
    expected_head, expected_body = encode_batch_parts(base_offset, records, timestamp_type=ts_type, now_ms=now_ms)
    assert len(body) == len(expected_body)  # exact before the body exists: sizes decide rolls and positions
    assert head[:17] == expected_head[:17] and head[21:] == expected_head[21:]  # all but the CRC, up front
    assert body.materialize() == expected_body
    assert head == expected_head  # the CRC is set by materialize()
    assert body.materialize() is body.materialize()  # made once
    batch = bytes(head) + expected_body
    verify_crc(batch, 0, read_header(batch))


@needs_c
def test_the_records_are_taken_when_planned_not_when_written() -> None:
    records = [Record(b"a" * 1000, b"k", 5), Record(b"b" * 1000, None, 9)]
    planned = plan_batch_parts(0, records, timestamp_type=TimestampType.CREATE_TIME, now_ms=1)
    assert planned is not None
    head, body = planned
    records[0] = Record(b"changed", None, 1)  # the caller reuses its list before the write
    records.append(Record(b"more"))
    batch = bytes(head) + body.materialize()
    got = decode_batch(batch, 0, read_header(batch))
    assert [(r.value, r.key, r.timestamp) for r in got] == [(b"a" * 1000, b"k", 5), (b"b" * 1000, None, 9)]


def test_what_the_c_encoder_does_not_take_is_not_planned() -> None:
    # encode_batch_parts then encodes it, or raises its documented error.
    for records in ([], [Record("text")], [Record(b"x", timestamp=-1)], [(b"x",)], "abc"):  # type: ignore[list-item]
        given: Any = records
        assert plan_batch_parts(0, given, timestamp_type=TimestampType.CREATE_TIME, now_ms=1) is None
    assert plan_batch_parts(-1, [Record(b"x")], timestamp_type=TimestampType.CREATE_TIME, now_ms=1) is None


def test_without_the_c_module_nothing_is_planned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_module, "_fast", None)
    assert plan_batch_parts(0, [Record(b"x")], timestamp_type=TimestampType.CREATE_TIME, now_ms=1) is None


class Exploding:
    """A late buffer whose making fails (e.g. MemoryError on a huge body)."""

    def __len__(self) -> int:
        return 10

    def materialize(self) -> bytes:
        raise MemoryError("no room for the body")


class Lying:
    """A late buffer that makes fewer bytes than it promised."""

    def __len__(self) -> int:
        return 10

    def materialize(self) -> bytes:
        return b"short"


class Recorded:
    """A late buffer that records the thread it was made in."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.thread: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self.data)

    def materialize(self) -> bytes:
        self.thread = threading.current_thread()
        return self.data


async def test_a_late_buffer_is_made_in_the_write_thread(tmp_path: Path) -> None:
    f = SegmentFile.open(tmp_path / "a.log", create=True)
    late = Recorded(b"late")
    assert await append_file(f, [b"head:", late, b":tail"]) == 0
    assert late.thread is not None and late.thread is not threading.current_thread()
    assert (tmp_path / "a.log").read_bytes() == b"head:late:tail" and f.size == 14
    f.close()


@pytest.mark.parametrize(("late", "error"), [(Exploding(), MemoryError), (Lying(), RuntimeError)])
async def test_a_late_buffer_that_cannot_be_made_writes_nothing(tmp_path: Path, late: Any, error: type) -> None:
    f = SegmentFile.open(tmp_path / "a.log", create=True)
    await append_file(f, [b"kept"])
    with pytest.raises(error):
        await append_file(f, [b"first-part", late])  # the plain part before it is not written either
    assert f.size == 4 and (tmp_path / "a.log").read_bytes() == b"kept"
    await append_file(f, [b"+next"])
    assert (tmp_path / "a.log").read_bytes() == b"kept+next"
    f.close()


@needs_c
async def test_a_planned_body_that_fails_to_write_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    ops = FailingOps()
    f = SegmentFile.open(tmp_path / "a.log", create=True, ops=ops)
    await append_file(f, [b"kept"])
    planned = plan_batch_parts(0, [Record(b"x" * 5000)] * 100, timestamp_type=TimestampType.CREATE_TIME, now_ms=1)
    assert planned is not None
    head, body = planned
    ops.fail("pwritev", errno.ENOSPC, partial_bytes=1000)
    with pytest.raises(StorageError, match="No space left"):
        await append_file(f, [head, body])
    assert f.size == 4 and (tmp_path / "a.log").read_bytes() == b"kept"
    assert isinstance(body, LateBody) and len(body.materialize()) == len(body)  # made once, kept for a retry
    f.close()


@needs_c
def test_a_plan_is_written_once_and_takes_only_a_tuple() -> None:
    fast = batch_module._fast
    assert fast is not None
    records = (Record(b"x" * 100, b"k", 3), Record(None, None, 7, (("h", b"v"),)))
    plan = fast.body_plan(records, False, 1)
    assert plan is not None and (plan.size, plan.base_ts, plan.max_ts) == (
        len(fast.encode_body(records, False, 1)[0]), 3, 7
    )
    assert plan.write() == fast.encode_body(records, False, 1)[0]
    with pytest.raises(RuntimeError, match="written already"):
        plan.write()
    with pytest.raises(TypeError):
        fast.body_plan(list(records), False, 1)  # a list could change between planning and writing


async def test_other_bytes_like_buffers_are_written_as_they_are(tmp_path: Path) -> None:
    # Only objects with materialize() are late; a bytes subclass or an array is written as pwritev takes it.
    class Chunk(bytes):
        pass

    f = SegmentFile.open(tmp_path / "a.log", create=True)
    assert await append_file(f, [Chunk(b"sub"), array.array("b", b"arr"), b"!"]) == 0
    assert (tmp_path / "a.log").read_bytes() == b"subarr!"
    f.close()


@needs_c
def test_an_unwritten_plan_in_a_reference_cycle_is_collected() -> None:
    # A record's offset field may hold anything, so a plan can end up inside its own records.
    fast = batch_module._fast
    assert fast is not None

    class Canary:
        pass

    canary = Canary()
    alive = weakref.ref(canary)
    box: list[object] = [canary]
    plan = fast.body_plan((Record(b"v", None, None, (), box),), False, 0)  # type: ignore[arg-type]
    box.append(plan)
    del plan, box, canary
    gc.collect()
    assert alive() is None
