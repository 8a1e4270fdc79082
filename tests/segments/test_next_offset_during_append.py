"""read_next_offset during an append returns the next offset before or after that append, never
another: its walk to the end of the log stays within the size it captured, also when it is re-run in
an executor thread (bytes not in the page cache) after the append completed. (The walk used to look
up the offset index's last entry in the thread, find the new append's entry past the captured end,
see no batch, and return the base offset.) The executor's queue delay is simulated by holding the
reader's job before it starts."""
import asyncio
import concurrent.futures
import threading

from seghelpers import batch

from seglog.segments.faults import Signal
from seglog.segments.fileio import FileOps
from seglog.segments.segment import LogSegment

KW = dict(max_index_size=4096, index_interval_bytes=0, roll_jitter_ms=0, now_ms=0)

class NotCached(FileOps):
    def preadv_nowait(self, fd, buf, position):
        raise BlockingIOError     # cold page cache: the read fn is re-run in a thread

class DelayingExecutor(concurrent.futures.ThreadPoolExecutor):
    hold = None
    held = Signal()               # raised when a job is held
    def submit(self, fn, /, *args, **kwargs):
        hold, self.hold = self.hold, None
        if hold is None:
            return super().submit(fn, *args, **kwargs)
        def delayed():
            self.held.set()
            hold.wait(60)         # queued behind other jobs
            return fn(*args, **kwargs)
        return super().submit(delayed)

async def test_read_next_offset_during_an_append_returns_the_end_before_or_after_it(tmp_path):
    loop = asyncio.get_running_loop()
    ex = DelayingExecutor(4)
    loop.set_default_executor(ex)
    seg = LogSegment.open(tmp_path, 0, ops=NotCached(), **KW)
    for i in range(10):
        await seg.append([batch(i, "v")])
    seg._next_offset = None       # as after open or truncate: not cached
    hold = threading.Event()
    ex.hold = hold
    reader = asyncio.ensure_future(seg.read_next_offset())
    try:
        assert await ex.held.wait_async(60), "the reader's thread job never came"  # it captured `end`
        await seg.append([batch(10, "w"), batch(11, "w")])
        hold.set()
        got = await reader
        assert got in (10, 12), f"read_next_offset returned {got}"
    finally:
        hold.set()
        seg.close()
