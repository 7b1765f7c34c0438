"""The Markdown of a comparison (numbers with units, missing values as a dash), and the task
that reports it: queued on the web queue, retried while the forge is down."""
from benchsite.config import RetryPolicy
from benchsite.integrations.pulls import tasks
from benchsite.integrations.pulls.report import comparison_markdown

from .conftest import PUBLIC, finish, make_comparison, row


def test_the_table_says_numbers_with_units_and_a_dash_for_what_is_missing(db, settings):
    settings.BENCH_PUBLIC_URL = PUBLIC
    comparison = finish(make_comparison(), outcome="incorrect", summary="compiled: output differs", table=[
        row(),
        row("compiled", "incorrect", base=1234.5, head=None, effect=None, ci_low=None, ci_high=None,
            correctness="incorrect", correctness_reason="token 7 | repeated\nforever", share_base=None,
            share_head=0.081, took_effect="yes: 2 graphs captured", note="head failed to start once"),
        row("eager-tp2", "incorrect", correctness="incorrect", correctness_reason="differs", note="differs"),
    ])
    text = comparison_markdown([comparison])
    lines = text.splitlines()
    assert lines[0] == "### decode-bench/tiny-a: incorrect"
    assert "compiled: output differs" in lines
    assert ("| variant | base | head | change [interval] | correctness | allreduce share base → head | took effect |"
            in lines)
    assert ("| eager (passed) | 41.2 tok/s | 40.9 tok/s | −0.7% [−2.0%, +0.6%] | identical | 42.0% → 40.0% | — |"
            in lines)
    assert ("| compiled (incorrect) | 1234 tok/s | — | — | incorrect: token 7 \\| repeated forever | — → 8.1% "
            "| yes: 2 graphs captured |") in lines
    assert "- compiled: head failed to start once" in lines and "- eager-tp2: differs" not in lines
    assert "Threshold: a change beyond 3% counts" in text
    assert lines[-1] == f"[Runs and details]({PUBLIC}/pr/github.com/acme/vllm/12/)"


def test_a_comparison_not_done_says_its_state(db):
    text = comparison_markdown([make_comparison(state="waiting")])
    assert text.splitlines()[0] == "### decode-bench/tiny-a: waiting for a maintainer" and "|" not in text


def test_queue_report_sends_the_task_to_the_web_queue_and_never_raises(db, sent, monkeypatch):
    tasks.queue_report(5)
    assert sent == [("hooks.report_pull", [5], {"queue": "web"})]

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker down")

    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", broker_down)
    tasks.queue_report(6)  # logged, not raised


def test_the_task_retries_a_transient_error_then_gives_up(github, settings, db, monkeypatch):
    comparison = make_comparison()
    github.fail("POST", "/check-runs", 503, times=5)
    retries = []

    def retry(**kwargs):
        retries.append(kwargs["countdown"])
        raise RuntimeError("retry")

    monkeypatch.setattr(tasks.report_pull, "retry", retry)
    settings.BENCH_STATUS_RETRY = RetryPolicy(retries=1, base_s=2)
    result = tasks.report_pull.apply(args=[comparison.id])
    assert retries == [2.0] and "retry" in repr(result.result)
    settings.BENCH_STATUS_RETRY = RetryPolicy(retries=0, base_s=2)  # past the retries: logged, False
    assert tasks.report_pull.apply(args=[comparison.id]).get() is False
    assert tasks.report_pull.apply(args=[999_999]).get() is False  # a comparison deleted since
