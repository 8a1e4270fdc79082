"""How long a small unsynced append's ``pwritev`` takes, and whether it ever waited in the kernel.

    .venv/bin/python bench/loop_write_latency.py                    # 300,000 writes of 200 B in the temp dir
    .venv/bin/python bench/loop_write_latency.py --dir /data --bytes 1300 --writes 100000

What the event loop pays when it writes a small append itself (``SegmentFile.write_nowait``): a
``pwritev`` of a 61-byte header and a body, at the end of a growing file, no ``fdatasync``. Prints
the percentiles of its duration, how many writes exceeded 1 ms and ``SLOW_WRITE_SECONDS``, and how
many made a *voluntary* context switch (``getrusage(RUSAGE_THREAD).ru_nvcsw``): a write that waited
in the kernel (dirty-page throttling, the journal, reclaim, a lock) sleeps, which is a voluntary
switch; a write whose thread was merely descheduled on a busy machine is an involuntary one.
docs/ARCHITECTURE.md ("Small appends written by the loop") uses these figures. Plain script,
never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

from seglog.segments.fileio import SLOW_WRITE_SECONDS


def main(directory: str, size: int, writes: int) -> None:
    header, body = bytearray(61), os.urandom(max(size - 61, 1))
    durations: list[float] = []
    waited = slow_waited = 0
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        fd = os.open(os.path.join(tmp, "append.log"), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            position = 0
            for _ in range(writes):
                before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
                start = time.perf_counter()
                position += os.pwritev(fd, [header, body], position)
                took = time.perf_counter() - start
                if resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw != before:
                    waited += 1
                    slow_waited += took > SLOW_WRITE_SECONDS
                durations.append(took)
        finally:
            os.close(fd)
    ordered = sorted(durations)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6

    print(f"{writes:,} pwritev of {size} B at the end of a growing file (no fdatasync), in {directory}")
    print(
        f"p50 {at(0.5):.1f} us  p99 {at(0.99):.1f} us  p99.9 {at(0.999):.1f} us  p99.99 {at(0.9999):.1f} us  "
        f"max {ordered[-1] * 1e6:.1f} us"
    )
    print(
        f"over 1 ms: {sum(d > 0.001 for d in durations)}  over {SLOW_WRITE_SECONDS * 1e3:g} ms: "
        f"{sum(d > SLOW_WRITE_SECONDS for d in durations)}  waited in the kernel (voluntary switch): {waited}, "
        f"of which slow: {slow_waited}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to write (the log directory's disk)")
    parser.add_argument("--bytes", type=int, default=200, help="bytes per write (200: one 100-B record's batch)")
    parser.add_argument("--writes", type=int, default=300_000)
    args = parser.parse_args()
    main(args.dir, args.bytes, args.writes)
