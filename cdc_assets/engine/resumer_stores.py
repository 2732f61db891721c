"""A target's resumer over the position store its config names (`resume_type`: sqlite, from_target, from_db,
logfile), with position.log beside it."""
from __future__ import annotations

from cdc_assets.config import DbResumer, LogResumer, SqliteResumer, TargetConfig, TargetResumer, TaskConfig
from cdc_assets.core.urls import DbUrl
from cdc_assets.engine.registry import position_store_factory
from cdc_assets.resumer.logfile import PositionLog
from cdc_assets.resumer.resumer import Resumer
from cdc_assets.resumer.sqlite import SqlitePositionStore


def open_resumer(config: TaskConfig, target: TargetConfig, key: str) -> Resumer:
    """The resumer of `target` (its own resumer section, else the task's), keeping its records under `key`.
    A logfile resumer's store is its position.log, which then serves as the log too."""
    log = PositionLog(config.log_dir)
    r = target.resumer or config.resumer
    if isinstance(r, SqliteResumer):
        store = SqlitePositionStore(r.path or config.data_dir / "positions.sqlite")
    elif isinstance(r, TargetResumer):
        url = target.db_url
        store = position_store_factory(url.db_type)(url, r.table_full_name, "from_target")
    elif isinstance(r, DbResumer):
        url = DbUrl.parse(r.url, "resumer.url")
        store = position_store_factory(url.db_type)(url, r.table_full_name, "from_db")
    elif isinstance(r, LogResumer):
        store = log if r.log_dir is None else PositionLog(r.log_dir)
        log = store
    return Resumer(key, store, log, config.source.db_type)
