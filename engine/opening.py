"""What ``Engine.open`` was asked for, checked, and the awaitable it returns.

Owns: ``OpenOptions`` (every option of ``Engine.open``, each checked once
before anything touches the directory) and ``Opening`` (await it, or use it
as ``async with``: the engine is closed when the block ends).

Concurrency contract: none of its own; ``Opening`` runs the open on the
caller's event loop.

Must not import: ``engine.engine``, ``tools``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Protocol, Self, TypeVar, cast

from seglog.engine.config import LogConfig
from seglog.engine.loader import RecoveryProgress
from seglog.engine.topics import check_partition_count
from seglog.engine.validate import check_max_open_files, validate_open_options

__all__ = ["OpenOptions", "Opening"]


@dataclass(frozen=True, slots=True)
class OpenOptions:
    """``Engine.open``'s options, checked (see its docstring for what each means)."""

    path: Path
    config: LogConfig
    read_only: bool
    on_progress: Callable[[RecoveryProgress], None] | None
    force_recovery: bool
    retention_check_interval_ms: int
    checkpoint_interval_ms: int
    flush_check_interval_ms: int
    follow: bool
    follow_interval_ms: int
    auto_create_topics: bool
    auto_create_partitions: int
    max_open_files: int | None
    transactional_id_expiration_ms: int
    transactions_remove_expired_transaction_cleanup_interval_ms: int

    @classmethod
    def checked(cls, path: object, config: object, on_progress: object, **options: Any) -> Self:
        """The options, once every one is valid; ``path`` made absolute, ``config=None`` the default.

        Raises:
            InvalidConfigError: as ``Engine.open`` says.
        """
        flags = {name: options[name] for name in ("read_only", "force_recovery", "follow", "auto_create_topics")}
        intervals = {name: value for name, value in options.items() if name.endswith("_ms")}
        absolute, checked_config = validate_open_options(path, config, flags, intervals, on_progress)
        check_partition_count("auto_create_partitions", options["auto_create_partitions"])
        check_max_open_files(options["max_open_files"])
        progress = cast("Callable[[RecoveryProgress], None] | None", on_progress)
        return cls(path=absolute, config=checked_config, on_progress=progress, **options)


class _Closable(Protocol):
    async def close(self) -> None: ...


T = TypeVar("T", bound=_Closable)


class Opening(Generic[T]):
    """What ``Engine.open`` returns: await it, or use it as ``async with``."""

    __slots__ = ("_opened", "_start")

    def __init__(self, start: Callable[[], Awaitable[T]]) -> None:
        self._start = start
        self._opened: T | None = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._start().__await__()

    async def __aenter__(self) -> T:
        self._opened = await self._start()
        return self._opened

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._opened is not None:
            await self._opened.close()
