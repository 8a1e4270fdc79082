"""docs/API.md names every public name, and its LogConfig table matches LogConfig.

A name added to ``seglog.__all__``, ``seglog.engine.__all__``, ``seglog.errors.__all__``
or ``seglog.indexes.__all__`` without a line in the reference fails here; so does a
config field whose Kafka key or default the table does not show. (The page's Python
blocks run as tests of their own, through the docs runner in conftest.py.)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import seglog
from seglog import LogConfig, engine, errors, indexes

ROOT = Path(__file__).resolve().parent.parent
API = (ROOT / "docs" / "API.md").read_text(encoding="utf-8")
PUBLIC = sorted(
    {(module.__name__, name) for module in (seglog, engine, errors, indexes) for name in module.__all__}
)


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m}.{n}" for m, n in PUBLIC])
def test_every_public_name_is_in_the_api_reference(module: str, name: str) -> None:
    assert re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", API), f"docs/API.md does not mention {module}.{name}"


def _config_rows() -> dict[str, list[str]]:
    rows = {}
    for line in API.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[1].startswith("`"):
            rows[cells[0].strip("`")] = cells
    return rows


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(LogConfig)])
def test_every_config_field_has_its_kafka_key_and_default_in_the_table(field: str) -> None:
    row = _config_rows().get(field)
    assert row is not None, f"docs/API.md's LogConfig table has no row for {field}"
    key = field.replace("_", ".")  # Kafka's name: the field's, dotted
    default = LogConfig().to_properties()[key]
    assert row[1] == f"`{key}`"
    shown = row[2].replace("`", "").replace('"', "")
    expected = {"9223372036854775807": "2⁶³−1", "-1": "−1", "false": "False"}.get(default, default)
    assert shown.startswith(expected), f"{field}: the table shows {row[2]!r}, LogConfig's default is {default}"
