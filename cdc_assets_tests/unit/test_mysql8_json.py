"""MySQL 8 binary JSON (sql/json_binary.h) as the binlog carries it becomes the text the snapshot reads (MySQL's own
Json_wrapper::to_string): large documents with 32-bit offsets, deep nesting and doubles printed by my_gcvt. The
documents are laid out byte for byte per json_binary.h by cdc_assets_tests/binlog_wire.json_binary."""
from __future__ import annotations

import json

import pytest
from pymysqlreplication.json_binary import parse_json  # what the library runs on a JSON column's bytes

from cdc_assets.core.tables import Column, Kind
from cdc_assets.sources.mysql.values import converter
from cdc_assets_tests.binlog_wire import json_binary

JSON_COLUMN = Column("doc", Kind.JSON, "json")


def text_of(document: bytes) -> str:
    return converter(JSON_COLUMN)(parse_json(document[0], document[1:]))


@pytest.mark.parametrize("value, mysql_text", [
    # my_gcvt(d, MY_GCVT_ARG_DOUBLE, 34) then ".0" when it printed neither '.' nor 'e' (json_dom.cc): 'e' only
    # from 1e15 up and below 1e-14, no '+' and no leading zero in the exponent.
    (1e20, "1e20"), (1e16, "1e16"), (1e15, "1e15"), (1e14, "100000000000000.0"), (100.0, "100.0"),
    (1e-5, "0.00001"), (1.5e-10, "0.00000000015"), (1e-15, "0.000000000000001"), (2.5e-16, "2.5e-16"),
    (-2.5, "-2.5"), (0.1 + 0.2, "0.30000000000000004"), (1.2345678901234567e19, "1.2345678901234567e19"),
    (1.7976931348623157e308, "1.7976931348623157e308"), (5e-324, "5e-324"), (-1e-100, "-1e-100"),
    (0.0, "0.0"), (-0.0, "-0.0"),
])
def test_a_json_double_prints_as_mysql_prints_it(value, mysql_text):
    assert text_of(json_binary([value])) == f"[{mysql_text}]"  # main: Python's repr, 1e+20, 1e-05


def test_large_documents_with_32_bit_offsets_print_like_small_ones():
    """MySQL switches an object or array to the large format (json_binary.h: 32-bit counts, sizes, offsets; INT32
    and UINT32 inlined) once it passes 64 KiB."""
    doc = {"id": 7, "big": "x" * 70_000, "n": [1, -40_000, 70_000, 2**40, None, True, False, "é"],
           "nested": {"b": 1.5, "aa": []}}
    small_text = text_of(json_binary({**doc, "big": "x"}))
    large_text = text_of(json_binary(doc, large=True))
    assert large_text == small_text.replace('"x"', '"' + "x" * 70_000 + '"')
    assert large_text.startswith('{"n": [1, -40000, 70000, 1099511627776, null, true, false, "é"], "id": 7, "big": "x')
    assert large_text.endswith('", "nested": {"b": 1.5, "aa": []}}')


def test_deeply_nested_documents_print_whole():
    """MySQL allows a depth of 100 (JSON_DOCUMENT_MAX_DEPTH)."""
    doc: object = "leaf"
    for depth in range(99):
        doc = [doc] if depth % 2 else {"k": doc}
    assert text_of(json_binary(doc)) == text_of(json_binary(doc, large=True))
    assert text_of(json_binary(doc)).count("[") == 49 and '"leaf"' in text_of(json_binary(doc))


def mysql_order(doc):
    """MySQL's own text of a document: members sorted by key length, then bytes (Json_key_comparator), ", " and
    ": " between them (Json_wrapper::to_string)."""
    if isinstance(doc, dict):
        return {k: mysql_order(doc[k]) for k in sorted(doc, key=lambda k: (len(k.encode()), k.encode()))}
    if isinstance(doc, list):
        return [mysql_order(v) for v in doc]
    return doc


# The documents of python-mysql-replication's own JSON tests (pymysqlreplication/tests/test_data_type.py, run there
# against a live MySQL 8), laid out here as MySQL stores them; the big ones pass 64 KiB, so MySQL stores them in the
# large format.
LIBRARY_DOCUMENTS = {
    "test_json": ({"my_key": "my_val", "my_key2": "my_val2"}, False),
    "test_json_array": (["my_val", "my_val2"], False),
    "test_json_large": ({f"foooo{i}": f"baaaaar{i}" for i in range(2560)}, True),
    "test_json_large_array": ({"my_key": list(range(100000))}, True),
    "test_json_large_with_literal": ({**{f"foooo{i}": f"baaaaar{i}" for i in range(2560)}, "literal": True}, True),
    "test_json_types": ([True, False, None, 1.2, 2 ^ 14, 2 ^ 30, 2 ^ 62, -1 * 2 ^ 14, ["foo", "bar"],
                         {"a": "b", "c": None}], False),
    "test_json_unicode": ({"miam": "🍔"}, False),
    "test_json_long_string": ({"my_key": "super_long_string" * 100}, False),
}


@pytest.mark.parametrize("name", sorted(LIBRARY_DOCUMENTS))
def test_the_library_test_documents_print_as_mysql_prints_them(name):
    doc, large = LIBRARY_DOCUMENTS[name]
    want = json.dumps(mysql_order(doc), ensure_ascii=False, separators=(", ", ": "))
    assert text_of(json_binary(doc, large=large)) == want


def test_strings_are_escaped_as_mysql_double_quote_escapes_them():
    """json_dom.cc double_quote/escape_character: '"', '\\', \\b \\t \\n \\f \\r by letter, other bytes up to 0x1f as
    \\u00xx in lower-case hex, everything else (0x7f, non-ASCII) as is."""
    doc = {"k\n": 'q"b\\s\b\t\n\f\r\x01\x1f\x7fé'}
    assert text_of(json_binary(doc)) == '{"k\\n": "q\\"b\\\\s\\b\\t\\n\\f\\r\\u0001\\u001f\x7fé"}'
