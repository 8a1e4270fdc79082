"""A segment opened with read_first_batch=False (every non-last segment at engine open) never learns
its first batch's timestamp: Kafka's timeWaitedForRoll loads rollingBasedTimestamp from the first
batch when it is unset, seglog falls back to now - created. When such a segment becomes the active one
(truncate_to after the later segments are removed), time-based rolling is measured from the open time
instead of the data's timestamps (and first_batch_timestamp says 'unknown' for a non-empty segment)."""

from seghelpers import batch

from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0)

async def test_rolling_timestamp_after_bulk_open(tmp_path):
    seg = await LogSegment.open(tmp_path, 0, now_ms=0, **KW)
    for i in range(5):
        await seg.append([batch(i, "v", ts=1_000 + i)])
    await seg.close()
    seg = await in_thread(LogSegment.open_existing_in_thread, tmp_path, 0, now_ms=10_000_000,
                          read_first_batch=False, **KW)
    try:
        await seg.truncate_to(3, now_ms=10_000_000)
        assert seg.first_batch_timestamp == 1_000
        # a new batch with timestamp 2_000 has waited 1_000 ms since the first batch (Kafka)
        assert seg.time_waited_for_roll(10_000_000, 2_000) == 1_000
    finally:
        await seg.close()
