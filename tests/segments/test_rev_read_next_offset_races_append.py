"""read_next_offset captures `end = size` on the loop, but _walk_to_end looks up
offset_index.last_offset inside the read fn, which is re-run in an executor thread when the bytes are
not in the page cache. If an append completes before that thread job starts (a busy executor: the
job waits in the queue), the lookup returns the new entry whose position is >= the captured end, the
walk sees no batch, and read_next_offset returns base_offset. (The result is not cached because the
size changed, but the wrong value is returned to the caller.)  The executor's queue delay is
simulated by holding the reader's job before it starts."""
import asyncio
import concurrent.futures
import threading

from seghelpers import batch

from seglog.segments.fileio import FileOps
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0, now_ms=0)

class NotCached(FileOps):
    def preadv_nowait(self, fd, buf, position):
        raise BlockingIOError     # cold page cache: the read fn is re-run in a thread

class DelayingExecutor(concurrent.futures.ThreadPoolExecutor):
    hold = None
    def submit(self, fn, /, *args, **kwargs):
        hold, self.hold = self.hold, None
        if hold is None:
            return super().submit(fn, *args, **kwargs)
        def delayed():
            hold.wait(5)          # queued behind other jobs
            return fn(*args, **kwargs)
        return super().submit(delayed)

async def test_read_next_offset_during_append(tmp_path):
    loop = asyncio.get_running_loop()
    ex = DelayingExecutor(4)
    loop.set_default_executor(ex)
    seg = await LogSegment.open(tmp_path, 0, ops=NotCached(), **KW)
    for i in range(10):
        await seg.append([batch(i, "v")])
    seg._next_offset = None       # as after open or truncate: not cached
    hold = threading.Event()
    ex.hold = hold
    reader = asyncio.ensure_future(seg.read_next_offset())
    await asyncio.sleep(0.05)     # reader captured `end`, its thread job is queued
    await seg.append([batch(10, "w"), batch(11, "w")])
    hold.set()
    got = await reader
    try:
        assert got in (10, 12), f"read_next_offset returned {got}"
    finally:
        await seg.close()
