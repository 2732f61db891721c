"""Faults the adversary injects into a task's processes, one registry entry per kind. A fault is drawn with its
parameters from the seed (`draw`) and applied by running the task's CLI (`apply`), which reports what happened:
"killed" (SIGKILL landed), "passed" (the process ended before the fault could land), "stopped" (it exited with an
error of its own: a loud stop, with its output, also where it came while a SIGTERM let the batch finish),
"refused" (SIGTERM was not honoured with a clean exit, 143, nor ended by such a stop), or
"gave_up" (a loud stop the fault allows: a target went away or the source restarted; after the last two, only a stop
whose error says what to do; the scenario goes on).

A crash point is a place in the code named by `crash_point(...)` (cdc_assets/engine/faults.py); `:n` kills on
the n-th pass. To add a fault: a class with `name`, `phase` ("snapshot" or "log"), `applies(scenario)`, `draw`
and `apply`, appended to FAULTS."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml

from cdc_assets.engine.faults import ENV as CRASH_ENV
from cdc_assets_tests.adversary.targets import tolerates
from cdc_assets_tests.support import cli_command

TIMEOUT = 300
CLI_ERROR = 2  # the CLI's exit status after a CdcError it printed as "error: ..."
SAVEPOINT = "savepoint"
RESET = "reset"
RESTART = "restart"
REPLAN = "replan"
AWAY = ("target_away", "target_away_pg", RESTART)  # a server or database gone and back while a sync runs


@dataclass(frozen=True)
class Injected:
    """A drawn fault: its kind, parameters, and how to describe it in one line."""
    kind: str
    point: str = ""
    nth: int = 1
    delay: float = 0.0

    def describe(self) -> str:
        if self.kind == SAVEPOINT:
            return f"savepoint({self.point}:{self.nth}" + (f" {self.delay:.1f}s)" if self.delay else ")")
        if self.kind in AWAY:
            return f"{self.kind}({self.delay:.1f}s, away {self.nth}s)"
        return f"{self.kind}({self.point}:{self.nth})" if self.point else f"{self.kind}({self.delay:.1f}s)"


def run_cli(config, env: dict, *args: str, crash: str | None = None) -> subprocess.Popen:
    env = {**env, **({CRASH_ENV: crash} if crash else {})}
    return subprocess.Popen(cli_command(config, *args), env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def outcome(proc: subprocess.Popen, timeout: float = TIMEOUT) -> tuple[str, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "stopped", f"no exit within {timeout} s:\n{out[-3000:]}"
    if proc.returncode == -signal.SIGKILL:
        return "killed", ""
    if proc.returncode == -signal.SIGTERM:  # before the CLI installed its handler: Python's default, an exit
        return "terminated", out[-3000:]
    return ("passed", "") if proc.returncode == 0 else ("stopped", out[-3000:])


class CrashPoint:
    """SIGKILL at the n-th pass of a named crash point."""
    phase, weight = "log", 4
    points = {"incremental.after_commit": lambda s: True,
              "incremental.after_apply": lambda s: s.exactly_once,
              "incremental.part_applied": lambda s: True,
              # one target's lane checkpointed a schema change it followed, the others not yet
              "incremental.schema_followed": lambda s: len(s.targets) > 1 and bool(s.changes)}
    args: tuple[str, ...] = ("sync", "--until-caught-up")

    @property
    def name(self) -> str:
        return "crash_point" if self.phase == "log" else "snapshot_crash_point"

    def applies(self, scenario) -> bool:
        return any(ok(scenario) for ok in self.points.values())

    def draw(self, rng: random.Random, scenario) -> Injected:
        point = rng.choice(sorted(p for p, ok in self.points.items() if ok(scenario)))
        return Injected(self.name, point, rng.randint(1, 4))

    def apply(self, fault: Injected, config, env: dict) -> tuple[str, str]:
        return outcome(run_cli(config, env, *self.args, crash=f"{fault.point}:{fault.nth}"))


class SnapshotCrashPoint(CrashPoint):
    """SIGKILL inside the snapshot (a split's backfill or its commit), then `snapshot` again resumes."""
    phase, weight = "snapshot", 1
    points = {"snapshot.after_commit": lambda s: True, "snapshot.backfill": lambda s: s.exactly_once}
    args = ("snapshot",)


class RandomKill:
    """SIGKILL of a following `sync` at a random moment."""
    name, phase, weight = "random_kill", "log", 2
    signal = signal.SIGKILL

    def applies(self, scenario) -> bool:
        return True

    earliest = 0.5

    def draw(self, rng: random.Random, scenario) -> Injected:
        return Injected(self.name, delay=rng.uniform(self.earliest, 6.0))

    def args(self, fault: Injected) -> tuple[str, ...]:
        return ("sync",)

    def apply(self, fault: Injected, config, env: dict) -> tuple[str, str]:
        proc = run_cli(config, env, *self.args(fault))
        time.sleep(fault.delay)
        if proc.poll() is not None:
            return outcome(proc)
        os.killpg(proc.pid, self.signal)
        status, out = outcome(proc, timeout=120)
        if proc.returncode == -signal.SIGTERM:  # before the CLI installed its handler (a slow start): not refused
            return "terminated", ""
        if self.signal == signal.SIGTERM:  # a clean stop is the contract: the batch finished, exit 128 + 15
            if proc.returncode == 128 + signal.SIGTERM:
                return "killed", ""
            # the batch the signal let finish ended on a loud stop of the CLI's own (exit 2, "error: ..."), which
            # is judged and has its way out applied as any stop is
            return ("stopped", out) if proc.returncode == CLI_ERROR and "error: " in out else ("refused", out)
        return status, out


class Terminate(RandomKill):
    """SIGTERM of a following `sync`: it must finish its batch and exit 143, as a shell reports SIGTERM."""
    name, weight = "sigterm", 1
    earliest = 3.0  # the CLI's handler is installed once its imports ran
    signal = signal.SIGTERM


class Savepoint(Terminate):
    """A savepoint the runner takes in a log segment and rolls back to at the segment's quiet point (runner.py),
    so that the segment's batches write before-images while the other faults land. `before_writes`: at the segment's
    start, after a `sync --until-caught-up`, with the source quiet (the state to return to is the source's);
    `on_stop`: `sync --savepoint-on-stop` stopped by SIGTERM at a random moment while the application writes (the
    state to return to is the target's as the savepoint left it). `nth`: the segment (1 or 2). Drawn apart from
    FAULTS, at most one per scenario (scenario.py)."""
    name, weight = SAVEPOINT, 0
    moments = ("before_writes", "before_writes", "on_stop")

    def applies(self, scenario) -> bool:
        return True

    def draw(self, rng: random.Random, scenario) -> Injected:
        moment, segment = rng.choice(self.moments), rng.choice((1, 1, 2))
        return Injected(self.name, moment, segment, rng.uniform(self.earliest, 6.0) if moment == "on_stop" else 0.0)

    def args(self, fault: Injected) -> tuple[str, ...]:
        return ("sync", "--savepoint-on-stop", savepoint_name(fault))


class TargetAway:
    """The MySQL target server stopped while a `sync` follows the log, started again `nth` seconds later (same port,
    same data), then the sync stopped with SIGTERM. It may resume ("killed": SIGTERM honoured) or stop loudly by
    itself ("gave_up", with its last line); either way the next sync must end equal. Drawn apart from FAULTS, from
    the second stream (scenario.py), only with a MySQL target (a PostgreSQL one: PostgresTargetAway). With
    three targets it is `maria`: one the commit policy may do without (the others go on and it catches up from its
    own checkpoint) or one it needs (the sync stops). Not an optional one behind a PostgreSQL source: the slot
    moves on without it, and several-targets.md documents it as lost."""
    name, phase, weight = "target_away", "log", 0

    def applies(self, scenario) -> bool:
        away = [t for t in scenario.targets if t.engine == "mysql"]
        return bool(away) and (scenario.source == "mysql" or
                               not tolerates(scenario.commit_policy, scenario.targets, away[0].name))

    def draw(self, rng: random.Random, scenario) -> Injected:
        # Of three targets, early (it leads its segment: scenario.py), while the application still writes: the
        # others then go on without it, or it is found down when the sync starts.
        latest = 2.5 if len(scenario.targets) > 1 else 5.0
        return Injected(self.name, "", rng.randint(1, 8), rng.uniform(min(1.0, latest - 2.0), latest))

    def apply(self, fault: Injected, config, env: dict, servers=None) -> tuple[str, str]:
        proc = run_cli(config, env, "sync")
        time.sleep(fault.delay)
        try:
            self.go(servers, config)
            time.sleep(fault.nth)
            self.back(servers, config)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        for wait in (0.0, 3.0):  # then room to reconnect and apply a batch
            time.sleep(wait)
            if proc.poll() is not None:
                status, out = outcome(proc)
                return self.stopped(out) if status == "stopped" else (status, out)
        os.killpg(proc.pid, signal.SIGTERM)
        status, out = outcome(proc, timeout=120)
        return ("killed", out) if proc.returncode == 128 + signal.SIGTERM else (status, out)

    def go(self, servers, config) -> None:
        servers.mysql_target.stop()

    def back(self, servers, config) -> None:
        servers.mysql_target.start()

    def stopped(self, out: str) -> tuple[str, str]:
        """A sync that stopped by itself: "gave_up" with its last line when the stop is one the fault allows."""
        return "gave_up", out.strip().splitlines()[-1] if out.strip() else ""


class PostgresTargetAway(TargetAway):
    """A PostgreSQL target away without a server of its own: its database closed to connections (`ALLOW_CONNECTIONS
    false`) and its sessions ended (`pg_terminate_backend`), from the server's `postgres` database, then opened again
    `nth` seconds later. The single target into PostgreSQL, where the sync retries with backoff
    (`pipeline.max_retries`) and otherwise stops with the unreachable target named; or `pg_a` of three, the first
    target (it keeps the task's own position keys), on the same terms as `maria` in TargetAway. Drawn only with
    `--target-away-pg` (scenario.py), so that the seeds drawn before it keep their scenario."""
    name = "target_away_pg"

    def applies(self, scenario) -> bool:
        away = [t for t in scenario.targets if t.engine == "postgres"][:1]
        return bool(away) and (scenario.source == "mysql" or
                               not tolerates(scenario.commit_policy, scenario.targets, away[0].name))

    def go(self, servers, config) -> None:
        database = _first_postgres_target(config)
        conn = servers.postgres.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS false')
                cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
        finally:
            conn.close()

    def back(self, servers, config) -> None:
        conn = servers.postgres.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f'ALTER DATABASE "{_first_postgres_target(config)}" WITH ALLOW_CONNECTIONS true')
        finally:
            conn.close()

    def stopped(self, out: str) -> tuple[str, str]:
        """Only a stop that says what to do (`error: ... -- <hint>`) is allowed; any other is a finding."""
        said = [line for line in out.strip().splitlines() if line.startswith("error: ") and " -- " in line]
        return ("gave_up", said[-1]) if said else ("stopped", out[-3000:])


