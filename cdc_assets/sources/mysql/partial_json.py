"""binlog_row_value_options=PARTIAL_JSON (MySQL >= 8.0.3): a PARTIAL_UPDATE_ROWS_EVENT logs a JSON column that
JSON_SET/JSON_REPLACE/JSON_REMOVE changed in place as the list of its changes, not as the new document. We
rebuild the new document from the before image (full under binlog_row_image=FULL) exactly as a MySQL replica
does (sql/json_diff.cc apply_json_diffs).

python-mysql-replication 1.0.17 reads only the first diff of such a column, and reads an empty diff list (a
JSON_REPLACE of a path that does not exist) as NULL: the target would get a wrong document, or NULL.

Wire format (sql/json_diff.cc Json_diff_vector::write_binary and Json_diff::write_binary):
    length u32 (bytes of the diffs that follow), then per diff:
    operation u8 (enum_json_diff_operation: 0 REPLACE, 1 INSERT, 2 REMOVE)
    path: net_field_length(length), text as Json_path::to_string writes it ($, .member or ."quoted member",
          [n], [last], [last-n])
    value (not for REMOVE): net_field_length(length), binary JSON (sql/json_binary.h)
"""
from __future__ import annotations

import copy
import json
import re
import struct
from dataclasses import dataclass
from typing import Any

from pymysqlreplication.json_binary import parse_json
from pymysqlreplication.packet import BinLogPacketWrapper

from cdc_assets.sources.mysql.transaction_payload import PayloadError, net_field_length

REPLACE, INSERT, REMOVE = 0, 1, 2
DIFF_VECTOR_LENGTH = struct.Struct("<I")  # ENCODED_LENGTH_BYTES, whatever the column's own length size


class JsonDiffError(ValueError):
    """A diff that cannot be read or applied (a MySQL replica rejects the row the same way)."""


@dataclass(frozen=True)
class Member:
    name: bytes  # decoded documents key objects by bytes


@dataclass(frozen=True)
class Cell:
    index: int
    from_end: bool = False  # [last-index]

    def position(self, size: int) -> int:
        return size - 1 - self.index if self.from_end else self.index


Leg = Member | Cell


@dataclass(frozen=True)
class JsonDiff:
    operation: int
    path: tuple[Leg, ...]
    value: Any = None  # decoded as the library decodes a whole document


@dataclass(frozen=True)
class JsonDiffs:
    """The value a partial JSON column carries in an after image; always true, even with no diff."""
    diffs: tuple[JsonDiff, ...]


def parse_diff_vector(data: bytes) -> JsonDiffs:
    """The diffs of one column: `data` is what follows the u32 length."""
    diffs, at = [], 0
    try:
        while at < len(data):
            operation = data[at]
            if operation not in (REPLACE, INSERT, REMOVE):
                raise JsonDiffError(f"unknown JSON diff operation {operation}")
            length, at = net_field_length(data, at + 1)
            path = parse_path(data[at:at + length].decode())
            at += length
            value = None
            if operation != REMOVE:
                length, at = net_field_length(data, at)
                doc = data[at:at + length]
                if len(doc) != length or not doc:
                    raise JsonDiffError("truncated JSON diff value")
                value = parse_json(doc[0], doc[1:])
                at += length
            diffs.append(JsonDiff(operation, path, value))
    except (PayloadError, UnicodeDecodeError, IndexError) as exc:
        raise JsonDiffError(f"unreadable JSON diff: {exc}") from None
    return JsonDiffs(tuple(diffs))


_LEG = re.compile(r"""\s*(?:\.\s*(?P<quoted>"(?:[^"\\]|\\.)*")|\.\s*(?P<name>[^.\[\s"]+)"""
                  r"""|\[\s*(?:(?P<last>last)\s*(?:-\s*(?P<back>\d+))?|(?P<index>\d+))\s*\])""")


def parse_path(text: str) -> tuple[Leg, ...]:
    """A path as Json_path::to_string prints it: "$", then member and array-cell legs."""
    stripped = text.strip()
    if not stripped.startswith("$"):
        raise JsonDiffError(f"JSON path {text!r} does not start with $")
    legs: list[Leg] = []
    at = 1
    while at < len(stripped):
        m = _LEG.match(stripped, at)
        if m is None:
            raise JsonDiffError(f"unreadable JSON path {text!r} at offset {at}")
        if m["quoted"] is not None:
            legs.append(Member(json.loads(m["quoted"]).encode()))
        elif m["name"] is not None:
            legs.append(Member(m["name"].encode()))
        elif m["last"] is not None:
            legs.append(Cell(int(m["back"] or 0), from_end=True))
        else:
            legs.append(Cell(int(m["index"])))
        at = m.end()
    return tuple(legs)


