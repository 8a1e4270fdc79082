"""The seglog pytest plugin (entry point pytest11), used exactly as a user's project would use it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import ModuleType

import pytest

from seglog.engine import Engine, LogConfig, Record

# pytester runs pytest on a throwaway project; a plugin of pytest itself, off unless asked for.
pytest_plugins = ["pytester"]


def test_config_fixture_uses_small_segments(seglog_config: LogConfig) -> None:
    assert seglog_config.segment_bytes == 64 * 1024


async def test_engine_fixture_is_fresh_and_open(seglog_engine: Engine, seglog_dir: Path, seglog: ModuleType) -> None:
    assert seglog_engine.topics() == [] and seglog_engine.path == seglog_dir
    await seglog_engine.create_topic("orders", partitions=2)
    await seglog_engine.produce("orders", b"paid", key=b"order-1")
    await seglog_engine.produce("orders", b"shipped", key=b"order-1")
    await seglog.assert_topic_holds(seglog_engine, "orders", [b"shipped", b"paid"])  # any order across partitions
    partition = (await seglog_engine.produce("orders", b"done", key=b"order-1")).partition
    await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid", b"shipped", b"done"], partition=partition,
                                    keys=[b"order-1"] * 3)
    with pytest.raises(AssertionError, match="holds"):
        await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid"], partition=partition)


async def test_recovery_reports_progress(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t", partitions=3)
        for p in range(3):
            await engine.log("t", p).append([Record(b"x" * 100)] * 10)
        await engine._abort_open()  # a crash: no clean-shutdown marker
    seen = []
    async with Engine.open(tmp_path, on_progress=seen.append) as engine:
        assert not engine.had_clean_shutdown
    assert [p.partitions_done for p in seen] == [1, 2, 3]
    assert {p.partitions_total for p in seen} == {3}
    assert sum(p.segments_recovered for p in seen) == 3 and sum(p.bytes_recovered for p in seen) > 3000


# ------------------------------------------------------------------------------------------ in a user's project
# Each test below runs pytest in a subprocess on a fresh directory with no conftest and no ini file: what a user's
# project looks like. (tests/test_packaging.py does the same from a wheel installed into a fresh venv.)

USER_TESTS = '''
import pytest
import pytest_asyncio

from seglog import Record


async def test_unmarked_coroutine_gets_the_engine(seglog_engine, seglog):
    await seglog_engine.create_topic("orders")
    await seglog_engine.produce("orders", b"paid", key=b"order-1")
    await seglog.assert_topic_holds(seglog_engine, "orders", [b"paid"])


@pytest.mark.asyncio
async def test_marked_coroutine_gets_the_engine(seglog_engine):
    await seglog_engine.create_topic("orders")
    log = seglog_engine.log("orders")
    res = await log.append([Record(b"a"), Record(b"b")])
    got = await log.read(res.first_offset)
    assert [r.value for r in got.records] == [b"a", b"b"]


@pytest_asyncio.fixture
async def orders(seglog_engine):
    await seglog_engine.create_topic("orders", partitions=2)
    return seglog_engine.log("orders", 1)


async def test_through_a_fixture_of_the_project(orders):
    await orders.append([Record(b"x")])
    assert orders.log_end_offset == 1


def test_sync_fixtures(seglog_config, seglog_dir):
    assert seglog_config.segment_bytes == 64 * 1024 and seglog_dir.name == "seglog-data"


async def test_not_ours():
    pass
'''


def run_user_project(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=USER_TESTS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args)


def test_fixtures_work_in_strict_mode_without_any_setting(pytester: pytest.Pytester) -> None:
    result = run_user_project(pytester)
    assert "mode=Mode.STRICT" in result.stdout.str() or "mode=strict" in result.stdout.str()
    assert result.parseoutcomes()["passed"] == 4, result.stdout.str()
    # Only tests using the plugin's asyncio fixtures are marked: strict mode still refuses the others.
    result.stdout.no_fnmatch_line("PASSED *::test_not_ours")


def test_fixtures_work_in_auto_mode(pytester: pytest.Pytester) -> None:
    result = run_user_project(pytester, "-o", "asyncio_mode=auto")
    assert "mode=Mode.AUTO" in result.stdout.str() or "mode=auto" in result.stdout.str()
    assert result.parseoutcomes()["passed"] == 5, result.stdout.str()


# pytest with pytest-asyncio uninstalled, as far as the seglog plugin can tell.
HIDE_PYTEST_ASYNCIO = """
import sys

class HidePytestAsyncio:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pytest_asyncio":
            raise ImportError("pytest_asyncio is hidden by the test")

sys.meta_path.insert(0, HidePytestAsyncio())
import pytest
raise SystemExit(pytest.main())
"""


def test_without_pytest_asyncio_the_engine_fixture_says_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_engine(seglog_engine):\n    pass\n")
    result = pytester.run(sys.executable, "-c", HIDE_PYTEST_ASYNCIO, "-p", "no:asyncio", "-p", "no:cacheprovider",
                          "--assert=plain")  # no rewrite hook ahead of the one hiding pytest_asyncio
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "needs pytest-asyncio, which is not installed: pip install 'seglog[testing]'" in result.stdout.str()


def test_every_async_fixture_of_the_plugin_is_listed_for_the_asyncio_mark() -> None:
    from seglog.engine import pytest_plugin
    from seglog.server import pytest_plugin as installed_plugin  # the entry point: it re-exports the engine's

    async_fixtures = set()
    for module in (pytest_plugin, installed_plugin):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        async_fixtures |= {node.name for node in ast.walk(tree) if isinstance(node, ast.AsyncFunctionDef)
                           and any("fixture" in ast.unparse(d) for d in node.decorator_list)}
    assert async_fixtures and async_fixtures == pytest_plugin.ASYNC_FIXTURES
    # The hook that adds the mark must be registered through the entry point's module too.
    assert installed_plugin.pytest_pycollect_makeitem is pytest_plugin.pytest_pycollect_makeitem
