"""Alerts: confirm before alerting, one alert per change point, signed webhook to a local HTTP
server (retried after a 500) and email through Django's locmem backend."""
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from benchsite.bench.lifecycle import claim, complete, dispatch
from benchsite.bench.models import Run
from benchsite.regressions import tasks
from benchsite.regressions.confirm import changepoint_confirm
from benchsite.regressions.models import Alert, ChangePoint, Subscription
from benchsite.regressions.pipeline import run_judge
from benchsite.regressions.selectors import confirmation_due, second_look_possible
from runners import contract

from .conftest import add_run, sha

SECRET = "alert-secret-for-tests"
WOBBLE = [0.0, 0.8, -0.6, 1.0, -1.0]


class Receiver:
    """A webhook receiver on 127.0.0.1 answering scripted status codes (then 200)."""

    def __init__(self, statuses=()):
        self.statuses, self.requests = list(statuses), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers), body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status < 400 else b"nope")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver(statuses=[500])
    yield r
    r.close()


@pytest.fixture
def deliver_in_process(monkeypatch, settings):
    """The web-queue task runs here (Celery's eager apply, retries included) instead of via
    the broker, so that locmem mail lands in this process's outbox."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.BENCH_ALERT_SECRET = SECRET
    settings.BENCH_ALERT_RETRY = settings.BENCH_ALERT_RETRY.model_copy(update={"base_s": 0.001})
    from benchsite.celery import app

    sent = []

    class Queued:
        id = "task-1"

    def send_task(name, args=None, **options):
        sent.append((name, args[0], options.get("queue")))
        if name == "regressions.deliver_alert":
            return tasks.deliver_alert.apply(args=args)
        return Queued()  # a GPU job (the confirmation run): the test plays the worker itself

    monkeypatch.setattr(app, "send_task", send_task)
    return sent


def history(benchmark, n=10, level=100.0):
    for i in range(n):
        run = add_run(benchmark, level * (1 + WOBBLE[i % 5] / 100), commit=sha(i + 1))
        run_judge(run_id=run.id)


def finish(run, value, django_capture_on_commit_callbacks, correct=None):
    """The worker's part: claim, then report `value` (three clean repeats)."""
    assert claim.run_claim(run_id=run.id, task_id="t", worker_host="host-a")
    result = {"measurements": [contract.measurement(contract.DECODE_TOK_S, value, samples=[value] * 3)]}
    if correct is not None:
        result["measurements"].append(contract.measurement(contract.CORRECT, 1.0 if correct else 0.0))
    with django_capture_on_commit_callbacks(execute=True):
        assert complete.run_complete(run_id=run.id, result=result)


def test_confirmed_regression_alerts_once(benchmark, receiver, deliver_in_process, django_capture_on_commit_callbacks):
    Subscription.objects.create(benchmark=benchmark, webhook_url=receiver.url)
    Subscription.objects.create(benchmark=benchmark, kind="email", email="perf@example.com")
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    assert (cp.run, cp.confirmation, cp.status) == (slow, "pending", "open")
    rerun = cp.confirm_run
    assert (rerun.state, rerun.commit, rerun.variant) == (Run.State.QUEUED, sha(99), slow.variant)
    assert not Alert.objects.exists() and receiver.requests == [] and mail.outbox == []

    assert ("bench.execute_run", rerun.id, "gpu.cpu") in deliver_in_process
    finish(rerun, 93.8, django_capture_on_commit_callbacks)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status) == ("agreed", "confirmed")
    # The webhook: a 500 first, then delivered by the task's retry; the same signed body twice.
    assert len(receiver.requests) == 2
    headers, body = receiver.requests[-1]
    assert receiver.requests[0][1] == body
    assert headers["X-Bench-Signature"] == "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    payload = json.loads(body)
    assert payload["event"] == "regression" and payload["metric"] == "decode_tok_s"
    assert (payload["commit"], payload["previous_commit"]) == (sha(99), sha(10))
    assert payload["change"] == pytest.approx(-0.06, abs=0.002)
    verdict = slow.verdicts.get(metric="decode_tok_s", point="")
    assert (payload["ci_low"], payload["ci_high"]) == (verdict.ci_low, verdict.ci_high)
    assert payload["ci_low"] < -0.05 < payload["ci_high"] < 0  # the judged run's interval around its -6%
    assert payload["links"]["run"].endswith(f"/runs/{slow.id}/")
    assert payload["links"]["confirm_run"].endswith(f"/runs/{rerun.id}/")
    webhook_alert = Alert.objects.get(subscription__webhook_url=receiver.url)
    assert (webhook_alert.state, webhook_alert.attempts) == ("sent", 2)
    (message,) = mail.outbox
    assert message.to == ["perf@example.com"] and "decode throughput \u22126.0% (100 tok/s -> 94 tok/s)" in message.subject
    assert f"/runs/{slow.id}/" in message.body

    # More slow runs of the same change: no new change point, no new alert.
    for i in range(5):
        later = add_run(benchmark, 94.0 * (1 + WOBBLE[i] / 100), commit=sha(100 + i))
        with django_capture_on_commit_callbacks(execute=True):
            run_judge(run_id=later.id)
    assert ChangePoint.objects.filter(metric=contract.DECODE_TOK_S).count() == 1
    assert Alert.objects.count() == 2 and len(receiver.requests) == 2 and len(mail.outbox) == 1


