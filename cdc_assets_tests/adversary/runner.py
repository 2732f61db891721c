"""Runs one scenario on private servers: source tables and seed rows, a snapshot while the application writes
(in process on a shared Spark session, or by the CLI when a snapshot fault is drawn), the log phase under the
drawn faults while the application writes on, a last `sync --until-caught-up`, then the oracle."""
from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from cdc_assets.config import load_config
from cdc_assets.engine.planning import ensure_plans
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.snapshot import snapshot_splits
from cdc_assets_tests.adversary.application import LEDGER, Source, Writer, ledger_ddl, q
from cdc_assets_tests.adversary.faults import (AWAY, BY_NAME as FAULTS, REPLAN, RESET, RESTART, SAVEPOINT, outcome,
                                               run_cli, savepoint_name)
from cdc_assets_tests.adversary.kinds import MYSQL, POSTGRES
from cdc_assets_tests.adversary.oracle import CheckpointWatch, checkpoints, differences, texts
from cdc_assets_tests.adversary.rewind import reset_at_quiet_point
from cdc_assets_tests.adversary.scenario import Scenario
from cdc_assets_tests.adversary.schema_changes import added_tables
from cdc_assets_tests.adversary.verification import verify_at_the_end
from cdc_assets_tests.adversary.ways_out import FALSE_STOP, WaysOut
from cdc_assets_tests.support import write_config

# A target the policy went on without, as the log (target_lanes.py) or the sync's report (sync_report.py) says it.
OUT_OF_SESSION = re.compile(r"is not applying the log in this run|target \w+: .*; (down|waiting|lost)")


@dataclass
class Servers:
    """The private servers a scenario runs on (the shape `write_config` reads), plus a MySQL target server and
    the Spark session the in-process snapshot adopts."""
    mariadb: object
    postgres: object
    mysql_target: object
    spark: object
    workdir: Path


@dataclass
class Outcome:
    seed: int
    direction: str
    # pass | expected_stop (documented: kinds.py `stop`) | divergence | stopped | checkpoint_back | error |
    # false_alarm | inconclusive (the task's verification at the end: verification.py) | false_stop (a documented
    # stop the scenario drew no cause for: ways_out.py)
    status: str
    details: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timing: list[str] = field(default_factory=list)  # where the writes fell: a rerun may place them elsewhere
    ways_out: WaysOut | None = field(default=None, repr=False)  # the documented stops' ways out, in the log phase

    def line(self) -> str:
        return (f"seed {self.seed} {self.direction}: {self.status.upper()} in {self.seconds:.0f} s; faults "
                f"{', '.join(self.faults) or 'none'}" + "".join(f"\n    {d}" for d in self.details) +
                ("".join(f"\n    timing: {t}" for t in self.timing) if self.status != "pass" else ""))


def renamed(statements, old: str, new: str):
    return [s.replace(f"`{old}`", f"`{new}`").replace(f'"{old}"', f'"{new}"') for s in statements]


def run(scenario: Scenario, servers: Servers) -> Outcome:
    started = time.monotonic()
    result = Outcome(scenario.seed, scenario.direction, "pass")
    ns = f"{scenario.namespace}_{uuid.uuid4().hex[:6]}"  # a rerun of the seed never meets the last run's tables
    src = _source(scenario, servers, ns)
    try:
        _run(scenario, servers, ns, src, result)
        expected = [p for p in scenario.expected_stops() if any(re.search(p, d) for d in result.details)]
        if result.status == "stopped" and expected:
            result.status = "expected_stop"
    finally:
        src.close()
        _cleanup(scenario, servers, ns, result.status in ("pass", "expected_stop"))
        result.seconds = time.monotonic() - started
    return result


def _source(scenario: Scenario, servers: Servers, ns: str) -> Source:
    server = servers.mariadb if scenario.source == MYSQL else servers.postgres
    server.create_database(ns)
    conn = Source(server, ns)
    with conn.cursor() as cur:
        if scenario.source == POSTGRES:
            cur.execute(f'CREATE SCHEMA "{ns}"')
        if _restarts(scenario):  # before the task's log starts: its CREATE TABLE is no change the sync sees
            cur.execute(ledger_ddl(scenario.source, ns))
        for table in scenario.tables:
            for statement in table.ddl(scenario.source, ns):
                cur.execute(statement)
        for statement in scenario.session:
            cur.execute(statement)
        cur.execute("BEGIN")
        for statement in renamed(scenario.setup, scenario.namespace, ns):
            cur.execute(statement)
        cur.execute("COMMIT")
    return conn


