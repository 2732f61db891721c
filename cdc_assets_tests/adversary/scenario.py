"""A scenario is its seed: direction, tables, seed rows, the application's transactions and the faults, all drawn
from `random.Random(seed)` in a fixed order, so the same seed builds the same scenario on every machine."""
from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass, field, replace

from cdc_assets_tests.adversary.faults import (AWAY, FAULTS, RESET, SAVEPOINT, Injected, PostgresTargetAway, Replan,
                                              Reset, Savepoint, SourceRestart, TargetAway)
from cdc_assets_tests.adversary.kinds import MYSQL, POSTGRES
from cdc_assets_tests.adversary.schema import Table, random_table, with_late_kinds
from cdc_assets_tests.adversary.schema_changes import Change, draw_log, left_out, tables_after, target_names
from cdc_assets_tests.adversary.targets import Target, describe as describe_targets, draw_three, single
from cdc_assets_tests.adversary.workload import Workload

LONG_LITERAL = re.compile(r"'[0-9a-f]{60,}'")  # the kB of a TOASTed value, shortened when printed
# The directions a seed draws from. The three-target ones are only run when asked for, so that adding them
# changed no seed's scenario.
DIRECTIONS = {"mysql-postgres": (MYSQL, POSTGRES), "postgres-postgres": (POSTGRES, POSTGRES),
              "mysql-mysql": (MYSQL, MYSQL), "postgres-mysql": (POSTGRES, MYSQL)}
