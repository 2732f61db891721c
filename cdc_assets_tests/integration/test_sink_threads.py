"""The log phase prepares the next batch on its own thread while the target applies the one before on another
(apply ahead): both reach the sink's catalog (what a column holds, a savepoint's shadow table), and a database
connection is not to be shared by two threads at once. Every catalog read and DDL of a sink goes through one
guard, so the two may meet without a broken protocol (pymysql: "Packet sequence number wrong")."""
import threading

from cdc_assets.core.tables import TableId
from cdc_assets.engine.runtime import TaskRuntime
from cdc_assets.sinks.before_images import BeforeImages
from cdc_assets_tests.support import config_for, source_database

ROUNDS = 300


def test_catalog_reads_from_two_threads_at_once(tmp_path, servers, mariadb_target):
    """MariaDB's client library (pymysql) has no lock of its own; psycopg's connections have one."""
    name = "sink_threads"
    with source_database(servers, "mysql", name, [f"CREATE TABLE {name}.t (id INT PRIMARY KEY, v VARCHAR(20))"]):
        config = config_for(tmp_path, servers, task_id=name, source="mysql", source_db=name,
                            tables=[f"{name}.t"], target="mysql", target_db="", target_server=mariadb_target)
        rt = TaskRuntime(config)
        try:
            sink, table = rt.sink, TableId(name, "t")
            with sink.catalog() as cur:  # the target table the snapshot would have created
                cur.execute(sink.create_namespace_sql(name))
                cur.execute(f"CREATE TABLE {sink.table_sql(table)} (id INT PRIMARY KEY, v VARCHAR(20))")
            images, failures = BeforeImages(sink), []

            def applier() -> None:  # what a batch's before-images look up on the apply thread
                try:
                    for _ in range(ROUNDS):
                        images.shadow_columns(name, table)
                except Exception as exc:
                    failures.append(exc)

            thread = threading.Thread(target=applier)
            thread.start()
            try:
                for _ in range(ROUNDS):  # what the next batch's fit check reads on the lane's thread
                    assert set(sink.column_capacities(table, fresh=True)) == {"id", "v"}
            finally:
                thread.join()
            assert failures == []
        finally:
            rt.close()