def test_the_confirmation_rerun_has_the_repeats_of_the_run_it_confirms(benchmark, deliver_in_process,
                                                                        django_capture_on_commit_callbacks):
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    Run.objects.filter(pk=slow.pk).update(repeats=9)  # asked for at the trigger; the benchmark says 5
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=slow.id)
    rerun = ChangePoint.objects.get().confirm_run
    assert (rerun.repeats, benchmark.repeats) == (9, 5)
    assert dispatch.run_spec(rerun)["repeats"] == 9


def test_confirmation_that_disagrees_sends_nothing(benchmark, receiver, deliver_in_process,
                                                    django_capture_on_commit_callbacks):
    Subscription.objects.create(benchmark=benchmark, webhook_url=receiver.url)
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    finish(cp.confirm_run, 100.2, django_capture_on_commit_callbacks)  # back at the old level
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status) == ("disagreed", "open")
    assert not Alert.objects.exists() and receiver.requests == []


def test_a_rerun_that_cannot_tell_gets_another_then_the_two_together_decide(
        benchmark, receiver, deliver_in_process, django_capture_on_commit_callbacks):
    """100 -> 94 at about 0.8% noise: a re-run at 98.9 is short of the bar (under 98) but its far
    edge passes a third of the change: another re-run; 95.9 and 98.9 average 97.4, past the bar
    for a mean of two: agreed, one alert. The re-runs are on the change point."""
    Subscription.objects.create(benchmark=benchmark, webhook_url=receiver.url)
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    first = cp.confirm_run
    finish(first, 98.9, django_capture_on_commit_callbacks)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.confirm_figures, cp.confirm_attempts) == ("pending", [98.9], 1)
    second = cp.confirm_run
    assert second != first and (second.commit, second.state, second.priority) == (sha(99), "QUEUED", first.priority)
    assert not Alert.objects.exists()
    finish(second, 95.9, django_capture_on_commit_callbacks)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status, cp.confirm_figures) == ("agreed", "confirmed", [98.9, 95.9])
    assert Alert.objects.filter(change_point=cp).count() == 1


def test_re_runs_that_cannot_tell_stop_at_the_cap_and_disagree(
        benchmark, deliver_in_process, settings, django_capture_on_commit_callbacks):
    settings.BENCH_CONFIRM_MAX_RUNS = 2
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    for _ in range(2):
        finish(cp.confirm_run, 98.9, django_capture_on_commit_callbacks)
        cp.refresh_from_db()
    assert (cp.confirmation, cp.status, cp.confirm_figures) == ("disagreed", "open", [98.9, 98.9])
    assert Run.objects.filter(commit=sha(99)).count() == 3  # the slow run and two re-runs: no third


