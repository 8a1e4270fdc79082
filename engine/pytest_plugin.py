"""The ``seglog`` pytest plugin: a fresh engine in a temporary directory for every test.

Installed with seglog (entry point ``pytest11``, through ``seglog.server.pytest_plugin``,
which re-exports these and adds ``seglog_kafka``), so a project that depends on
seglog gets these fixtures without any import::

    async def test_orders_flow(seglog_engine):
        await seglog_engine.create_topic("orders")
        await my_service.handle(seglog_engine)
        await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid"])

Fixtures:

* ``seglog_config`` — the ``LogConfig`` the engine opens with; small segments
  (64 KiB) so rolls happen in tests. Override the fixture to change it.
* ``seglog_dir`` — the log directory (inside ``tmp_path``).
* ``seglog_engine`` — an open ``Engine`` on ``seglog_dir``, closed after the
  test (async fixture; needs pytest-asyncio).
* ``seglog`` — the helper module ``seglog.engine.testing`` (``topic_records``,
  ``partition_records``, ``assert_topic_holds``).

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest

from seglog.engine import testing
from seglog.engine.config import LogConfig
from seglog.engine.engine import Engine

__all__ = ["seglog", "seglog_config", "seglog_dir"]


@pytest.fixture
def seglog_config() -> LogConfig:
    return LogConfig(segment_bytes=64 * 1024, segment_index_bytes=64 * 1024)


@pytest.fixture
def seglog_dir(tmp_path: Path) -> Path:
    return tmp_path / "seglog-data"


@pytest.fixture
def seglog() -> ModuleType:
    return testing


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the fixture needs pytest-asyncio; the rest does not
    pass
else:

    @pytest_asyncio.fixture
    async def seglog_engine(seglog_dir: Path, seglog_config: LogConfig) -> AsyncIterator[Engine]:
        async with Engine.open(seglog_dir, seglog_config) as engine:
            yield engine

    __all__ += ["seglog_engine"]
