"""Every public entry point refuses bad input with a SeglogError that names the value and the rule,
and a refused call changes nothing stored.

One table: each row is a call, the bad value it gets, the exception expected and a substring of its
message. Every row runs against the same small log directory (a topic of two partitions holding
records, a committed group offset) and checks afterwards that the directory's files and everything
the API reports are exactly as before. The rules are written down in docs/OPERATIONS.md, "Input
validation"; the checks live in ``engine.validate``.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine, LogConfig, Record, errors
from seglog.engine.validate import MAX_GROUP_ID_BYTES, validate_group, validate_header_key, validate_offset


@dataclass(frozen=True)
class Case:
    rule: str  # the test id: the rule the row holds
    call: Callable[[Engine, Any], object]  # may return an awaitable
    bad: object
    error: type[errors.SeglogError]
    message: str


def _log(engine: Engine, partition: int = 0) -> Any:
    return engine.log("t", partition)


async def _subscribe_first(engine: Engine, start: object) -> object:
    async for record in _log(engine).subscribe(start):
        return record
    return None


E = errors
CASES = [
    # -- partitions: an int, not a bool (True and 1.0 hash as 1 and found partition 1) --------------
    Case("log_partition_is_not_a_bool", lambda e, v: e.log("t", v), True, E.InvalidTopicError,
         "partition must be an int, got bool"),
    Case("log_partition_is_not_a_float", lambda e, v: e.log("t", v), 1.0, E.InvalidTopicError,
         "partition must be an int, got float"),
    Case("log_partition_is_not_negative", lambda e, v: e.log("t", v), -1, E.InvalidTopicError, "[0, 1000000)"),
    Case("log_topic_is_a_str", lambda e, v: e.log(v, 0), [], E.InvalidTopicError, "topic name must be a str"),
    Case("log_topic_follows_kafkas_rules", lambda e, v: e.log(v, 0), "a/b", E.InvalidTopicError,
         "illegal character"),
    Case("partitions_for_topic_is_a_str", lambda e, v: e.partitions_for(v), None, E.InvalidTopicError,
         "topic name must be a str"),
    Case("produce_partition_is_not_a_bool", lambda e, v: e.produce("t", b"v", partition=v), True,
         E.InvalidTopicError, "got bool"),
    Case("produce_headers_are_a_sequence_of_pairs", lambda e, v: e.produce("t", b"v", headers=v), "h=v",
         E.InvalidRecordError, "headers must be a sequence"),
    # -- group ids: non-empty, valid UTF-8, no NUL, at most 32,767 UTF-8 bytes ---------------------------
    Case("group_id_is_valid_utf8", lambda e, v: e.commit_offset(v, "t", 0, 1), "\udcff", E.InvalidRecordError,
         "lone surrogate"),
    Case("group_id_holds_no_nul", lambda e, v: e.commit_offset(v, "t", 0, 1), "billing\x00", E.InvalidRecordError,
         "NUL"),
    Case("group_id_is_not_empty", lambda e, v: e.commit_offset(v, "t", 0, 1), "", E.InvalidRecordError, "empty"),
    Case("group_id_is_a_str", lambda e, v: e.commit_offset(v, "t", 0, 1), b"billing", E.InvalidRecordError,
         "group id must be a str"),
    Case("group_id_fits_kafkas_string", lambda e, v: e.commit_offset(v, "t", 0, 1), "g" * (MAX_GROUP_ID_BYTES + 1),
         E.InvalidRecordError, "the maximum is 32767"),
    Case("group_id_length_counts_utf8_bytes", lambda e, v: e.commit_offset(v, "t", 0, 1),
         "é" * (MAX_GROUP_ID_BYTES // 2 + 1), E.InvalidRecordError, "UTF-8 bytes"),
    Case("committed_group_id_is_valid_utf8", lambda e, v: e.committed(v, "t", 0), "\udcff", E.InvalidRecordError,
         "lone surrogate"),
    Case("group_offsets_group_id_holds_no_nul", lambda e, v: e.group_offsets(v), "\x00", E.InvalidRecordError,
         "NUL"),
    Case("delete_group_group_id_is_valid_utf8", lambda e, v: e.delete_group(v), "b\udcffilling",
         E.InvalidRecordError, "lone surrogate"),
    # -- committed offsets: an int in [0, 2**63-1] -------------------------------------------------------
    Case("committed_offset_fits_int64", lambda e, v: e.commit_offset("billing", "t", 0, v), 2**64,
         E.InvalidRecordError, "outside [0, 2**63-1]"),
    Case("committed_offset_is_not_negative", lambda e, v: e.commit_offset("billing", "t", 0, v), -1,
         E.InvalidRecordError, "outside [0, 2**63-1]"),
    Case("committed_offset_is_not_a_bool", lambda e, v: e.commit_offset("billing", "t", 0, v), True,
         E.InvalidRecordError, "must be an int"),
    Case("commit_partition_is_not_a_bool", lambda e, v: e.commit_offset("billing", "t", v, 1), True,
         E.InvalidTopicError, "got bool"),
    Case("committed_partition_is_not_a_bool", lambda e, v: e.committed("billing", "t", v), True,
         E.InvalidTopicError, "got bool"),
    Case("committed_topic_follows_kafkas_rules", lambda e, v: e.committed("billing", v, 0), "../t",
         E.InvalidTopicError, "illegal character"),
    Case("commit_offsets_takes_a_mapping", lambda e, v: e.commit_offsets("billing", v), [("t", 0, 1)],
         E.InvalidRecordError, "must be a mapping"),
    Case("commit_offsets_keys_are_pairs", lambda e, v: e.commit_offsets("billing", v), {"t": 1},
         E.InvalidRecordError, "(topic, partition) pairs"),
    Case("commit_offsets_offsets_fit_int64", lambda e, v: e.commit_offsets("billing", {("t", 0): 1, ("t", 1): v}),
         2**63, E.InvalidRecordError, "outside [0, 2**63-1]"),
    # -- topics ------------------------------------------------------------------------------------------
    Case("create_topic_name_is_at_most_249_characters", lambda e, v: e.create_topic(v), "x" * 250,
         E.InvalidTopicError, "the maximum is 249"),
    Case("create_topic_name_holds_no_nul", lambda e, v: e.create_topic(v), "u\x00", E.InvalidTopicError,
         "illegal character"),
    Case("create_topic_partitions_is_not_a_bool", lambda e, v: e.create_topic("u", partitions=v), True,
         E.InvalidConfigError, "positive int"),
    Case("create_topic_config_is_range_checked", lambda e, v: e.create_topic("u", config=v), {"retention.bytes": -7},
         E.InvalidConfigError, "retention.bytes must be at least -1"),
    Case("create_topic_config_is_a_mapping_or_logconfig", lambda e, v: e.create_topic("u", config=v), "x",
         E.InvalidConfigError, "mapping of overrides"),
    Case("delete_topic_name_is_a_str", lambda e, v: e.delete_topic(v), 5, E.InvalidTopicError,
         "topic name must be a str"),
    Case("delete_topic_name_follows_kafkas_rules", lambda e, v: e.delete_topic(v), "..", E.InvalidTopicError,
         "cannot be '..'"),
    # -- reads and lookups: offsets and timestamps fit int64 -------------------------------------------
    Case("read_offset_beyond_int64_is_out_of_range", lambda e, v: _log(e).read(v), 2**64, E.OffsetOutOfRangeError,
         "outside [0, 2**63-1]"),
    Case("read_offset_is_an_int", lambda e, v: _log(e).read(v), "0", E.InvalidRecordError, "offset must be an int"),
    Case("read_max_bytes_is_not_negative", lambda e, v: _log(e).read(0, v), -1, E.InvalidRecordError,
         "max_bytes must be a non-negative int"),
    Case("offset_for_timestamp_fits_int64", lambda e, v: _log(e).offset_for_timestamp(v), 2**64,
         E.InvalidRecordError, "outside [-2**63, 2**63-1]"),
    Case("offset_for_timestamp_negative_is_a_sentinel", lambda e, v: _log(e).offset_for_timestamp(v), -7,
         E.InvalidRecordError, "-1 (latest), -2 (earliest), -3 (max)"),
    Case("offset_for_timestamp_is_not_a_bool", lambda e, v: _log(e).offset_for_timestamp(v), True,
         E.InvalidRecordError, "must be an int"),
    Case("subscribe_start_offset_is_an_int", lambda e, v: _log(e).subscribe(v), "x", E.InvalidRecordError,
         "start_offset must be an int"),
    Case("subscribe_start_offset_fits_int64", lambda e, v: _log(e).subscribe(v), 2**64, E.InvalidRecordError,
         "outside [0, 2**63-1]"),
    Case("subscribe_max_bytes_is_not_negative", lambda e, v: _log(e).subscribe(0, max_bytes=v), -1,
         E.InvalidRecordError, "max_bytes"),
    Case("subscribe_beyond_the_log_end_is_out_of_range", _subscribe_first, 10**6, E.OffsetOutOfRangeError,
         "beyond the log end"),
    Case("delete_records_before_offset_fits_int64", lambda e, v: _log(e).delete_records_before(v), 2**64,
         E.InvalidRecordError, "outside [0, 2**63-1]"),
    Case("delete_records_before_offset_is_not_a_bool", lambda e, v: _log(e).delete_records_before(v), True,
         E.InvalidRecordError, "must be an int"),
    Case("delete_records_before_offset_beyond_the_log_end", lambda e, v: _log(e).delete_records_before(v), 10**6,
         E.OffsetOutOfRangeError, "beyond the log end"),
    Case("enforce_retention_now_ms_is_an_int", lambda e, v: _log(e).enforce_retention(v), "now",
         E.InvalidRecordError, "now_ms must be an int"),
    # -- appends: header keys valid UTF-8 without NUL, timestamps fit int64 ------------------------------
    # One record (encoded by the writer with other small appends), 20 (encoded at the call) and 70
    # (sized at the call by the C module, written by the append's thread): three encoding paths.
    *(
        Case(f"header_key_is_valid_utf8_in_a_batch_of_{n}",
             lambda e, v, n=n: _log(e).append([Record(b"v", headers=((v, b"x"),))] * n), "\udcff",
             E.InvalidRecordError, "lone surrogate")
        for n in (1, 20, 70)
    ),
    *(
        Case(f"header_key_holds_no_nul_in_a_batch_of_{n}",
             lambda e, v, n=n: _log(e).append([Record(b"v", headers=((v, b"x"),))] * n), "trace\x00id",
             E.InvalidRecordError, "NUL")
        for n in (1, 20, 70)
    ),
    Case("produce_header_key_holds_no_nul", lambda e, v: e.produce("t", b"v", headers=[(v, b"x")]), "\x00",
         E.InvalidRecordError, "NUL"),
    Case("header_key_is_a_str", lambda e, v: _log(e).append([Record(b"v", headers=((v, b"x"),))]), b"k",
         E.InvalidRecordError, "(str, bytes) pair"),
    Case("record_timestamp_fits_int64", lambda e, v: _log(e).append([Record(b"v", timestamp=v)]), 2**63,
         E.InvalidRecordError, "outside [0, 2**63-1]"),
    Case("record_timestamp_is_not_a_bool", lambda e, v: _log(e).append([Record(b"v", timestamp=v)]), True,
         E.InvalidRecordError, "timestamps must be int"),
    Case("append_takes_a_sequence_of_records", lambda e, v: _log(e).append(v), "text", E.InvalidRecordError,
         "sequence of Record"),
    Case("append_encoded_takes_bytes", lambda e, v: _log(e).append_encoded(v), "batch", E.InvalidRecordError,
         "takes bytes"),
    # -- LogConfig: every field range-checked, Kafka's validators as the reference ------------------------
    Case("logconfig_refuses_an_unknown_field", lambda e, v: LogConfig(**{v: 1}), "bogus", E.InvalidConfigError,
         "unknown LogConfig field(s) bogus"),
    Case("logconfig_takes_keywords_only", lambda e, v: LogConfig(v), 65536, E.InvalidConfigError,
         "keyword arguments only"),
    Case("retention_bytes_is_at_least_minus_one", lambda e, v: LogConfig(retention_bytes=v), -7,
         E.InvalidConfigError, "retention.bytes must be at least -1"),
    Case("max_message_bytes_holds_the_smallest_batch", lambda e, v: LogConfig(max_message_bytes=v), 0,
         E.InvalidConfigError, "max.message.bytes must be at least 69"),
    Case("retention_ms_is_at_least_minus_one", lambda e, v: LogConfig(retention_ms=v), -2, E.InvalidConfigError,
         "retention.ms must be at least -1"),
    Case("segment_bytes_fits_an_int32", lambda e, v: LogConfig(segment_bytes=v), 2**31, E.InvalidConfigError,
         "2**31-1"),
    Case("segment_bytes_is_at_least_256", lambda e, v: LogConfig(segment_bytes=v), 255, E.InvalidConfigError,
         "segment.bytes must be at least 256"),
    Case("segment_bytes_is_not_a_bool", lambda e, v: LogConfig(segment_bytes=v), True, E.InvalidConfigError,
         "segment.bytes must be an int"),
    Case("segment_ms_is_positive", lambda e, v: LogConfig(segment_ms=v), 0, E.InvalidConfigError,
         "segment.ms must be at least 1"),
    Case("segment_ms_fits_an_int64", lambda e, v: LogConfig(segment_ms=v), 2**63, E.InvalidConfigError, "2**63-1"),
    Case("segment_jitter_ms_is_not_negative", lambda e, v: LogConfig(segment_jitter_ms=v), -1, E.InvalidConfigError,
         "segment.jitter.ms must be at least 0"),
    Case("segment_index_bytes_holds_two_time_index_entries", lambda e, v: LogConfig(segment_index_bytes=v), 23,
         E.InvalidConfigError, "segment.index.bytes must be at least 24"),
    Case("index_interval_bytes_is_not_negative", lambda e, v: LogConfig(index_interval_bytes=v), -1,
         E.InvalidConfigError, "index.interval.bytes must be at least 0"),
    Case("flush_messages_is_positive", lambda e, v: LogConfig(flush_messages=v), 0, E.InvalidConfigError,
         "flush.messages must be at least 1"),
    Case("flush_ms_is_not_negative", lambda e, v: LogConfig(flush_ms=v), -1, E.InvalidConfigError,
         "flush.ms must be at least 0"),
    Case("file_delete_delay_ms_is_not_negative", lambda e, v: LogConfig(file_delete_delay_ms=v), -1,
         E.InvalidConfigError, "file.delete.delay.ms must be at least 0"),
    Case("message_timestamp_type_is_one_of_two", lambda e, v: LogConfig(message_timestamp_type=v), "create",
         E.InvalidConfigError, "'CreateTime' or 'LogAppendTime'"),
    Case("preallocate_is_a_bool", lambda e, v: LogConfig(preallocate=v), 1, E.InvalidConfigError,
         "preallocate must be a bool"),
    Case("from_properties_takes_a_mapping_not_a_str", lambda e, v: LogConfig.from_properties(v), "x",
         E.InvalidConfigError, "takes a mapping"),
    Case("from_properties_takes_a_mapping_not_none", lambda e, v: LogConfig.from_properties(v), None,
         E.InvalidConfigError, "takes a mapping"),
    Case("from_properties_keys_are_str", lambda e, v: LogConfig.from_properties(v), {1: 2}, E.InvalidConfigError,
         "keys must be str"),
    Case("from_properties_base_is_a_logconfig", lambda e, v: LogConfig.from_properties({}, base=v), {},
         E.InvalidConfigError, "base must be a LogConfig"),
    Case("from_properties_values_parse", lambda e, v: LogConfig.from_properties({"segment.bytes": v}), "64k",
         E.InvalidConfigError, "segment.bytes must be an integer"),
    Case("with_overrides_refuses_an_unknown_field", lambda e, v: LogConfig().with_overrides(**{v: 1}), "bogus",
         E.InvalidConfigError, "unknown log config field"),
    # -- Engine.open ------------------------------------------------------------------------------------
    Case("open_path_is_a_str_or_pathlike", lambda e, v: Engine.open(v), None, E.InvalidConfigError,
         "path must be a str or os.PathLike"),
    Case("open_path_holds_no_nul", lambda e, v: Engine.open(v), "data\x00", E.InvalidConfigError, "without NUL"),
    Case("open_read_only_is_a_bool", lambda e, v: Engine.open("elsewhere", read_only=v), "yes",
         E.InvalidConfigError, "read_only must be a bool"),
    Case("open_config_is_a_logconfig", lambda e, v: Engine.open("elsewhere", v), {"segment.bytes": 1 << 20},
         E.InvalidConfigError, "config must be a LogConfig"),
]


def _digest(path: Path) -> dict[str, str]:
    """Every file below ``path`` (but the lock) with a hash of its bytes."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