def test_a_change_still_found_after_a_disagreeing_rerun_gets_one_second_look(
        benchmark, receiver, deliver_in_process, django_capture_on_commit_callbacks):
    """A real step whose one re-run was unlucky: the runs after it stay slow, the detector keeps
    the change at its commit, and SECOND_LOOK_AFTER runs on it is re-run once more; that one
    agrees and the alert goes out. A third re-run never happens."""
    Subscription.objects.create(benchmark=benchmark, webhook_url=receiver.url)
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    first = cp.confirm_run
    finish(first, 100.2, django_capture_on_commit_callbacks)  # unlucky: back at the old level
    cp.refresh_from_db()
    assert (cp.confirmation, cp.confirm_attempts) == ("disagreed", 1)
    assert not confirmation_due(run=slow) and second_look_possible(run=slow)
    for i in range(4):
        later = add_run(benchmark, 94.0 * (1 + WOBBLE[i] / 100), commit=sha(100 + i))
        run_judge(run_id=later.id)
    cp.refresh_from_db()
    assert (cp.commit, cp.confirmation, cp.confirm_attempts) == (sha(99), "pending", 2)
    second = cp.confirm_run
    assert second != first and (second.commit, second.state) == (sha(99), Run.State.QUEUED)
    assert not Alert.objects.exists() and confirmation_due(run=slow)
    finish(second, 93.9, django_capture_on_commit_callbacks)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.status) == ("agreed", "confirmed")
    assert not confirmation_due(run=slow) and not second_look_possible(run=slow)
    assert Alert.objects.filter(change_point=cp).count() == 1


def test_no_second_look_when_the_runs_after_go_back(benchmark, deliver_in_process, django_capture_on_commit_callbacks):
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    finish(cp.confirm_run, 100.2, django_capture_on_commit_callbacks)
    for i in range(6):  # one slow run was noise: the level is back
        later = add_run(benchmark, 100.0 * (1 + WOBBLE[i % 5] / 100), commit=sha(100 + i))
        run_judge(run_id=later.id)
    cp.refresh_from_db()
    assert (cp.confirmation, cp.confirm_attempts, cp.status) == ("disagreed", 1, "open")
    assert Run.objects.filter(state=Run.State.QUEUED).count() == 0
    assert not confirmation_due(run=slow) and not second_look_possible(run=slow)  # six runs on: no more look


def test_a_change_found_later_at_the_same_commit_is_judged_by_the_rerun_already_made(
        benchmark, deliver_in_process, django_capture_on_commit_callbacks):
    """Every run measures every metric: a change of another metric found at the same commit after
    the re-run finished (the detector needs a few runs) is judged by that re-run at once."""
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    run_judge(run_id=slow.id)
    decode = ChangePoint.objects.get()
    rerun = decode.confirm_run
    assert claim.run_claim(run_id=rerun.id, task_id="t", worker_host="host-a")
    result = {"measurements": [contract.measurement(contract.DECODE_TOK_S, 93.8, samples=[93.8] * 3),
                               contract.measurement(contract.ITL_MS_P50, 10.7, samples=[10.7] * 3)]}
    with django_capture_on_commit_callbacks(execute=True):
        assert complete.run_complete(run_id=rerun.id, result=result)
    later = ChangePoint.objects.create(
        benchmark=benchmark, variant=slow.variant, series_key=decode.series_key, metric=contract.ITL_MS_P50, run=slow,
        previous_run=decode.previous_run, index=decode.index, commit=sha(99), previous_commit=decode.previous_commit,
        before=10.0, after=10.6, change=0.06, is_regression=True)
    changepoint_confirm(change_point=later)
    later.refresh_from_db()
    assert (later.confirm_run, later.confirmation, later.status, later.confirm_attempts) == (
        rerun, "agreed", "confirmed", 1)
    assert Run.objects.filter(trigger=Run.Trigger.SCHEDULE).count() == 1


