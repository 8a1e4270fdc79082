"""tools._output: time parsing, bytes in JSON, JSON rendering of the library's values, tables."""

from __future__ import annotations

import argparse
from array import array
from pathlib import Path

import pytest

from seglog.engine import offline
from seglog.indexes import OffsetPosition
from seglog.tools._output import (
    UsageError,
    bytes_of_json,
    iso,
    json_bytes,
    jsonable,
    log_dir_of,
    parse_time,
    print_table,
    text_of,
)


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2026-11-22T10:00:00Z", 1795341600000),
        ("2026-11-22T10:00:00", 1795341600000),  # no zone: UTC
        ("2026-11-22T11:00:00+01:00", 1795341600000),
        ("2026-11-22T10:00:00.250Z", 1795341600250),
        ("1795341600000", 1795341600000),
        (" 42 ", 42),
    ],
)
def test_parse_time(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_parse_time_refuses_other_text() -> None:
    with pytest.raises(UsageError, match="not a time"):
        parse_time("yesterday")


def test_iso() -> None:
    assert iso(1795341600250) == "2026-11-22T10:00:00.250Z"
    assert iso(-1) == iso(None) == "-"


def test_bytes_round_trip_through_json() -> None:
    for data in (b"plain", b"\x00\xff", b"", None):
        assert bytes_of_json(json_bytes(data), "v") == data
    assert json_bytes(b"\xff") == {"base64": "/w=="}
    with pytest.raises(UsageError):
        bytes_of_json(5, "value")
    with pytest.raises(UsageError, match="base64"):
        bytes_of_json({"base64": "***"}, "value")
    assert text_of(b"a\xffb") == "a\\xffb"


def test_jsonable_renders_the_library_values(tmp_path: Path) -> None:
    finding = offline.Finding(offline.Severity.ERROR, offline.Check.OFFSET_INDEX, tmp_path / "x.index", "bad", 8, 3)
    assert jsonable(finding) == {"severity": "error", "check": "offset-index", "path": str(tmp_path / "x.index"),
                                 "message": "bad", "position": 8, "offset": 3}
    assert jsonable(OffsetPosition(5, 10)) == {"offset": 5, "position": 10}
    assert jsonable({("t", 0): array("q", [1, 2])}) == {"('t', 0)": [1, 2]}
    with pytest.raises(TypeError):
        jsonable(object())


def test_tables_are_tab_separated_when_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    print_table(["a", "b"], [(1, "x\ty"), (2, "z")])
    assert capsys.readouterr().out == "a\tb\n1\tx y\n2\tz\n"


def test_log_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEGLOG_LOG_DIR", str(tmp_path))
    assert log_dir_of(argparse.Namespace(log_dir=None)) == tmp_path
    other = tmp_path / "other"
    other.mkdir()
    assert log_dir_of(argparse.Namespace(log_dir=str(other))) == other
    assert log_dir_of(argparse.Namespace(dir=str(tmp_path), log_dir=str(other))) == tmp_path
    with pytest.raises(UsageError, match="no such log directory"):
        log_dir_of(argparse.Namespace(log_dir=str(tmp_path / "nope")))
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        log_dir_of(argparse.Namespace(log_dir=str(tmp_path / "file")))
