"""What every ``seglog`` subcommand shares: the log-dir option, time and byte parsing, output, exit codes.

Conventions (docs/CLI.md): data goes to stdout, diagnostics to stderr; ``--json``
prints machine-readable data (one JSON document, or JSON Lines for streams);
tables are drawn with rich when stdout is a terminal and printed as
tab-separated values with a header row when it is not (so ``cut -f`` and
``awk -F'\\t'`` work); progress bars (rich, on stderr) appear only when stderr
is a terminal. Exit codes: 0 ok, 1 findings or a ``SeglogError``, 2 usage
(including a log directory that does not exist).

Imports the standard library, rich and ``engine`` only.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import datetime as dt
import enum
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Final, NamedTuple

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from seglog.engine import run
from seglog.engine.validate import INT64_MAX, INT64_MIN

EXIT_OK: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2

LOG_DIR_ENV: Final = "SEGLOG_LOG_DIR"
DEFAULT_LOG_DIR: Final = "data"
# Progress bars redraw at most 4 times a second: a redraw costs about a millisecond.
PROGRESS_REFRESH_S: Final = 0.25


class UsageError(Exception):
    """A command line that cannot be run as given (exit 2): a bad value, a missing directory."""


# ------------------------------------------------------------------------------------------ options


def add_log_dir(parser: argparse.ArgumentParser) -> None:
    """``--log-dir DIR`` (default ``$SEGLOG_LOG_DIR`` or ``./data``)."""
    parser.add_argument(
        "--log-dir",
        default=None,
        metavar="DIR",
        help=f"log directory (default: ${LOG_DIR_ENV}, else ./{DEFAULT_LOG_DIR})",
    )


def add_json(parser: argparse.ArgumentParser, what: str = "the data") -> None:
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON on stdout")


def log_dir_of(args: argparse.Namespace, *, must_exist: bool = True) -> Path:
    """The log directory the command works on (positional DIR, ``--log-dir``, env, ``./data``).

    Raises:
        UsageError: ``must_exist`` and it is not an existing directory.
    """
    given = getattr(args, "dir", None) or args.log_dir or os.environ.get(LOG_DIR_ENV) or DEFAULT_LOG_DIR
    path = Path(given)
    if must_exist and not path.is_dir():
        what = "not a directory" if path.exists() else "no such log directory"
        raise UsageError(f"{path}: {what} (give --log-dir DIR or set {LOG_DIR_ENV})")
    return path


def epilog(*examples: str, notes: str = "") -> str:
    """A help epilog that ends with examples (every ``seglog`` help does)."""
    lines = [notes.rstrip(), ""] if notes else []
    lines.append("Examples:" if len(examples) > 1 else "Example:")
    lines += [f"  {e}" for e in examples]
    return "\n".join(lines)


def add_command(
    subparsers: Any, name: str, *, help: str, examples: Sequence[str], description: str | None = None,
    notes: str = "", func: Callable[[argparse.Namespace], int] | None = None,
) -> argparse.ArgumentParser:
    """Add a (sub)command whose help keeps its line breaks and ends with ``examples``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=description or help[:1].upper() + help[1:] + ".",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=epilog(*examples, notes=notes),
    )
    if func is not None:
        parser.set_defaults(func=func)
    return parser