THREE = {"mysql-three": MYSQL, "postgres-three": POSTGRES}  # into pg_a, pg_b (PostgreSQL) and maria (MariaDB)
EVERY_DIRECTION = sorted(DIRECTIONS) + sorted(THREE)
VERIFY_SHARE = 0.25  # of the scenarios end with the task's own verification (verification.py)


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
    targets: tuple[Target, ...] = ()
    commit_policy: str = "all"
    changes: tuple[Change, ...] = ()  # schema changes, each a transaction of its own in during_log
    schema_policy: str = "halt"
    verify: bool = False  # `cdc-assets verify` at the end (verification.py)

    @property
    def source(self) -> str:
        return THREE[self.direction] if self.direction in THREE else DIRECTIONS[self.direction][0]

    def describe(self) -> str:
        tables = "; ".join(f"{t.name}(key {t.key_shape}{' ' + t.collation if t.collation else ''}"
                           f"{f', {t.partitions} partitions' if t.partitions else ''}: "
                           f"{', '.join(k for _, k in t.columns)})" for t in self.tables)
        return (f"seed {self.seed} {self.direction}: {describe_targets(self.targets, self.commit_policy)}{tables}; "
                f"{len(self.setup)} seed rows, "
                f"{len(self.during_snapshot)}+{len(self.during_log)} transactions, faults "
                f"{', '.join(f.describe() for f in self.faults) or 'none'}, "
                f"{'exactly-once' if self.exactly_once else 'at-least-once'}" +
                (f"; schema changes under {self.schema_policy}: {', '.join(c.describe() for c in self.changes)}"
                 if self.changes else "") + ("; verified at the end" if self.verify else ""))

    def script(self) -> str:
        """The scenario as a person reads it: DDL, seed rows, each transaction, and where the faults fall."""
        (first, faults1), (_, faults2) = self.segments()
        named = [", ".join(f.describe() for f in faults) or "none" for faults in (faults1, faults2)]
        half = len(first)
        rollbacks = [next((f", then savepoint rollback adv_{f.point}_{f.nth}, compare, sync, compare" for f in faults
                           if f.kind == SAVEPOINT), "") for faults in (faults1, faults2)]
        rollbacks = [r + "".join(f", then {f.describe()}, sync, compare" for f in self.faults
                                 if f.kind == RESET and f.nth == n) for n, r in enumerate(rollbacks, 1)]
        lines = [f"-- {self.describe()}"]
        lines += [s + ";" for t in self.tables for s in t.ddl(self.source, self.namespace)]
        lines += ["BEGIN;", *(s + ";" for s in self.setup), "COMMIT;", "-- snapshot starts; during it:"]
        for number, tx in enumerate(self.during_snapshot + self.during_log):
            if number == len(self.during_snapshot):
                lines.append(f"-- log phase; faults {named[0]} while:")
            if number == len(self.during_snapshot) + half:
                lines.append(f"-- quiet point 1{rollbacks[0]}; then faults {named[1]} while:")
            lines += ["BEGIN;", *(f"  {s};" for s in tx), "COMMIT;"]
        return "\n".join(LONG_LITERAL.sub(lambda m: f"{m.group(0)[:21]}...'/*{len(m.group(0)) - 2} chars*/", line)
                         for line in lines + [f"-- quiet point 2{rollbacks[1]}"])

    @property
    def session(self) -> list[str]:
        """What every session writing the source runs first (a kind's `session`)."""
        return sorted({s for t in self.tables for s in t.session(self.source)})

    def expected_stops(self) -> list[str]:
        """The `stop` patterns of the kinds whose stopping values the scenario writes: a loud stop matching one is
        the documented outcome (a pass is too, with the target equal, when the value was gone before it was read)."""
        statements = [s for tx in (self.setup, *self.during_snapshot, *self.during_log) for s in tx]
        kinds = {k.name: k for t in self.tables for _, k in t.kinds() if k.stops_on}.values()
        return [k.stop for k in kinds if any(v in s for v in k.stops_on for s in statements)]

    def segments(self) -> list[tuple[tuple, tuple]]:
        """The log phase in two halves, each ending at a quiet point: the first half of the transactions under the
        first log fault, the second half under the others; a savepoint first in the segment it names."""
        half = len(self.during_log) // 2
        faults = [f for f in self.faults if f.kind not in ("snapshot_crash_point", SAVEPOINT, RESET)]
        parts = [faults[:1], faults[1:]]
        if len(self.targets) > 1:  # the target away first in its segment, so that it goes while the application writes
            parts[1].sort(key=lambda f: f.kind not in AWAY)
        for savepoint in (f for f in self.faults if f.kind == SAVEPOINT):
            parts[savepoint.nth - 1].insert(0, savepoint)
        return [(self.during_log[:half], tuple(parts[0])), (self.during_log[half:], tuple(parts[1]))]

    def shrunk(self, **changes) -> "Scenario":
        return replace(self, **changes)

    def tables_at(self, quiet_point: int) -> tuple[Table, ...]:
        """The source's tables at quiet point 1 or 2: with the schema changes run before it."""
        return tables_after(self.tables, self.changes, self._written(quiet_point), self.source, self.namespace)

    def target_names_at(self, quiet_point: int) -> dict[str, dict[str, str | None]]:
        """Per table, the name each of its columns at quiet point 1 or 2 has on the target (None: not there yet),
        a plan since aside (schema_changes.target_names)."""
        return target_names(self.tables, self.changes, self._written(quiet_point), self.source, self.namespace)

    def _written(self, quiet_point: int) -> tuple[tuple[str, ...], ...]:
        return self.during_log[:len(self.during_log) // 2] if quiet_point == 1 else self.during_log

    def left_out(self) -> dict[str, set[str]]:
        return left_out(self.changes, self.schema_policy)


def build(seed: int, direction: str | None = None, reset: bool | None = None, away_pg: bool = False,
          restart: bool = False, schema_changes: bool = False, verify: bool | None = None,
          replan: bool = False) -> Scenario:
    """The scenario of `seed`; `direction` fixed, or drawn from the seed (one of the four single-target ones);
    `reset`: a reset fault always (True), never (False), or when the seed draws one (None); `away_pg`: a PostgreSQL
    target away where one applies, `restart`: a source restart, each only when asked (its timing from a stream of
    its own), so that every seed keeps the scenario it had before them; `schema_changes`: schema changes in the log
    phase (the scenario then has no savepoint nor reset, which a re-plan would void); `replan`: an operator's
    re-plan while the application writes (likewise no savepoint nor reset; only when asked, as `restart`);
    `verify`: the task's verification at the end always (True), never (False), or when the seed draws it (None)."""
    rng = random.Random(seed)
    drawn = rng.choice(sorted(DIRECTIONS))
    direction = direction or drawn
    # Each later choice comes from a stream of its own, so that the choices before it keep every seed's scenario.
    three = random.Random(f"three targets {seed}")
    source = THREE.get(direction) or DIRECTIONS[direction][0]
    targets, policy = draw_three(three) if direction in THREE else (single(DIRECTIONS[direction][1]), "all")
    namespace = f"adv{seed}"
    tables = [random_table(rng, f"t{i}", source) for i in range(rng.randint(1, 3))]
    late = random.Random(f"late kinds {seed}")  # the kinds added later, so that earlier seeds keep their scenario
    tables = [with_late_kinds(late, t, source) for t in tables]
    work = Workload(rng, tables, source, tuple(sorted({t.engine for t in targets})), namespace, late)
    setup = tuple(s for t in tables for s in work.seed_rows(t, rng.randint(5, 60)))
    during_snapshot = tuple(tuple(work.transaction()) for _ in range(rng.randint(5, 30)))
    fork = copy.deepcopy(work) if schema_changes else None  # its own copy of the stream: the draws after stay
    during_log = tuple(tuple(work.transaction(big=rng.random() < 0.1)) for _ in range(rng.randint(20, 80)))
    changes, schema_policy = (), "halt"
    if schema_changes:
        during_log, changes, schema_policy = draw_log(
            random.Random(f"schema changes {seed}"), fork, source, namespace, random.Random(f"add a table {seed}"),
            random.Random(f"rename a table {seed}" if source == MYSQL else f"rename a postgres table {seed}"))
    # mysql.md: exactly-once needs an integer or decimal split column (a text key stops the plan, as documented)
    exactly_once = source == MYSQL and rng.random() < 0.5 and all(t.key_shape != "text" for t in tables)
    part_events = rng.choice((3, 10, 5000))
    probe = Scenario(seed, direction, namespace, tuple(tables), setup, during_snapshot, during_log, (),
                     exactly_once, rng.choice((7, 20, 1000)), part_events, targets=targets, commit_policy=policy,
                     changes=changes, schema_policy=schema_policy)
    faults = []
    for _ in range(rng.randint(1, 3)):
        kinds = [f for f in FAULTS if f.applies(probe)]
        faults.append(rng.choices(kinds, [f.weight for f in kinds])[0].draw(rng, probe))
    snapshot_faults = [f for f in faults if f.kind == "snapshot_crash_point"][:1]
    savepoint = [Savepoint().draw(rng, probe)] if rng.random() < 0.5 else []
    if direction in THREE:
        away = [TargetAway().draw(three, probe)] if TargetAway().applies(probe) and three.random() < 0.5 else []
    else:
        away = [TargetAway().draw(late, probe)] if TargetAway().applies(probe) and late.random() < 0.3 else []
    rewind = random.Random(f"reset {seed}")
    drawn_reset = rewind.random() < 0.25
    resets = [Reset().draw(rewind, probe)] if (drawn_reset if reset is None else reset) else []
    if away_pg and PostgresTargetAway().applies(probe):
        away.append(PostgresTargetAway().draw(random.Random(f"target away pg {seed}"), probe))
    if restart:
        away.append(SourceRestart().draw(random.Random(f"restart {seed}"), probe))
    replans = [Replan().draw(random.Random(f"replan {seed}"), probe)] if replan else []
    if changes or replan:
        savepoint, resets = [], []
    drawn_verify = random.Random(f"verify {seed}").random() < VERIFY_SHARE
    return replace(probe, verify=drawn_verify if verify is None else verify, faults=tuple(snapshot_faults + [f for f in faults if f.kind != "snapshot_crash_point"] +
                                       away + replans + savepoint + resets))
