"""engine.producer_state: Kafka's producer-state rules, the snapshot codec and its distrust of bytes.

No event loop: the module is pure. The property tests drive one producer that
sends, retries and skips against a model of what a Kafka broker answers, and
check that what would be written is every batch exactly once, in order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.engine.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from seglog.engine.producer_state import (
    MAX_SEQUENCE,
    NUM_BATCHES_TO_RETAIN,
    AppendCheck,
    AppendOrigin,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    plan_snapshot_load,
    producer_fields_problem,
)

PID = 7


def write(
    manager: ProducerStateManager, epoch: int, base_seq: int, count: int = 1, *, pid: int = PID,
    timestamp: int = 1000, transactional: bool = False,
) -> tuple[int, int] | BatchMetadata:
    """A client's batch through the check, then recorded as written: its offsets, or the batch it repeats."""
    first = manager.map_end_offset
    check = AppendCheck(manager)
    duplicate = check.check(pid, epoch, base_seq, first, count - 1, timestamp, is_transactional=transactional)
    if duplicate is not None:
        return duplicate
    manager.load_batch(pid, epoch, base_seq, first, count - 1, timestamp, is_transactional=transactional)
    return first, first + count - 1


# ------------------------------------------------------------------------------------------ sequences


def test_sequences_wrap_from_int32_max_to_zero() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert decrement_sequence(0, 1) == MAX_SEQUENCE
    assert decrement_sequence(1, 3) == MAX_SEQUENCE - 1


@given(st.integers(0, MAX_SEQUENCE), st.integers(0, MAX_SEQUENCE))
def test_decrement_undoes_increment(sequence: int, step: int) -> None:
    assert decrement_sequence(increment_sequence(sequence, step), step) == sequence


def test_a_batch_crossing_the_wrap_continues_at_the_wrapped_sequence() -> None:
    manager = ProducerStateManager()
    assert write(manager, 0, MAX_SEQUENCE - 1, 4) == (0, 3)  # sequences 2**31-2 .. 1
    assert manager.producers[PID].last_seq == 1
    assert write(manager, 0, 2) == (4, 4)
    assert write(manager, 0, MAX_SEQUENCE - 1, 4) == BatchMetadata(1, 3, 3, 1000)


# ------------------------------------------------------------------------------------------ the rules


def test_a_retry_of_any_of_the_last_five_batches_answers_its_original_offsets() -> None:
    manager = ProducerStateManager()
    for n in range(8):
        assert write(manager, 0, 2 * n, 2) == (2 * n, 2 * n + 1)
    for n in range(8 - NUM_BATCHES_TO_RETAIN, 8):
        duplicate = write(manager, 0, 2 * n, 2)
        assert isinstance(duplicate, BatchMetadata)
        assert (duplicate.first_offset, duplicate.last_offset) == (2 * n, 2 * n + 1)
    assert manager.map_end_offset == 16  # nothing more was written


def test_a_retry_older_than_the_last_five_batches_is_out_of_order() -> None:
    manager = ProducerStateManager()
    for n in range(NUM_BATCHES_TO_RETAIN + 1):
        write(manager, 0, n)
    with pytest.raises(OutOfOrderSequenceError, match="expected 6"):
        write(manager, 0, 0)


def test_a_retry_with_another_sequence_range_is_not_a_duplicate() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        write(manager, 0, 0, 2)  # same first sequence, other last: not the batch that was written


def test_a_sequence_gap_is_out_of_order() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0, 5)
    with pytest.raises(OutOfOrderSequenceError, match="starts at sequence 6, but the last sequence written is 4"):
        write(manager, 0, 6)
    assert write(manager, 0, 5) == (5, 5)


def test_an_older_epoch_is_fenced() -> None:
    manager = ProducerStateManager()
    write(manager, 3, 0)
    with pytest.raises(InvalidProducerEpochError, match=r"epoch 2 .* older than epoch 3"):
        write(manager, 2, 1)
    with pytest.raises(InvalidProducerEpochError):
        write(manager, 2, 0)  # not a duplicate either: a duplicate must have the producer's epoch


def test_a_new_epoch_starts_at_sequence_zero() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0, 3)
    with pytest.raises(OutOfOrderSequenceError, match="a new epoch starts at 0"):
        write(manager, 1, 3)
    assert write(manager, 1, 0) == (3, 3)
    assert manager.producers[PID].producer_epoch == 1
    assert len(manager.producers[PID].batches) == 1  # the old epoch's batches are forgotten


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    manager = ProducerStateManager()
    assert write(manager, 4, 1234) == (0, 0)
    with pytest.raises(OutOfOrderSequenceError):
        write(manager, 4, 1236)