def _config(scenario: Scenario, servers: Servers, ns: str) -> Path:
    work = servers.workdir / ns
    work.mkdir(parents=True)
    for target in scenario.targets:
        if target.engine == POSTGRES:
            servers.postgres.create_database(target.database(ns))
    sections = dict(source_extra={"split_columns": {f"{ns}.{t.name}": "u" for t in scenario.tables
                                                    if t.key_shape == "unique_only"}},
                    snapshot={"split_size": scenario.split_size, "partitions_per_run": 2},
                    resumer={"resume_type": "from_target" if scenario.exactly_once else "sqlite"},
                    pipeline={"exactly_once": scenario.exactly_once, "checkpoint_after_events": 20,
                              "checkpoint_interval_secs": 0.5, "transaction_part_events": scenario.part_events,
                              **({"schema_change_policy": scenario.schema_policy} if scenario.changes else {})})
    tables = [f"{ns}.{t.name}" for t in scenario.tables]
    if len(scenario.targets) > 1:
        sections["pipeline"]["commit_policy"] = scenario.commit_policy
        return write_config(work, servers, task_id=ns, source=scenario.source, source_db=ns, tables=tables,
                            targets=[t.entry(servers, ns) for t in scenario.targets], **sections)
    [target] = scenario.targets
    return write_config(work, servers, task_id=ns, source=scenario.source, source_db=ns, tables=tables,
                        target=target.engine, target_db=target.database(ns) if target.engine == POSTGRES else "",
                        target_server=servers.mysql_target if target.engine == MYSQL else None, **sections)


def _run(scenario: Scenario, servers: Servers, ns: str, src, result: Outcome) -> None:
    path = _config(scenario, servers, ns)
    config = load_config(path)
    env = {**os.environ, "DAGSTER_HOME": str(path.parent / "dagster_home")}
    server = servers.mariadb if scenario.source == MYSQL else servers.postgres
    writer = _writer(scenario, server, ns, scenario.during_snapshot)
    writer.start()
    try:
        _snapshot(scenario, config, path, env, servers, result)
        result.timing.append(f"the snapshot ended after {writer.done} of {len(writer.transactions)} transactions "
                             "written during it")
    finally:
        writer.join()
    if result.status != "pass" or _failed(writer, result):
        return
    # A first run describes the tables as they are when it starts, not as of its start position (a known limit,
    # integration/test_schema_change_follow.py): a checkpoint first, so that each schema change is met in the log.
    watch = CheckpointWatch(config)
    watch.start()
    result.ways_out = WaysOut(scenario, servers, ns, path, env, watch)
    noted: list[dict] = []  # each quiet point's checkpoints, for a reset back to an earlier one
    try:
        if scenario.changes and not _synced("sync before the log phase", path, env, result):
            return
        for number, (transactions, faults) in enumerate(scenario.segments(), 1):
            if not _segment(scenario, servers, ns, src, path, env, transactions, faults, result, number, watch):
                break
            noted.append(checkpoints(config))
            reset = next((f for f in scenario.faults if f.kind == RESET and f.nth == number), None)
            if reset is not None and result.ways_out.replanned:
                result.faults.append(f"{reset.describe()} voided by the re-plan")
                reset = None
            if reset is not None and not _reset(scenario, servers, ns, src, reset, noted, config, path, env, result,
                                                watch):
                break
        else:
            if scenario.verify and result.status == "pass":
                verify_at_the_end(path, env, result, result.ways_out.unmet(scenario.target_names_at(2)))
    finally:
        backwards = watch.finish()
    if backwards and result.status == "pass":
        result.status, result.details = "checkpoint_back", result.details + backwards[:3]


