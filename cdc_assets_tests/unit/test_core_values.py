"""Positions, splits and key literals: ordered, frozen, JSON round-trips."""
import json

import pytest

from cdc_assets.core.keys import literal, range_predicate
from cdc_assets.core.positions import MysqlPosition, PgPosition, earliest, is_before, position_from_json
from cdc_assets.core.splits import KeyRange, SplitPlan, parse_split_id, split_id
from cdc_assets.core.tables import TableId
from cdc_assets.core.urls import DbUrl


def test_mysql_positions_order_by_file_sequence_then_offset():
    a = MysqlPosition("mysql-bin.000009", 900)
    b = MysqlPosition("mysql-bin.000010", 4)
    c = MysqlPosition("mysql-bin.000010", 120)
    assert is_before(a, b) and is_before(b, c) and not is_before(c, a)
    assert earliest([c, a, b]) == a


def test_positions_round_trip_through_json():
    for p in (MysqlPosition("mysql-bin.000003", 4663, "0-1-12"), PgPosition.parse_lsn("16/B374D848")):
        assert position_from_json(json.loads(json.dumps(p.to_json()))) == p
    assert str(PgPosition.parse_lsn("16/B374D848")) == "16/B374D848"


def test_positions_of_different_logs_do_not_compare():
    with pytest.raises(TypeError):
        is_before(MysqlPosition("f.000001", 4), PgPosition(4))


def test_split_ids_are_zero_padded_and_parse_back():
    t = TableId.parse("shop.orders")
    assert split_id(t, 7) == "shop.orders:0007"
    assert parse_split_id("shop.orders:0007") == (t, 7)
    assert sorted(split_id(t, i) for i in (10, 2, 1)) == ["shop.orders:0001", "shop.orders:0002", "shop.orders:0010"]


def test_plan_splits_are_half_open_and_end_open():
    plan = SplitPlan(TableId("s", "t"), "id", "int", (10, 20), (10, 10, 5), "now")
    ranges = [s.range for s in plan.splits]
    assert ranges == [KeyRange(None, 10), KeyRange(10, 20), KeyRange(20, None)]
    again = SplitPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan and again.plan_id == plan.plan_id


def test_plan_id_changes_with_boundaries_and_edits_are_refused():
    a = SplitPlan(TableId("s", "t"), "id", "int", (10,), (1, 1), "now")
    b = SplitPlan(TableId("s", "t"), "id", "int", (11,), (1, 1), "now")
    assert a.plan_id != b.plan_id
    edited = {**a.to_json(), "boundaries": [12]}
    with pytest.raises(ValueError, match="edited"):
        SplitPlan.from_json(edited)


def test_empty_range_is_refused():
    with pytest.raises(ValueError):
        KeyRange(5, 5)


def test_string_literals_escape_quotes_and_backslashes_per_dialect():
    assert literal("o'k\\", "string", "mysql") == "'o''k\\\\'"
    assert literal("o'k\\", "string", "postgres") == "'o''k\\'"
    assert literal("00ff", "binary", "mysql") == "X'00ff'"
    with pytest.raises(Exception):
        literal("1; DROP TABLE x", "decimal", "mysql")


def test_range_predicate_bounds():
    assert range_predicate("`id`", KeyRange(None, 5), "int", "mysql") == "`id` < 5"
    assert range_predicate('"id"', KeyRange(5, None), "int", "postgres") == '"id" >= 5'
    assert range_predicate("k", KeyRange(None, None), "int", "mysql") == "1=1"


def test_urls_never_print_their_password():
    url = DbUrl.parse("mysql://cdc:s3cr%40t@db.example:3307/shop")
    assert url.password == "s3cr@t" and url.port == 3307 and url.database == "shop"
    assert "s3cr" not in str(url) and "s3cr" not in repr(url)
    assert url.render(masked=False) == "mysql://cdc:s3cr%40t@db.example:3307/shop"


def test_a_table_planned_again_gets_another_plan_id_and_planned_at_round_trips():
    base = dict(table=TableId("s", "t"), split_column="id", key_kind="int", boundaries=(10,),
                estimated_rows=(10, 5), created_at="x")
    first = SplitPlan(**base, planned_at=PgPosition(100).to_json())
    again = SplitPlan(**base, planned_at=PgPosition(200).to_json())
    assert first.plan_id != again.plan_id  # old finished markers never count for the new plan
    assert SplitPlan.from_json(json.loads(json.dumps(first.to_json()))) == first
    assert SplitPlan(**base).plan_id == SplitPlan.from_json(SplitPlan(**base).to_json()).plan_id


def test_checkpoint_tables_ahead_round_trip_through_the_position_store(tmp_path):
    from cdc_assets.resumer.logfile import PositionLog
    from cdc_assets.resumer.resumer import Checkpoint, Resumer
    from cdc_assets.resumer.sqlite import SqlitePositionStore

    resumer = Resumer("t", SqlitePositionStore(tmp_path / "p.sqlite"), PositionLog(tmp_path / "logs"), "mysql")
    checkpoint = Checkpoint(MysqlPosition("b.000002", 4), 3, 17, {TableId("s", "a"): MysqlPosition("b.000003", 9)})
    resumer.record_committed(resumer.checkpoint_records(checkpoint))
    assert resumer.checkpoint() == checkpoint
    resumer.close()


def test_scrub_masks_every_copy_of_the_password_and_nothing_without_one():
    from cdc_assets.errors import MASK, scrub

    said = "Access denied for user 'cdc' (using password: s3cr3t) -- s3cr3t"
    assert scrub(said, "s3cr3t") == f"Access denied for user 'cdc' (using password: {MASK}) -- {MASK}"
    assert scrub(said, "") == said  # no password: an empty string would match everywhere