def test_producers_are_independent() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0, pid=1)
    write(manager, 0, 0, pid=2)
    assert write(manager, 0, 1, pid=1) == (2, 2)
    assert isinstance(write(manager, 0, 0, pid=2), BatchMetadata)


def test_a_write_checks_its_batches_against_each_other() -> None:
    manager = ProducerStateManager()
    check = AppendCheck(manager)
    assert check.check(PID, 0, 0, 0, 1, 10) is None  # offsets 0..1, sequences 0..1
    assert check.check(PID, 0, 2, 2, 0, 10) is None  # follows the first, though nothing is written yet
    repeated = check.check(PID, 0, 0, 3, 1, 10)  # the first again, within the same write
    assert repeated == BatchMetadata(1, 1, 1, 10)
    with pytest.raises(OutOfOrderSequenceError):
        check.check(PID, 0, 9, 3, 0, 10)
    assert manager.is_empty  # a check records nothing


def test_a_refused_batch_leaves_the_write_as_it_was() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0)
    check = AppendCheck(manager)
    with pytest.raises(OutOfOrderSequenceError):
        check.check(PID, 0, 5, 1, 0, 10)
    assert check.check(PID, 0, 1, 1, 0, 10) is None


def test_a_transaction_is_open_from_its_first_batch() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0)  # not transactional
    write(manager, 0, 1, 2, transactional=True)
    write(manager, 0, 3, transactional=True)
    assert manager.producers[PID].current_txn_first_offset == 1
    assert manager.first_undecided_offset() == 1
    write(manager, 0, 0, pid=9, transactional=True)
    assert manager.first_undecided_offset() == 1
    with pytest.raises(InvalidTxnStateError, match="transaction from offset 1 is open"):
        write(manager, 0, 4)


def test_expired_producers_are_forgotten_unless_their_transaction_is_open() -> None:
    manager = ProducerStateManager()
    write(manager, 0, 0, pid=1, timestamp=1000)
    write(manager, 0, 0, pid=2, timestamp=1000, transactional=True)
    write(manager, 0, 0, pid=3, timestamp=5000)
    assert manager.remove_expired_producers(now_ms=5999, expiration_ms=5000) == 0
    assert manager.remove_expired_producers(now_ms=6000, expiration_ms=5000) == 1
    assert sorted(manager.producers) == [2, 3]


def test_batches_loaded_from_the_log_are_not_checked() -> None:
    manager = ProducerStateManager()
    manager.load_batch(PID, 5, 10, 0, 0, 1)
    manager.load_batch(PID, 5, 40, 1, 0, 1)  # a gap: the log is what it is
    manager.load_batch(-1, -1, -1, 2, 9, 1)  # no producer: only the end moves
    manager.load_batch(PID, -3, 0, 12, 0, 1)  # nonsense fields: ignored
    assert manager.producers[PID].last_seq == 40
    assert manager.map_end_offset == 13


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ((-1, -1, -1), None),
        ((5, 0, 0), None),
        ((-1, 0, -1), "both must be -1"),
        ((-2, 0, 0), "negative"),
        ((5, -1, 0), "epoch -1"),
        ((5, 0, -1), "base sequence -1"),
    ],
)
def test_producer_fields_of_a_batch(fields: tuple[int, int, int], problem: str | None) -> None:
    found = producer_fields_problem(*fields)
    assert found is None if problem is None else problem in (found or "")


# ------------------------------------------------------------------------------------------ a model


@dataclass
class _Sent:
    epoch: int
    base_seq: int
    count: int


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_one_producer_retrying_at_random_writes_each_batch_exactly_once(data: st.DataObject) -> None:
    """A producer sends batches in order and retries any of them; the log gets each once, in order."""
    manager = ProducerStateManager()
    sent: list[_Sent] = []
    written: list[tuple[int, int, int]] = []  # (epoch, base_seq, count) in log order
    offsets: dict[int, tuple[int, int]] = {}  # index in sent -> offsets it got
    epoch, next_seq = 0, 0
    for _ in range(data.draw(st.integers(1, 40))):
        action = data.draw(st.sampled_from(["send", "send", "retry", "bump"]))
        if action == "bump":
            epoch, next_seq = epoch + 1, 0
            continue
        if action == "send" or not sent:
            batch = _Sent(epoch, next_seq, data.draw(st.integers(1, 4)))
            next_seq = increment_sequence(next_seq, batch.count)
            sent.append(batch)
            got = write(manager, batch.epoch, batch.base_seq, batch.count)
            assert isinstance(got, tuple)
            offsets[len(sent) - 1] = got
            written.append((batch.epoch, batch.base_seq, batch.count))
            continue
        index = data.draw(st.integers(0, len(sent) - 1))
        batch = sent[index]
        # The partition knows the epoch of the last batch written, not the epoch the client moved to.
        written_epoch = sent[-1].epoch
        same_epoch = [i for i, s in enumerate(sent) if s.epoch == written_epoch]
        if batch.epoch == written_epoch and index in same_epoch[-NUM_BATCHES_TO_RETAIN:]:
            got = write(manager, batch.epoch, batch.base_seq, batch.count)
            assert isinstance(got, BatchMetadata)
            assert (got.first_offset, got.last_offset) == offsets[index]
        elif batch.epoch < written_epoch:
            with pytest.raises(InvalidProducerEpochError):
                write(manager, batch.epoch, batch.base_seq, batch.count)
        else:
            with pytest.raises(OutOfOrderSequenceError):
                write(manager, batch.epoch, batch.base_seq, batch.count)
    assert written == [(s.epoch, s.base_seq, s.count) for s in sent]
    assert manager.map_end_offset == sum(s.count for s in sent)


