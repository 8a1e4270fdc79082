"""The ``seglog`` pytest plugin: the engine's fixtures plus ``seglog_kafka``, a log directory served to Kafka clients.

Installed with seglog (entry point ``pytest11``), so a project that depends on
seglog gets every fixture without an import. The engine's fixtures
(``seglog_config``, ``seglog_dir``, ``seglog_engine``, ``seglog``) are defined
in ``seglog.engine.pytest_plugin`` and re-exported here (the engine cannot import the
server; this module sits above both)::

    def test_orders_roundtrip(seglog_kafka):
        producer = KafkaProducer(bootstrap_servers=seglog_kafka)
        producer.send("orders", b"paid").get(timeout=10)
        ...

* ``seglog_kafka`` — ``seglog_dir`` opened with ``seglog_config`` and served
  over the Kafka protocol on a free port of 127.0.0.1 from a background thread
  (so blocking clients and async ones both work); yields the bootstrap address
  ``"127.0.0.1:PORT"``. Topics are created on first use. Stopped cleanly after
  the test; the files stay in ``seglog_dir`` for the test to open afterwards.

Must not import: ``tools``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.engine import LogConfig
from seglog.engine.pytest_plugin import (
    pytest_pycollect_makeitem,  # the hook that marks coroutine tests using seglog_engine as asyncio tests
    seglog,
    seglog_config,
    seglog_dir,
    seglog_engine,
)

__all__ = ["pytest_pycollect_makeitem", "seglog", "seglog_config", "seglog_dir", "seglog_engine", "seglog_kafka"]


@pytest.fixture
def seglog_kafka(seglog_dir: Path, seglog_config: LogConfig) -> Iterator[str]:
    # Imported here: the protocol library loads only in sessions that use the fixture.
    from seglog.server.testing import serve_in_thread

    with serve_in_thread(seglog_dir, seglog_config) as bootstrap_servers:
        yield bootstrap_servers
