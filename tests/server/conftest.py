"""Fixtures of the server tests: an engine in a temporary directory served by a ``KafkaServer``."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from seglog.engine import Engine, LogConfig
from seglog.server import KafkaServer


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with Engine.open(tmp_path / "data", LogConfig(segment_bytes=1 << 20)) as opened:
        yield opened


@pytest.fixture
async def server(engine: Engine) -> AsyncIterator[KafkaServer]:
    async with KafkaServer(engine, "127.0.0.1:0") as started:
        yield started


@pytest.fixture
async def make_server(engine: Engine) -> AsyncIterator[Callable[..., Awaitable[KafkaServer]]]:
    """``await make_server(idle_timeout_ms=..., ...)``: a server with options; closed after the test."""
    started: list[KafkaServer] = []

    async def make(**options: object) -> KafkaServer:
        srv = KafkaServer(engine, "127.0.0.1:0", **options)  # type: ignore[arg-type]
        await srv.start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        await srv.close()
