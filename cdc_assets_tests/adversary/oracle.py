"""The oracle: the target holds the source's rows exactly, compared per column as each server renders it as
text and then canonicalised by the column kind's documented rule; and the checkpoint never moves back."""
from __future__ import annotations

import threading
from contextlib import contextmanager

from cdc_assets.core.positions import compare
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets_tests.adversary.kinds import MYSQL, MYSQL_TEXT, PG_TEXT
from cdc_assets_tests.adversary.schema import Table, q

Rows = dict[tuple, dict[str, object]]


def texts(conn, engine: str, namespace: str, table: Table, names: dict[str, str] | None = None) -> Rows:
    """Every row of `table` by its key's text: each column's text, canonicalised by its kind; `names`: the name a
    column has on this server where it differs (a rename the target has not met yet)."""
    key_text = MYSQL_TEXT if engine == MYSQL else PG_TEXT
    keys = [key_text.format(c=q(engine, c)) for c in table.key_columns]
    kinds = table.kinds()
    values = [k.text[engine].format(c=q(engine, (names or {}).get(c, c))) for c, k in kinds]
    with conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(keys + values)} FROM {q(engine, namespace)}.{q(engine, table.name)}")
        rows = cur.fetchall()
    n = len(keys)
    return {tuple(r[:n]): {c: None if v is None else k.canon(v) for (c, k), v in zip(kinds, r[n:])} for r in rows}


def columns_of(conn, namespace: str, table: Table) -> set[str]:
    """The columns `table` has on a server (both engines answer information_schema alike)."""
    with conn.cursor() as cur:
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                    (namespace, table.name))
        return {r[0] for r in cur.fetchall()}


def differences(source: Rows, target: Rows, limit: int = 5, names: tuple[str, str] = ("target", "source")) -> list[str]:
    """Each differing row, at most `limit`: missing, extra, or the columns whose text differs; `names`: what
    `target` and `source` are called in the lines."""
    out = []
    for key in sorted(source.keys() | target.keys(), key=repr):
        want, got = source.get(key), target.get(key)
        if want == got:
            continue
        if got is None:
            out.append(f"key {key}: missing from the {names[0]}")
        elif want is None:
            out.append(f"key {key}: in the {names[0]} only")
        else:
            cols = [f"{c}: {names[0]} {short(got[c])}, {names[1]} {short(want[c])}" for c in want if want[c] != got[c]]
            out.append(f"key {key}: " + "; ".join(cols))
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:50] + "..."


def checkpoints(config) -> dict[str, object]:
    """Each target's checkpoint position by target name (a target without one left out)."""
    rt = TaskRuntime(config)
    try:
        found = {lane.name: lane.resumer.checkpoint() for lane in rt.lanes}
    finally:
        rt.close()
    return {name: c.position for name, c in found.items() if c is not None}


class CheckpointWatch(threading.Thread):
    """Polls each target's checkpoint; records any move back to an earlier position."""

    def __init__(self, config, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.config, self.interval = config, interval
        self.stop = threading.Event()
        self.backwards: list[str] = []
        self.seen = 0
        self.last: dict[str, object] = {}  # target name -> the position polled last
        self.lock = threading.Lock()

    def run(self) -> None:
        rt = TaskRuntime(self.config)
        try:
            while not self.stop.wait(self.interval):
                with self.lock:
                    self._poll(rt)
        finally:
            rt.close()

    def _poll(self, rt: TaskRuntime) -> None:
        for lane in rt.lanes:
            try:
                checkpoint = lane.resumer.checkpoint()
            except Exception:  # noqa: BLE001 - the store is being created or locked, the target away: read later
                lane.reconnect()
                continue
            if checkpoint is None:
                continue
            self.seen += 1
            last = self.last.get(lane.name)
            if last is not None and compare(checkpoint.position, last) < 0:
                on = f" of target {lane.name}" if len(rt.lanes) > 1 else ""
                self.backwards.append(f"checkpoint{on} moved back from {last} to {checkpoint.position}")
            self.last[lane.name] = checkpoint.position

    @contextmanager
    def rewinding(self):
        """A savepoint rollback or a reset moves checkpoints back by design: not polled meanwhile, counted afresh
        after."""
        with self.lock:
            yield
            self.last = {}

    def finish(self) -> list[str]:
        self.stop.set()
        self.join(10)
        return self.backwards

