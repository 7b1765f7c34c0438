"""Recording a result is idempotent: a message retried after a database error, or delivered
again, loses no file and no judgement (correctness, verdicts); a run that lacks one says why."""
import json

import pytest
from django.core.management import call_command
from django.db import OperationalError

from benchsite.bench.storage import artifacts
from benchsite.bench.lifecycle import claim, judge, tasks, trigger
from benchsite.bench.models import Benchmark, Run
from benchsite.regressions import judgement, pipeline
from benchsite.regressions import tasks as regression_tasks
from benchsite.regressions.models import Verdict

pytestmark = pytest.mark.django_db

TOKENS = list(range(100, 132))


@pytest.fixture
def batch(sent):
    benchmark = Benchmark.objects.create(name="tiny", slug="tiny", model="/models/tiny", max_tokens=32, repeats=2)
    trigger.variant_create(benchmark=benchmark, name="eager", is_reference=True)
    trigger.variant_create(benchmark=benchmark, name="compiled")
    runs = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.API)
    for run in runs:
        claim.run_claim(run_id=run.id, task_id=f"exec-{run.id}", worker_host="gpu-a")
    return runs


def _result(run, tokens=TOKENS, greedy=True):
    """A GPU worker's result: its files already in the artifact storage, references in the message."""
    files = [{"kind": "server_log", "name": "vllm-serve.log", "content": "INFO ready\n"}]
    if greedy:
        doc = {"token_ids": tokens, "logprobs": [{f"token_id:{t}": 0.0, "token_id:1": -5.0} for t in tokens]}
        files.append({"kind": "probe_json", "name": "greedy.json", "content": json.dumps(doc)})
    return {"measurements": [{"metric": "decode_tok_s", "value": 100.0, "unit": "tok/s", "direction": "higher",
                              "samples": [99.0, 101.0]}],
            "artifacts": artifacts.store_all(run.id, files)}


def _files_readable(run) -> bool:
    rows = list(run.artifacts.all())
    return bool(rows) and all(row.error == "" and row.read_text() for row in rows)


def test_a_result_retried_after_database_is_locked_is_recorded_once_with_every_judgement(
        batch, monkeypatch, django_capture_on_commit_callbacks):
    reference, candidate = batch
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(reference.id, _result(reference), task_id=f"exec-{reference.id}") is True

    real_judge, calls = judge.correctness_judge, []

    def locked_once(*, run):
        calls.append(run.id)
        if len(calls) == 1:
            raise OperationalError("database is locked")
        return real_judge(run=run)

    monkeypatch.setattr(judge, "correctness_judge", locked_once)
    message = (candidate.id, _result(candidate, tokens=[7] * len(TOKENS)))
    with pytest.raises(OperationalError), django_capture_on_commit_callbacks(execute=True):
        tasks.record_result(*message, task_id=f"exec-{candidate.id}")  # the task's autoretry takes it from here
    candidate.refresh_from_db()
    assert candidate.state == Run.State.BUILDING and not candidate.measurements.exists()  # nothing half-stored
    assert all(artifacts.storage().exists(a["file"]) for a in message[1]["artifacts"])

    with django_capture_on_commit_callbacks(execute=True):  # the retry
        assert tasks.record_result(*message, task_id=f"exec-{candidate.id}") is True
    # ...and the same message delivered once more (a worker lost before its ack): nothing changes
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(*message, task_id=f"exec-{candidate.id}") is False

    candidate.refresh_from_db()
    assert candidate.state == Run.State.SUCCEEDED and candidate.judged_at and candidate.judgement_missing == ""
    assert candidate.measurements.get(metric="correct").value == 0.0  # token 7 every time: judged incorrect
    assert set(Verdict.objects.filter(run=candidate).values_list("metric", flat=True)) == {"correct", "decode_tok_s"}
    assert _files_readable(candidate) and _files_readable(reference)
    assert candidate.artifacts.count() == 2


def test_a_late_result_of_another_execution_deletes_its_own_files_only(batch, django_capture_on_commit_callbacks):
    run = batch[0]
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(run.id, _result(run), task_id=f"exec-{run.id}")
    late = _result(run)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(run.id, late, task_id="exec-lost") is False
    assert not any(artifacts.storage().exists(a["file"]) for a in late["artifacts"])
    assert _files_readable(run)


def test_verdicts_deferred_while_the_database_is_busy_are_judged_by_the_retried_task(
        batch, sent, monkeypatch, client, django_capture_on_commit_callbacks):
    run = batch[0]
    real_judge = pipeline.run_judge

    def locked(**kw):
        raise OperationalError("database is locked")

    monkeypatch.setattr(pipeline, "run_judge", locked)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(run.id, _result(run), task_id=f"exec-{run.id}")
    run.refresh_from_db()
    assert run.state == Run.State.SUCCEEDED and run.judged_at is None and not run.verdicts.exists()
    assert [(name, args) for name, args, _ in sent if name.startswith("regressions.")] == [
        (judgement.JUDGE_TASK, [run.id])]
    assert "Verdicts pending" in client.get(f"/runs/{run.id}/").content.decode()

    monkeypatch.setattr(pipeline, "run_judge", real_judge)
    with django_capture_on_commit_callbacks(execute=True):
        assert regression_tasks.judge_run(run.id) is True
        assert regression_tasks.judge_run(run.id) is False  # judged once
    run.refresh_from_db()
    assert run.judged_at and run.verdicts.filter(metric="decode_tok_s").exists()
    assert 'id="judgement"' not in client.get(f"/runs/{run.id}/").content.decode()


def test_a_run_that_could_not_be_judged_says_why_on_its_page_until_bench_judge_judges_it(
        batch, monkeypatch, client, django_capture_on_commit_callbacks):
    run = batch[1]
    real_judge = pipeline.run_judge

    def broken(**kw):
        raise ValueError("series key too long")

    monkeypatch.setattr(pipeline, "run_judge", broken)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(run.id, _result(run, greedy=False), task_id=f"exec-{run.id}")
    run.refresh_from_db()
    assert run.judged_at is None
    assert run.judgement_missing.splitlines() == [
        "correctness: no greedy output was stored for this run",
        "verdicts: judging failed: ValueError: series key too long"]
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "Not judged" in page and "series key too long" in page and "no greedy output was stored for this run" in page
    assert f"bench_judge --run {run.id}" in page

    monkeypatch.setattr(pipeline, "run_judge", real_judge)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("bench_judge", "--run", str(run.id))
    run.refresh_from_db()
    assert run.judged_at and run.verdicts.exists()
    assert run.judgement_missing == "correctness: no greedy output was stored for this run"  # still true, still shown
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "no greedy output was stored for this run" in page and "series key too long" not in page


def test_an_unreadable_output_of_another_run_never_costs_the_reference_its_own_judgement(
        batch, django_capture_on_commit_callbacks):
    reference, candidate = batch
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(candidate.id, _result(candidate), task_id=f"exec-{candidate.id}")
    before = candidate.measurements.get(metric="correct").details
    artifacts.delete(candidate.artifacts.get(name="greedy.json").file)  # lost (as the retried result used to do)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.record_result(reference.id, _result(reference), task_id=f"exec-{reference.id}")
    reference.refresh_from_db()
    assert reference.measurements.get(metric="correct").value == 1.0 and reference.judgement_missing == ""
    assert candidate.measurements.get(metric="correct").details == before  # kept its earlier judgement
