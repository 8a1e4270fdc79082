"""The ``seglog`` command line: one console script, one module per subcommand.

Conventions (every subcommand follows them; docs/CLI.md): data goes to stdout,
diagnostics and summaries to stderr; ``--json`` on every command that prints
data; exit 0 when all is well, 1 for findings or errors, 2 for usage errors
(a log directory that does not exist included); a ``SeglogError`` is printed
as one line ``Error: ...``, never a traceback; every help text ends with an
example. ``main(argv)`` returns the exit code instead of exiting, so tests
run it in-process.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from seglog import __version__
from seglog.engine import errors
from seglog.tools._output import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UsageError, epilog

# Subcommand modules under tools.commands, in the order `seglog --help` lists them.
# Each defines `register(subparsers) -> None`, which adds its parser and sets
# `func(args) -> int` as the parser default. A module listed here that is not
# written yet is skipped (the replay tool's modules land separately).
COMMAND_MODULES: tuple[str, ...] = (
    "topics",
    "produce",
    "consume",
    "offsets",
    "groups",
    "dump",
    "verify",
    "recover",
    "explain",
    "serve",
    "replay",
    "record",
    "workload",
    "pipeline",
    "bench",
)

__all__ = ["COMMAND_MODULES", "EXIT_FINDINGS", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seglog",
        description="seglog: an embeddable, Kafka-style log-segment storage engine. "
        "Data goes to stdout, diagnostics to stderr; exit 0 ok, 1 findings or errors, 2 usage.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=epilog(
            "seglog topics create orders --partitions 3 --log-dir data",
            "seglog verify data && echo consistent",
            "seglog COMMAND --help",
        ),
    )
    parser.add_argument("--version", action="version", version=f"seglog {__version__}",
                        help="print seglog's version (seglog.__version__) and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        qualified = f"seglog.tools.commands.{name}"
        if importlib.util.find_spec(qualified) is None:
            continue
        importlib.import_module(qualified).register(subparsers)
    return parser


class _OneLine(logging.Formatter):
    """``Error: <message>``: the library's messages say what and where; a traceback is noise on a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.capitalize()}: {record.getMessage()}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``seglog`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    # The library's warnings and errors (a background task that failed, say) reach stderr as one line
    # each, like the command's own errors; without a handler Python would print them with tracebacks.
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLine())
    library_log = logging.getLogger("seglog")
    library_log.addHandler(handler)
    try:
        return _main(argv)
    finally:
        library_log.removeHandler(handler)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args))
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except errors.SeglogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `seglog consume ... | head`: the reader left; exit quietly, without a second error at shutdown.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
