"""Random tables: a key shape (int, bigint, text (case-insensitive on MySQL when drawn), composite, or no key but
a unique column), payload columns drawn from the kinds, and on PostgreSQL sometimes range partitions by key.
A row's key comes from an integer id (`key_values`), so the workload can name rows without reading them."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from cdc_assets_tests.adversary.kinds import BY_NAME, KINDS, MYSQL, POSTGRES, Kind, literal

KEY_SHAPES = ("int", "bigint", "text", "composite", "unique_only")
MYSQL_TEXT_KEYS = ("utf8mb4_general_ci", "utf8mb4_bin", "utf8mb4_unicode_520_ci")
PARTITION_WIDTH = 1000  # ids per leaf partition


@dataclass(frozen=True)
class Table:
    name: str
    key_shape: str
    collation: str  # of a MySQL text key column ("" otherwise)
    columns: tuple[tuple[str, str], ...]  # payload (column name, kind name)
    partitions: int  # PostgreSQL range partitions by id (0: a plain table)

    @property
    def key_columns(self) -> tuple[str, ...]:
        return {"composite": ("ka", "kb"), "unique_only": ("u",)}.get(self.key_shape, ("k",))

    @property
    def case_insensitive(self) -> bool:
        return self.collation.endswith("_ci")

    @property
    def text_key(self) -> bool:
        return self.key_shape in ("text", "composite")

    def session(self, engine: str) -> list[str]:
        return sorted({k.session[engine] for _, k in self.kinds() if engine in k.session})

    def kinds(self) -> list[tuple[str, Kind]]:
        return [(c, BY_NAME[k]) for c, k in self.columns]

    def key_values(self, engine: str, ident: int, upper: bool = False) -> tuple[str, ...]:
        """SQL literals of the key of row `ident`; `upper`: its text part in upper case (equal under _ci)."""
        text = literal(engine, ("K" if upper else "k") + str(ident))
        return {"int": (str(ident),), "bigint": (str(ident * 10**12),), "text": (text,),
                "composite": (str(ident % 7), text), "unique_only": (str(ident),)}[self.key_shape]

    def where(self, engine: str, ident: int, upper: bool = False) -> str:
        return " AND ".join(f"{q(engine, c)} = {v}" for c, v in zip(self.key_columns,
                                                                   self.key_values(engine, ident, upper)))

    def ddl(self, engine: str, namespace: str) -> list[str]:
        name = f"{q(engine, namespace)}.{q(engine, self.name)}"
        text_type = f"VARCHAR(40) CHARACTER SET utf8mb4 COLLATE {self.collation}" if engine == MYSQL else "VARCHAR(40)"
        key_types = {"int": ["INT"], "bigint": ["BIGINT"], "text": [text_type], "composite": ["INT", text_type],
                     "unique_only": ["INT"]}[self.key_shape]
        columns = [f"{q(engine, c)} {t} NOT NULL" for c, t in zip(self.key_columns, key_types)]
        columns += [f"{q(engine, c)} {BY_NAME[k].ddl[engine].replace('{ns}', q(engine, namespace))}"
                    for c, k in self.columns]
        keys = ", ".join(q(engine, c) for c in self.key_columns)
        unique = q(engine, f"{self.name}_u")
        columns.append(f"CONSTRAINT {unique} UNIQUE ({keys})" if self.key_shape == "unique_only"
                       else f"PRIMARY KEY ({keys})")
        toast = [f"ALTER TABLE {name} ALTER COLUMN {q(engine, c)} SET STORAGE EXTERNAL"
                 for c, k in self.columns if k == "big_text" and engine == POSTGRES and not self.partitions]
        if self.key_shape == "unique_only" and engine == POSTGRES:  # updates and deletes need a replica identity
            toast.append(f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {unique}")
        preludes = [k.prelude[engine].replace("{ns}", q(engine, namespace)) for _, k in self.kinds()
                    if engine in k.prelude]
        if not self.partitions:
            return [*preludes, f"CREATE TABLE {name} ({', '.join(columns)})", *toast]
        statements = [*preludes, f"CREATE TABLE {name} ({', '.join(columns)}) PARTITION BY RANGE ({q(engine, 'k')})"]
        for p in range(self.partitions):
            low = "MINVALUE" if p == 0 else str(p * PARTITION_WIDTH)
            high = "MAXVALUE" if p == self.partitions - 1 else str((p + 1) * PARTITION_WIDTH)
            statements.append(f"CREATE TABLE {q(engine, namespace)}.{q(engine, self.leaf(p))} PARTITION OF {name} "
                              f"FOR VALUES FROM ({low}) TO ({high})")
        return statements

    def leaf(self, p: int) -> str:
        return f"{self.name}_p{p}"

    def leaf_of(self, ident: int) -> str:
        return self.leaf(min(ident // PARTITION_WIDTH, self.partitions - 1))


def q(engine: str, name: str) -> str:
    return f"`{name}`" if engine == MYSQL else f'"{name}"'


def random_table(rng: random.Random, name: str, source: str) -> Table:
    shape = rng.choice(KEY_SHAPES)
    collation = rng.choice(MYSQL_TEXT_KEYS) if source == MYSQL and shape in ("text", "composite") else ""
    available = [k for k in KINDS if source in k.ddl and not k.late]
    drawn = rng.sample(available, k=min(len(available), rng.randint(2, 6)))
    partitions = rng.choice((0, 0, 2, 3)) if source == POSTGRES and shape == "int" else 0
    return Table(name, shape, collation, tuple((f"c_{k.name}", k.name) for k in drawn), partitions)


def with_late_kinds(rng: random.Random, table: Table, source: str) -> Table:
    """`table` with 0-2 columns of the late kinds added, drawn from the scenario's second stream."""
    available = [k for k in KINDS if source in k.ddl and k.late and rng.random() < k.share]
    drawn = rng.sample(available, k=rng.choice((0, 1, 1, 2)))
    return replace(table, columns=table.columns + tuple((f"c_{k.name}", k.name) for k in drawn))
