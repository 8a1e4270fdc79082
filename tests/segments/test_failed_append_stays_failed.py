"""A failed append never comes back: on a preallocated .log, an append whose fdatasync fails after
the pwritev wrote everything is cut back to where the log ended, so neither a later append nor crash
recovery finds its batches. (The cut used to go to the preallocated length, i.e. do nothing: after a
same-sized retry and a crash, recovery resurrected a batch whose append was reported as failed.)"""
import errno

import pytest
from seghelpers import append, batch

from seglog.indexes.errors import StorageError
from seglog.segments.fileio import FileOps
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=4096, roll_jitter_ms=0, now_ms=0)

class FailSyncOnce(FileOps):
    armed = False
    def fdatasync(self, fd):
        if self.armed:
            self.armed = False
            raise OSError(errno.EIO, "injected")
        super().fdatasync(fd)

async def test_a_failed_append_on_a_preallocated_log_is_not_recovered_after_a_crash(tmp_path):
    ops = FailSyncOnce()
    seg = LogSegment.open(tmp_path, 0, preallocate_bytes=1 << 20, ops=ops, **KW)
    await append(seg, [batch(0, "x")])
    ops.armed = True
    with pytest.raises(StorageError):
        await append(seg, [batch(1, "FAILED-1"), batch(2, "FAILED-2")], fsync=True)
    assert seg.size == len(batch(0, "x"))
    # the producer retries / another producer writes offset 1 (same size as FAILED-1)
    await append(seg, [batch(1, "retry-01")], fsync=True)
    assert seg.read_next_offset() == 2
    # crash: nothing trimmed
    seg.close_handlers()
    seg2 = LogSegment.open(tmp_path, 0, file_already_exists=True, ops=ops, **KW)
    try:
        seg2.recover(max_batch_bytes=1 << 20)
        values = [r.value for r in (seg2.read(0, 1 << 20)).records()]
        assert b"FAILED-2" not in values, values
        assert seg2.read_next_offset() == 2
    finally:
        seg2.close()
