"""A batch over pipeline.checkpoint_timeout_secs: reported with its figures and what to tune."""
from cdc_assets.core.slow_batch import slow


def test_a_batch_within_the_timeout_is_not_reported():
    assert slow("bin.000001:400", 1000, 900, 3, 59.9, 60.0, 1000) is None
    assert slow("bin.000001:400", 1000, 900, 3, 60.0, 60.0, 1000) is None


def test_a_slow_batch_names_its_figures_and_what_to_tune():
    found = slow("bin.000001:400", 1000, 800, 4, 80.0, 60.0, 1000)
    assert found is not None and found.rows_per_sec == 10.0
    text = found.advice()
    for part in ("bin.000001:400", "80.0 s in the target", "checkpoint_timeout_secs 60", "1000 changes in 4 "
                 "transactions", "800 rows written (10 rows/s)", "checkpoint_after_events (now 1000, e.g. 250)",
                 "index on its key", "triggers"):
        assert part in text, part
