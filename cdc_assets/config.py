"""The task config: YAML (with `${VAR}` from the environment) -> validated pydantic models.

Relative paths are resolved against the config file's folder, so `dagster dev`, the CLI and tests
agree whatever their working directory.
"""
from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from cdc_assets.config_sections import (DEBIAN_JARS, DbResumer, LogResumer, ReadLimit, ResumerConfig,
                                        RuntimeConfig, SnapshotConfig, SparkConfig, SqliteResumer, StartPosition,
                                        TargetResumer, VerifyConfig, _Model)
from cdc_assets.core.tables import TableId
from cdc_assets.config_text import describe, expand, redacted, secrets_in_raw, secrets_in_text, yaml_error
from cdc_assets.core.urls import DbUrl, mask
from cdc_assets.dbapi.mysql_login import MysqlLogin
from cdc_assets.errors import ConfigError

CONFIG_ENV = "CDC_ASSETS_CONFIG"


class _Endpoint(_Model):
    db_type: Literal["mysql", "postgres"]
    """The engine: `mysql` (MySQL and MariaDB) or `postgres`."""
    url: str
    """`mysql://user:pw@host:port` or `postgresql://user:pw@host:port/database`; `${VAR}` is read from the environment.
    Passwords never appear in logs, errors or metadata."""

    @property
    def db_url(self) -> DbUrl:
        return DbUrl.parse(self.url)

    @model_validator(mode="after")
    def _url_matches_type(self) -> "_Endpoint":
        parsed = DbUrl.parse(self.url)
        if parsed.db_type != self.db_type:
            raise ValueError(f"url {mask(self.url)} is a {parsed.db_type} URL but db_type is {self.db_type}")
        if parsed.db_type == "mysql":
            MysqlLogin.from_url(parsed)  # TLS parameters checked before anything connects
        return self


_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9_$]+\.[A-Za-z0-9_$]+$")


class CollectionConfig(_Model):
    """One captured MongoDB collection: its declared top-level fields ({name: kind}), or none for the whole
    document as JSON with an `_id` of `id_kind`. Kinds are checked by the source (sources/mongodb/collections.py)."""

    fields: dict[str, str] | None = None
    """Declared top-level fields, `{name: kind}`, one column each; `_id` among them. None: the whole document as one
    JSON column."""
    id_kind: str | None = None
    """For a collection taken whole: the kind of its `_id` (`objectid` when not given; `json` for mixed types)."""

    @model_validator(mode="after")
    def _fields_or_id_kind(self) -> "CollectionConfig":
        if self.fields is not None and self.id_kind is not None:
            raise ValueError("id_kind is for collections captured whole: declare _id among the fields instead")
        if self.fields is not None and "_id" not in self.fields:
            raise ValueError("the fields do not declare _id: add it with its kind, e.g. _id: objectid")
        return self

    def raw(self) -> dict:
        return self.model_dump(exclude_none=True)


class SourceConfig(_Endpoint):
    """`tables` for MySQL/PostgreSQL; `collections` for MongoDB, each `database.collection` the task's table of that
    name (namespace = the database), keyed by `_id`."""

    db_type: Literal["mysql", "postgres", "mongo"]
    """The source engine: `mysql` (MySQL and MariaDB), `postgres` or `mongo`."""
    tables: list[str] = []
    """Captured tables, `database.table` (MySQL) or `schema.table` (PostgreSQL); a MySQL database maps to a PostgreSQL
    schema of the same name and back."""
    collections: dict[str, CollectionConfig | None] = {}
    """For a `mongo` source instead of `tables`: `database.collection` with its declared fields
    (docs/connectors/mongodb.md)."""
    # For tables without a primary key: the column (unique, not null) to split and upsert on.
    split_columns: dict[str, str] = {}
    """`{table: column}` for tables without a primary key: a NOT NULL column with a unique index."""
    # Columns left out of the snapshot and the log, e.g. of a type with no mapping: {table: [column, ...]}.
    exclude_columns: dict[str, list[str]] = {}
    """`{table: [column, ...]}`: columns neither created on the target nor read nor applied, e.g. of a type with no
    mapping. A key column cannot be excluded."""

    @field_validator("tables")
    @classmethod
    def _tables_are_qualified(cls, tables: list[str]) -> list[str]:
        for name in tables:
            TableId.parse(name)
        if len(set(tables)) != len(tables):
            raise ValueError("a table is listed twice")
        return tables

    @field_validator("collections")
    @classmethod
    def _collections_are_qualified(cls, collections: dict) -> dict:
        for name in collections:
            if not _COLLECTION_NAME.match(name):
                raise ValueError(f"collection '{name}' is not of the form database.collection (letters, digits, _ "
                                 "and $ in each, as it becomes a SQL table name)")
        return collections

    @model_validator(mode="after")
    def _tables_or_collections(self) -> "SourceConfig":
        if self.db_type == "mongo":
            if self.tables:
                raise ValueError("a mongodb source lists its collections in source.collections, not source.tables")
            if not self.collections:
                raise ValueError("source.collections is empty: name each captured collection as database.collection")
            if self.split_columns:
                raise ValueError("source.split_columns does not apply to a mongodb source: collections split on _id")
        elif self.collections:
            raise ValueError(f"source.collections is for mongodb sources; a {self.db_type} source lists source.tables")
        elif not self.tables:
            raise ValueError("source.tables is empty: name each captured table as database.table or schema.table")
        return self

    @property
    def names(self) -> list[str]:
        """The captured tables' names as written: `tables`, or a MongoDB source's `collections`."""
        return list(self.collections) if self.db_type == "mongo" else self.tables

    @property
    def table_ids(self) -> list[TableId]:
        return [TableId.parse(t) for t in self.names]

    @property
    def engine_options(self) -> dict:
        """What the source's constructor takes beyond its URL (registry.py): a MongoDB source's collections."""
        if self.db_type != "mongo":
            return {}
        return {"collections": {name: spec.raw() if spec else None for name, spec in self.collections.items()}}


