"""A read-only LogSegment (Engine.open(read_only=True): 'writes nothing') refuses every mutation with
ClosedError and leaves its files as they are: truncate_to, recover, append, and also delete() and
change_file_suffixes() (which used to remove or rename files of the read-only snapshot)."""

import pytest
from seghelpers import append, batch

from seglog.indexes.errors import ClosedError
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0, now_ms=0)

async def _ro(tmp_path):
    seg = LogSegment.open(tmp_path, 0, **KW)
    await append(seg, [batch(0, "a")])
    seg.close()
    return LogSegment.open(tmp_path, 0, file_already_exists=True, writable=False, **KW)

async def test_a_read_only_segment_refuses_to_change_file_suffixes(tmp_path):
    seg = await _ro(tmp_path)
    try:
        with pytest.raises(ClosedError):
            seg.change_file_suffixes("", ".deleted")
    finally:
        seg.close()
    assert (tmp_path / f"{0:020d}.log").exists()

async def test_a_read_only_segment_refuses_to_delete_its_files(tmp_path):
    seg = await _ro(tmp_path)
    with pytest.raises(ClosedError):
        seg.delete()
    seg.close()
    assert (tmp_path / f"{0:020d}.log").exists()
