"""What the engine's Hypothesis state machines share: an engine with one topic "t" on its own event loop.

A ``RuleBasedStateMachine`` is driven synchronously, so each machine owns a
private event loop and runs every engine call to completion on it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, rule

from seglog.engine import Engine, LogConfig, PartitionLog

T = TypeVar("T")


class EngineMachine(RuleBasedStateMachine):
    """An engine opened with :attr:`CONFIG` in a fresh directory, topic "t" created; closed and removed at teardown.

    Subclasses set :attr:`CONFIG` and add the rules and invariants of their
    model; ``roll`` is a rule of every machine.
    """

    CONFIG: LogConfig

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix=f"seglog-{type(self).__name__}-"))
        self.engine = self.run(Engine.open(self.dir, self.CONFIG))
        self.run(self.engine.create_topic("t"))

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @property
    def log(self) -> PartitionLog:
        return self.engine.log("t")

    def reopen_engine(self) -> None:
        """Close the engine cleanly and open it again from the same directory."""
        self.run(self.engine.close())
        self.engine = self.run(Engine.open(self.dir, self.CONFIG))

    def teardown(self) -> None:
        try:
            self.run(self.engine.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule()
    def roll(self) -> None:
        self.run(self.log.roll())


def machine_test(machine: type[EngineMachine], *, max_examples: int, steps: int) -> type[Any]:
    """``machine``'s pytest case, with ``max_examples`` runs of up to ``steps`` steps.

    No deadline and no too-slow health check: every step does file I/O, whose
    time on a shared machine says nothing about the code.
    """
    case = machine.TestCase
    case.settings = settings(
        max_examples=max_examples, stateful_step_count=steps, deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    return case
