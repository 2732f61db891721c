"""What `cdc-assets snapshot` says when splits stay unfinished: a failure it saw, or why no run was started."""
from cdc_assets.defs.snapshot_run import SnapshotReport, TableReport


def test_a_failure_seen_is_named():
    report = SnapshotReport([TableReport("shop.a", 3, 1, 0, 1.0, ["shop.a:0001..shop.a:0002: boom"], runs=1)], "")
    assert "first failure: shop.a:0001..shop.a:0002: boom" in report.reason()


def test_no_run_started_never_points_at_run_logs():
    report = SnapshotReport([TableReport("shop.a", 3, 0, 0, 0.0)], "", unanswered={"mirror": "connection refused"})
    reason = report.reason()
    assert "see the run logs" not in reason
    assert "no run was started for shop.a" in reason and "target mirror did not answer: connection refused" in reason
