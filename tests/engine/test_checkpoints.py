from __future__ import annotations

import pytest

from seglog.engine.checkpoints import format_checkpoint, parse_checkpoint
from seglog.engine.errors import CorruptionError


def test_format_is_kafkas_and_round_trips() -> None:
    offsets = {("orders", 1): 99, ("orders", 0): 1234}
    data = format_checkpoint(offsets)
    assert data == b"0\n2\norders 0 1234\norders 1 99\n"
    assert parse_checkpoint(data) == offsets
    assert parse_checkpoint(format_checkpoint({})) == {}


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"0\n",
        b"1\n0\n",
        b"0\n2\norders 0 1\n",
        b"0\n1\norders 0\n",
        b"0\n1\norders x 1\n",
        b"0\n1\norders 0 -5\n",
        b"0\n1\n../x 0 5\n",
        b"\xff\xfe",
        b"0\nmany\n",
    ],
)
def test_malformed_files_are_corruption(data: bytes) -> None:
    with pytest.raises(CorruptionError):
        parse_checkpoint(data, name="recovery-point-offset-checkpoint")
