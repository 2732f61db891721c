"""Sensors of a task: the split planner registers each table's splits as partitions."""

import dagster as dg

from cdc_assets.config import TaskConfig, load_config
from cdc_assets.defs.partitions import add_requests
from cdc_assets.engine.planning import plan_unplanned
from cdc_assets.engine.runtime import TaskRuntime


def split_planner_sensor(config: TaskConfig, config_path: str) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{config.task_id}_split_planner",
        description="Plans tables without a split plan and registers every split as a partition.",
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=30,
    )
    def _planner(context: dg.SensorEvaluationContext):
        # Config errors and unreachable databases raise: the tick shows red with the message, never a skip.
        runtime = TaskRuntime(load_config(config_path))
        try:
            plans = plan_unplanned(runtime)
        finally:
            runtime.close()
        for note in runtime.capture_notes:
            context.log.info(note)
        requests = add_requests(context.instance, config.task_id, plans)
        if not requests:
            total = sum(len(p.splits) for p in plans)
            return dg.SkipReason("; ".join([f"all {len(plans)} tables planned; {total} splits registered as "
                                            "partitions", *runtime.capture_notes]))
        return dg.SensorResult(dynamic_partitions_requests=requests)

    return _planner
