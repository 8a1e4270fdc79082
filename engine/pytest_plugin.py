"""The ``seglog`` pytest plugin: a fresh engine in a temporary directory for every test.

Installed with seglog (entry point ``pytest11``, through ``seglog.server.pytest_plugin``,
which re-exports these fixtures and this module's hook and adds ``seglog_kafka``);
``pip install 'seglog[testing]'`` brings pytest and pytest-asyncio with it, and a
project gets these fixtures without any import, conftest or ini setting::

    async def test_orders_flow(seglog_engine, seglog):
        await seglog_engine.create_topic("orders")
        await my_service.handle(seglog_engine)
        await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid"])

Fixtures:

* ``seglog_config`` — the ``LogConfig`` the engine opens with; small segments
  (64 KiB) so rolls happen in tests. Override the fixture to change it.
* ``seglog_dir`` — the log directory (inside ``tmp_path``).
* ``seglog_engine`` — an open ``Engine`` on ``seglog_dir``, closed after the
  test (an asyncio fixture: needs pytest-asyncio).
* ``seglog`` — the helper module ``seglog.engine.testing`` (``topic_records``,
  ``partition_records``, ``assert_topic_holds``).

Both of pytest-asyncio's modes work. In its default *strict* mode a coroutine
test runs only with ``@pytest.mark.asyncio``; a coroutine test that uses one of
this plugin's asyncio fixtures (directly or through a fixture of its own) can
only mean asyncio, so the plugin adds the mark when the test has no
``asyncio``, ``anyio`` or ``trio`` mark of its own. ``docs/TESTING.md`` is the
user's guide.

Must not import: ``tools``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import pytest

from seglog.engine import testing
from seglog.engine.config import LogConfig
from seglog.engine.engine import Engine

try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - exercised by a test that hides pytest-asyncio in a subprocess
    _HAVE_PYTEST_ASYNCIO = False
else:
    _HAVE_PYTEST_ASYNCIO = True

__all__ = ["ASYNC_FIXTURES", "seglog", "seglog_config", "seglog_dir", "seglog_engine"]

# The fixtures of this plugin that run on an event loop: a coroutine test using any of them is an asyncio test.
ASYNC_FIXTURES: Final = frozenset({"seglog_engine"})
# Marks by which a test already says which async framework runs it.
_ASYNC_MARKS: Final = ("asyncio", "anyio", "trio")

_NO_PYTEST_ASYNCIO: Final = (
    "the seglog_engine fixture runs on asyncio and needs pytest-asyncio, which is not installed: "
    "pip install 'seglog[testing]' (or pytest-asyncio)"
)


@pytest.fixture
def seglog_config() -> LogConfig:
    return LogConfig(segment_bytes=64 * 1024, segment_index_bytes=64 * 1024)


@pytest.fixture
def seglog_dir(tmp_path: Path) -> Path:
    return tmp_path / "seglog-data"


@pytest.fixture
def seglog() -> ModuleType:
    return testing


if _HAVE_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def seglog_engine(seglog_dir: Path, seglog_config: LogConfig) -> AsyncIterator[Engine]:
        async with Engine.open(seglog_dir, seglog_config) as engine:
            yield engine

else:  # pragma: no cover - see above

    @pytest.fixture
    def seglog_engine(seglog_dir: Path, seglog_config: LogConfig) -> AsyncIterator[Engine]:
        # Without this, pytest reports only "fixture 'seglog_engine' not found".
        pytest.fail(_NO_PYTEST_ASYNCIO, pytrace=False)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> Generator[None, Any, Any]:
    """Mark unmarked coroutine tests that use an asyncio fixture of this plugin with ``asyncio``.

    ``trylast`` makes this the innermost wrapper: the mark is set before
    pytest-asyncio's own wrapper of this hook decides which items it runs.
    """
    result = yield
    if not _HAVE_PYTEST_ASYNCIO or not result:
        return result
    for item in result if isinstance(result, list) else [result]:
        if (
            isinstance(item, pytest.Function)
            and inspect.iscoroutinefunction(item.obj)
            and not ASYNC_FIXTURES.isdisjoint(item.fixturenames)
            and not any(item.get_closest_marker(mark) for mark in _ASYNC_MARKS)
        ):
            item.add_marker("asyncio")
    return result