class PipelineConfig(_Model):
    """The incremental phase: batching, checkpoints, delivery guarantee, where to start, and DDL."""

    checkpoint_after_events: int = Field(1000, ge=1)
    """A batch ends (always at a transaction end) after this many row changes."""
    checkpoint_interval_secs: float = Field(10.0, gt=0)
    """A batch ends (always at a transaction end) after this many seconds."""
    # A batch ends once the reader has nothing read ahead and this long has passed since the previous batch: a
    # followed log is committed as it comes, a backlog still fills batches (engine/lane.py, Lane.step).
    max_batch_delay_ms: float = Field(20.0, ge=0)
    """A batch also ends once the reader has nothing more read ahead and this long has passed since the previous batch.
"""
    # A batch whose target apply and commit take longer is reported with its figures (SeaTunnel's checkpoint.timeout).
    checkpoint_timeout_secs: float = Field(60.0, gt=0)
    """A batch whose target apply and commit take longer is reported with its figures and what to tune
    (docs/operations/checkpoint-timeout.md)."""
    # A transaction with more row changes than this is read and applied in parts of this size, inside one
    # target transaction: memory stays bounded whatever the transaction's size.
    transaction_part_events: int = Field(5000, ge=1)
    """A transaction with more row changes is read and applied in parts of this many, inside one target transaction."""
    exactly_once: bool = False
    """false: at-least-once, the upsert makes the final state exact. true: no row version committed twice; needs
    `from_target` positions and a MySQL/MariaDB source (docs/concepts/exactly-once.md)."""
    startup_mode: Literal["initial", "latest", "earliest", "timestamp", "position"] = "initial"
    """Where to start when no checkpoint exists: `initial` (snapshot, then log), `latest` (the log end now), `earliest`
    (the oldest log position kept), `timestamp` (`start_timestamp`), `position` (`start_position`)."""
    start_timestamp: datetime | None = None  # startup_mode=timestamp; naive values are UTC
    """With `startup_mode: timestamp` (MySQL and MongoDB): ISO 8601, UTC unless an offset is given."""
    start_position: StartPosition | None = None  # startup_mode=position
    """With `startup_mode: position`: a binlog file/offset or an LSN."""
    schema_change_policy: Literal["halt", "apply_add_columns", "ignore"] = "halt"
    """DDL on a captured table mid-stream: `halt` stops the run, `apply_add_columns` adds added columns to the
    target, `ignore` goes on past DDL that leaves the captured columns' values whole (added columns left out). A
    retyped column is followed under every policy once the target's column holds it; see
    docs/concepts/log-phase.md, "Schema changes"."""
    # With several targets: which acknowledgements move the task's checkpoint (DeltaForge's commit policy).
    commit_policy: str = Field("all", pattern=r"^(all|required|quorum\([1-9][0-9]*\))$")
    """With several targets, which must acknowledge: `all`, `required` (those with `required: true`), `quorum(N)`."""
    max_retries: int = Field(5, ge=0)  # an unreachable source or target, before the run fails
    """How often an unreachable source or target is retried before the run fails."""
    retry_backoff_secs: float = Field(1.0, gt=0)  # doubled at each retry
    """The first wait between retries, doubled at each retry."""
    read_limit: ReadLimit = ReadLimit()  # events and estimated bytes a second, paced after each batch's checkpoint
    """The most the log phase applies, in row changes and estimated bytes a second since the sync started."""

    @model_validator(mode="after")
    def _start_given(self) -> "PipelineConfig":
        if self.startup_mode == "timestamp" and self.start_timestamp is None:
            raise ValueError("startup_mode timestamp needs start_timestamp (ISO 8601, UTC unless an offset is given)")
        if self.startup_mode == "position" and self.start_position is None:
            raise ValueError("startup_mode position needs start_position")
        return self


