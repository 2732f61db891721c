"""Column kinds the adversary draws tables from: each says how a source engine declares it, which values to
write (edge values first, then ordinary ones), how each engine renders it as text, and how two texts compare.

The compare rule (`canon`) applies only the conversions docs/connectors/*.md "Type mapping" documents for the
direction: the source's text and the target's text, each canonicalised, must be equal. To add a kind, append a
`Kind` to KINDS; every scenario may then draw it (see docs/architecture/testing.md)."""
from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

MYSQL, POSTGRES = "mysql", "postgres"
PG_TEXT, MYSQL_TEXT = "{c}::text", "CAST({c} AS CHAR)"


def same(text: str) -> str:
    return text


@dataclass(frozen=True)
class Kind:
    """`ddl[engine]`: the column's type on that source engine (absent: the engine has no such kind).
    `edges[engine]`: SQL literals of edge values; `ordinary(rng, engine)`: an ordinary SQL literal.
    `not_into`: target engines some edge values cannot reach by documented rule, with the edges to leave out.
    `text[engine]`: an SQL expression rendering column {c} (of this kind, or its mapped type) as text.
    `late`: drawn from a scenario's second stream (scenario.py), so seeds drawn before the kind existed keep theirs.
    `session[engine]`: a statement every writing session of that source runs first; `prelude[engine]`: DDL the
    table needs first (`{ns}` is the namespace, as in `ddl`).
    `stops_on`: literals whose write makes the documented outcome a loud stop, whose output matches `stop`.
    `share`: the chance a table may draw a late kind at all (a kind that mostly ends a scenario early is rare)."""
    name: str
    ddl: dict[str, str]
    edges: dict[str, tuple[str, ...]]
    ordinary: Callable[[random.Random, str], str]
    canon: Callable[[str], object] = same
    text: dict[str, str] = field(default_factory=lambda: {MYSQL: MYSQL_TEXT, POSTGRES: PG_TEXT})
    keyable: bool = False
    not_into: dict[str, tuple[str, ...]] = field(default_factory=dict)
    late: bool = False
    session: dict[str, str] = field(default_factory=dict)
    prelude: dict[str, str] = field(default_factory=dict)
    stops_on: tuple[str, ...] = ()
    stop: str = ""
    share: float = 1.0

    def value(self, rng: random.Random, source: str, targets: tuple[str, ...]) -> str:
        """A literal every target engine in `targets` can take."""
        barred = {e for t in targets for e in self.not_into.get(t, ())}
        edges = [e for e in self.edges.get(source, ()) if e not in barred]
        roll = rng.random()
        if roll < 0.08:
            return "NULL"
        if edges and roll < 0.4:
            return rng.choice(edges)
        return self.ordinary(rng, source)


def quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def pg_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def literal(engine: str, text: str) -> str:
    return quote(text) if engine == MYSQL else pg_quote(text)


WORDS = ("a", "B", "ß", "é", "🚀", "日本", "x y", "tail  ", "  lead", "it's", "back\\slash", "Ω", "")


def words(rng: random.Random, engine: str, limit: int = 30) -> str:
    return literal(engine, "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 4)))[:limit])


def as_float(text: str) -> str:
    return repr(float(text)) if text.lower() not in ("nan",) else "nan"


def as_decimal(text: str) -> Decimal:
    return Decimal(text)


def as_json(text: str):
    return json.loads(text, parse_float=Decimal, parse_int=Decimal)


def as_bits(text: str) -> int:
    return int(text, 2) if text else 0


def as_bool(text: str) -> int:
    return {"true": 1, "t": 1, "false": 0, "f": 0}.get(text, None) if not text.isdigit() else int(text)


def as_timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


DURATION = re.compile(r"^(-)?(\d+):(\d\d):(\d\d)(?:\.(\d+))?$")


def as_duration(text: str) -> int | str:
    """Microseconds of a MySQL TIME, a PostgreSQL time or interval in hours ('-838:59:59', '-00:00:01.5',
    '24:00:00'); any other form (`34 days 22:59:59`) stays text: mysql.md promises hours."""
    m = DURATION.match(text)
    if m is None:
        return text
    neg, h, mi, s, frac = m.groups()
    micro = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int((frac or "0").ljust(6, "0")[:6])
    return -micro if neg else micro


def _int(lo: int, hi: int) -> Callable[[random.Random, str], str]:
    return lambda rng, engine: str(rng.randint(lo, hi))


def _fsp(rng: random.Random, digits: int = 6) -> str:
    return "." + "".join(rng.choice("0123456789") for _ in range(digits))


def _datetime(rng: random.Random, engine: str) -> str:
    day = dt.date(1000, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000))
    return literal(engine, f"{day} {rng.randint(0, 23):02}:{rng.randint(0, 59):02}:{rng.randint(0, 59):02}{_fsp(rng)}")


