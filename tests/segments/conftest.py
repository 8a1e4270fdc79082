"""Fixtures of the segment tests: a segment factory that closes what it opened."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from seghelpers import SegmentFactory

from seglog.segments.fileio import in_thread
from seglog.segments.segment import LogSegment


@pytest.fixture
async def make_segment(tmp_path: Path) -> AsyncIterator[SegmentFactory]:
    """``await make_segment(base, index_interval_bytes=10, ...)``; every segment is closed at the end."""
    opened: list[LogSegment] = []

    async def make(
        base_offset: int,
        *,
        directory: Path | None = None,
        index_interval_bytes: int = 10,
        max_index_size: int = 1000,
        roll_jitter_ms: int = 0,
        now_ms: int = 0,
        **kwargs: Any,
    ) -> LogSegment:
        seg = await in_thread(
            LogSegment.open,
            directory or tmp_path,
            base_offset,
            max_index_size=max_index_size,
            index_interval_bytes=index_interval_bytes,
            roll_jitter_ms=roll_jitter_ms,
            now_ms=now_ms,
            **kwargs,
        )
        opened.append(seg)
        return seg

    yield make
    for seg in opened:
        seg.close()