def _segment(scenario: Scenario, servers: Servers, ns: str, src, path: Path, env: dict, transactions, faults,
             result: Outcome, number: int, watch: CheckpointWatch) -> bool:
    """Writes and faults, then a quiet point: the writer done, `sync --until-caught-up`, the oracle; with a
    savepoint in the segment, then its rollback, checked against the state it tagged, and a sync to the source."""
    server = servers.mariadb if scenario.source == MYSQL else servers.postgres
    savepoint = next((f for f in faults if f.kind == SAVEPOINT), None)
    replanned = result.ways_out.replanned  # a re-plan in this segment voids its savepoint
    tagged = None
    if savepoint is not None and savepoint.point == "before_writes":
        tagged = _savepoint_before_writes(scenario, ns, src, path, env, savepoint, result)
        if tagged is None:
            return False
    writer = _writer(scenario, server, ns, transactions)
    writer.start()
    try:
        applied = True
        for fault in (f for f in faults if f.point != "before_writes"):
            applied = applied and _apply(fault, path, env, result, servers)
            if applied and fault is savepoint:  # on_stop: the target as the savepoint left it, before other faults
                applied = _savepoint_taken(scenario, savepoint, path, env, result)
                tagged = _target_texts(scenario, servers, ns)
        result.timing.append(f"segment {number}: its faults ended after {writer.done} of {len(transactions)} "
                             "transactions")
    finally:
        writer.join()
    if any(f.kind == RESTART for f in faults):
        src.reopen()
        restarted = [i for i, f in enumerate(result.faults) if f.startswith(f"{RESTART}(")]
        if writer.retried and restarted:
            result.faults[restarted[-1]] += f" (the application ran {writer.retried} transactions again)"
    if not applied or _failed(writer, result) or not _add_tables(scenario, transactions, path, env, result):
        return False
    if not _synced(f"sync at quiet point {number}", path, env, result):
        return False
    _oracle(scenario, servers, ns, src, result, f"quiet point {number}", number)
    if savepoint is None or result.status != "pass":
        return result.status == "pass"
    if result.ways_out.replanned > replanned:
        result.faults.append(f"{savepoint.describe()} rollback voided by the re-plan")
        return True
    with watch.rewinding():
        if not _rollback_to(savepoint, path, env, result):
            return False
    return _after_rollback(scenario, servers, ns, src, path, env, savepoint, tagged, result, number)


def _add_tables(scenario: Scenario, transactions, path: Path, env: dict, result: Outcome) -> bool:
    """The tables the segment created, added to source.tables as an operator adds them to a running task; the
    snapshot plans and reads them, and the sync that follows joins them from their own low watermarks."""
    added = added_tables(scenario.changes, transactions, scenario.source, scenario.namespace)
    if not added:
        return True
    result.ways_out.add_tables(added)
    result.faults.append(f"add_tables({', '.join(added)}) applied")
    return _step(f"snapshot of the added {', '.join(added)}", outcome(run_cli(path, env, "snapshot")), result,
                 again=lambda: run_cli(path, env, "snapshot"))


def _reset(scenario: Scenario, servers: Servers, ns: str, src, fault, noted: list[dict], config, path: Path,
           env: dict, result: Outcome, watch: CheckpointWatch) -> bool:
    """The reset at a quiet point (rewind.py), then a sync and the oracle: a replay ends equal too."""
    status, wrong = reset_at_quiet_point(fault, noted, config, path, env, result, watch)
    if wrong:
        result.status = status
        result.details.append(wrong)
        return False
    if not _synced(f"sync after {fault.describe()}", path, env, result):
        return False
    _oracle(scenario, servers, ns, src, result, f"quiet point {fault.nth} after {fault.describe()}")
    return result.status == "pass"


def _savepoint_before_writes(scenario: Scenario, ns: str, src, path: Path, env: dict, savepoint,
                             result: Outcome) -> dict | None:
    """Caught up with the source quiet, then the savepoint: the state to return to is the source's as it is now."""
    if not _synced("sync before the savepoint", path, env, result):
        return None
    status = outcome(run_cli(path, env, "savepoint", "create", savepoint_name(savepoint)))
    result.faults.append(f"{savepoint.describe()} {status[0]}")
    if not _step(savepoint.describe(), status, result):
        return None
    state = {t.name: texts(src, scenario.source, ns, t) for t in scenario.tables}
    return {target.name: state for target in scenario.targets}


