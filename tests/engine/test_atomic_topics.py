"""create_topic makes a complete topic or none; delete_topic works for every valid name or changes nothing.

The crash test SIGKILLs a real create_topic at each of its file-system steps in turn
(``create_topic_kills.py`` stops the writer at step K with a hook, then kills it): after each kill
the next open finds the topic complete (finishing it if needed) or absent, and says so in the log
when it had something to finish or remove.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from create_topic_kills import OVERRIDES, PARTITIONS, TOPIC, value

from seglog.engine import Engine, Record, errors
from seglog.engine import _fs as engine_fs
from seglog.engine.testing import partition_records

KILLS = Path(__file__).with_name("create_topic_kills.py")


def leftovers(directory: Path) -> list[str]:
    """What a cut-short create_topic may leave: directories aside, a topic short of partitions or segments."""
    found = sorted(p.name for p in directory.iterdir() if p.name.endswith("-create"))
    placed = [directory / f"{TOPIC}-{p}" for p in range(PARTITIONS) if (directory / f"{TOPIC}-{p}").is_dir()]
    if placed and len(placed) < PARTITIONS:
        found.append(f"{len(placed)} of {PARTITIONS} partitions")
    found += [p.name for p in placed if not any(p.glob("*.log"))]
    return found


async def kill_at_every_step(tmp_path: Path, mode: str, last_step: int = 10_000) -> list[dict[str, Any]]:
    """Run ``create_topic_kills.py``: one directory per step K, the writer SIGKILLed before step K."""
    result_path = tmp_path / "kills.json"
    base = tmp_path / "runs"
    base.mkdir()
    run = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(KILLS), str(base), str(result_path), mode, str(last_step)],
        check=False, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    results: list[dict[str, Any]] = json.loads(result_path.read_text())
    assert all("error" not in r for r in results), [r for r in results if "error" in r]
    assert all(r["killed"] for r in results), "a writer was not killed by SIGKILL"
    done = results[-1]
    assert "done" in done, done
    assert len(results) >= 5, f"{mode} took only {len(results) - 1} steps: the hook missed its calls"
    return results


async def test_a_create_topic_killed_at_any_step_leaves_a_complete_topic_or_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    results = await kill_at_every_step(tmp_path, "create")
    assert results[-1]["done"] == len(results) - 1, "a step was skipped"
    assert len(results) >= 10, f"create_topic took only {len(results) - 1} steps"

    outcomes = {"absent": 0, "finished": 0, "complete": 0}
    for r in results:
        directory = Path(r["dir"])
        before = leftovers(directory)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="seglog"):
            async with Engine.open(directory) as engine:
                warned = [m.getMessage() for m in caplog.records if m.levelno >= logging.WARNING]
                where = f"killed at step {r.get('step', 'after the end')} ({r.get('op')} {r.get('path')})"
                assert not [p.name for p in directory.iterdir() if p.name.endswith("-create")], where
                if before:
                    assert any("create_topic" in m for m in warned), f"{where}: {before} fixed without a word"
                if engine.topics() == []:
                    assert not list(directory.glob(f"{TOPIC}-*")), where
                    outcomes["absent"] += 1
                    await engine.create_topic(TOPIC, partitions=PARTITIONS, config=OVERRIDES)
                else:
                    assert engine.topics() == [TOPIC], where
                    outcomes["finished" if before else "complete"] += 1
                assert engine.partitions_for(TOPIC) == PARTITIONS, where
                assert engine.topic_config(TOPIC).retention_ms == OVERRIDES["retention.ms"], where
                for p in range(PARTITIONS):
                    assert (directory / f"{TOPIC}-{p}" / "topic.json").is_file(), where
                    log = engine.log(TOPIC, p)
                    result = await log.append([Record(f"v{p}".encode())])
                    assert (await log.read(result.first_offset)).records[0].value == f"v{p}".encode()
                with pytest.raises(errors.TopicExistsError):
                    await engine.create_topic(TOPIC, partitions=PARTITIONS)
    # The kills hit every kind of instant: before any partition was placed, between placements, after.
    assert all(outcomes.values()), outcomes


async def test_a_delete_topic_killed_at_any_step_leaves_the_topic_whole_or_gone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Its renames and their directory fsync are the first steps; after them the topic is gone whatever
    # follows (closes, the removal in the background), so the kills stop at step 12, and one run completes.
    results = await kill_at_every_step(tmp_path, "delete", last_step=12)
    assert [r.get("op") for r in results[:3]] == ["replace"] * PARTITIONS, results[:4]  # rename(2), by os.replace
    outcomes = {"kept": 0, "finished": 0, "gone": 0}
    for r in results:
        directory = Path(r["dir"])
        where = f"killed at step {r.get('step', 'after the end')} ({r.get('op')} {r.get('path')})"
        placed = sorted(p.name for p in directory.glob(f"{TOPIC}-[0-9]*") if p.name[len(TOPIC) + 1:].isdigit())
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="seglog"):
            async with Engine.open(directory) as engine:
                if engine.topics():  # nothing was renamed yet: the topic is as it was, records and all
                    assert placed == [f"{TOPIC}-{p}" for p in range(PARTITIONS)], where
                    for p in range(PARTITIONS):
                        assert [x.value for x in await partition_records(engine.log(TOPIC, p))] == [value(p)], where
                    outcomes["kept"] += 1
                else:
                    if placed:  # partly renamed: the open finished the delete, and said so
                        assert any("delete_topic was cut short" in m.getMessage() for m in caplog.records), where
                        outcomes["finished"] += 1
                    else:
                        outcomes["gone"] += 1
                    await engine.create_topic(TOPIC)  # the name is free
                    assert await partition_records(engine.log(TOPIC, 0)) == []
    assert all(outcomes.values()), outcomes


async def test_a_half_made_partition_directory_without_topic_json_or_records_is_removed_at_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # What a create_topic cut short used to leave: t-0/ without topic.json. It was taken for a
    # one-partition topic with the default config, and create_topic("t", 3) said it existed.
    (tmp_path / "t-0").mkdir()
    with caplog.at_level(logging.WARNING, logger="seglog"):
        async with Engine.open(tmp_path) as engine:
            assert engine.topics() == []
            assert any("create_topic was cut short" in r.getMessage() for r in caplog.records)
            await engine.create_topic("t", partitions=3)
            assert engine.partitions_for("t") == 3
    async with Engine.open(tmp_path) as engine:
        assert engine.partitions_for("t") == 3


async def test_a_partition_directory_without_topic_json_that_holds_records_is_kept(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        await engine.log("t").append([Record(b"kept")])
    (tmp_path / "t-0" / "topic.json").unlink()
    async with Engine.open(tmp_path) as engine:
        assert engine.topics() == ["t"]
        assert [r.value for r in (await engine.log("t").read(0)).records] == [b"kept"]


@pytest.mark.parametrize("partitions", [1, 12])
async def test_a_topic_with_a_249_character_name_can_be_deleted(tmp_path: Path, partitions: int) -> None:
    topic = "x" * 249
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic(topic, partitions=partitions)
        await engine.log(topic, partitions - 1).append([Record(b"v")])
        await engine.delete_topic(topic)
        assert engine.topics() == []
        assert not list(tmp_path.glob(f"{topic}-*[0-9]")), "a partition directory is still in place"
        aside = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
        assert all(len(name.encode()) <= 255 for name in aside), aside
        await engine.create_topic(topic, partitions=2)  # the name is free again
        await engine.delete_topic(topic)
    async with Engine.open(tmp_path) as engine:
        assert engine.topics() == []


@pytest.mark.parametrize("lazily_opened", [False, True], ids=["open", "left-unopened-by-a-clean-open"])
async def test_a_failed_delete_leaves_the_topic_fully_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lazily_opened: bool
) -> None:
    real_rename = engine_fs._rename_dir
    renamed: list[str] = []

    def rename_failing_on_the_second_partition(source: Path, target: Path) -> None:
        if source.name == "t-1" and target.name.endswith("-delete"):
            raise errors.StorageError(f"{source}: cannot rename to {target}: injected EIO")
        real_rename(source, target)
        renamed.append(source.name)

    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=3)
        for p in range(3):
            await engine.log("t", p).append([Record(f"before-{p}".encode())])
    async with Engine.open(tmp_path) as engine:
        logs = [engine.log("t", p) for p in range(3)]
        if not lazily_opened:
            for log in logs:
                await log.read(0)  # opens its files
        monkeypatch.setattr(engine_fs, "_rename_dir", rename_failing_on_the_second_partition)
        with pytest.raises(errors.StorageError, match="injected"):
            await engine.delete_topic("t")
        assert renamed[0] == "t-0", renamed  # the failure came after a partition had moved
        monkeypatch.undo()
        assert engine.topics() == ["t"]
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("t-")) == ["t-0", "t-1", "t-2"]
        for p, log in enumerate(logs):  # the same objects, still open, their files where they were
            assert engine.log("t", p) is log
            await log.roll()  # a new segment goes into the partition's directory, not the moved one
            await log.append([Record(f"after-{p}".encode())])
            assert [r.value for r in await partition_records(log)] == [f"before-{p}".encode(), f"after-{p}".encode()]
        await engine.commit_offset("g", "t", 0, 1)
    async with Engine.open(tmp_path) as engine:
        assert engine.partitions_for("t") == 3
        assert [r.value for r in await partition_records(engine.log("t", 2))] == [b"before-2", b"after-2"]
        await engine.delete_topic("t")  # and it can be deleted once the disk behaves
        assert engine.topics() == []
    async with Engine.open(tmp_path) as engine:
        assert engine.topics() == []