def _time(rng: random.Random, engine: str) -> str:
    hours = rng.randint(0, 838) if engine == MYSQL else rng.randint(0, 23)
    sign = "-" if engine == MYSQL and rng.random() < 0.3 else ""
    return literal(engine, f"{sign}{hours}:{rng.randint(0, 59):02}:{rng.randint(0, 59):02}{_fsp(rng)}")


def _json(rng: random.Random, engine: str) -> str:
    doc = {rng.choice("abcxyz"): rng.choice([1, -2.5, "🚀", None, [1, 2], {"k": "v"}, True]) for _ in range(3)}
    return literal(engine, json.dumps(doc, ensure_ascii=False))


def _bits(rng: random.Random, engine: str) -> str:
    return ("b'" if engine == MYSQL else "B'") + "".join(rng.choice("01") for _ in range(10)) + "'"


def _hex(rng: random.Random, engine: str) -> str:
    data = "".join(rng.choice("0123456789abcdef") for _ in range(2 * rng.randint(0, 12)))
    return f"X'{data}'" if engine == MYSQL else f"decode('{data}', 'hex')"


def _big_text(rng: random.Random, engine: str) -> str:
    """Hex text of 3-12 kB: incompressible enough that PostgreSQL stores it out of line (TOAST)."""
    return literal(engine, "".join(rng.choice("0123456789abcdef") for _ in range(rng.randint(3000, 12000))))


def _int_array(rng: random.Random, engine: str) -> str:
    items = [rng.choice(["NULL", "0", "-2147483648", "2147483647", str(rng.randint(-9, 9))])
             for _ in range(rng.randint(0, 4))]
    return "'{" + ",".join(items) + "}'"


def _date(rng: random.Random) -> dt.date:
    return dt.date(1001, 1, 1) + dt.timedelta(days=rng.randint(0, 3_000_000))


ZERO_DATES = ("'0000-00-00'", "'2020-00-15'", "'2021-02-00'")


def _lenient_date(rng: random.Random, engine: str) -> str:
    """Mostly real dates: a zero date stops the task (mysql.md "Zero dates"), so it is rare in a scenario."""
    return rng.choice(ZERO_DATES) if rng.random() < 0.02 else quote(str(_date(rng)))


def _datetime3(rng: random.Random, engine: str) -> str:
    return literal(engine, f"{_date(rng)} {rng.randint(0, 23):02}:{rng.randint(0, 59):02}:{rng.randint(0, 59):02}"
                           f"{_fsp(rng, 3)}")


def _time3(rng: random.Random, engine: str) -> str:
    hours = rng.randint(0, 838) if engine == MYSQL else rng.randint(0, 23)
    sign = "-" if engine == MYSQL and rng.random() < 0.4 else ""
    return literal(engine, f"{sign}{hours}:{rng.randint(0, 59):02}:{rng.randint(0, 59):02}{_fsp(rng, 3)}")


def _timestamptz(rng: random.Random, engine: str) -> str:
    zone = rng.choice(("+00", "+05:30", "-08", "+14", "-03:30"))
    return pg_quote(f"{_date(rng)} {rng.randint(0, 23):02}:{rng.randint(0, 59):02}:{rng.randint(0, 59):02}"
                    f"{_fsp(rng)}{zone}")


