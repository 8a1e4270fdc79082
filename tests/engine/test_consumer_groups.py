"""Consumer-group offsets beside topic and group deletion, and the longest group ids.

* delete_topic forgets the topic in every group's offsets while another group is deleted
  concurrently, and raises nothing but a SeglogError (it used to read a group's offsets after
  awaiting another group's write, and fail with a bare KeyError when that group was gone);
  the group store's write of the forget_topic is held at its fdatasync while delete_group queues;
* every group id the API accepts can commit (an id over ~185 bytes once failed with ENAMETOOLONG,
  when each group had a file named after it).
"""
import asyncio
from pathlib import Path

from seglog.engine import Engine, errors
from seglog.segments.faults import GatedOps
from seglog.segments.fileio import use_ops


async def test_delete_topic_beside_a_concurrent_delete_group_raises_no_foreign_error(tmp_path: Path) -> None:
    with GatedOps() as ops, use_ops(ops):
        async with Engine.open(tmp_path) as engine:
            await engine.create_topic("t")
            await engine.commit_offset("a", "t", 0, 1)
            await engine.commit_offset("b", "t", 0, 1)
            write = ops.gate("fdatasync", path_contains="consumer-offsets")  # forget_topic's write to the store
            deleting = asyncio.create_task(engine.delete_topic("t"))
            await write.reached()
            deleting_group = asyncio.create_task(engine.delete_group("b"))  # a different group, queued behind it
            await asyncio.sleep(0)  # let delete_group start; it must then wait for the held write
            assert not deleting.done() and not deleting_group.done()
            write.release()
            try:
                await deleting
            except errors.SeglogError:
                pass
            except Exception as exc:
                raise AssertionError(f"delete_topic raised a non-SeglogError: {exc!r}") from exc
            assert await deleting_group is False  # forget_topic, queued first, left "b" without offsets
            assert engine.topics() == []
            assert engine.groups() == []  # "a" has no offsets left, "b" is gone


async def test_the_longest_valid_group_id_can_commit(tmp_path: Path) -> None:
    async with Engine.open(tmp_path) as engine:
        await engine.create_topic("t")
        group = "g" * 200  # accepted by validate_group (max 255)
        await engine.commit_offset(group, "t", 0, 5)
        assert await engine.committed(group, "t", 0) == 5
