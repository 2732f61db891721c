"""Names a savepoint gives to what it creates: slot names PostgreSQL accepts, apart per task, target and
savepoint, and before-image tables apart per task (or target) and table within the identifier limits of both
targets."""
import hashlib
import re

import pytest

from cdc_assets.core.tables import TableId
from cdc_assets.engine.savepoint_values import NAME
from cdc_assets.sinks.before_images import BeforeImages
from cdc_assets.sources.postgres.savepoint_slots import savepoint_slot
from cdc_assets.sources.postgres.slot import slot_name

SLOT = re.compile(r"^[a-z0-9_]{1,63}$")  # what pg_create_logical_replication_slot accepts


@pytest.mark.parametrize("task", ["shop", "a-b", "A_Very_Long_Task_Name_" * 4])
def test_savepoint_slots_are_valid_distinct_and_start_with_the_task_slot_name(task):
    names = {savepoint_slot(task, task, sp) for sp in ("before_release", "Before_Release", "x" * 100)}
    assert len(names) == 3
    for name in names:
        assert SLOT.match(name), name
        assert name.startswith(slot_name(task)[:40])  # the test fixtures' cleanup finds them by that prefix
    assert savepoint_slot("a-b", "a-b", "s") != savepoint_slot("a_b", "a_b", "s")


def test_the_same_savepoint_on_two_targets_is_two_slots_and_the_first_target_keeps_its_slot_name():
    first, second = savepoint_slot("shop", "shop", "s"), savepoint_slot("shop", "shop.b", "s")
    assert first != second and SLOT.match(second) and second.startswith(slot_name("shop"))
    # the first target's key is the task's id: a one-target task's savepoint slots keep their names
    assert first.endswith("_sp_" + hashlib.sha256(b"shop|s").hexdigest()[:10])


def test_before_image_tables_are_apart_per_task_and_table():
    images = BeforeImages.__new__(BeforeImages)
    names = {images.shadow(key, TableId("shop", t)).name for key in ("t1", "t2", "t1.b") for t in ("Orders", "orders")}
    assert len(names) == 6 and all(len(n) <= 63 for n in names)


@pytest.mark.parametrize("name, ok", [("before_release", True), ("v1.2-rc", True), ("", False), ("-x", False),
                                      ("a b", False), ("x" * 101, False), ("x'; DROP", False)])
def test_savepoint_names(name, ok):
    assert bool(NAME.match(name)) is ok
