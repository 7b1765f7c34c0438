"""The retention policy's words and its pure rules: days per kind, cutoffs, annotations."""
from datetime import datetime, timedelta, timezone

import pytest

from benchsite.bench.retention.policy import Policy, annotation_marks

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def test_traces_and_logs_expire_after_their_own_days_and_probe_outputs_never():
    policy = Policy(traces_days=30, logs_days=90)
    assert policy.cutoffs(NOW) == {"profiler_trace": NOW - timedelta(days=30), "server_log": NOW - timedelta(days=90),
                                   "build_log": NOW - timedelta(days=90)}
    assert policy.reason("profiler_trace") == "traces are kept 30 days"
    assert policy.reason("build_log") == "logs are kept 90 days"


def test_zero_days_keeps_a_kind_forever():
    policy = Policy(traces_days=0, logs_days=7)
    assert set(policy.cutoffs(NOW)) == {"server_log", "build_log"}
    assert "profiler traces: kept forever (BENCH_RETAIN_TRACES_DAYS)" in policy.lines()
    assert "server and build logs: kept 7 days (BENCH_RETAIN_LOGS_DAYS)" in policy.lines()


@pytest.mark.parametrize(("note", "created", "marks"), [
    ({"note_commit": "abc1"}, NOW, True),
    ({"note_commit": "abc2"}, NOW, False),
    ({"note_commit": "", "starts_at": NOW - timedelta(days=2), "ends_at": NOW}, NOW - timedelta(days=1), True),
    ({"note_commit": "", "starts_at": NOW - timedelta(days=2), "ends_at": NOW}, NOW + timedelta(hours=1), False),
    # an open range marks its first day, not every later run
    ({"note_commit": "", "starts_at": NOW, "ends_at": None}, NOW + timedelta(hours=23), True),
    ({"note_commit": "", "starts_at": NOW, "ends_at": None}, NOW + timedelta(days=3), False),
])
def test_an_annotation_marks_runs_by_commit_prefix_or_date_range(note, created, marks):
    assert annotation_marks(commit="abc1" + "0" * 36, created_at=created, **{"starts_at": None, "ends_at": None,
                                                                           **note}) is marks


def test_a_run_without_a_commit_is_not_marked_by_a_commit_note():
    assert annotation_marks(commit="", created_at=NOW, note_commit="abc1", starts_at=None, ends_at=None) is False


def test_an_app_cannot_register_a_keep_rule_the_policy_does_not_name():
    from benchsite.bench.retention.protected import register

    with pytest.raises(ValueError, match="unknown keep rule 'kept_by_typo'"):
        register("kept_by_typo", lambda ids: set())