def _entry(
    pid: int, epoch: int, coord: int, ts: int, txn: int | None, batches: list[tuple[int, int, int]]
) -> ProducerStateEntry:
    entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coord, last_timestamp=ts, current_txn_first_offset=txn)
    offset = 0
    for last_seq, delta, timestamp in batches:
        offset += delta
        entry.batches.append(BatchMetadata(last_seq, offset, delta, timestamp))
        offset += 1
    return entry


_entries = st.builds(
    _entry,
    st.integers(0, 2**63 - 1),
    st.integers(0, 32767),
    st.integers(-1, 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.one_of(st.none(), st.integers(0, 999)),
    st.lists(st.tuples(st.integers(0, MAX_SEQUENCE), st.integers(0, 3), st.integers(-1, 2**40)), max_size=5),
)


@given(st.lists(_entries, max_size=6, unique_by=lambda e: e.producer_id))
def test_a_snapshot_reads_back_what_was_written(entries: list[ProducerStateEntry]) -> None:
    assert decode_snapshot(encode_snapshot(entries), 1000) == entries


@settings(max_examples=50, deadline=None)
@given(st.lists(_entries, min_size=1, max_size=3, unique_by=lambda e: e.producer_id), st.data())
def test_a_snapshot_with_any_byte_changed_or_cut_is_refused(
    entries: list[ProducerStateEntry], data: st.DataObject
) -> None:
    raw = encode_snapshot(entries)
    position = data.draw(st.integers(0, len(raw) - 1))
    flipped = bytearray(raw)
    flipped[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(flipped), 1000)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(raw[:position], 1000)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(raw + b"\0", 1000)


def _resealed(tail: bytes) -> bytes:
    """A snapshot whose CRC holds over ``tail``: the checks after the CRC must catch what is wrong."""
    return struct.pack(">hI", 0x5401, google_crc32c.value(tail)) + tail


_PRODUCER = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iqiq")


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (struct.pack(">i", 1) + _PRODUCER.pack(-1, 0, -1, 0, -1, 0), "producer id -1 is negative"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, -1, -1, 0, -1, 0), "epoch -1"),
        (struct.pack(">i", 2) + _PRODUCER.pack(5, 0, -1, 0, -1, 0) * 2, "appears twice"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -2, 0, -1, 0), "coordinator epoch -2"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, 1000, 0), "open transaction at offset 1000"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, -1, 6), "6 batches"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, -1, 2), "announces 2 batches"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, -1, 1) + _BATCH.pack(0, 1000, 0, 0), "out of range"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, -1, 1) + _BATCH.pack(-1, 10, 0, 0), "out of range"),
        (struct.pack(">i", 1) + _PRODUCER.pack(5, 0, -1, 0, -1, 1) + _BATCH.pack(3, 10, 11, 0), "out of range"),
        (
            struct.pack(">i", 1)
            + _PRODUCER.pack(5, 0, -1, 0, -1, 2)
            + _BATCH.pack(3, 10, 1, 0)
            + _BATCH.pack(4, 10, 0, 0),
            "out of offset order",
        ),
        (struct.pack(">i", 99), "producer count 99"),
        (struct.pack(">i", -1), "producer count -1"),
    ],
)
def test_a_snapshot_whose_crc_holds_is_still_checked(tail: bytes, problem: str) -> None:
    with pytest.raises(CorruptSnapshotError, match=problem):
        decode_snapshot(_resealed(tail), 1000)


def test_a_snapshot_of_another_version_is_refused() -> None:
    kafka_like = struct.pack(">hI", 1, 0) + struct.pack(">i", 0)
    with pytest.raises(CorruptSnapshotError, match="version 0x0001"):
        decode_snapshot(kafka_like, 10)
    with pytest.raises(CorruptSnapshotError, match="fewer than"):
        decode_snapshot(b"\x54\x01", 10)