def parse_time(text: str) -> int:
    """A point in time as epoch milliseconds: ISO 8601 (UTC unless a zone is given) or an integer of ms.

    Raises:
        UsageError: neither form.
    """
    t = text.strip()
    if t.lstrip("-").isdigit():
        ms = int(t)
        if not INT64_MIN <= ms <= INT64_MAX:
            raise UsageError(f"{text!r} is outside the range of a timestamp, [-2**63, 2**63-1] milliseconds")
        return ms
    try:
        when = dt.datetime.fromisoformat(t.replace("Z", "+00:00") if t.endswith("Z") else t)
    except ValueError:
        raise UsageError(f"{text!r} is not a time: use ISO 8601 (2026-11-22T10:00:00Z) or epoch milliseconds") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def time_arg(text: str) -> int:
    """argparse ``type=`` for :func:`parse_time`."""
    try:
        return parse_time(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def offset_arg(text: str) -> int:
    """argparse ``type=`` for an offset: an integer that fits int64 (a Kafka long)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer offset") from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{value} is outside the range of an offset, [-2**63, 2**63-1]")
    return value


def iso(ms: int | None) -> str:
    """Epoch milliseconds as ISO 8601 UTC (``-`` for none or Kafka's -1)."""
    if ms is None or ms < 0:
        return "-"
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (OverflowError, ValueError, OSError):
        return str(ms)


def key_value_arg(text: str) -> tuple[str, str]:
    """argparse ``type=`` for ``KEY=VALUE``."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


# ------------------------------------------------------------------------------------------ bytes


def text_of(data: bytes | None) -> str:
    """Bytes for a human: UTF-8, undecodable bytes as ``\\xNN`` escapes; ``None`` as empty."""
    return "" if data is None else data.decode("utf-8", "backslashreplace")


def json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """Bytes for JSON: a string when valid UTF-8, else ``{"base64": "..."}`` (``produce`` reads both)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def bytes_of_json(value: object, what: str) -> bytes | None:
    """The inverse of :func:`json_bytes`.

    Raises:
        UsageError: neither a string, ``null`` nor ``{"base64": ...}``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except ValueError:
            raise UsageError(f"{what}: invalid base64") from None
    raise UsageError(f"{what} must be a string, null or {{\"base64\": \"...\"}}, got {value!r}")


# ------------------------------------------------------------------------------------------ JSON


def jsonable(obj: Any) -> Any:
    """Plain JSON values for dataclasses, NamedTuples, enums, paths, bytes and containers."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, bytes | bytearray):
        return json_bytes(bytes(obj))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):
        return {k: jsonable(v) for k, v in obj._asdict().items()}
    if isinstance(obj, Mapping):
        return {(k if isinstance(k, str) else str(k)): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset) or hasattr(obj, "tolist"):
        return [jsonable(v) for v in (obj.tolist() if hasattr(obj, "tolist") else obj)]
    raise TypeError(f"cannot render {type(obj).__name__} as JSON")


def print_json(obj: Any, *, out: IO[str] | None = None, lines: bool = False) -> None:
    """One JSON document (indented) or, with ``lines``, one compact line (JSON Lines)."""
    stream = out or sys.stdout
    if lines:
        stream.write(json.dumps(jsonable(obj), separators=(",", ":")) + "\n")
    else:
        stream.write(json.dumps(jsonable(obj), indent=2) + "\n")


# ------------------------------------------------------------------------------------------ consoles


def stdout_console() -> Console:
    return Console(file=sys.stdout, highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """A diagnostic line on stderr (never markup-interpreted)."""
    stderr_console().print(message, markup=False)


class Column(NamedTuple):
    header: str
    justify: str = "left"  # "left" or "right"


def print_table(columns: Sequence[Column | str], rows: Sequence[Sequence[object]], *, title: str | None = None) -> None:
    """Rows on stdout: a rich table on a terminal, tab-separated values (header first) otherwise."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    console = stdout_console()
    if console.is_terminal:
        table = Table(title=title, box=None, header_style="bold", pad_edge=False)
        for c in cols:
            # fold, never ellipsize: a cut file name or offset is worse than a wrapped one
            table.add_column(c.header, justify=c.justify, overflow="fold")  # type: ignore[arg-type]
        for row in rows:
            table.add_row(*(str(v) for v in row))
        console.print(table)
        return
    out = sys.stdout
    out.write("\t".join(c.header for c in cols) + "\n")
    for row in rows:
        out.write("\t".join(str(v).replace("\t", " ").replace("\n", " ") for v in row) + "\n")


@contextmanager
def progress(description: str, total: int | None, *, enabled: bool = True,
             unit: str = "items") -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr; yields ``advance(n, total=None)``.

    A no-op callback when stderr is not a terminal or ``enabled`` is false.
    """
    console = stderr_console()
    if not enabled or not console.is_terminal:
        yield lambda n, total=None: None
        return
    columns: list[Any] = [TextColumn("[bold]{task.description}"), BarColumn()]
    columns.append(DownloadColumn() if unit == "bytes" else TextColumn("{task.completed}/{task.total}"))
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    bar = Progress(*columns, console=console, auto_refresh=False, transient=True)
    task = bar.add_task(description, total=total)
    last = 0.0

    def advance(n: int, total: int | None = None) -> None:
        nonlocal last
        if total is not None:
            bar.update(task, total=total)
        bar.advance(task, n)
        now = time.monotonic()
        if now - last >= PROGRESS_REFRESH_S:
            last = now
            bar.refresh()

    with bar:
        yield advance


@contextmanager
def scan_progress(description: str, *, enabled: bool) -> Iterator[Callable[[Any], None]]:
    """A byte progress bar fed with reports carrying ``bytes_done`` and ``bytes_total`` (``VerifyProgress``)."""
    with progress(description, None, enabled=enabled, unit="bytes") as advance:
        last = 0

        def on_progress(report: Any) -> None:
            nonlocal last
            advance(report.bytes_done - last, total=report.bytes_total)
            last = report.bytes_done

        yield on_progress


def run_async(coro: Any) -> Any:
    """Run a coroutine on uvloop when installed (``engine.run``)."""
    return run(coro)