def _savepoint_taken(scenario: Scenario, savepoint, path: Path, env: dict, result: Outcome) -> bool:
    """A SIGTERM that lands before the sync holds the task's lease ends it at once, without the savepoint: then
    `sync --until-caught-up --savepoint-on-stop` with the application still writing (a savepoint needs a checkpoint,
    which the segment's first sync may not have written yet), so the segment has its savepoint all the same."""
    name = savepoint_name(savepoint)
    listing = run_cli(path, env, "savepoint", "list")
    out, _ = listing.communicate(timeout=300)
    if listing.returncode != 0:
        return _step("savepoint list", ("stopped", out[-3000:]), result)
    if out.count(f"{name}: epoch") == len(scenario.targets):  # on every target
        return True
    result.faults[-1] += " (stopped before the lease: taken when caught up)"
    return _synced(f"sync --until-caught-up --savepoint-on-stop {name}", path, env, result, "--savepoint-on-stop",
                   name)


def _rollback_to(savepoint, path: Path, env: dict, result: Outcome) -> bool:
    name = savepoint_name(savepoint)
    return _step(f"savepoint rollback {name}", outcome(run_cli(path, env, "savepoint", "rollback", name)), result)


def _after_rollback(scenario: Scenario, servers: Servers, ns: str, src, path: Path, env: dict, savepoint,
                    tagged: dict, result: Outcome, number: int) -> bool:
    """docs/operations/savepoints.md: the rollback returns the target to the tagged state; a sync then converges."""
    name = savepoint_name(savepoint)
    now = _target_texts(scenario, servers, ns)
    for target in scenario.targets:
        for table in scenario.tables:
            diff = differences(tagged[target.name][table.name], now[target.name][table.name],
                               names=("target", "savepoint"))
            if diff:
                result.status = "divergence"
                result.details += [f"after the rollback to {name}, {_on(scenario, target)}{table.name}: {d}"
                                   for d in diff]
    if result.status != "pass":
        return False
    if not _synced(f"sync after the rollback to {name}", path, env, result):
        return False
    _oracle(scenario, servers, ns, src, result, f"quiet point {number} after the rollback")
    return result.status == "pass"


def _target_texts(scenario: Scenario, servers: Servers, ns: str, tables=None, names=None, renamed=None) -> dict:
    """Each target's tables' rows: {target name: {table name: rows}}; `names`: per table, the name a column has
    on the target (WaysOut.on_the_target); `renamed`: the target table of a source table, where its name differs
    (WaysOut.target_tables)."""
    out, renamed = {}, renamed or {}
    for target in scenario.targets:
        tgt = target.connect(servers, ns)
        try:
            out[target.name] = {t.name: texts(tgt, target.engine, ns, replace(t, name=renamed.get(t.name, t.name)),
                                              (names or {}).get(t.name))
                                for t in tables or scenario.tables}
        finally:
            tgt.close()
    return out


def _snapshot(scenario: Scenario, config, path: Path, env: dict, servers: Servers, result: Outcome) -> None:
    faults = [f for f in scenario.faults if f.kind == "snapshot_crash_point"]
    if faults:
        if _apply(faults[0], path, env, result, servers):
            _step("snapshot after the kill", outcome(run_cli(path, env, "snapshot")), result)
        return
    rt = TaskRuntime(config)
    rt.adopt_spark(servers.spark)
    try:
        for tp in ensure_plans(rt):
            snapshot_splits(rt, tp.plan.table, [s.id for s in tp.plan.splits])
    except Exception as exc:  # noqa: BLE001 - a loud stop of the snapshot is an outcome, not a harness crash
        result.status, result.details = "stopped", [f"snapshot: {type(exc).__name__}: {exc}"]
    finally:
        rt.close()


def _writer(scenario: Scenario, server, ns: str, transactions) -> Writer:
    """The application writing `transactions`; when the scenario restarts the source, one that retries."""
    ledger = f"{q(scenario.source, ns)}.{q(scenario.source, LEDGER)}" if _restarts(scenario) else ""
    return Writer(lambda: server.connect(ns), [renamed(tx, scenario.namespace, ns) for tx in transactions],
                  scenario.session, ledger=ledger)


