"""The scaling section's lookups alone: point read and time lookup + read on a 10⁵- and a 10⁷-record log.

    .venv/bin/python bench/scaling_lookups.py [--lookups 2000] [--rounds 5]

Writes the two logs of ``seglog bench --only scaling`` (1-B values, 100 records per append, one engine,
default config: one segment each) and reads them with the same workloads (random offsets; time lookups
at those offsets' timestamps), alternating log and operation round by round; the first round is a
warm-up. Prints each p50 (the median of the rounds' p50s) and the 10⁷ / 10⁵ ratio issue 22 bounds at
1.2. Seconds to run, not minutes: for checking a change to the lookup paths. Plain script, never run
by the tests; the machine is shared: quote the ratios.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

from seglog.engine import run
from seglog.tools.bench import scaling, workloads
from seglog.tools.bench.data import open_engine

SIZES = {"small": 100_000, "large": 10_000_000}


async def main(lookups: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        engine = await open_engine(Path(directory))
        try:
            logs = {}
            for name, count in SIZES.items():
                await engine.create_topic(name)
                logs[name] = engine.log(name)
                await workloads.fill(logs[name], scaling.tiny_batches(count, 100))
            rnd = random.Random(1)
            p50s: dict[tuple[str, str], list[float]] = {}
            for round_ in range(rounds + 1):
                for name, count in SIZES.items():
                    for kind in ("point", "ts"):
                        targets = workloads.sample_offsets(rnd, 0, count, lookups)
                        out: list[float] = []
                        if kind == "point":
                            await workloads.point_reads(logs[name], targets, out)
                        else:
                            stamps = [scaling.BASE_TIMESTAMP_MS + o for o in targets]
                            await workloads.timestamp_reads(logs[name], stamps, out)
                        if round_:
                            p50s.setdefault((name, kind), []).append(statistics.median(out) * 1e6)
        finally:
            await engine.close()
    for kind, label in (("point", "point read"), ("ts", "time lookup + read")):
        small, large = statistics.median(p50s[("small", kind)]), statistics.median(p50s[("large", kind)])
        print(f"{label:>19}: 10^5 {small:5.2f} us, 10^7 {large:5.2f} us, ratio {large / small:.3f} (<= 1.2)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    run(main(args.lookups, args.rounds))
