"""A background task that fails is reported once, to the ``seglog`` logger: a SeglogError as one line
(its message says what and where), anything else (a bug) with its traceback."""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from seglog.engine import Engine
from seglog.engine.errors import StorageError
from seglog.engine.log import log_task_failure


def _rmtree_out_of_descriptors(path: Any, *args: object, **kwargs: object) -> None:
    raise OSError(errno.EMFILE, "Too many open files", str(path))


async def test_a_failed_removal_of_a_deleted_topic_is_logged_once_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(shutil, "rmtree", _rmtree_out_of_descriptors)
    caplog.set_level(logging.WARNING)
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=2)
        removals: list[asyncio.Task[None]] = []
        work = engine._background
        spawn = work.spawn

        def spawn_and_note_removals(coro: Any, name: str) -> None:
            spawn(coro, name)
            if name.startswith("seglog-remove"):
                removals.extend(t for t in work._tasks if t.get_name() == name)

        monkeypatch.setattr(work, "spawn", spawn_and_note_removals)
        await engine.delete_topic("t")
        assert len(removals) == 2  # the background work this test is about did start
        await asyncio.wait(removals)
        assert all(isinstance(t.exception(), StorageError) for t in removals)
    removals.clear()
    gc.collect()  # a task whose exception nobody took would be reported now, a second time

    failures = [r for r in caplog.records if "background task" in r.getMessage()]
    assert len(failures) == 2
    for record in failures:
        assert record.name == "seglog" and record.levelno == logging.ERROR
        assert record.exc_info is None  # one line: no traceback
        assert "cannot remove" in record.getMessage() and "Too many open files" in record.getMessage()
    assert not [r for r in caplog.records if r.name == "asyncio"]


async def test_a_failed_background_task_that_is_a_bug_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def broken() -> None:
        raise RuntimeError("a bug")

    task = asyncio.get_running_loop().create_task(broken(), name="seglog-broken")
    await asyncio.wait([task])
    log_task_failure(task, where="t-0")
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.getMessage() == "t-0: background task seglog-broken failed: RuntimeError('a bug')"