def test_the_rerun_is_judged_against_the_history_before_the_run_it_confirms(
        benchmark, deliver_in_process, django_capture_on_commit_callbacks):
    """The slow run's own figure is what is in doubt: never in its re-run's baseline, even for a
    metric without a change point of its own (there it would pull the baseline halfway down)."""
    history(benchmark)
    slow = add_run(benchmark, 96.8, commit=sha(99))
    run_judge(run_id=slow.id)  # decode -3.2%: a regression, not a strong one
    assert not ChangePoint.objects.exists()
    itl = ChangePoint.objects.create(  # what the detector found on another metric of this run
        benchmark=benchmark, variant=slow.variant, series_key=slow.verdicts.get(metric=contract.DECODE_TOK_S).series_key,
        metric=contract.ITL_MS_P50, run=slow, index=10, commit=sha(99), before=10.0, after=10.6, change=0.06,
        is_regression=True)
    changepoint_confirm(change_point=itl)
    itl.refresh_from_db()
    finish(itl.confirm_run, 96.8, django_capture_on_commit_callbacks)
    verdict = itl.confirm_run.verdicts.get(metric=contract.DECODE_TOK_S)
    assert slow.id not in verdict.baseline_runs and len(verdict.baseline_runs) == 10
    assert verdict.kind == slow.verdicts.get(metric=contract.DECODE_TOK_S).kind == "regression"
    assert f"before run #{slow.id} that this run confirms" in verdict.baseline_description


def test_newly_incorrect_output_alerts_without_rerun(benchmark, deliver_in_process, django_capture_on_commit_callbacks):
    Subscription.objects.create(benchmark=benchmark, kind="email", email="perf@example.com")
    history(benchmark, n=3)
    wrong = add_run(benchmark, 100.0, correct=False, commit=sha(50))
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=wrong.id)
    cp = ChangePoint.objects.get(metric=contract.CORRECT)
    assert (cp.status, cp.confirm_run, cp.commit) == ("confirmed", None, sha(50))
    (message,) = mail.outbox
    assert "output became incorrect" in message.subject and sha(50)[:12] in message.subject
    assert not Run.objects.filter(state=Run.State.QUEUED).exists()


def test_refused_and_unreachable_webhooks(benchmark, deliver_in_process, settings, django_capture_on_commit_callbacks):
    refusing = Receiver(statuses=[404])
    try:
        Subscription.objects.create(benchmark=benchmark, webhook_url=refusing.url)
        Subscription.objects.create(benchmark=benchmark, webhook_url="http://127.0.0.1:9/closed")
        settings.BENCH_CONFIRM_REGRESSIONS = False
        settings.BENCH_ALERT_RETRY = settings.BENCH_ALERT_RETRY.model_copy(update={"retries": 2})
        history(benchmark)
        slow = add_run(benchmark, 94.0, commit=sha(99))
        with django_capture_on_commit_callbacks(execute=True):
            run_judge(run_id=slow.id)
        assert ChangePoint.objects.get().status == "confirmed"  # confirmation off: alert at once
        refused = Alert.objects.get(subscription__webhook_url=refusing.url)
        assert (refused.state, refused.attempts, len(refusing.requests)) == ("failed", 1, 1)
        assert "HTTP 404" in refused.last_error
        unreachable = Alert.objects.get(subscription__webhook_url__endswith="/closed")
        assert (unreachable.state, unreachable.attempts) == ("failed", 3)
    finally:
        refusing.close()


def test_a_single_merely_significant_run_waits_for_the_detector(benchmark, deliver_in_process):
    """-3.5% on +-1% noise: a regression verdict (95% interval, 3% threshold), but inside the
    99.9% interval: no change point and no re-run until the detector sees a step."""
    history(benchmark)
    run = add_run(benchmark, 96.5, commit=sha(99))
    run_judge(run_id=run.id)
    verdict = run.verdicts.get(metric=contract.DECODE_TOK_S)
    assert (verdict.kind, verdict.strong) == ("regression", False)
    assert not ChangePoint.objects.exists() and not Run.objects.filter(state=Run.State.QUEUED).exists()
