"""Regenerate the bundled sample workload: ``examples/sample-workload.parquet``.

Run from the repository root (the output is deterministic for a seed)::

    .venv/bin/python examples/generate_sample_workload.py            # seed 7, 12 s
    .venv/bin/python examples/generate_sample_workload.py --seed 11 --output /tmp/other.parquet

Then replay it::

    .venv/bin/seglog replay examples/sample-workload.parquet --log-dir data --report reports/replay.json

The generator itself lives in ``tools/replay/sample.py`` (also behind
``seglog workload generate``); this script only fixes where the bundled copy goes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from seglog.tools.replay.format import write_workload
from seglog.tools.replay.sample import DEFAULT_DURATION_S, DEFAULT_SEED, generate_sample

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--duration", type=float, default=DEFAULT_DURATION_S, help="seconds of capture time")
    parser.add_argument("--output", type=Path, default=HERE / "sample-workload.parquet")
    args = parser.parse_args()
    workload = generate_sample(args.seed, args.duration)
    path = write_workload(args.output, workload.rows, workload.partitions)
    print(f"wrote {len(workload.rows)} rows to {path}")


if __name__ == "__main__":
    main()
