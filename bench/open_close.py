"""Clean open and clean close of a log directory of many partitions x 10 segments. Plain script.

    .venv/bin/python bench/open_close.py [--partitions 1000] [--rounds 3] [--dir DIR]

Builds the directory once (as ``seglog bench``'s open section does, ``seglog.tools.bench.scaling``), then
times ``Engine.open`` and ``Engine.close`` of it ``--rounds`` times, and counts the descriptors the
open engine holds under the directory (Linux ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from seglog.engine import Engine, run
from seglog.tools.bench import scaling
from seglog.tools.bench.data import Dataset


def descriptors_under(root: Path) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(root))
        except OSError:
            continue
    return count


async def main(args: argparse.Namespace) -> None:
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="seglog-openclose-"))
    if not root.exists() or not any(root.iterdir()):
        await scaling.build_many_partitions(root, args.partitions, 1, Dataset(100_000, 100))
    for _ in range(args.rounds):
        start = time.perf_counter()
        engine = await Engine.open(root)
        opened = time.perf_counter() - start
        held = descriptors_under(root)
        start = time.perf_counter()
        await engine.close()
        closed = time.perf_counter() - start
        print(f"open {opened:.3f} s, close {closed:.3f} s, {held} descriptors held while open")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="directory to (re)use; built when empty or missing")
    run(main(parser.parse_args()))