class SourceRestart(PostgresTargetAway):
    """The source server shut down while a `sync` follows the log and the application writes, started again `nth`
    seconds later on the same port with the same data (on PostgreSQL the server of the PostgreSQL targets too).
    The sync reconnects (retried with backoff) or stops saying what to do; the application reconnects and runs
    again a transaction the restart broke, never one that committed (application.py). Drawn only with
    `--restart` (scenario.py)."""
    name = RESTART

    def applies(self, scenario) -> bool:
        return True

    def draw(self, rng: random.Random, scenario) -> Injected:
        # Early, while the application still writes: from the sync's start (its first connections) to its batches.
        return Injected(self.name, "", rng.randint(1, 5), rng.uniform(0.5, 2.5))

    def go(self, servers, config) -> None:
        _source_server(servers, config).stop()

    def back(self, servers, config) -> None:
        _source_server(servers, config).start()


def _task_file(config) -> dict:
    return yaml.safe_load(Path(config).read_text())


def _first_postgres_target(config) -> str:
    raw = _task_file(config)
    entries = raw.get("targets") or [raw["target"]]
    url = next(e["url"] for e in entries if e["db_type"] == "postgres")
    return urlparse(url).path.lstrip("/")


def _source_server(servers, config):
    return servers.mariadb if _task_file(config)["source"]["db_type"] == "mysql" else servers.postgres


