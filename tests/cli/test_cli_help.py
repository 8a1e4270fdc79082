"""Every ``seglog`` subcommand: help ending with an example, usage errors, the README section."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cliharness import ROOT, Result, run_seglog

from seglog.tools.cli import build_parser

Cli = Callable[..., Result]

MINE = ("topics", "produce", "consume", "offsets", "groups", "dump", "verify", "recover", "explain")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _all_commands() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for name, sub in _subparsers(build_parser()).items():
        yield name, sub
        for action, nested in _subparsers(sub).items():
            yield f"{name} {action}", nested


COMMANDS = sorted(dict(_all_commands()))
TOP_LEVEL = sorted(_subparsers(build_parser()))


def test_every_command_is_registered() -> None:
    assert set(MINE) <= set(TOP_LEVEL)
    assert {"topics create", "topics list", "topics describe", "topics delete", "groups list",
            "groups describe", "groups reset", "groups delete"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_ends_with_an_example(command: str) -> None:
    parser = dict(_all_commands())[command]
    lines = [line for line in parser.format_help().splitlines() if line.strip()]
    heading = max((i for i, line in enumerate(lines) if line.startswith("Example")), default=None)
    assert heading is not None, f"'seglog {command} --help' has no Example(s) section"
    examples = lines[heading + 1:]
    assert examples and "seglog " in examples[0], f"'seglog {command} --help' does not end with an example"
    # Every line after the heading is an indented example (or the continuation of one).
    assert all(line.startswith("  ") for line in examples)
    assert all("seglog " in line for line in examples if not line.startswith("    "))


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[0] in MINE])
def test_help_exits_0(cli: Cli, command: str) -> None:
    r = cli(*command.split(), "--help")
    assert r.code == 0 and "usage: seglog" in r.out


def test_version_is_the_package_version(cli: Cli) -> None:
    import seglog

    r = cli("--version")
    assert r.code == 0 and r.out == f"seglog {seglog.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", seglog.__version__)


def test_no_command_and_unknown_command_are_usage_errors(cli: Cli) -> None:
    r = cli()
    assert r.code == 2 and "usage: seglog" in r.err and r.out == ""
    r = cli("frobnicate")
    assert r.code == 2 and "invalid choice" in r.err


DIR_COMMANDS = [
    ["verify"], ["recover"], ["recover", "--dry-run"], ["explain", "t", "0", "--offset", "0"],
    ["topics", "list"], ["topics", "describe"], ["topics", "delete", "t"], ["produce", "t"], ["consume", "t"],
    ["offsets", "t"], ["groups", "list"], ["groups", "describe", "g"],
    ["groups", "reset", "g", "--topic", "t", "--to-earliest"], ["groups", "delete", "g"],
]


@pytest.mark.parametrize("argv", DIR_COMMANDS, ids=" ".join)
def test_missing_log_dir_is_one_line_and_exit_2(cli: Cli, tmp_path: Path, argv: list[str]) -> None:
    missing = tmp_path / "nope"
    r = cli(*argv, "--log-dir", missing)
    assert r.code == 2, r
    assert r.err.splitlines() == [f"Error: {missing}: no such log directory (give --log-dir DIR or set SEGLOG_LOG_DIR)"]
    assert not missing.exists()


def test_missing_log_dir_through_a_real_process(tmp_path: Path) -> None:
    p = run_seglog("verify", tmp_path / "nope")
    assert p.returncode == 2
    assert p.stderr.decode().startswith("Error: ") and b"Traceback" not in p.stderr
    p = run_seglog("consume", "t", env={"SEGLOG_LOG_DIR": str(tmp_path / "gone")})
    assert p.returncode == 2 and b"gone: no such log directory" in p.stderr


def test_default_log_dir_is_data_in_the_working_directory(cli: Cli, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("verify")
    assert r.code == 2 and r.err.startswith("Error: data: no such log directory")
    (tmp_path / "data").mkdir()
    assert cli("verify").code == 0


def _readme_examples() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    # Only code: fenced blocks and inline code spans.
    blocks = re.findall(r"```.*?\n(.*?)```", text, flags=re.S) + re.findall(r"`([^`\n]+)`", text)
    return "\n".join(blocks)


@pytest.mark.parametrize("command", TOP_LEVEL)
def test_every_subcommand_appears_in_the_readme_with_an_example(command: str) -> None:
    code = _readme_examples()
    assert re.search(rf"(^|\s|\$ )seglog {re.escape(command)}\b", code, flags=re.M), (
        f"README.md has no example of 'seglog {command}' in a code block; see docs/CLI.md for the section to paste"
    )
