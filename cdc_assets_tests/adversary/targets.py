"""A scenario's targets: one for the four single-target directions, three for `<source>-three` (two PostgreSQL
databases and the second MariaDB, as `support.three_targets` lays them out) under a commit policy drawn from the
seed. Says where each target's tables live, how to reach them, and which targets the policy can do without
(docs/operations/several-targets.md)."""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from cdc_assets_tests.adversary.kinds import MYSQL, POSTGRES

AWAY = "maria"  # the target TargetAway stops: the second MariaDB server is the only target server of its own


@dataclass(frozen=True)
class Target:
    name: str
    engine: str
    required: bool = True
    suffix: str = ""  # a PostgreSQL target's database is `<namespace><suffix>`

    def database(self, ns: str) -> str:
        return f"{ns}{self.suffix}"

    def entry(self, servers, ns: str) -> dict:
        """The target as a `targets:` list entry of the task file."""
        url = servers.postgres.url(self.database(ns)) if self.engine == POSTGRES else servers.mysql_target.url()
        return {"name": self.name, "db_type": self.engine, "url": url, "required": self.required}

    def connect(self, servers, ns: str):
        return servers.postgres.connect(self.database(ns)) if self.engine == POSTGRES else servers.mysql_target.connect()


def single(engine: str) -> tuple[Target, ...]:
    """The target of a one-target direction, where runner.py has always put it."""
    return (Target("target", engine, suffix="_tgt" if engine == POSTGRES else ""),)


def draw_three(rng: random.Random) -> tuple[tuple[Target, ...], str]:
    """pg_a, pg_b and maria, and a commit policy; under `required` at least one target is required."""
    policy = rng.choice(("all", "quorum(2)", "quorum(1)", "required", "required"))
    flags = [rng.random() < 0.6 for _ in range(3)]
    if policy == "required" and not any(flags):
        flags[rng.randrange(3)] = True
    names = (("pg_a", POSTGRES, "_a"), ("pg_b", POSTGRES, "_b"), (AWAY, MYSQL, ""))
    return tuple(Target(n, e, f, s) for (n, e, s), f in zip(names, flags)), policy


def tolerates(policy: str, targets: tuple[Target, ...], name: str) -> bool:
    """The policy goes on without target `name` (the others all applying): docs/operations/several-targets.md."""
    if len(targets) == 1 or policy == "all":
        return False
    quorum = re.fullmatch(r"quorum\((\d+)\)", policy)
    if quorum:
        return len(targets) - 1 >= int(quorum.group(1))
    return not next(t for t in targets if t.name == name).required


def describe(targets: tuple[Target, ...], policy: str) -> str:
    if len(targets) == 1:
        return ""
    return (f"targets {', '.join(t.name + ('' if t.required else ' (optional)') for t in targets)}, "
            f"commit_policy {policy}; ")