class Reset:
    """`cdc-assets reset` at a segment's quiet point (`nth`), the sync stopped, then a sync and the oracle
    (rewind.py). Moves (`point`), each one docs/operations/reset.md documents as exact: `same`, to the checkpoint it
    is at (effect none); `back`, in the second segment to the checkpoint of the first quiet point (a replay, which
    the upsert makes exact; on PostgreSQL refused with PositionLost once the slot confirmed past it); `earliest` on
    PostgreSQL, the slot's confirmed position (the checkpoint or just before it). Not `earliest` on MySQL: it goes
    back past the tables' CREATE TABLE, a documented stop under schema_change_policy halt. Drawn apart from
    FAULTS, from a stream of its own (scenario.py)."""
    name, phase, weight = RESET, "log", 0

    def applies(self, scenario) -> bool:
        return True

    def draw(self, rng: random.Random, scenario) -> Injected:
        segment = rng.choice((1, 2, 2))
        moves = ["same"] + (["back", "back"] if segment == 2 else []) + (["earliest"] if scenario.source == "postgres"
                                                                          else [])
        return Injected(self.name, rng.choice(moves), segment)

    def args(self, fault: Injected, position: dict | None) -> tuple[str, ...]:
        if fault.point == "earliest":
            return ("reset", "--to", "earliest")
        return ("reset", "--to", "position", json.dumps(position))


class Replan:
    """An operator's `plan --replan`, then `snapshot`, `delay` seconds into a segment while the application writes
    and no sync runs: every table planned and read again, the checkpoint discarded by design (the checkpoint watch
    excuses it), the sync after it joins each table from its new snapshot. Drawn only with `--replan`
    (scenario.py); applied by the runner, which holds what a re-plan changes for the oracle (ways_out.py)."""
    name, phase, weight = REPLAN, "log", 0

    def applies(self, scenario) -> bool:
        return True

    def draw(self, rng: random.Random, scenario) -> Injected:
        return Injected(self.name, delay=rng.uniform(0.5, 4.0))


def savepoint_name(fault: Injected) -> str:
    return f"adv_{fault.point}_{fault.nth}"


FAULTS = [CrashPoint(), SnapshotCrashPoint(), RandomKill(), Terminate()]
BY_NAME = {f.name: f for f in [*FAULTS, Savepoint(), TargetAway(), PostgresTargetAway(), SourceRestart(), Reset(),
                                Replan()]}
