"""validate_group accepts group ids up to 255 characters, but the group file name is the id in
base64 (4/3 longer, plus '.json' and '.tmp'): any id over ~185 bytes exceeds NAME_MAX (255) and
commit_offset fails with StorageError (ENAMETOOLONG) for a group id the API declared valid."""
from pathlib import Path

from seglog.engine import Engine


async def test_commit_with_longest_valid_group_id(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        group = "g" * 200  # accepted by validate_group (max 255)
        await engine.commit_offset(group, "t", 0, 5)
        assert await engine.committed(group, "t", 0) == 5
