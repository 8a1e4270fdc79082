"""The ``seglog`` command line: one console script, one module per subcommand.

Conventions (every subcommand follows them): data goes to stdout, diagnostics
and summaries to stderr; ``--json`` on every command that prints data; exit 0
when all is well, 1 for findings or errors, 2 for usage errors; a
``SeglogError`` is printed as one line ``Error: ...``, never a traceback; every
help text ends with an example.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from engine import errors

# Subcommand modules under tools.commands, in the order `seglog --help` lists them.
# Each defines `register(subparsers) -> None`, which adds its parser and sets
# `func(args) -> int` as the parser default.
COMMAND_MODULES: tuple[str, ...] = ("replay", "record", "workload")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seglog",
        description="seglog: an embeddable, Kafka-style log-segment storage engine.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example:\n  seglog --help",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"tools.commands.{name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(func(args))
    except errors.SeglogError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