def _restarts(scenario: Scenario) -> bool:
    return any(f.kind == RESTART for f in scenario.faults)


def _apply(fault, path: Path, env: dict, result: Outcome, servers: Servers) -> bool:
    if fault.kind == REPLAN:
        time.sleep(fault.delay)
        wrong = result.ways_out.replan()
        result.faults.append(f"{fault.describe()} {'stopped' if wrong else 'applied'}")
        return _step(fault.describe(), ("stopped", wrong) if wrong else ("passed", ""), result)
    kind = FAULTS[fault.kind]
    status, out = kind.apply(fault, path, env, servers) if fault.kind in AWAY else kind.apply(fault, path, env)
    left = " (the others went on without it)" if fault.kind in AWAY and OUT_OF_SESSION.search(out) else ""
    left += " (it reconnected)" if fault.kind in AWAY and "; reconnecting in " in out else ""
    result.faults.append(f"{fault.describe()} {status}{left}" + (f": {out[:200]}" if status == "gave_up" else ""))
    return _step(fault.describe(), (status, out), result)


def _synced(what: str, path: Path, env: dict, result: Outcome, *more: str) -> bool:
    """`sync --until-caught-up` (and `more`) as a step: after a way out, it runs again."""
    command = ("sync", "--until-caught-up", *more)
    return _step(what, outcome(run_cli(path, env, *command)), result, again=lambda: run_cli(path, env, *command))


def _step(what: str, status_out: tuple[str, str], result: Outcome, again=None) -> bool:
    """Did the step end as a fault may end it? A schema change's documented stop has its way out applied, then
    the step runs `again` (without it, the scenario goes on)."""
    status, out = status_out
    for _ in range(8):
        if status in ("killed", "passed", "terminated", "gave_up"):
            return True
        way, wrong = result.ways_out.apply(out) if status == "stopped" and result.ways_out else ("", "")
        if not way or wrong:
            out = f"{out}\nthe way out ({way}): {wrong}" if wrong else out
            break
        result.faults.append(f"way_out_{way}() applied after {what}")
        if again is None:
            return True
        status, out = outcome(again())
    result.status = "false_stop" if FALSE_STOP in out else "stopped"
    result.details.append(f"{what}: {status}: " + out.strip()[-1500:])
    return False


def _failed(writer: Writer, result: Outcome) -> bool:
    if writer.error:
        result.status, result.details = "error", result.details + [writer.error]
    return bool(writer.error)


def _oracle(scenario: Scenario, servers: Servers, ns: str, src, result: Outcome, where: str,
            number: int = 2) -> None:
    """Every target equal to the source, row by row, in the columns the source has at quiet point `number` less
    those the docs say the target does not get (yet), each under the name the target has it by."""
    compared, names, renamed = scenario.tables_at(number), {}, {}
    if result.ways_out:
        compared, names, lacking = result.ways_out.on_the_target(compared, scenario.target_names_at(number))
        renamed = result.ways_out.target_tables()
        result.status = "divergence" if lacking else result.status
        result.details += [f"{where}, {line}" for line in lacking]
    source = {t.name: texts(src, scenario.source, ns, t) for t in compared}
    for target, tables in _target_texts(scenario, servers, ns, compared, names, renamed).items():
        for table in compared:
            diff = differences(source[table.name], tables[table.name])
            if diff:
                result.status = "divergence"
                on = f"target {target}, " if len(scenario.targets) > 1 else ""  # `target` is its name here
                result.details += [f"{where}, {on}{table.name}: {d}" for d in diff]


def _on(scenario: Scenario, target) -> str:
    return f"target {target.name}, " if len(scenario.targets) > 1 else ""


def _cleanup(scenario: Scenario, servers: Servers, ns: str, passed: bool) -> None:
    """Drops the task's slot (it holds WAL) and, after a pass, the MySQL databases."""
    conn = servers.postgres.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name LIKE %s AND NOT active", (f"%{ns}%",))
    conn.close()
    if passed:
        for server in (servers.mariadb, servers.mysql_target):
            mine = server.connect()
            with mine.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{ns}`")
            mine.close()
