"""Split plans of a collection on `_id`, from the boundaries the server returns.

Three sources of boundaries, best first:
  - `splitVector` (needs the clusterManager role): `{"splitKeys": [{"_id": v}, ...]}`, evenly sized by bytes.
  - `$bucketAuto` on `$_id`: `[{"_id": {"min": v, "max": w}, "count": n}, ...]`, exact counts, one sort of the
    whole `_id` index (allowDiskUse).
  - `$sample` of `_id`s, sorted here: cheap on big collections, counts estimated.

Boundaries are ordered and deduplicated in MongoDB's BSON order (`bson_order`), never Python's: `_id`s of several
types (ints, strings, ObjectIds) share one index, and 1, 1.0 and Decimal128("1") are one key there. A split may
span a type boundary: it is read with the index bounds `min()`/`max()` (`range_bounds`), which follow that index
order across types, where a `$gte`/`$lt` filter would match only values of the bound's own type ("type bracketing").

A boundary travels as canonical Extended JSON text (key kind "bson"), so its BSON type survives the plan's JSON:
`{"$oid": "..."}`, `{"$numberLong": "7"}`, `"a string"`.
"""
from __future__ import annotations

from functools import lru_cache

from bson import json_util
from bson.json_util import CANONICAL_JSON_OPTIONS

from cdc_assets.core.splits import KeyRange, SplitPlan
from cdc_assets.core.tables import TableId
from cdc_assets.errors import TableError
from cdc_assets.sources.mongodb.bson_order import MAX_KEY, MIN_KEY, rank, sort_key
from cdc_assets.sources.mongodb.values import ejson

KEY_KIND = "bson"
SPLIT_FIELD = "_id"


def encode_boundary(value: object) -> str:
    if rank(value) in (MIN_KEY, MAX_KEY):
        raise ValueError("MinKey/MaxKey are the unbounded ends of a plan, not boundaries: use None")
    return ejson(value)


def decode_boundary(text: str) -> object:
    return json_util.loads(text, json_options=CANONICAL_JSON_OPTIONS)  # a UUID as Binary: any client encodes it


def plan_from_buckets(table: TableId, buckets: list[dict], created_at: str) -> SplitPlan:
    """A plan from `$bucketAuto`'s output: each bucket after the first starts a split at its `min`."""
    if not buckets:
        return _plan(table, [], [0], created_at)
    ordered = sorted(buckets, key=lambda b: sort_key(b["_id"]["min"]))
    return _plan(table, [b["_id"]["min"] for b in ordered[1:]], [int(b["count"]) for b in ordered], created_at)


def plan_from_split_keys(table: TableId, split_keys: list[dict], total_rows: int, created_at: str) -> SplitPlan:
    """A plan from `splitVector`'s `splitKeys` (documents `{"_id": v}`); rows spread evenly over the splits."""
    values = [k[SPLIT_FIELD] for k in split_keys]
    return _plan(table, values, _even(total_rows, len(values) + 1), created_at)


def plan_from_sample(table: TableId, sampled_ids: list, splits: int, total_rows: int, created_at: str) -> SplitPlan:
    """A plan from `$sample`d `_id`s: the sample's quantiles in BSON order cut `splits` ranges."""
    if splits < 1:
        raise ValueError("a plan has at least one split")
    ordered = sorted(sampled_ids, key=sort_key)
    step = len(ordered) / splits
    values = [ordered[int(step * i)] for i in range(1, splits) if int(step * i) < len(ordered)]
    return _plan(table, values, _even(total_rows, len(values) + 1), created_at)


def _plan(table: TableId, values: list, counts: list[int], created_at: str) -> SplitPlan:
    """Boundaries in BSON order; a boundary equal (in BSON order) to the one before folds its split into that one."""
    boundaries: list[object] = []
    rows = [counts[0]]
    for value, count in zip(values, counts[1:]):
        if rank(value) in (MIN_KEY, MAX_KEY):  # an empty bucket's edge: its rows stay with the neighbour
            rows[-1] += count
            continue
        if boundaries and sort_key(value) < sort_key(boundaries[-1]):
            raise TableError(f"split boundaries of {table} are out of _id order at {value!r}",
                             "plan again: the server's boundaries must ascend")
        if boundaries and sort_key(value) == sort_key(boundaries[-1]):
            rows[-1] += count
            continue
        boundaries.append(value)
        rows.append(count)
    return SplitPlan(table, SPLIT_FIELD, KEY_KIND, tuple(encode_boundary(v) for v in boundaries), tuple(rows),
                     created_at)


def _even(total: int, parts: int) -> list[int]:
    base, extra = divmod(max(total, 0), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def contains(key_range: KeyRange, value: object) -> bool:
    """Is `_id` value in the half-open range, in MongoDB's order? (for a change's key in the log phase; a row key
    becomes its `_id` with values.id_value)"""
    key = sort_key(value)
    if key_range.start is not None and key < _boundary_key(str(key_range.start)):
        return False
    return key_range.end is None or key < _boundary_key(str(key_range.end))


@lru_cache(maxsize=4096)
def _boundary_key(text: str) -> tuple:
    """Parsed once per boundary: every change of the log phase is placed against them."""
    return sort_key(decode_boundary(text))


def range_bounds(key_range: KeyRange) -> dict:
    """`find()` keyword arguments reading exactly `[start, end)` along the `_id` index: `min` is inclusive and `max`
    exclusive, both index bounds that cross BSON types in index order."""
    bounds: dict = {"hint": [(SPLIT_FIELD, 1)]}
    if key_range.start is not None:
        bounds["min"] = [(SPLIT_FIELD, decode_boundary(str(key_range.start)))]
    if key_range.end is not None:
        bounds["max"] = [(SPLIT_FIELD, decode_boundary(str(key_range.end)))]
    return bounds
