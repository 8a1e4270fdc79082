"""A read-only LogSegment (Engine.open(read_only=True): 'writes nothing') refuses truncate_to,
recover, append... with ClosedError, but delete() has no check at all and change_file_suffixes()
only checks _check_open: both rename/remove files of the read-only snapshot."""

import pytest
from seghelpers import batch

from seglog.indexes.errors import ClosedError
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0, now_ms=0)

async def _ro(tmp_path):
    seg = await LogSegment.open(tmp_path, 0, **KW)
    await seg.append([batch(0, "a")])
    await seg.close()
    return await LogSegment.open(tmp_path, 0, file_already_exists=True, writable=False, **KW)

async def test_readonly_change_file_suffixes_refused(tmp_path):
    seg = await _ro(tmp_path)
    try:
        with pytest.raises(ClosedError):
            await seg.change_file_suffixes("", ".deleted")
    finally:
        await seg.close()
    assert (tmp_path / f"{0:020d}.log").exists()

async def test_readonly_delete_refused(tmp_path):
    seg = await _ro(tmp_path)
    with pytest.raises(ClosedError):
        await seg.delete()
    await seg.close()
    assert (tmp_path / f"{0:020d}.log").exists()