async def _stored(engine: Engine) -> object:
    """What the API reports as stored: topics, configs, every partition's records and bounds, groups."""
    state: dict[str, object] = {"topics": engine.topics(), "groups": engine.groups()}
    for topic in engine.topics():
        state[f"{topic}/config"] = engine.topic_config(topic)
        for partition in range(engine.partitions_for(topic)):
            plog = engine.log(topic, partition)
            got = await plog.read(plog.log_start_offset, 1 << 20)
            state[f"{topic}-{partition}"] = (plog.log_start_offset, plog.log_end_offset, got.records)
    for group in engine.groups():
        state[f"group/{group}"] = engine.group_offsets(group)
    return state


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
async def test_bad_input_is_refused_by_name_and_changes_nothing(tmp_path: Path, case: Case) -> None:
    data = tmp_path / "data"
    async with Engine.open(data) as engine:
        await engine.create_topic("t", partitions=2)
        await engine.log("t", 0).append([Record(b"a", b"k", 1_700_000_000_000, (("h", b"1"),)), Record(b"b")])
        await engine.log("t", 1).append([Record(b"c")])
        await engine.commit_offset("billing", "t", 0, 1)
        await engine.flush()
        files_before, stored_before = _digest(data), await _stored(engine)

        with pytest.raises(case.error) as info:
            outcome = case.call(engine, case.bad)
            if inspect.isawaitable(outcome):
                await outcome
        exc = info.value
        assert isinstance(exc, errors.SeglogError)
        # Also the builtin a generic handler expects: a wrong type or value, or a position out of range.
        assert isinstance(exc, TypeError | ValueError | LookupError)
        assert case.message in str(exc), str(exc)

        assert await _stored(engine) == stored_before
        assert _digest(data) == files_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing created beside it


