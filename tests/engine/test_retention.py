from __future__ import annotations

from seglog.engine.retention import SegmentSummary, plan_retention

DAY = 86_400_000


def segs(*specs: tuple[int, int, int]) -> list[SegmentSummary]:
    return [SegmentSummary(base, size, ts) for base, size, ts in specs]


def plan(segments: list[SegmentSummary], **kw: int):  # type: ignore[no-untyped-def]
    args = {"log_end_offset": 300, "high_watermark": 300, "log_start_offset": 0, "now_ms": 10 * DAY,
            "retention_ms": -1, "retention_bytes": -1}
    args.update(kw)
    return plan_retention(segments, **args)


def test_nothing_to_do_by_default() -> None:
    assert plan(segs((0, 100, 0), (100, 100, 0), (200, 100, 0))).empty


def test_time_deletes_expired_prefix_only() -> None:
    s = segs((0, 100, 1 * DAY), (100, 100, 9 * DAY), (200, 100, 2 * DAY))
    p = plan(s, retention_ms=7 * DAY)
    # The second segment is fresh, so the walk stops there even though the third is old.
    assert p.delete == (0,) and p.reason == "retention.ms" and not p.roll_first


def test_time_rolls_when_everything_expired() -> None:
    p = plan(segs((0, 100, 1 * DAY), (100, 100, 1 * DAY)), retention_ms=DAY, log_end_offset=150,
             high_watermark=150)
    assert p.delete == (0, 100) and p.roll_first


def test_empty_active_segment_is_never_deleted() -> None:
    p = plan(segs((0, 100, 1 * DAY), (100, 0, 0)), retention_ms=DAY, log_end_offset=100, high_watermark=100)
    assert p.delete == (0,) and not p.roll_first


def test_size_keeps_partition_under_limit() -> None:
    s = segs((0, 100, 0), (100, 100, 0), (200, 100, 0), (300, 50, 0))
    # Kafka deletes a segment only while the partition stays at or above the limit
    # without it: 350 bytes, limit 150 -> drop 100 (250 left, excess 100) and 100 more.
    assert plan(s, retention_bytes=150, log_end_offset=320, high_watermark=320).delete == (0, 100)
    assert plan(s, retention_bytes=200, log_end_offset=320, high_watermark=320).delete == (0,)
    assert plan(s, retention_bytes=260, log_end_offset=320, high_watermark=320).empty


def test_log_start_offset_deletes_segments_wholly_below_it() -> None:
    s = segs((0, 100, 0), (100, 100, 0), (200, 100, 0))
    assert plan(s, log_start_offset=150).delete == (0,)
    assert plan(s, log_start_offset=200).delete == (0, 100)


def test_nothing_above_high_watermark_is_deleted() -> None:
    s = segs((0, 100, 0), (100, 100, 0), (200, 100, 0))
    assert plan(s, retention_ms=0, high_watermark=150).delete == (0,)
