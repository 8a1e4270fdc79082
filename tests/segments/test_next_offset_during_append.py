"""read_next_offset during an append returns the next offset before or after that append, never
another: its walk to the end of the log stays within the size it captured, also when it runs in a
thread (bytes not in the page cache) while the append is published on the loop. (The walk used to
look up the offset index's last entry after taking the size, find the new append's entry past it,
see no batch, and return the base offset.) The executor's queue delay is simulated by holding the
reader's job before it starts; the publication between the size and the lookup by a size taken
before the last append."""
import asyncio
import concurrent.futures
import threading

from seghelpers import append, batch

from seglog.engine.log import segment_read
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
        await append(seg, [batch(i, "v")])
    seg._next_offset = None       # as after open or truncate: not cached
    hold = threading.Event()
    ex.hold = hold
    reader = asyncio.ensure_future(segment_read(lambda nowait: seg.read_next_offset(nowait=nowait)))
    try:
        assert await ex.held.wait_async(60), "the reader's thread job never came"  # it captured `end`
        await append(seg, [batch(10, "w"), batch(11, "w")])
        hold.set()
        got = await reader
        assert got in (10, 12), f"read_next_offset returned {got}"
    finally:
        hold.set()
        seg.close()


def test_read_next_offset_ignores_index_entries_past_the_size_it_took_and_calls_none_a_lie(tmp_path):
    async def scenario():
        seg = LogSegment.open(tmp_path, 0, ops=NotCached(), **KW)
        try:
            for i in range(10):
                await append(seg, [batch(i, "v")])
            before = seg.size
            await append(seg, [batch(10, "w"), batch(11, "w")])  # index_interval_bytes=0: entries for both
            seg._next_offset = None
            seg._log._size = before  # the size as a reader took it, before the append was published
            assert seg.read_next_offset() == 10
            assert seg._index_lie is None, "an entry published after the size was taken is no lie"
        finally:
            seg.close()

    asyncio.run(scenario())
