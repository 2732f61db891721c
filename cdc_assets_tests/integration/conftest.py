import pytest

from cdc_assets.config import SparkConfig
from cdc_assets.spark.session import build_session


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every in-process test: starting one costs seconds."""
    session, _ = build_session(SparkConfig(master="local[2]", driver_memory="1g"), app_name="cdc_assets_tests")
    yield session
    session.stop()
