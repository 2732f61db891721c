"""The task config's sections that stand on their own: the snapshot, the resumer, the runtime folders, Spark and
verification (config.py holds the endpoints, the log phase and the task that composes them)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEBIAN_JARS = ("/usr/share/java/mariadb-java-client.jar", "/usr/share/java/postgresql.jar")


class _Model(BaseModel):
    # Each field's docstring is its description: docs/reference/config.md is generated from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ReadLimit(_Model):
    """SeaTunnel's read limits: rows (or log events) and bytes a second, each None for no limit (the default).
    What a byte is depends on where rows are counted: docs/operations/read-limits.md."""

    rows_per_second: int | None = Field(None, ge=1)
    """The most rows (log phase: row changes) a second; none: no limit."""
    bytes_per_second: int | None = Field(None, ge=1)
    """The most bytes a second, counted where the rows are (docs/operations/read-limits.md); none: no limit."""


class SnapshotConfig(_Model):
    split_size: int = Field(100_000, ge=1)
    """Rows per split."""
    partitions_per_run: int = Field(16, ge=1)
    """Splits per run in a Dagster backfill and in `cdc-assets snapshot`."""
    fetch_size: int = Field(10_000, ge=1)
    """JDBC fetch size of the snapshot reads."""
    write_batch_size: int = Field(50_000, ge=1)
    """Rows per JDBC batch of a MySQL target's staging writes."""
    split_lock_timeout_secs: float = Field(600.0, ge=0)  # how long a run waits for a split another run holds
    """How long a run waits for a split another run is reading, before it skips (finished) or fails."""
    read_limit: ReadLimit = ReadLimit()  # the aggregate of all Spark tasks of a group of splits
    """The most a snapshot reads, all Spark tasks of a group of splits together (docs/operations/read-limits.md)."""
    # A PostgreSQL target's splits piped from the source's own client into the staging COPY in Python tasks
    # (docs/concepts/snapshot.md); false: every read through Spark JDBC, for executors without psycopg2/mysqlclient.
    pipe: bool = True
    """A PostgreSQL target's splits from a PostgreSQL or MariaDB source piped by the source's own client in Spark's
    Python tasks; false: every split through Spark JDBC."""


class StartPosition(_Model):
    """An explicit start: a binlog file/offset (optionally its GTID set) or a PostgreSQL LSN."""

    binlog_filename: str | None = None
    """MySQL: the binlog file to start in."""
    next_event_position: int | None = Field(None, ge=4)
    """MySQL: the offset of an event boundary in that file."""
    gtid_set: str = ""
    """MySQL: the GTID set executed at that position (optional)."""
    lsn: str | None = Field(None, pattern=r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$")
    """PostgreSQL: the LSN to start at, e.g. `0/16B3748`."""

    @model_validator(mode="after")
    def _one_kind(self) -> "StartPosition":
        binlog = self.binlog_filename is not None and self.next_event_position is not None
        if binlog == (self.lsn is not None):
            raise ValueError("give either binlog_filename + next_event_position (MySQL) or lsn (PostgreSQL)")
        return self


class SqliteResumer(_Model):
    resume_type: Literal["sqlite"] = "sqlite"
    """Positions in a SQLite file (WAL mode: several runs may write at once)."""
    path: Path | None = None  # default: <runtime.data_dir>/positions.sqlite
    """The SQLite file; default `<runtime.data_dir>/positions.sqlite`."""


class TargetResumer(_Model):
    resume_type: Literal["from_target"]
    """Positions in the target; finished markers and checkpoints commit in the same transaction as the rows."""
    table_full_name: str = "cdc_assets_meta.task_position"
    """The position table in the target."""


class DbResumer(_Model):
    resume_type: Literal["from_db"]
    """Positions in a named MySQL or PostgreSQL database."""
    db_type: Literal["mysql", "postgres"]
    """That database's engine."""
    url: str
    """That database's URL (password masked wherever shown)."""
    table_full_name: str = "cdc_assets_meta.task_position"
    """The position table there."""


class LogResumer(_Model):
    resume_type: Literal["from_log"]
    """Positions in `position.log` and `finished.log` alone."""
    log_dir: Path | None = None  # default: runtime.log_dir
    """Where the two files are; default `runtime.log_dir`."""


ResumerConfig = Annotated[
    Union[SqliteResumer, TargetResumer, DbResumer, LogResumer], Field(discriminator="resume_type")
]


class RuntimeConfig(_Model):
    data_dir: Path = Path(".cdc")
    """Plans, the SQLite position table, the CLI's default Dagster home."""
    log_dir: Path | None = None  # default: <data_dir>/logs
    """`position.log`, `finished.log` and `spark.log`; default `<data_dir>/logs`."""


class SparkConfig(_Model):
    master: str = "local[*]"
    """`local[*]`, or a standalone master `spark://host:7077` (docs/operations/spark-cluster.md)."""
    conf: dict[str, str] = {}
    """Spark settings; `spark.remote: sc://host:port` attaches to a Spark Connect server (docs/operations/spark-
    connect.md). `spark.jars.packages` is refused."""
    jars: list[str] = list(DEBIAN_JARS)
    """JDBC driver jar files on the driver; default the Debian jars in /usr/share/java."""
    driver_memory: str = "2g"
    """The driver JVM's memory."""

    @field_validator("conf")
    @classmethod
    def _no_maven(cls, conf: dict[str, str]) -> dict[str, str]:
        if "spark.jars.packages" in conf:
            raise ValueError("spark.jars.packages downloads from Maven; list local jar files in spark.jars instead")
        remote = conf.get("spark.remote")
        if remote is not None and not remote.startswith("sc://"):
            raise ValueError(f"spark.remote must be a Spark Connect URL sc://host:port, not {remote!r}")
        if remote is None and conf.get("spark.api.mode", "").lower() == "connect":
            # pyspark would start a Connect server inside this process: a JVM per run, what spark.remote avoids.
            raise ValueError("spark.api.mode: connect needs spark.remote: sc://host:port, the long-lived server "
                             "runs attach to (docs/operations/spark-connect.md)")
        return conf


class VerifyConfig(_Model):
    every_secs: int = Field(0, ge=0)
    """Seconds between two ticks of the task's `<task_id>_verify` sensor, which verifies the splits proven equal
    longest ago (lock-free, as the `split_matches_source` check); 0: the sensor is not defined."""
    splits_per_tick: int = Field(4, ge=1)
    """Splits each tick of the sensor verifies."""
    rows_per_second: int = Field(0, ge=0)
    """The most rows per second verification reads on each side, paced split by split; 0: no limit."""
    repair: Literal["manual", "auto"] = "manual"
    """`auto`: the sensor materializes each split whose last verification failed (its repair), and the asset's
    checks verify it again in that run. `manual`: the UI's *Materialize* of the partition does."""
