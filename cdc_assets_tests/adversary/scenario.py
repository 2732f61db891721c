"""A scenario is its seed: direction, tables, seed rows, the application's transactions and the faults, all drawn
from `random.Random(seed)` in a fixed order, so the same seed builds the same scenario on every machine."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

from cdc_assets_tests.adversary.faults import FAULTS, Injected
from cdc_assets_tests.adversary.kinds import MYSQL, POSTGRES
from cdc_assets_tests.adversary.schema import Table, random_table
from cdc_assets_tests.adversary.workload import Workload

LONG_LITERAL = re.compile(r"'[0-9a-f]{60,}'")  # the kB of a TOASTed value, shortened when printed
DIRECTIONS = {"mysql-postgres": (MYSQL, POSTGRES), "postgres-postgres": (POSTGRES, POSTGRES),
              "mysql-mysql": (MYSQL, MYSQL), "postgres-mysql": (POSTGRES, MYSQL)}


@dataclass(frozen=True)
class Scenario:
    seed: int
    direction: str
    namespace: str  # the MySQL database or PostgreSQL schema holding the tables
    tables: tuple[Table, ...]
    setup: tuple[str, ...]  # seed rows, one transaction
    during_snapshot: tuple[tuple[str, ...], ...]  # transactions run while the snapshot runs
    during_log: tuple[tuple[str, ...], ...]  # transactions run while the log phase is faulted
    faults: tuple[Injected, ...]
    exactly_once: bool
    split_size: int
    part_events: int
    notes: tuple[str, ...] = field(default=())

    @property
    def source(self) -> str:
        return DIRECTIONS[self.direction][0]

    @property
    def target(self) -> str:
        return DIRECTIONS[self.direction][1]

    def describe(self) -> str:
        tables = "; ".join(f"{t.name}(key {t.key_shape}{' ' + t.collation if t.collation else ''}"
                           f"{f', {t.partitions} partitions' if t.partitions else ''}: "
                           f"{', '.join(k for _, k in t.columns)})" for t in self.tables)
        return (f"seed {self.seed} {self.direction}: {tables}; {len(self.setup)} seed rows, "
                f"{len(self.during_snapshot)}+{len(self.during_log)} transactions, faults "
                f"{', '.join(f.describe() for f in self.faults) or 'none'}, "
                f"{'exactly-once' if self.exactly_once else 'at-least-once'}")

    def script(self) -> str:
        """The scenario as a person reads it: DDL, seed rows, each transaction, and where the faults fall."""
        log_faults = [f.describe() for f in self.faults if f.kind != "snapshot_crash_point"]
        half = len(self.during_log) // 2
        lines = [f"-- {self.describe()}"]
        lines += [s + ";" for t in self.tables for s in t.ddl(self.source, self.namespace)]
        lines += ["BEGIN;", *(s + ";" for s in self.setup), "COMMIT;", "-- snapshot starts; during it:"]
        for number, tx in enumerate(self.during_snapshot + self.during_log):
            if number == len(self.during_snapshot):
                lines.append(f"-- log phase; faults {', '.join(log_faults[:1]) or 'none'} while:")
            if number == len(self.during_snapshot) + half:
                lines.append(f"-- quiet point 1; then faults {', '.join(log_faults[1:]) or 'none'} while:")
            lines += ["BEGIN;", *(f"  {s};" for s in tx), "COMMIT;"]
        return "\n".join(LONG_LITERAL.sub(lambda m: f"{m.group(0)[:21]}...'/*{len(m.group(0)) - 2} chars*/", line)
                         for line in lines + ["-- quiet point 2"])

    def shrunk(self, **changes) -> "Scenario":
        return replace(self, **changes)


def build(seed: int, direction: str | None = None) -> Scenario:
    """The scenario of `seed`; `direction` fixed, or drawn from the seed."""
    rng = random.Random(seed)
    drawn = rng.choice(sorted(DIRECTIONS))
    direction = direction or drawn
    source, target = DIRECTIONS[direction]
    namespace = f"adv{seed}"
    tables = [random_table(rng, f"t{i}", source) for i in range(rng.randint(1, 3))]
    work = Workload(rng, tables, source, target, namespace)
    setup = tuple(s for t in tables for s in work.seed_rows(t, rng.randint(5, 60)))
    during_snapshot = tuple(tuple(work.transaction()) for _ in range(rng.randint(5, 30)))
    during_log = tuple(tuple(work.transaction(big=rng.random() < 0.1)) for _ in range(rng.randint(20, 80)))
    # mysql.md: exactly-once needs an integer or decimal split column (a text key stops the plan, as documented)
    exactly_once = source == MYSQL and rng.random() < 0.5 and all(t.key_shape != "text" for t in tables)
    part_events = rng.choice((3, 10, 5000))
    probe = Scenario(seed, direction, namespace, tuple(tables), setup, during_snapshot, during_log, (),
                     exactly_once, rng.choice((7, 20, 1000)), part_events)
    faults = []
    for _ in range(rng.randint(1, 3)):
        kinds = [f for f in FAULTS if f.applies(probe)]
        faults.append(rng.choices(kinds, [f.weight for f in kinds])[0].draw(rng, probe))
    snapshot_faults = [f for f in faults if f.kind == "snapshot_crash_point"][:1]
    return replace(probe, faults=tuple(snapshot_faults + [f for f in faults if f.kind != "snapshot_crash_point"]))
