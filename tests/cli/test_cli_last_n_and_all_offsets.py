"""``seglog consume --from -N`` (the last N records of each partition, kcat's ``-o -N``) and ``seglog offsets``
without a topic (every partition of every topic, as kafka-get-offsets without ``--topic``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cliharness import Result, run_seglog

from seglog.engine import Engine, Record, run

Cli = Callable[..., Result]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """orders: partition 0 holds v0..v9 with its first 4 deleted (log start 4), partition 1 v0..v2; audit: empty."""
    path = tmp_path / "data"

    async def build() -> None:
        async with Engine.open(path) as engine:
            await engine.create_topic("orders", partitions=2)
            await engine.create_topic("audit")
            await engine.log("orders", 0).append([Record(f"v{i}".encode()) for i in range(10)])
            await engine.log("orders", 0).delete_records_before(4)
            await engine.log("orders", 1).append([Record(f"v{i}".encode()) for i in range(3)])

    run(build())
    return path


def consumed(cli: Cli, data: Path, *args: str) -> list[tuple[int, int, str]]:
    r = cli("consume", "orders", "--log-dir", data, "--format", "json", *args)
    assert r.code == 0, r
    return [(g["partition"], g["offset"], g["value"]) for g in map(json.loads, r.out.splitlines())]


def test_from_minus_n_reads_the_last_n_records_of_each_partition(cli: Cli, data: Path) -> None:
    assert consumed(cli, data, "--from", "-2") == [(0, 8, "v8"), (0, 9, "v9"), (1, 1, "v1"), (1, 2, "v2")]
    assert consumed(cli, data, "--from=-1", "-p", "1") == [(1, 2, "v2")]
    # More than a partition holds: from its log start (never below it, so never out of range).
    assert consumed(cli, data, "--from", "-100", "-p", "0") == [(0, o, f"v{o}") for o in range(4, 10)]
    assert consumed(cli, data, "--from", "-0") == []  # -0 is the log end, as latest
    assert len(consumed(cli, data, "--from", "-5", "--max-messages", "3")) == 3


def test_from_minus_n_in_a_real_process(data: Path) -> None:
    p = run_seglog("consume", "orders", "--from", "-1", "--log-dir", data)
    assert (p.returncode, p.stdout) == (0, b"v9\nv2\n"), p.stderr


def test_from_that_is_not_a_number_is_a_usage_error(cli: Cli, data: Path) -> None:
    for spec in ("-x", "-", "soon"):
        r = cli("consume", "orders", f"--from={spec}", "--log-dir", data)
        assert r.code == 2 and "-N for the last N records" in r.err, (spec, r)


def test_offsets_without_a_topic_lists_every_partition_of_every_topic(cli: Cli, data: Path) -> None:
    r = cli("offsets", "--log-dir", data)
    assert (r.code, r.out) == (0, "audit:0:0\norders:0:10\norders:1:3\n")
    r = cli("offsets", "--time", "earliest", "--json", "--log-dir", data)
    assert [(row["topic"], row["partition"], row["offset"]) for row in json.loads(r.out)] == [
        ("audit", 0, 0), ("orders", 0, 4), ("orders", 1, 0)]
    assert cli("offsets", "-p", "1", "--log-dir", data).out == "orders:1:3\n"  # partition 1 of each topic
    assert cli("offsets", "orders", "--log-dir", data).out == "orders:0:10\norders:1:3\n"  # one topic, as before


def test_offsets_without_a_topic_on_an_empty_directory_prints_nothing(cli: Cli, tmp_path: Path) -> None:
    run(_open_and_close(tmp_path / "empty"))
    r = cli("offsets", "--json", "--log-dir", tmp_path / "empty")
    assert (r.code, json.loads(r.out)) == (0, [])
    assert cli("offsets", "--log-dir", tmp_path / "empty").out == ""


async def _open_and_close(path: Path) -> None:
    async with Engine.open(path):
        pass
