"""The command line refuses bad input with exit code 2 and one line on stderr, before it reads or writes;
``dump`` takes a partition directory; the library's background failures reach stderr as one line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from cliharness import ROOT, Result, run_seglog

Cli = Callable[..., Result]


def one_error_line(r: Result) -> str:
    """The one line saying what was refused: ``Error: ...``, or argparse's ``seglog CMD: error: ...``
    (which follows the command's usage)."""
    lines = [line for line in r.err.splitlines() if line.startswith("Error: ") or ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in r.err, r.err
    return lines[0]


# ------------------------------------------------------------------------------------------ consume


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "99999999999999999999999"], "outside the range of an offset"),
        (["--from", str(2**63)], "outside the range of an offset"),
        (["--from", "37"], "past the end of orders-0, whose next offset is 36"),
        (["--partition", "1", "--from", "3"], "past the end of orders-1, whose next offset is 2"),
        (["--to-offset", "99999999999999999999999"], "outside the range of an offset"),
        (["--from-time", "99999999999999999999999"], "outside the range of a timestamp"),
        (["--group", "billing\x00"], "--group: group id 'billing\\x00' holds a NUL"),
        (["--group", "\udcff"], "--group: group id '\\udcff' is not valid UTF-8"),
    ],
    ids=["from_beyond_int64", "from_2_63", "from_past_the_end", "from_past_the_end_of_the_chosen_partition",
         "to_offset_beyond_int64", "from_time_beyond_int64", "group_with_nul", "group_with_a_lone_surrogate"],
)
def test_consume_refuses_positions_outside_the_log_or_int64_with_exit_2(
    cli: Cli, log_dir: Path, args: list[str], message: str
) -> None:
    r = cli("consume", "orders", "--log-dir", log_dir, *args)
    assert r.code == 2
    assert r.out == ""  # nothing consumed
    assert message in one_error_line(r)


def test_consume_from_the_log_end_is_not_past_it(cli: Cli, log_dir: Path) -> None:
    # The edge: the next offset to be written is a valid start (nothing to print yet), one more is not.
    r = cli("consume", "orders", "--partition", "0", "--from", "36", "--log-dir", log_dir)
    assert (r.code, r.out) == (0, "")
    r = cli("consume", "orders", "--partition", "0", "--from", "35", "--log-dir", log_dir)
    assert (r.code, r.out.splitlines()) == (0, ["v2"])


def test_consume_from_beyond_int64_exits_2_from_the_console_script(log_dir: Path) -> None:
    # The case as a user met it: the real process, whose exit status is what a shell script sees.
    done = run_seglog("consume", "orders", "--log-dir", log_dir, "--from", "99999999999999999999999")
    assert done.returncode == 2 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1 and done.stderr.startswith(b"Error: --from ")


def test_groups_reset_to_offset_beyond_int64_is_a_usage_error(cli: Cli, log_dir: Path) -> None:
    r = cli("groups", "reset", "billing", "--topic", "orders", "--to-offset", str(2**64), "--log-dir", log_dir)
    assert r.code == 2 and "outside the range of an offset" in one_error_line(r)


# ------------------------------------------------------------------------------------------ dump


def test_dump_of_a_partition_directory_dumps_each_segment_in_offset_order(cli: Cli, log_dir: Path) -> None:
    partition = log_dir / "orders-0"
    files = [partition / f"{base:020d}{suffix}" for base in (0, 12, 24) for suffix in (".log", ".index", ".timeindex")]
    assert all(f.is_file() for f in files) and not list(partition.glob("*.txnindex"))
    by_dir = cli("dump", partition)
    by_files = cli("dump", *files)
    assert by_dir.code == by_files.code == 0
    assert by_dir.out == by_files.out  # the same dump, file by file
    assert by_dir.err == by_files.err  # including one "Dumping <file>" note per file
    assert [line.split()[1] for line in by_dir.out.splitlines() if line.startswith("baseOffset")] == [
        str(base) for base in range(0, 36, 3)
    ]
    doc = json.loads(cli("dump", partition, "--json").out)
    assert [Path(f["path"]).name for f in doc["files"]] == [f.name for f in files]


def test_dump_of_a_log_directory_asks_for_a_partition_directory(cli: Cli, log_dir: Path) -> None:
    r = cli("dump", log_dir)
    assert r.code == 2 and r.out == ""
    line = one_error_line(r)
    assert "is a log directory; dump takes a partition directory" in line and str(log_dir / "orders-0") in line


def test_dump_of_a_directory_without_segments_or_a_missing_path_is_a_usage_error(
    cli: Cli, log_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    r = cli("dump", tmp_path / "empty")
    assert r.code == 2 and "holds no segment" in one_error_line(r)
    r = cli("dump", tmp_path / "nope")
    assert r.code == 2 and "no such file or directory" in one_error_line(r)
    # Every argument is checked before anything is printed.
    r = cli("dump", log_dir / "orders-0", tmp_path / "nope")
    assert r.code == 2 and r.out == ""


# ------------------------------------------------------------------------------------------ background failures

# A real `seglog topics delete` whose background removal of the deleted partition fails as it does with
# file descriptors exhausted (EMFILE from rmtree). The delete is made to wait for that removal, so the
# failure happens while the command runs (and the test checks that it did).
_DELETE_WITH_A_FAILING_REMOVAL = textwrap.dedent("""
    import asyncio, errno, shutil, sys
    from seglog.engine.background import BackgroundWork
    from seglog.engine.engine import Engine
    from seglog.tools.cli import main

    def rmtree_out_of_descriptors(path, *args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files", str(path))

    shutil.rmtree = rmtree_out_of_descriptors
    removals = []
    real_spawn, real_delete_topic = BackgroundWork.spawn, Engine.delete_topic

    def spawn_and_note_removals(self, coro, name):
        real_spawn(self, coro, name)
        if name.startswith("seglog-remove"):
            removals.extend(t for t in self._tasks if t.get_name() == name)

    async def delete_topic_then_wait_for_the_removal(self, topic):
        await real_delete_topic(self, topic)
        if not removals:
            sys.exit("delete_topic started no background removal: the failure this test needs did not happen")
        await asyncio.wait(removals)

    BackgroundWork.spawn = spawn_and_note_removals
    Engine.delete_topic = delete_topic_then_wait_for_the_removal
    sys.exit(main(sys.argv[1:]))
""")


def test_a_background_failure_reaches_a_commands_stderr_once_as_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    created = run_seglog("topics", "create", "orders", "--partitions", "2", "--log-dir", data)
    assert created.returncode == 0, created
    done = subprocess.run(
        [sys.executable, "-c", _DELETE_WITH_A_FAILING_REMOVAL, "topics", "delete", "orders", "--log-dir", str(data)],
        capture_output=True, timeout=60, cwd=ROOT, check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "Traceback" not in err
    failures = [line for line in err.splitlines() if "background task" in line]
    assert len(failures) == 2, err  # one per partition's removal, each once
    for line in failures:
        assert line.startswith("Error: ") and "background task seglog-remove-orders-" in line
        assert "cannot remove" in line and "Too many open files" in line
