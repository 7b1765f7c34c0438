"""bench_gc frees what the policy allows on the filesystem and on S3, keeps the files of every
protected run and says why, never touches a run, a measurement or an artifact row's existence,
and a second pass does nothing."""
import io
import re
import subprocess

import pytest
from django.core.management import CommandError, call_command

from benchsite.bench.models import Artifact, Measurement, Run
from benchsite.bench.retention.collect import collect
from benchsite.bench.retention.policy import Policy

from benchsite.storage_config import filesystem_artifacts_storage

from ..storage.conftest import files_under, s3_keys, use_storage
from .history import FREED, KEPT_BY, build

pytestmark = pytest.mark.django_db
EXPIRING = {"server_log", "build_log", "profiler_trace"}


def _gc(*args) -> str:
    out = io.StringIO()
    call_command("bench_gc", *args, stdout=out)
    return out.getvalue()


def _stored(run) -> set[str]:
    return {a.kind for a in run.artifacts.exclude(file="")}


def test_gc_frees_old_traces_and_logs_of_unprotected_runs_only(fs_storage, client):
    runs = build()
    before = (Run.objects.count(), Measurement.all_points.count(), Artifact.objects.count(), len(files_under(fs_storage)))

    dry = _gc("--dry-run")
    assert "would free 2 profiler_trace file(s)" in dry and "would free 2 server_log file(s)" in dry
    assert (Run.objects.count(), Measurement.all_points.count(), Artifact.objects.count(),
            len(files_under(fs_storage))) == before

    out = _gc()
    assert "freed 2 profiler_trace file(s)" in out and "freed 2 build_log file(s)" in out
    for rule, names in KEPT_BY.items():
        assert re.search(rf"kept {3 * len(names)} file\(s\), .* past their days \({rule}\): ", out), (rule, out)
    for name in FREED:
        assert _stored(runs[name]) == {"probe_json"}, name
        gone = runs[name].artifacts.get(kind="profiler_trace")
        assert gone.removed_reason == "traces are kept 30 days" and gone.size > 0 and gone.removed_at
    for name in [n for names in KEPT_BY.values() for n in names] + ["recent"]:
        assert _stored(runs[name]) == EXPIRING | {"probe_json"}, name
    assert (Run.objects.count(), Measurement.all_points.count(), Artifact.objects.count()) == before[:3]
    assert len(files_under(fs_storage)) == before[3] - 3 * len(FREED)
    assert "freed nothing" in _gc()  # idempotent

    page = client.get(f"/runs/{runs['plain'].pk}/").content.decode()
    day = gone.removed_at.strftime("%Y-%m-%d")
    assert f"removed by policy on {day} (traces are kept 30 days)" in page
    assert f"removed by policy on {day} (logs are kept 90 days)" in page


def test_zero_days_keeps_traces_forever_while_logs_still_go(fs_storage, settings):
    runs = build()
    settings.BENCH_RETAIN_TRACES_DAYS = 0
    report = collect(policy=Policy.from_settings())
    assert dict(report.freed) == {"server_log": 2, "build_log": 2}
    assert _stored(runs["plain"]) == {"probe_json", "profiler_trace"}


def test_small_batches_free_and_keep_the_same_files_as_one(fs_storage):
    build()
    policy = Policy(traces_days=30, logs_days=90)
    dry = collect(policy=policy, dry_run=True)
    report = collect(policy=policy, batch_size=2)  # batches that split runs and their kept rows
    assert (report.freed, report.kept) == (dry.freed, dry.kept) and sum(dry.kept.values()) == 33


def test_gc_frees_the_files_in_the_s3_bucket(s3_storage):
    runs = build()
    keys = set(s3_keys(s3_storage))
    report = collect(policy=Policy(traces_days=30, logs_days=90))
    assert sum(report.freed.values()) == 3 * len(FREED) and not report.failed
    gone = keys - set(s3_keys(s3_storage))
    assert len(gone) == 3 * len(FREED) and all(f"/runs/{runs['plain'].pk}/" in f"/{k}" or
                                                f"/runs/{runs['pull_closed'].pk}/" in f"/{k}" for k in gone)


@pytest.fixture
def read_only_disk(settings, tmp_path):
    """A real tmpfs as the artifact storage, made read-only after the history is written (EROFS
    from the kernel on every delete). Mounting needs root, as the ENOSPC test's does."""
    root = tmp_path / "ro-disk"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(root)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the read-only test (needs root): {mounted.stderr.strip()}")
    use_storage(settings, filesystem_artifacts_storage(root))
    yield root
    subprocess.run(["umount", str(root)], check=True)


def test_a_storage_that_refuses_deletes_fails_the_command_and_leaves_the_rows(read_only_disk):
    runs = build()
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_disk)], check=True)
    err = io.StringIO()
    with pytest.raises(CommandError, match=r"6 file\(s\) could not be deleted from .*ro-disk"):
        call_command("bench_gc", stdout=io.StringIO(), stderr=err)
    assert "Read-only file system" in err.getvalue()
    assert _stored(runs["plain"]) == EXPIRING | {"probe_json"}
    assert not Artifact.objects.filter(removed_at__isnull=False).exists()


def test_the_admin_artifact_list_shows_the_policy(admin_client, settings):
    settings.BENCH_RETAIN_TRACES_DAYS = 14
    page = admin_client.get("/admin/bench/artifact/").content.decode()
    assert "profiler traces: kept 14 days (BENCH_RETAIN_TRACES_DAYS)" in page
    assert "server and build logs: kept 90 days (BENCH_RETAIN_LOGS_DAYS)" in page
