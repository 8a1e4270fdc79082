from __future__ import annotations

import dataclasses
import random

import pytest

from seglog.engine.config import DEFAULT_MAX_MESSAGE_BYTES, LONG_MAX, LogConfig
from seglog.engine.errors import InvalidConfigError, SeglogError


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 604_800_000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10 << 20
    assert c.index_interval_bytes == 4096
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.retention_ms == 604_800_000 and c.retention_bytes == -1
    assert c.file_delete_delay_ms == 60_000
    assert c.max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES == 1_048_588
    assert c.message_timestamp_type == "CreateTime"
    assert c.preallocate is False


def test_frozen_slotted_keyword_only() -> None:
    c = LogConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.segment_bytes = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        LogConfig(1024)  # type: ignore[misc]
    assert not hasattr(c, "__dict__")


def test_small_segments_are_accepted() -> None:
    c = LogConfig(segment_bytes=64 * 1024, segment_index_bytes=64 * 1024, index_interval_bytes=0)
    assert c.segment_bytes == 65536


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("segment_bytes", 10, "segment.bytes"),
        ("segment_ms", 0, "segment.ms"),
        ("segment_jitter_ms", -1, "segment.jitter.ms"),
        ("segment_index_bytes", 4, "segment.index.bytes"),
        ("index_interval_bytes", -1, "index.interval.bytes"),
        ("flush_messages", 0, "flush.messages"),
        ("flush_ms", -1, "flush.ms"),
        ("retention_ms", -2, "retention.ms"),
        ("file_delete_delay_ms", -1, "file.delete.delay.ms"),
        ("max_message_bytes", -1, "max.message.bytes"),
        ("message_timestamp_type", "WallClock", "message.timestamp.type"),
        ("segment_bytes", "1024", "segment.bytes"),
        ("segment_bytes", True, "segment.bytes"),
        ("preallocate", 1, "preallocate"),
    ],
)
def test_out_of_range_values_name_the_kafka_key(field: str, value: object, key: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")) as info:
        LogConfig(**{field: value})  # type: ignore[arg-type]
    assert isinstance(info.value, SeglogError) and isinstance(info.value, ValueError)


def test_from_properties_parses_strings_and_keeps_base() -> None:
    base = LogConfig(retention_ms=1000)
    c = LogConfig.from_properties(
        {"segment.bytes": "65536", "preallocate": "TRUE", "message.timestamp.type": "LogAppendTime"}, base=base
    )
    assert c.segment_bytes == 65536 and c.preallocate is True and c.timestamp_is_log_append_time
    assert c.retention_ms == 1000


def test_from_properties_round_trips() -> None:
    c = LogConfig(segment_bytes=4096, flush_messages=1, retention_bytes=123)
    assert LogConfig.from_properties(c.to_properties()) == c


@pytest.mark.parametrize("props", [{"segmnt.bytes": 1}, {"segment.bytes": "big"}, {"preallocate": "yes"}])
def test_from_properties_rejects_unknown_or_unparsable(props: dict[str, object]) -> None:
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties(props)


def test_with_overrides_and_overrides_from() -> None:
    base = LogConfig()
    c = base.with_overrides(segment_bytes=4096)
    assert c.overrides_from(base) == {"segment_bytes": 4096}
    with pytest.raises(InvalidConfigError, match="nope"):
        base.with_overrides(nope=1)


def test_jitter_is_below_min_of_jitter_and_segment_ms() -> None:
    rng = random.Random(7)
    assert LogConfig().random_segment_jitter(rng) == 0
    c = LogConfig(segment_ms=100, segment_jitter_ms=1000)
    draws = {c.random_segment_jitter(rng) for _ in range(2000)}
    assert min(draws) >= 0 and max(draws) < 100 and len(draws) > 50


def test_initial_segment_size_follows_preallocate() -> None:
    assert LogConfig(segment_bytes=4096).initial_segment_size == 0
    assert LogConfig(segment_bytes=4096, preallocate=True).initial_segment_size == 4096
