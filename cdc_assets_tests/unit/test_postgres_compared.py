"""How verification reads a PostgreSQL column to compare it with a MySQL target: char(n) without its pad spaces
(MySQL's CHAR hands values back without them), every other text type as it is."""
from cdc_assets.sources.postgres.types import column_from_catalog, compared_for_mysql


def test_a_char_is_compared_without_its_pad_spaces_a_varchar_with_its_trailing_spaces():
    assert compared_for_mysql(column_from_catalog("c", "character(8)", False, "S"), '"c"') == '"c"::text'
    assert compared_for_mysql(column_from_catalog("c", "character", False, "S"), '"c"') == '"c"::text'
    for native in ("character varying(40)", "text", "character varying"):
        assert compared_for_mysql(column_from_catalog("c", native, False, "S"), '"c"') == '"c"', native
