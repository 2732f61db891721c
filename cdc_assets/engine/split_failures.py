"""A group of splits that failed: in Spark, in the target's commit, or in one target the commit policy tolerates.
Each says one line where the run and the position records show it; the whole trace goes to errors.log."""
from __future__ import annotations

import logging
import traceback

from cdc_assets.core.fits import narrower
from cdc_assets.core.splits import Split
from cdc_assets.core.tables import TableId
from cdc_assets.engine.planning import describe
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.engine.target_down import one_line
from cdc_assets.errors import CdcError, TableError
from cdc_assets.resumer.records import now_text
from cdc_assets.resumer.resumer import SplitWatermarks
from cdc_assets.spark.errors import root_cause

log = logging.getLogger("cdc_assets.snapshot")
ERRORS_LOG = "errors.log"  # beside position.log: the full traces behind one-line split failures


def failed_target(rt: TaskRuntime, staged, splits: list[Split], marks: list[SplitWatermarks],
                   exc: Exception) -> str:
    """A target the policy tolerates failed its part of a group (`staged`: its side of the group): said, recorded where possible, not raised."""
    line = f"failed: {one_line(exc)}"
    log.warning("target %s: %s..%s of %s %s; the others go on", staged.lane.name, splits[0].id, splits[-1].id,
                splits[0].table, line)
    try:
        staged.lane.resumer.record_failed(marks, staged.reads, line)
    except Exception:  # its position store may be down with it
        staged.lane.reconnect_target()
    return line


class SplitFailed(CdcError):
    """Reading or staging a group of splits failed inside Spark, or a split is not finished for the commit policy;
    the message is the root cause in one line. Way out: fix the cause named, then materialize the split again."""


def split_failed(rt: TaskRuntime, splits: list[Split], marks: list[SplitWatermarks], reads: dict[str, int],
                 exc: Exception, where: str = "in Spark", detail: CdcError | None = None) -> SplitFailed:
    """One line for the CLI, the Dagster run and the position records; the whole trace to errors.log. `detail`:
    what the engine found out about the cause, after the database's message."""
    message, where = root_cause(exc, where)
    if detail is None and "commit" in where:
        detail = narrower_target(rt, splits[0].table)
    if detail is not None:
        message += f"; {detail.message} ({detail.hint})"
    ids = [s.id for s in splits]
    line = f"{ids[0]}..{ids[-1]} of {splits[0].table} failed {where}: {message}"
    rt.resumer.record_failed(marks, reads, line)
    log_dir = rt.config.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / ERRORS_LOG, "a", encoding="utf-8") as out:
        out.write(f"{now_text()} | {line}\n{''.join(traceback.format_exception(exc))}\n")
    return SplitFailed(line, f"fix the cause, then materialize the splits again; the trace is in {log_dir / ERRORS_LOG}")


def narrower_target(rt: TaskRuntime, table: TableId) -> CdcError | None:
    """Why a commit may have failed that the server's message does not say: target columns too narrow for the
    source's current definitions (a column the source widened or retyped since the target table was made).
    None when every column holds, or when the catalogs cannot be read now."""
    try:
        schema = describe(rt, table)
        capacities = rt.sink.column_capacities(table, fresh=True)
    except Exception:  # the failure is reported as the server said it, without this guess
        return None
    narrow = narrower(schema.columns, capacities)
    if not narrow:
        return None
    return TableError(
        f"target columns of {table} do not hold the source's current definitions: "
        + ", ".join(f"'{c.name}' is {capacities[c.name].type_text}, the source's {c.native}" for c in narrow),
        "; ".join(rt.sink.alter_column_sql(table, c, c.name in schema.primary_key) for c in narrow)
        + " (then materialize the splits again); or re-plan, which alters them: cdc-assets plan --replan")
