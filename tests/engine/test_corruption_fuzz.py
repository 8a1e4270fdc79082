"""Randomly damaged log directories: only ``SeglogError`` escapes, and no record is served at another offset.

Each trial copies a template log directory (written by a real ``Engine``, stopped cleanly or
copied while open), applies one to three random damages to any kind of file -- ``.log``
(bit flips, one in a sealed batch's base offset, which the CRC does not cover; truncation,
zeroed ranges, random bytes, a torn or garbage tail), whole segments (swapped, duplicated,
deleted, renamed), ``.index`` / ``.timeindex`` (bit flips, truncation, zeros, random bytes,
deletion, well-formed lying entries), a planted ``.txnindex``, producer-state ``.snapshot`` files
(bit flips, truncation, random bytes, planted ones), the ``.clean-shutdown`` record
(damaged or lying, e.g. omitting the first segment), both checkpoints (damaged or lying),
``topic.json`` and the consumer-group files -- and then judges what the offline tools
(``seglog verify``, ``recover --dry-run``, ``consume``, ``offsets``), a read-only engine, a
writable engine and a second writable open make of it: every offset of the log is read,
timestamps are looked up, one partition is followed with ``subscribe``, a producer's last batch is
sent again. The model, the damage
kinds and the rules (what counts as a crash, a wrong answer, a silent gap, and which losses a
damage explains) are documented in ``corruption_model.py``.

Reproducible: trial ``i`` uses seed ``i``; a failure prints each bad trial's seed, template,
damage and the rules it broke. ``SEGLOG_FUZZ_SEED=N`` runs only seed N,
``SEGLOG_FUZZ_TRIALS=N`` runs seeds 0..N-1 (default 320), ``SEGLOG_FUZZ_REPORT=FILE`` appends
one JSON line per trial (seed, damage, outcome, findings) for a baseline count. Every trial must
pass: a failing one fails its chunk with every finding.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import pytest
from corruption_model import (
    SHAPES,
    T0,
    Allow,
    Expected,
    Judge,
    Observation,
    PartitionModel,
    Template,
    Templates,
    TrialReport,
    judge_directory,
    run_trial,
)

from seglog import OffsetAndTimestamp, Record
from seglog.engine.errors import SeglogError

# The pure-Python pass of `make test` runs these tests a second time, on the slower codec: a sample there.
TRIALS = int(os.environ.get("SEGLOG_FUZZ_TRIALS", "64" if os.environ.get("SEGLOG_PURE_PYTHON") == "1" else "320"))
CHUNK = 16  # trials per test, so pytest shows progress
ONE_SEED = os.environ.get("SEGLOG_FUZZ_SEED")


def _chunks() -> list[list[int]]:
    if ONE_SEED is not None:
        return [[int(ONE_SEED)]]
    return [list(range(i, min(i + CHUNK, TRIALS))) for i in range(0, TRIALS, CHUNK)]


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    return Templates(tmp_path_factory.mktemp("templates"))


def _report(reports: list[TrialReport]) -> None:
    target = os.environ.get("SEGLOG_FUZZ_REPORT")
    if not target:
        return
    with open(target, "a", encoding="utf-8") as f:
        for r in reports:
            f.write(json.dumps({
                "seed": r.seed, "template": r.template, "damages": [d.kind for d in r.damages],
                "damage": [str(d) for d in r.damages], "outcome": r.obs.outcome,
                "findings": [{"category": x.category, "where": x.where, "message": x.message}
                             for x in r.obs.findings],
                "errors": r.obs.errors[:5], "losses": r.obs.losses[:5],
            }) + "\n")


def test_the_oracle_flags_wrong_records_gaps_bad_bounds_and_bad_lookups() -> None:
    """The rules themselves, on a hand-made model: each broken one is a finding, the right answers are not."""
    model = PartitionModel("t", 0, [Expected(o, b"k", b"v%d" % o, T0 + (o % 3) * 10, ()) for o in range(6)])
    template = Template(0, True, Path("unused"), {("t", 0): model}, {})

    def judged(allow: Allow | None = None) -> tuple[Judge, Observation]:
        obs = Observation()
        return Judge(template, {("t", 0): allow or Allow()}, obs, "test", random.Random(0)), obs

    def rec(offset: int, value: bytes | None = None) -> Record:
        e = model.records[offset]
        return Record(e.value if value is None else value, key=e.key, timestamp=e.timestamp, offset=offset)

    judge, obs = judged()
    served: set[int] = set()
    judge.check_records(("t", 0), 1, [rec(1), rec(2)], 3, 6, "read(1)", served)
    judge.bounds(("t", 0), 0, 6, "")
    judge.check_lookup(("t", 0), T0 + 15, _hit(2, T0 + 20), 0, 6, {0, 1, 2, 3}, "")
    judge.check_lookup(("t", 0), T0 + 25, None, 0, 6, {0, 1, 2, 3}, "")
    assert obs.findings == [] and served == {1, 2}
    cases = [
        (lambda j: j.check_records(("t", 0), 1, [rec(1, b"other")], 2, 6, "", set()), "wrong"),
        (lambda j: j.check_records(("t", 0), 1, [rec(2)], 3, 6, "", set()), "gap"),
        (lambda j: j.check_records(("t", 0), 1, [rec(1), rec(3)], 4, 6, "", set()), "gap"),
        (lambda j: j.check_records(("t", 0), 4, [], 4, 6, "", set()), "gap"),
        (lambda j: j.bounds(("t", 0), 2, 6, ""), "start"),
        (lambda j: j.bounds(("t", 0), 0, 9, ""), "end"),
        (lambda j: j.check_lookup(("t", 0), T0 + 15, _hit(5, T0 + 20), 0, 6, {0, 1, 2, 3, 4, 5}, ""), "lookup"),
        (lambda j: j.check_lookup(("t", 0), T0 + 15, None, 0, 6, {2}, ""), "lookup"),
        (lambda j: j.check_lookup(("t", 0), T0, _hit(7, T0), 0, 6, set(), ""), "lookup"),
        (lambda j: j.raised("read(0)", ValueError("negative read position"), ("t", 0)), "crash"),
        (lambda j: j.raised("read(0)", SeglogError("refused"), ("t", 0)), "error"),
    ]
    for act, category in cases:
        judge, obs = judged()
        act(judge)
        assert [f.category for f in obs.findings] == [category], (category, [str(f) for f in obs.findings])
    judge, obs = judged(Allow(errors=True, head=True))
    judge.raised("read(0)", SeglogError("refused"), ("t", 0))
    judge.bounds(("t", 0), 2, 6, "")
    assert obs.findings == [] and obs.outcome == "error"


def _hit(offset: int, timestamp: int) -> OffsetAndTimestamp:
    return OffsetAndTimestamp(offset, timestamp)


def _settle(failed: list[TrialReport], total: int, rerun: str = "SEGLOG_FUZZ_SEED=N reruns one") -> None:
    """Fail with the list of bad trials and every finding they made."""
    if not failed:
        return
    print("\n".join(r.summary(limit=50) for r in failed))  # every finding, shown with a failure
    lines = "\n".join(r.summary() for r in failed)
    pytest.fail(f"{len(failed)} of {total} trials broke a rule ({rerun}):\n{lines}", pytrace=False)


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("shape", range(SHAPES))
async def test_undamaged_templates_are_served_exactly(
    shape: int, clean: bool, templates: Templates, tmp_path: Path
) -> None:
    """The oracle's own control: with no damage at all, every rule holds and the log is served exactly."""
    template = (await templates.get(shape))[0 if clean else 1]
    path = tmp_path / "copy"
    shutil.copytree(template.path, path)
    obs = await judge_directory(template, path, [], random.Random(shape))
    report = TrialReport(-1, template.describe(), [], obs)
    _settle([report] if report.failed else [], 1, "no damage: the oracle's control")
    assert obs.outcome == "exact", (obs.errors, obs.losses)


@pytest.mark.parametrize("seeds", _chunks(), ids=lambda seeds: f"seeds{seeds[0]}-{seeds[-1]}")
async def test_damaged_directories_serve_only_their_own_records(
    seeds: list[int], templates: Templates, tmp_path: Path
) -> None:
    reports = [await run_trial(seed, templates.get, tmp_path) for seed in seeds]
    _report(reports)
    _settle([r for r in reports if r.failed], len(reports))