def apply_diffs(document: Any, diffs: JsonDiffs) -> Any:
    """The document after `diffs`, as apply_json_diffs computes it; `document` is left untouched.
    Raises JsonDiffError where MySQL rejects the diff (a path that is not there, the root, an existing member)."""
    doc = copy.deepcopy(document)
    for diff in diffs.diffs:
        if not diff.path:
            raise JsonDiffError("a JSON diff on the document root")
        parent, leg = _seek(doc, diff.path[:-1]), diff.path[-1]
        if not {REPLACE: _replace, INSERT: _insert, REMOVE: _remove}[diff.operation](parent, leg, diff.value):
            raise JsonDiffError(f"{_OPERATIONS[diff.operation]} at {_path_text(diff.path)} does not fit the before "
                                "image")
    return doc


_OPERATIONS = {REPLACE: "REPLACE", INSERT: "INSERT", REMOVE: "REMOVE"}


def _seek(doc: Any, legs: tuple[Leg, ...]) -> Any:
    """seek_exact_path: only exact members and cells within bounds, no auto-wrapping."""
    for leg in legs:
        if isinstance(doc, list) and isinstance(leg, Cell) and 0 <= leg.position(len(doc)) < len(doc):
            doc = doc[leg.position(len(doc))]
        elif isinstance(doc, dict) and isinstance(leg, Member) and leg.name in doc:
            doc = doc[leg.name]
        else:
            raise JsonDiffError(f"the JSON path {_path_text(legs)} is not in the before image")
    return doc


def _replace(parent: Any, leg: Leg, value: Any) -> bool:
    if isinstance(parent, list) and isinstance(leg, Cell) and 0 <= leg.position(len(parent)) < len(parent):
        parent[leg.position(len(parent))] = value
    elif isinstance(parent, dict) and isinstance(leg, Member) and leg.name in parent:
        parent[leg.name] = value
    else:
        return False
    return True


def _insert(parent: Any, leg: Leg, value: Any) -> bool:
    if isinstance(parent, dict) and isinstance(leg, Member) and leg.name not in parent:
        parent[leg.name] = value
        # MySQL keeps object members sorted by key length, then bytes (Json_key_comparator): the snapshot
        # prints them in that order.
        ordered = sorted(parent.items(), key=lambda kv: (len(kv[0]), kv[0]))
        parent.clear()
        parent.update(ordered)
    elif isinstance(parent, list) and isinstance(leg, Cell):
        parent.insert(max(0, min(leg.position(len(parent)), len(parent))), value)  # Json_array::insert_alias
    else:
        return False
    return True


def _remove(parent: Any, leg: Leg, _value: Any) -> bool:
    if isinstance(parent, dict) and isinstance(leg, Member) and leg.name in parent:
        del parent[leg.name]
    elif isinstance(parent, list) and isinstance(leg, Cell) and 0 <= leg.position(len(parent)) < len(parent):
        del parent[leg.position(len(parent))]
    else:
        return False
    return True


def _leg_text(leg: Leg) -> str:
    if isinstance(leg, Member):
        return "." + json.dumps(leg.name.decode("utf-8", errors="replace"), ensure_ascii=False)
    return f"[last-{leg.index}]" if leg.from_end else f"[{leg.index}]"


def _path_text(legs: tuple[Leg, ...]) -> str:
    return "$" + "".join(_leg_text(leg) for leg in legs)


def resolve_partial_json(before: dict, after: dict) -> None:
    """Replace every JsonDiffs in the after image `after` with the full document, in place.
    Raises JsonDiffError naming the column when the before image cannot take the diffs."""
    for name, value in after.items():
        if isinstance(value, JsonDiffs):
            if before.get(name) is None:
                raise JsonDiffError(f"column '{name}' has JSON diffs but no document in the before image")
            try:
                after[name] = apply_diffs(before[name], value)
            except JsonDiffError as exc:
                raise JsonDiffError(f"column '{name}': {exc}") from None


_read_whole_json = BinLogPacketWrapper.read_binary_json


def _read_binary_json(self, size: int, is_partial: bool):
    if not is_partial:
        return _read_whole_json(self, size, False)
    (length,) = DIFF_VECTOR_LENGTH.unpack(self.read(DIFF_VECTOR_LENGTH.size))
    return parse_diff_vector(self.read(length))


# The library's RowsEvent reads a JSON column through its packet wrapper's read_binary_json.
BinLogPacketWrapper.read_binary_json = _read_binary_json
