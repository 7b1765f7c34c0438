"""Slack-format alerts: a confirmed regression posted to a local HTTP server as Slack's incoming
webhook body (text + mrkdwn blocks); a refusal (4xx) retried, then failed with the answer's text;
the message built from a payload (chat.slack_body); the kind in the admin (migration 0013's kind
of existing rows: tests/benchsite/test_data_migrations.py)."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from benchsite.bench.domain.units import interval_text
from benchsite.metrics.instruments import ALERTS
from benchsite.regressions import chat
from benchsite.regressions.models import Alert, ChangePoint, Subscription
from benchsite.regressions.pipeline import run_judge

from .conftest import add_run, sha
from .test_alerts import deliver_in_process, finish, history  # noqa: F401 (a fixture)


class SlackReceiver:
    """An incoming-webhook endpoint on 127.0.0.1 answering scripted (status, text), then (200, 'ok')."""

    def __init__(self, answers=()):
        self.answers, self.bodies = list(answers), []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                receiver.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                status, text = receiver.answers.pop(0) if receiver.answers else (200, "ok")
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(text.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/T0/B0/x"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack():
    receiver = SlackReceiver()
    yield receiver
    receiver.close()


def block_texts(body: dict) -> str:
    parts = []
    for block in body["blocks"]:
        assert block["type"] == "section"
        parts += [block["text"]["text"]] if "text" in block else [f["text"] for f in block["fields"]]
        assert all(f["type"] == "mrkdwn" for f in block.get("fields", [block.get("text")]))
    return "\n".join(parts)


def test_a_confirmed_regression_is_posted_as_text_and_blocks(benchmark, slack, deliver_in_process,
                                                             django_capture_on_commit_callbacks):
    Subscription.objects.create(benchmark=benchmark, kind="slack", webhook_url=slack.url, name="perf-channel")
    history(benchmark)
    slow = add_run(benchmark, 94.0, commit=sha(99))
    with django_capture_on_commit_callbacks(execute=True):
        run_judge(run_id=slow.id)
    cp = ChangePoint.objects.get()
    assert slack.bodies == []  # not before the re-run agrees
    finish(cp.confirm_run, 93.8, django_capture_on_commit_callbacks)

    (body,) = slack.bodies
    commits = f"{sha(10)[:12]}..{sha(99)[:12]}"
    assert body["text"] == f"[tiny/eager] decode throughput \u22126.0% (100 tok/s -&gt; 94 tok/s) at {commits}"
    text = block_texts(body)
    assert "*Metric*\ndecode throughput" in text
    assert "*Change*\n\u22126.0% (100 tok/s -&gt; 94 tok/s)" in text
    assert f"*Commits*\n`{commits}`" in text and "*Benchmark*\ntiny / eager" in text
    assert f"/runs/{slow.id}/|run>" in text and f"/runs/{cp.confirm_run_id}/|re-run>" in text
    assert f"<{Alert.objects.get().payload['links']['changes']}|change page>" in text
    verdict = slow.verdicts.get(metric="decode_tok_s", point="")
    assert f"*Interval*\n{interval_text(verdict.ci_low, verdict.ci_high)}" in text  # the judged run's
    alert = Alert.objects.get()
    assert (alert.state, alert.attempts, alert.last_error) == ("sent", 1, "")


def test_a_refusal_is_retried_then_the_alert_fails_with_the_answer(benchmark, deliver_in_process, settings,
                                                                   django_capture_on_commit_callbacks):
    settings.BENCH_CONFIRM_REGRESSIONS = False
    settings.BENCH_ALERT_RETRY = settings.BENCH_ALERT_RETRY.model_copy(update={"retries": 2})
    refusing = SlackReceiver(answers=[(404, "no_service")] * 3)
    flaky = SlackReceiver(answers=[(400, "invalid_token"), (500, "oops")])
    try:
        Subscription.objects.create(benchmark=benchmark, kind="slack", webhook_url=refusing.url)
        Subscription.objects.create(benchmark=benchmark, kind="slack", webhook_url=flaky.url)
        history(benchmark)
        slow = add_run(benchmark, 94.0, commit=sha(99))
        counted = {r: ALERTS.labels(result=r)._value.get() for r in ("sent", "retry", "failed")}
        with django_capture_on_commit_callbacks(execute=True):
            run_judge(run_id=slow.id)
        refused = Alert.objects.get(subscription__webhook_url=refusing.url)
        assert (refused.state, refused.attempts, len(refusing.bodies)) == ("failed", 3, 3)
        # 3 + 2 failed attempts, one of them the last one given up: decode_bench_alerts says so
        assert {r: ALERTS.labels(result=r)._value.get() - counted[r] for r in counted} == {
            "sent": 1, "retry": 5, "failed": 1}
        assert "HTTP 404 no_service" in refused.last_error
        recovered = Alert.objects.get(subscription__webhook_url=flaky.url)
        assert (recovered.state, recovered.attempts, recovered.last_error) == ("sent", 3, "")
        assert refusing.bodies[0] == flaky.bodies[-1]  # the same message each time
    finally:
        refusing.close()
        flaky.close()


PAYLOAD = {"event": "regression", "change_point": 7, "benchmark": "tiny", "variant": "a<b", "series": "k",
           "metric": "decode_tok_s", "label": "decode throughput", "unit": "tok/s", "direction": "higher",
           "commit": "b" * 40, "previous_commit": None, "before": 100.0, "after": 90.0, "change": -0.1,
           "confirmed_by_run": None, "links": {"run": "https://bench.example.com/runs/5/",
                                               "changes": "https://bench.example.com/changes/tiny/"}}


def test_the_message_has_the_interval_when_the_payload_has_one_and_escapes_mrkdwn():
    body = chat.slack_body(PAYLOAD | {"ci_low": -0.12, "ci_high": -0.08})
    text = block_texts(body)
    assert "*Interval*\n[\u221212.0%, \u22128.0%]" in text
    assert "*Benchmark*\ntiny / a&lt;b" in text and "`?..bbbbbbbbbbbb`" in text
    assert text.endswith("<https://bench.example.com/runs/5/|run> · <https://bench.example.com/changes/tiny/|change page>")
    assert body["text"] == "[tiny/a&lt;b] decode throughput \u221210.0% (100 tok/s -&gt; 90 tok/s) at ?..bbbbbbbbbbbb"
    assert "Interval" not in block_texts(chat.slack_body(PAYLOAD))


def test_incorrect_output_says_so():
    body = chat.slack_body(PAYLOAD | {"event": "incorrect_output", "metric": "correct", "change": None})
    assert "Incorrect output on tiny/a&lt;b: output became incorrect" in block_texts(body)
    assert body["text"] == "[tiny/a&lt;b] output became incorrect at ?..bbbbbbbbbbbb"


def test_the_admin_lists_and_edits_the_kind(benchmark, admin_client):
    Subscription.objects.create(benchmark=benchmark, kind="slack", webhook_url="https://chat.example.com/a", name="ch")
    page = admin_client.get("/admin/regressions/subscription/").content.decode()
    assert "Slack-format incoming webhook" in page and "ch" in page
    form = {"benchmark": benchmark.id, "name": "", "kind": "email", "webhook_url": "https://chat.example.com/b",
            "email": "", "secret": "", "active": "on"}
    refused = admin_client.post("/admin/regressions/subscription/add/", form)
    assert refused.status_code == 200
    assert "An email subscription has an email address and no URL." in refused.content.decode()
    admin_client.post("/admin/regressions/subscription/add/", form | {"kind": "slack"})
    assert Subscription.objects.filter(kind="slack", webhook_url="https://chat.example.com/b").exists()