class TargetConfig(_Endpoint):
    """One target. A task's targets share its snapshot reads and its log; each keeps its own finished markers and
    checkpoint. `required`: must acknowledge under `pipeline.commit_policy: required` (else it may fail without
    blocking the others). `resumer`: where its positions live, when not where the task's `resumer` says."""

    db_type: Literal["mysql", "postgres", "mongo"]  # a MongoDB target: sinks/mongodb
    """The target engine: `mysql` (MySQL and MariaDB), `postgres` or `mongo`."""
    name: str = Field("target", pattern=r"^[A-Za-z][A-Za-z0-9_]{0,30}$")
    """The target's name in positions, metadata and logs (`<task_id>.<name>` keys for all but the first)."""
    required: bool = True
    """Must acknowledge under `pipeline.commit_policy: required`."""
    resumer: ResumerConfig | None = None
    """Where this target's positions live, when not where the task's `resumer` says."""


_POLICY = re.compile(r"^(all|required|quorum\((\d+)\))$")


class TaskConfig(_Model):
    task_id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
    """Names the task in positions, asset keys (`<task_id>/<db>/<table>`), groups, sensors and jobs."""
    source: SourceConfig
    """The source database and its captured tables."""
    targets: list[TargetConfig]
    """The targets; `target:` (one) is read as a list of one (docs/operations/several-targets.md)."""
    snapshot: SnapshotConfig = SnapshotConfig()
    """The snapshot phase."""
    resumer: ResumerConfig = SqliteResumer()
    """Where positions live (docs/concepts/positions.md)."""
    pipeline: PipelineConfig = PipelineConfig()
    """The incremental (log) phase."""
    runtime: RuntimeConfig = RuntimeConfig()
    """Local folders."""
    spark: SparkConfig = SparkConfig()
    """The Spark session of the snapshot."""
    verify: VerifyConfig = VerifyConfig()
    """Verification always on, and its repair (docs/operations/verify.md)."""

    @model_validator(mode="before")
    @classmethod
    def _target_is_a_list_of_one(cls, raw):
        if isinstance(raw, dict) and "target" in raw:
            if "targets" in raw:
                raise ValueError("give either target (one) or targets (a list), not both")
            raw = {**raw, "targets": [raw["target"]]}
            del raw["target"]
        return raw

    @property
    def target(self) -> TargetConfig:
        """The first target: it keeps the task's own position keys, so a task that gains targets keeps its
        positions (engine/runtime.py, `TaskRuntime.lanes`)."""
        return self.targets[0]

    @model_validator(mode="after")
    def _targets_fit_the_policy(self) -> "TaskConfig":
        if not self.targets:
            raise ValueError("targets is empty: name at least one target")
        names = [t.name for t in self.targets]
        if len(set(names)) != len(names):
            raise ValueError(f"targets: each needs a name of its own (names: {names})")
        urls = [str(t.db_url) for t in self.targets]  # masked: equal servers and databases
        if len(set(urls)) != len(urls):
            raise ValueError("targets: two targets have the same url; each target is a database of its own")
        policy = self.pipeline.commit_policy
        if policy == "required" and not any(t.required for t in self.targets):
            raise ValueError("pipeline.commit_policy required: no target is required (required: true)")
        quorum = _POLICY.match(policy).group(2)
        if quorum is not None and int(quorum) > len(self.targets):
            raise ValueError(f"pipeline.commit_policy {policy}: the task has only {len(self.targets)} targets")
        for t in self.targets[1:]:
            if self.pipeline.exactly_once and not isinstance(t.resumer or self.resumer, TargetResumer):
                raise ValueError(f"pipeline.exactly_once needs each target's positions in that target: target "
                                 f"{t.name} has resume_type {(t.resumer or self.resumer).resume_type}")
        return self

    @model_validator(mode="after")
    def _split_columns_name_tables(self) -> "TaskConfig":
        unknown = set(self.source.split_columns) - set(self.source.tables)
        if unknown:
            raise ValueError(f"source.split_columns names tables not in source.tables: {sorted(unknown)}")
        unknown = set(self.source.exclude_columns) - set(self.source.names)
        if unknown:
            listed = "source.collections" if self.source.db_type == "mongo" else "source.tables"
            raise ValueError(f"source.exclude_columns names tables not in {listed}: {sorted(unknown)}")
        if self.pipeline.exactly_once and not isinstance(self.target.resumer or self.resumer, TargetResumer):
            raise ValueError("pipeline.exactly_once needs resumer.resume_type: from_target, so that each batch and "
                             "its checkpoint commit in one target transaction")
        if self.pipeline.exactly_once and self.source.db_type == "postgres":
            raise ValueError("pipeline.exactly_once is available for MySQL/MariaDB sources only: the backfill of a "
                             "split would have to read the task's replication slot during the snapshot, and psycopg2 "
                             "may confirm an idle slot past changes not yet applied; use at-least-once (the upsert "
                             "makes the final state exact)")
        if self.source.db_type == "mongo" and self.pipeline.exactly_once:
            raise ValueError("pipeline.exactly_once is not available for MongoDB sources yet: its backfill path has "
                             "never run against a replica set; use at-least-once (the upsert makes the final state "
                             "exact)")
        start = self.pipeline.start_position
        if start is not None and self.source.db_type == "mongo":
            raise ValueError("pipeline.start_position does not fit a mongodb source (it holds a binlog coordinate "
                             "or an LSN); start a MongoDB task at a time with startup_mode timestamp")
        if start is not None and (start.lsn is not None) != (self.source.db_type == "postgres"):
            raise ValueError(f"pipeline.start_position does not fit a {self.source.db_type} source")
        if self.pipeline.startup_mode == "timestamp" and self.source.db_type == "postgres":
            raise ValueError("startup_mode timestamp is not possible for PostgreSQL: WAL records carry no time "
                             "before their commit and a slot cannot be moved back; use latest, or position with an LSN")
        return self

    @property
    def data_dir(self) -> Path:
        return self.runtime.data_dir

    @property
    def log_dir(self) -> Path:
        return self.runtime.log_dir or self.runtime.data_dir / "logs"