@settings(max_examples=100, deadline=None)
@given(st.data())
def test_state_rebuilt_from_the_log_or_a_snapshot_equals_the_live_state(data: st.DataObject) -> None:
    """What the writer recorded, what a scan of the written batches rebuilds and what a snapshot holds agree."""
    live = ProducerStateManager()
    log: list[tuple[int, int, int, int, int, int]] = []
    next_seq: dict[int, int] = {}
    for _ in range(data.draw(st.integers(0, 30))):
        pid = data.draw(st.integers(0, 3))
        count = data.draw(st.integers(1, 3))
        seq = next_seq.get(pid, data.draw(st.integers(0, 100)))
        first = live.map_end_offset
        if data.draw(st.booleans()):
            log.append((-1, -1, -1, first, count - 1, 5))
            live.load_batch(-1, -1, -1, first, count - 1, 5)
            continue
        got = write(live, 0, seq, count, pid=pid, timestamp=first)
        assert isinstance(got, tuple)
        log.append((pid, 0, seq, first, count - 1, first))
        next_seq[pid] = increment_sequence(seq, count)
    rebuilt = ProducerStateManager()
    for pid, epoch, seq, base, delta, ts in log:
        rebuilt.load_batch(pid, epoch, seq, base, delta, ts)
    assert dict(rebuilt.producers) == dict(live.producers)
    assert rebuilt.map_end_offset == live.map_end_offset
    restored = ProducerStateManager()
    restored.load_snapshot(decode_snapshot(live.snapshot(), live.map_end_offset), live.map_end_offset, now_ms=0)
    assert dict(restored.producers) == dict(live.producers)


def test_loading_a_snapshot_leaves_out_expired_producers_and_keeps_open_transactions() -> None:
    live = ProducerStateManager()
    write(live, 0, 0, pid=1, timestamp=0)
    write(live, 0, 0, pid=2, timestamp=0, transactional=True)
    restored = ProducerStateManager()
    restored.load_snapshot(decode_snapshot(live.snapshot(), 2), 2, now_ms=10, expiration_ms=10)
    assert list(restored.producers) == [2]
    assert restored.first_undecided_offset() == 1
    assert restored.map_end_offset == 2


def test_a_client_append_info_checks_and_a_log_append_info_does_not() -> None:
    manager = ProducerStateManager()
    write(manager, 5, 0)
    strict = manager.prepare_update(PID, AppendOrigin.CLIENT)
    with pytest.raises(InvalidProducerEpochError):
        strict.append_data_batch(4, 1, 1, 0, 1, 1)
    lenient = manager.prepare_update(PID, AppendOrigin.LOG)
    lenient.append_data_batch(4, 9, 9, 0, 1, 1)
    manager.update(lenient)
    assert manager.producers[PID].producer_epoch == 4


# ------------------------------------------------------------------------------------------ which snapshots


def test_the_newest_snapshot_is_tried_first_and_each_roll_snapshot_is_kept() -> None:
    plan = plan_snapshot_load([0, 100, 200, 250], [0, 100, 200], log_start_offset=0, log_end_offset=250,
                              clean_shutdown=True)
    assert plan.candidates == (250, 200, 100, 0) and plan.delete == () and not plan.assume_empty


def test_snapshots_past_a_truncated_log_end_are_deleted() -> None:
    plan = plan_snapshot_load([100, 200, 250], [0, 100, 200], log_start_offset=0, log_end_offset=180,
                              clean_shutdown=False)
    assert plan.candidates == (100,) and plan.delete == (200, 250)


def test_stray_snapshots_are_deleted_but_the_close_snapshot_above_every_segment_is_kept() -> None:
    plan = plan_snapshot_load([50, 120, 230, 250], [0, 100, 200], log_start_offset=0, log_end_offset=260,
                              clean_shutdown=True)
    assert plan.candidates == (250,) and plan.delete == (50, 120, 230)


def test_snapshots_below_the_log_start_are_deleted() -> None:
    plan = plan_snapshot_load([0, 100, 200], [100, 200], log_start_offset=150, log_end_offset=300,
                              clean_shutdown=False)
    assert plan.candidates == (200,) and plan.delete == (0, 100)


def test_no_snapshot_after_a_clean_shutdown_means_an_empty_state_and_after_a_crash_a_scan() -> None:
    clean = plan_snapshot_load([], [0, 100], log_start_offset=0, log_end_offset=150, clean_shutdown=True)
    crashed = plan_snapshot_load([], [0, 100], log_start_offset=0, log_end_offset=150, clean_shutdown=False)
    assert clean.assume_empty and not crashed.assume_empty
    only_stray = plan_snapshot_load([400], [0, 100], log_start_offset=0, log_end_offset=150, clean_shutdown=True)
    assert not only_stray.assume_empty and only_stray.delete == (400,)
