"""Faults injected for real: a private Redis killed and restarted, Celery workers killed with
SIGKILL, engines that hang or die, a task delivered twice, a run cancelled while it runs, the
web worker's PostgreSQL cut off behind a TCP proxy, the artifact storage's disk full.

The engine is the fake one (tests/faults/fake_engine.py, a real process group started by the
real GPU worker): what is under test is our handling, not vLLM. test_real_engine.py does the
worker kill once with a real `vllm serve`."""
import pytest

from . import scenarios

# Production infrastructure (private Redis, real workers): `make test` runs them in the PostgreSQL pass.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_pass, pytest.mark.timeout(150)]


def test_a_worker_killed_mid_run_is_reaped_with_the_reason_and_its_orphaned_engine_stopped(service):
    figures = scenarios.worker_sigkill(service)
    assert figures["details"]["state"] == "FAILED"
    assert figures["details"]["failure_kind"] == "worker"
    assert "no heartbeat from worker" in figures["details"]["error"]
    assert "'probing decode'" in figures["details"]["error"]
    # BENCH_HEARTBEAT_TIMEOUT_S=4, reaper every 1 s: bounded well under the 30 s allowed
    assert figures["recovery_s"] < 15
    assert "stopping orphaned engine group" in service.workers.log("gpu")


def test_a_hung_engine_fails_the_run_at_the_probe_deadline_with_its_last_log_lines(service):
    figures = scenarios.engine_fault(service, "hang")
    error = figures["details"]["error"]
    assert figures["details"]["state"] == "FAILED"
    assert "probing decode: timeout" in error and "within 2 s" in error  # BENCH_PROBE_TIMEOUT_S=2
    assert "fake engine: stopped sending tokens after 3 (planted hang)" in error


def test_an_engine_dying_mid_stream_fails_the_run_with_its_exit_and_last_log_lines(service):
    figures = scenarios.engine_fault(service, "exit")
    error = figures["details"]["error"]
    assert figures["details"]["failure_kind"] == "engine"
    assert figures["details"]["phase"] == "probing decode"  # where it failed, not the worker's "storing artifacts"
    assert "engine exited with code 3" in error
    assert "CUDA error: an illegal memory access was encountered (planted)" in error


def test_a_redis_restart_loses_no_run(service):
    figures = scenarios.redis_restart(service)
    assert figures["runs_lost"] == 0
    gpu_log = service.workers.log("gpu")
    assert "bench.record_result delivered after" in gpu_log  # it really met the dead broker
    assert "is QUEUED but its message" in service.workers.log("web")  # re-sent from the database


def test_the_same_task_delivered_twice_executes_once(short_visibility_service):
    figures = scenarios.duplicate_delivery(short_visibility_service)
    assert figures["details"]["executions"] == 1


def test_cancelling_a_running_run_stops_its_engine_and_a_late_result_cannot_revive_it(service):
    figures = scenarios.cancel_running(service)
    assert figures["details"]["engine_gone_s"] < 30
    assert figures["details"]["state"] == "CANCELLED"


def test_results_sent_while_the_web_side_database_is_down_land_once_when_it_returns(proxied_db_service):
    figures = scenarios.database_down(proxied_db_service)
    assert figures["runs_lost"] == 0 and figures["details"]["results_stored"] == 1
    assert figures["details"]["outage_s"] >= scenarios.DATABASE_OUTAGE_S  # longer than the heartbeat timeout
    web_log = proxied_db_service.workers.log("web")
    assert "OperationalError" in web_log  # the outage was real: the worker's queries failed
    assert "heartbeats are judged from now on" in web_log  # and the reaper did not judge the unheard ones
    # Whether the next run's claim is also caught by the outage (and then taken over by its retry,
    # "landed late; its retry") depends on timing; that path has its own test in
    # test_messages_and_requeue.py. Here the next run must just end well, which the scenario checks.


def test_a_full_disk_loses_the_artifacts_with_a_clear_reason_and_nothing_else(full_disk_service):
    service, disk = full_disk_service
    figures = scenarios.disk_full_artifacts(service, disk)
    assert figures["runs_lost"] == 0 and figures["details"]["measurements"] >= 1
    assert figures["details"]["partial_files"] == 0 and figures["details"]["artifacts_not_stored"] >= 1
    assert "not stored: disk full (ENOSPC)" in figures["details"]["error"]