def load_config(path: str | os.PathLike | None = None) -> TaskConfig:
    """Read, expand and validate a config file; `path` defaults to $CDC_ASSETS_CONFIG."""
    path = path or os.environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError("no config file given", f"pass --config FILE or set {CONFIG_ENV}")
    file = Path(path).expanduser().resolve()
    if file.is_dir():  # a folder of task files is for the Dagster code location; a command works on one task
        raise ConfigError(f"{file} is a folder; this needs one task file",
                          f"pass --config {file}/<task file>.yaml")
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {file} does not exist", f"check the path or {CONFIG_ENV}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {file} cannot be read ({type(exc).__name__})", "check the file") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise redacted(yaml_error(file, exc), secrets_in_text(text)) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {file} must hold a mapping at the top level")
    return parse_config(raw, base_dir=file.parent)


def parse_config(raw: dict, base_dir: Path) -> TaskConfig:
    """Errors never show a credential of `raw` (config_text.py)."""
    try:
        config = TaskConfig.model_validate(expand(raw, ""))
    except ValidationError as exc:
        raise redacted(ConfigError(describe(exc), "fix the key named above; see docs/reference/config.md"),
                       secrets_in_raw(raw)) from None
    except ConfigError as exc:  # a validator's (a URL that does not parse), or an unset ${VAR}
        raise redacted(exc, secrets_in_raw(raw)) from None
    return _resolve_paths(config, base_dir)


def _resolve_paths(config: TaskConfig, base_dir: Path) -> TaskConfig:
    def resolve(p: Path | None) -> Path | None:
        return None if p is None else (p if p.is_absolute() else (base_dir / p).resolve())

    runtime = config.runtime.model_copy(
        update={"data_dir": resolve(config.runtime.data_dir), "log_dir": resolve(config.runtime.log_dir)}
    )
    resumer = config.resumer
    if isinstance(resumer, SqliteResumer) and resumer.path is not None:
        resumer = resumer.model_copy(update={"path": resolve(resumer.path)})
    if isinstance(resumer, LogResumer) and resumer.log_dir is not None:
        resumer = resumer.model_copy(update={"log_dir": resolve(resumer.log_dir)})
    return config.model_copy(update={"runtime": runtime, "resumer": resumer})