def as_utc_timestamp(text: str) -> dt.datetime | str:
    """A timestamptz rendered at UTC, or a MySQL datetime holding UTC (postgres.md); 'infinity' stays text."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return text


MOODS = ("a", "B", "c d", "ü", "it's", "🚀")
SJIS = ("日本語", "ｱｲｳｴｵ", "カタカナ", "〜", "−", "ABC ", "")  # 〜 and − are where sjis and cp932 part ways
UTF16 = ("🚀𝄞", "ß x", "日本", "", " ", "\u00a0")

KINDS: list[Kind] = [
    Kind("int", {MYSQL: "INT", POSTGRES: "INTEGER"}, {MYSQL: ("-2147483648", "2147483647", "0"),
         POSTGRES: ("-2147483648", "2147483647", "0")}, _int(-1000, 1000), keyable=True),
    Kind("bigint", {MYSQL: "BIGINT", POSTGRES: "BIGINT"}, {e: ("-9223372036854775808", "9223372036854775807")
         for e in (MYSQL, POSTGRES)}, _int(-10**12, 10**12), keyable=True),
    Kind("bigint_unsigned", {MYSQL: "BIGINT UNSIGNED"}, {MYSQL: ("18446744073709551615", "0")}, _int(0, 10**15)),
    Kind("decimal", {MYSQL: "DECIMAL(20,6)", POSTGRES: "NUMERIC(20,6)"},
         {e: ("99999999999999.999999", "-99999999999999.999999", "0", "-0.000001") for e in (MYSQL, POSTGRES)},
         lambda rng, e: f"{rng.randint(-10**6, 10**6)}.{rng.randint(0, 999999):06}", as_decimal),
    Kind("double", {MYSQL: "DOUBLE", POSTGRES: "DOUBLE PRECISION"},
         {MYSQL: ("1.7976931348623157e308", "-5e-324", "-0e0", "0"),
          POSTGRES: ("1.7976931348623157e308", "-5e-324", "'-0'", "'NaN'", "'Infinity'", "'-Infinity'")},
         lambda rng, e: repr(rng.uniform(-1e6, 1e6)), as_float,
         # postgres.md: NaN and the infinities stop a MySQL target. MariaDB stores no -0 (it lands as 0), which
         # the type mapping does not say yet: left out so that it does not hide other findings.
         not_into={MYSQL: ("'NaN'", "'Infinity'", "'-Infinity'", "'-0'")}),
    Kind("varchar", {MYSQL: "VARCHAR(40) CHARACTER SET utf8mb4", POSTGRES: "VARCHAR(40)"},
         {e: (literal(e, ""), literal(e, "trail   "), literal(e, "🚀𝄞"), literal(e, " ")) for e in (MYSQL, POSTGRES)},
         words),
    Kind("varchar_latin1", {MYSQL: "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_general_cs"},
         {MYSQL: ("'ÿ'", "'Ä ß'", "''")}, lambda rng, e: quote(rng.choice(["abc", "é", "Größe", "x "]))),
    Kind("char", {MYSQL: "CHAR(8)", POSTGRES: "CHAR(8)"}, {e: ("''", "'  x'", "'12345678'") for e in (MYSQL, POSTGRES)},
         lambda rng, e: words(rng, e, 8)),
    Kind("big_text", {MYSQL: "LONGTEXT", POSTGRES: "TEXT"}, {}, _big_text,
         text={MYSQL: "CONCAT(LENGTH({c}), ':', MD5({c}))", POSTGRES: "length({c}) || ':' || md5({c})"}),
    Kind("datetime", {MYSQL: "DATETIME(6)", POSTGRES: "TIMESTAMP(6)"},
         {e: (literal(e, "1000-01-01 00:00:00"), literal(e, "9999-12-31 23:59:59.999999"),
              literal(e, "2024-02-29 12:00:00.5")) for e in (MYSQL, POSTGRES)}, _datetime, as_timestamp),
    Kind("time", {MYSQL: "TIME(6)", POSTGRES: "TIME(6)"},
         {MYSQL: ("'838:59:59'", "'-838:59:59'", "'-00:00:01.5'", "'00:00:00'"),
          POSTGRES: ("'24:00:00'", "'00:00:00'", "'23:59:59.999999'")}, _time, as_duration),
    Kind("json", {MYSQL: "JSON", POSTGRES: "JSONB"},
         {e: ("'[]'", "'{}'", "'\"\"'", "'1.5e3'") for e in (MYSQL, POSTGRES)}, _json, as_json),
    Kind("enum", {MYSQL: "ENUM('a','B','c d','ü')"}, {MYSQL: ("'ü'", "'B'")},
         lambda rng, e: rng.choice(["'a'", "'B'", "'c d'"])),
    Kind("bit", {MYSQL: "BIT(10)", POSTGRES: "BIT(10)"}, {MYSQL: ("b'0000000000'", "b'1111111111'"),
         POSTGRES: ("B'0000000000'", "B'1111111111'")}, _bits, as_bits,
         text={MYSQL: "BIN({c})", POSTGRES: PG_TEXT}),
    Kind("bytes", {MYSQL: "VARBINARY(32)", POSTGRES: "BYTEA"},
         {MYSQL: ("X''", "X'00'"), POSTGRES: ("'\\x'", "'\\x00'")}, _hex, str.lower,
         text={MYSQL: "HEX({c})", POSTGRES: "encode({c}, 'hex')"}),
    Kind("int_array", {POSTGRES: "INTEGER[]"}, {POSTGRES: ("'{}'", "'{NULL}'")}, _int_array, as_json,
         text={MYSQL: MYSQL_TEXT, POSTGRES: "to_json({c})::text"}),
    Kind("bool", {POSTGRES: "BOOLEAN"}, {POSTGRES: ("TRUE", "FALSE")}, lambda rng, e: rng.choice(["TRUE", "FALSE"]),
         as_bool),
]
KINDS += [
    Kind("zero_date", {MYSQL: "DATE"}, {MYSQL: ("'1000-01-01'", "'9999-12-31'")}, _lenient_date, late=True,
         session={MYSQL: "SET SESSION sql_mode = ''"}, stops_on=ZERO_DATES, share=0.3,
         # mysql.md "Zero dates": the log stops with ZeroDateError; the snapshot fails the split with the target
         # server's refusal of the value
         stop=r"ZeroDateError|a zero or invalid date|(Incorrect date(time)? value: \\?'|value out of range: \\?\")"
              r"(0000-00-00|2020-00-15|2021-02-00)"),
    Kind("datetime3", {MYSQL: "DATETIME(3)", POSTGRES: "TIMESTAMP(3)"},
         {e: (literal(e, "1000-01-01 00:00:00.000"), literal(e, "9999-12-31 23:59:59.999"),
              literal(e, "2024-02-29 12:00:00.5")) for e in (MYSQL, POSTGRES)}, _datetime3, as_timestamp, late=True),
    Kind("time3", {MYSQL: "TIME(3)", POSTGRES: "TIME(3)"},
         {MYSQL: ("'-838:59:59'", "'-00:00:00.001'", "'-12:00:00.5'", "'838:59:59'"),
          POSTGRES: ("'24:00:00'", "'23:59:59.999'", "'00:00:00.001'")}, _time3, as_duration, late=True),
    Kind("timestamptz", {POSTGRES: "TIMESTAMPTZ(6)"},
         {POSTGRES: ("'1970-01-01 00:00:00+00'", "'2038-01-19 03:14:08+00'", "'9999-12-31 23:59:59.999999+00'",
                     "'2024-03-31 02:30:00.5+02'", "'1000-01-01 00:00:00+00'", "'infinity'", "'-infinity'")},
         _timestamptz, as_utc_timestamp, late=True,
         text={MYSQL: MYSQL_TEXT, POSTGRES: "({c} AT TIME ZONE 'UTC')::text"},
         not_into={MYSQL: ("'infinity'", "'-infinity'")}),  # postgres.md: ±infinity stops a MySQL target
    Kind("pg_enum", {POSTGRES: "{ns}.mood"}, {POSTGRES: tuple(pg_quote(m) for m in MOODS)},
         lambda rng, e: pg_quote(rng.choice(MOODS)), late=True,
         prelude={POSTGRES: "DO $$ BEGIN CREATE TYPE {ns}.mood AS ENUM (" + ", ".join(pg_quote(m) for m in MOODS) +
                  "); EXCEPTION WHEN duplicate_object THEN NULL; END $$"}),
    Kind("varchar_utf16", {MYSQL: "VARCHAR(20) CHARACTER SET utf16"}, {MYSQL: tuple(quote(t) for t in UTF16)},
         lambda rng, e: quote("".join(rng.choice(UTF16) for _ in range(rng.randint(0, 3)))[:20]), late=True),
    Kind("varchar_sjis", {MYSQL: "VARCHAR(20) CHARACTER SET sjis"}, {MYSQL: tuple(quote(t) for t in SJIS)},
         lambda rng, e: quote("".join(rng.choice(SJIS) for _ in range(rng.randint(0, 3)))[:20]), late=True),
]
BY_NAME = {k.name: k for k in KINDS}
KEY_KINDS = [k for k in KINDS if k.keyable]
