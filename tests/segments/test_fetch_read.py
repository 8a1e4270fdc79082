"""A segment read of a fetch (many small batches): what it costs in reads of the ``.log``."""

from __future__ import annotations

from seglog.segments.batch import HEADER_SIZE
from seglog.segments.segment import _READ_WINDOW, LogSegment
from tests.segments.seghelpers import SegmentFactory, append, batch


async def _small_batches(make_segment: SegmentFactory, count: int) -> LogSegment:
    seg = await make_segment(0, index_interval_bytes=4096)  # Kafka's default: one entry per ~35 such batches
    for offset in range(count):
        await append(seg, [batch(offset, "v" * 60)])
    return seg


async def test_a_fetch_from_an_unindexed_small_batch_copies_no_megabyte_before_declining(
    make_segment: SegmentFactory,
) -> None:
    # The cached attempt of a fetch lands on the first indexed batch reaching the offset; with small
    # batches that one usually starts after the offset, so the attempt declines. It must learn that
    # from the batch's header, not from a megabyte copied out of the page cache for nothing.
    seg = await _small_batches(make_segment, 400)
    sizes: list[int] = []
    real = seg._log.read_cached

    def recorded(position: int, size: int) -> bytes | bytearray | None:
        sizes.append(size)
        return real(position, size)

    seg._log.read_cached = recorded  # type: ignore[method-assign]
    answered = probed = 0
    for start in range(0, 400, 7):
        sizes.clear()
        got = seg.read_cached(start, 1 << 20)
        if got is None:
            # A 61-byte header, or at most a window near the file's end (where the last entry has no span).
            assert all(size == HEADER_SIZE or size <= _READ_WINDOW for size in sizes), (start, sizes)
            probed += sizes == [HEADER_SIZE]
        else:
            answered += 1
            slow = seg.read(start, 1 << 20, min_one_message=True)
            assert slow is not None and bytes(got.data) == bytes(slow.data)
    assert probed > 0 and answered > 0  # both cases were reached