def test_every_rule_has_one_row() -> None:
    rules = [c.rule for c in CASES]
    assert len(rules) == len(set(rules))


@pytest.mark.parametrize(
    "valid",
    ["billing", "billing/team α", "g" * MAX_GROUP_ID_BYTES, "é" * (MAX_GROUP_ID_BYTES // 2), " "],
)
def test_group_ids_kafka_accepts_are_accepted(valid: str) -> None:
    assert validate_group(valid) == valid


def test_the_edges_of_the_ranges_are_accepted() -> None:
    assert validate_offset(0) == 0
    assert validate_offset(2**63 - 1) == 2**63 - 1
    assert validate_header_key("") == ""
    assert validate_header_key("trace-id ü") == "trace-id ü"
    config = LogConfig(retention_bytes=-1, max_message_bytes=69, segment_bytes=256, segment_index_bytes=24,
                       segment_ms=2**63 - 1, index_interval_bytes=0, flush_ms=0, file_delete_delay_ms=0)
    assert (config.retention_bytes, config.max_message_bytes) == (-1, 69)
    assert LogConfig(segment_bytes=64 * 1024, segment_index_bytes=64 * 1024).segment_bytes == 64 * 1024


async def test_a_batch_of_exactly_max_message_bytes_69_is_accepted(tmp_path: Path) -> None:
    # The smallest limit LogConfig takes still admits the smallest batch: the bound is not off by one.
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", config=LogConfig(max_message_bytes=69))
        result = await engine.log("t").append([Record(None)])
        assert result.first_offset == 0
        with pytest.raises(errors.RecordTooLargeError):
            await engine.log("t").append([Record(b"x")])
