"""The dashboard in real headless Chromium (Debian `chromium` + `chromium-driver`, driven by Selenium).

The chart must render from the JSON endpoint with Chart.js served from static files, and its
points must be the database's. Screenshots go to $BENCH_SCREENSHOT_DIR (default var/screenshots/; the ones in docs/screenshots/
come from `BENCH_SCREENSHOT_DIR=docs/screenshots pytest tests/benchsite/bench/pages/test_browser.py`), so a test run never dirties the tree.
"""
import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from benchsite.bench.lifecycle import dispatch
from benchsite.bench.models import PoolWorker, Run
from tests.benchsite.conftest import WAIT_S

from .conftest import add_server_log

SCREENSHOT_DIR = Path(os.environ.get("BENCH_SCREENSHOT_DIR", Path(__file__).resolve().parents[4] / "var" / "screenshots"))

pytestmark = pytest.mark.django_db(transaction=True)


def _wait(driver, predicate, what):
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The run page reloads itself: an element can go stale between finding and reading it.
    wait = WebDriverWait(
        driver, WAIT_S, poll_frequency=0.1, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    )
    return wait.until(predicate, message=f"timed out waiting for {what}")


def _text(driver, element_id):
    # Read in one script call: the page replaces these nodes in place, and a found element
    # read a moment later can belong to the old document (a chromedriver inspector error,
    # not a StaleElementReferenceException, so the wait would not ignore it).
    return driver.execute_script("const e = document.getElementById(arguments[0]); return e ? e.innerText.trim() : '';", element_id)


def _chart_state(driver, metric="decode_tok_s"):
    return driver.execute_script(
        """
        const canvas = document.getElementById('chart-' + arguments[0]);
        const chart = Chart.getChart(canvas);
        if (!chart || canvas.dataset.rendered !== '1') return null;
        return {
          datasets: chart.data.datasets.map(ds => ({label: ds.label, points: ds.data.map(p => [p.run, p.y, p.x])})),
        };
        """,
        metric,
    )


def _severe_console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _all_canvases_drawn(driver):
    """Every canvas on the page has been drawn on (our scripts mark it) and has pixels."""
    return driver.execute_script(
        """
        const canvases = [...document.querySelectorAll('canvas')];
        return canvases.length > 0 && canvases.every(c => c.dataset.rendered === '1' && c.width > 0 && c.height > 0);
        """
    )


def _screenshot(driver, name):
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOT_DIR / name))


def _judge(history):
    from benchsite.bench.models import Measurement
    from benchsite.regressions.outcomes import outcomes_refresh

    for (index, position), run in history.items():
        if run.state == "SUCCEEDED":
            Measurement.objects.create(run=run, metric="correct", value=0.0 if (index, position) == (1, 3) else 1.0)
    outcomes_refresh(run_ids=[run.pk for run in history.values()])


def test_benchmark_page_charts_render_db_points_and_open_runs(browser, live_server, history, ladder_benchmark):
    from benchsite.bench.models import Annotation

    from benchsite.regressions.models import ChangePoint, Verdict

    _judge(history)  # batch 1's "nccl LL" output is wrong: a red cross, not on the line
    Annotation.objects.create(benchmark=ladder_benchmark, text="<script>window.pwned=1</script> enabled CUDA graphs",
                              commit="0123abcd")
    marked = history[(2, 2)]  # an improvement verdict and a change point, drawn on the tok/s chart
    Verdict.objects.create(run=marked, metric="decode_tok_s", kind="improvement", effect=0.01, threshold=0.005)
    ChangePoint.objects.create(benchmark=ladder_benchmark, variant=marked.variant, series_key="k", metric="decode_tok_s",
                               run=marked, index=1, commit=marked.commit, before=297.9, after=301.2, change=0.011)
    browser.get(f"{live_server.url}/b/{ladder_benchmark.slug}/")
    state = _wait(browser, _chart_state, "the Chart.js chart")
    expected = {}
    for variant in ladder_benchmark.variants.order_by("position"):
        runs = Run.objects.filter(variant=variant, state=Run.State.SUCCEEDED).exclude(pk=history[(1, 3)].pk).order_by("created_at")
        expected[f"{variant.position}. {variant.name}"] = [(r.pk, r.measurements.get(metric="decode_tok_s").value) for r in runs]
    expected["incorrect output"] = [(history[(1, 3)].pk, 275.4)]
    got = {ds["label"]: [(run, y) for run, y, _ in ds["points"]] for ds in state["datasets"]}
    assert got == expected
    xs = {run: x for ds in state["datasets"] for run, _, x in ds["points"]}
    assert xs[history[(0, 1)].pk] == xs[history[(0, 2)].pk] == xs[history[(0, 3)].pk] == 0
    assert xs[history[(2, 1)].pk] == xs[history[(2, 2)].pk] == 2
    _wait(browser, _all_canvases_drawn, "every chart on the page")
    assert "1 annotation(s)" in browser.find_element("id", "chart-status-decode_tok_s").text
    marks = browser.execute_script("return document.getElementById('chart-decode_tok_s').dataset.marks")
    assert marks == "2"  # the verdict's triangle and the change point's line
    assert browser.execute_script("return window.pwned === undefined")
    assert "<script>window.pwned=1</script> enabled CUDA graphs" in browser.find_element("id", "annotations").text
    assert _severe_console_errors(browser) == []
    _screenshot(browser, "benchmark-history.png")

    # Click the point of run (2, 2) on the tok/s chart: its run page opens.
    target = history[(2, 2)]
    x, y = browser.execute_script(
        """
        const chart = Chart.getChart(document.getElementById('chart-decode_tok_s'));
        const i = chart.data.datasets.findIndex(ds => ds.label === '2. cuda graphs');
        const j = chart.data.datasets[i].data.findIndex(p => p.run === arguments[0]);
        const el = chart.getDatasetMeta(i).data[j];
        const box = chart.canvas.getBoundingClientRect();
        chart.canvas.scrollIntoView({block: 'center'});
        const box2 = chart.canvas.getBoundingClientRect();
        return [el.x - box2.width / 2, el.y - box2.height / 2];
        """,
        target.pk,
    )
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = browser.find_element("id", "chart-decode_tok_s")
    ActionChains(browser).move_to_element_with_offset(canvas, int(x), int(y)).click().perform()
    _wait(browser, lambda d: d.current_url.endswith(f"/runs/{target.pk}/"), "the clicked point's run page")


def test_every_page_draws_its_charts_without_console_errors(browser, live_server, history, ladder_benchmark):
    from benchsite.bench.models import Measurement

    _judge(history)
    run = history[(2, 2)]
    for metric, value in (("allreduce_share", 0.3), ("allreduce_share_analytic", 0.45)):
        Measurement.objects.create(run=run, metric=metric, value=value)
    add_server_log(run, lines=100)
    pages = [  # (screenshot or None, path): the dashboard page's waterfall and time budget are the 2 x H200 ones
        ("home.png", "/"),                                   # (tests/benchsite/bench/pages/test_browser_waterfall.py)
        (None, f"/b/{ladder_benchmark.slug}/waterfall/"),
        (None, f"/runs/{run.pk}/"),
        ("compare.png", f"/compare/?a={history[(0, 2)].pk}&b={run.pk}"),
    ]
    for name, path in pages:
        browser.get(live_server.url + path)
        if browser.find_elements("css selector", "canvas"):
            _wait(browser, _all_canvases_drawn, f"the charts of {path}")
        assert _severe_console_errors(browser) == [], path
        if name:
            _screenshot(browser, name)
    browser.get(f"{live_server.url}/")
    assert "301.2" in browser.find_element("css selector", ".benchmark-summary").text
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    assert browser.find_element("css selector", "pre.log").text.splitlines()[-1] == "INFO log line 100"
    assert "Estimates disagree" in browser.find_element("id", "time-budget").text


def test_login_trigger_and_run_page_in_browser(browser, live_server, history, ladder_benchmark, user, monkeypatch):
    enqueued = []
    # the live server runs in this process; enqueue_run(run_id, queue="")
    monkeypatch.setattr(dispatch, "enqueue_run", lambda run_id, *args, **kwargs: enqueued.append(run_id))
    PoolWorker.objects.update(last_seen_at=timezone.now() - timedelta(hours=2))  # the pool's worker went away
    browser.get(f"{live_server.url}/b/{ladder_benchmark.slug}/")
    browser.find_element("link text", "Log in to trigger").click()
    browser.find_element("name", "username").send_keys("alice")
    browser.find_element("name", "password").send_keys("pw-alice-123")
    browser.find_element("css selector", "form button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements("name", "variants"), "the trigger form")

    boxes = browser.find_elements("name", "variants")
    assert len(boxes) == 3 and all(b.is_selected() for b in boxes)
    boxes[1].click()  # leave out "cuda graphs"
    summary = browser.find_element("id", "trigger-summary").text
    assert "2 run(s) — 1. eager, 3. nccl LL" in summary and "on pool h200x2 (queue gpu.h200x2)" in summary
    # this benchmark runs the installed engine: no ref (the ref field is tested in tests/benchsite/bench/test_builds.py)
    browser.find_element("css selector", ".trigger-form button[type=submit]").click()
    plan = _wait(browser, lambda d: d.find_elements("id", "trigger-plan-summary"), "the review page")[0].text
    assert "2 runs of /models/llama-8b-random" in plan and "on pool h200x2 (queue gpu.h200x2)" in plan
    assert enqueued == []  # nothing is queued before the confirm button
    pool = browser.find_element("id", "trigger-plan-pool").text
    assert "no worker has served pool h200x2 since" in pool and "(2 h ago)" in pool and "position 2" in pool
    _screenshot(browser, "trigger-review.png")
    browser.find_element("css selector", ".trigger-confirm button[type=submit]").click()  # "Queue anyway" is required: nothing is sent
    assert browser.find_elements("id", "trigger-plan-pool") and enqueued == []
    browser.find_element("css selector", "#trigger-force input[name=force]").click()  # "Queue anyway"
    browser.find_element("css selector", ".trigger-confirm button[type=submit]").click()
    message = _wait(browser, lambda d: d.find_elements("css selector", ".messages li"), "the success message")
    batch = Run.objects.filter(triggered_by=user).order_by("variant__position")  # the history's runs have no user
    eager, ll = batch
    assert f"Queued 2 run(s): #{eager.pk} eager, #{ll.pk} nccl LL." in message[0].text
    links = message[0].find_elements("tag name", "a")
    assert [a.get_attribute("href") for a in links] == [f"{live_server.url}/runs/{r.pk}/" for r in (eager, ll)]
    _screenshot(browser, "triggered.png")

    assert sorted(batch.values_list("variant__name", flat=True)) == ["eager", "nccl LL"]
    assert sorted(enqueued) == sorted(batch.values_list("pk", flat=True))

    # The run page of a queued run polls the JSON endpoint and reloads when the state changes.
    run = batch.get(variant__name="eager")
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    assert "QUEUED" in browser.find_element("id", "run-status").text
    queue = _text(browser, "run-queue")
    assert queue.startswith("position 2 of 3 in pool h200x2's queue · no worker has served pool h200x2 since"), queue
    browser.execute_script("window.sameDocument = true")  # gone if the page reloads

    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, phase="probe: decode", started_at=timezone.now())
    _wait(browser, lambda d: "RUNNING" in _text(d, "run-status"), "the page to follow the run")
    _wait(browser, lambda d: "probe: decode" in _text(d, "run-phase"), "the new phase")
    assert not browser.find_element("id", "run-queue").is_displayed()  # it left the queue
    add_server_log(run, lines=70)
    _wait(browser, lambda d: _text(d, "run-log").endswith("INFO log line 70"), "the log tail in place")
    assert "s" in browser.find_element("id", "run-elapsed").text
    assert browser.execute_script("return window.sameDocument === true"), "the page reloaded instead of updating"
    _screenshot(browser, "run-live.png")
    # Found and clicked in one try: a poll can replace the button between the two.
    _wait(browser, lambda d: d.find_element("css selector", "#run-status button.danger").click() or True, "the cancel button")
    _wait(browser, lambda d: "CANCELLED" in _text(d, "run-status"), "the cancelled run")
    assert _severe_console_errors(browser) == []


OUTCOME_BADGES = """
const found = [...document.querySelectorAll(arguments[0])].map(e => {
  const style = getComputedStyle(e);
  return {text: e.innerText.trim(), background: style.backgroundColor, color: style.color};
});
const green = getComputedStyle(document.documentElement).getPropertyValue('--ok').trim();
const red = getComputedStyle(document.documentElement).getPropertyValue('--bad').trim();
const probe = document.createElement('span');
document.body.appendChild(probe);
probe.style.color = green; const greenRgb = getComputedStyle(probe).color;
probe.style.color = red; const redRgb = getComputedStyle(probe).color;
probe.remove();
const scope = arguments[1] ? document.querySelector(arguments[1]) : document.body;
const anyGreen = [...scope.querySelectorAll('*')].some(e => {
  const s = getComputedStyle(e); return s.color === greenRgb || s.backgroundColor === greenRgb;
});
return {badges: found, red: redRgb, anyGreen: anyGreen};
"""


def _badges(driver, selector, scope=None):
    return driver.execute_script(OUTCOME_BADGES, selector, scope)


def test_a_run_judged_incorrect_is_red_and_says_incorrect_everywhere(browser, live_server, history, ladder_benchmark):
    from benchsite.bench.models import Measurement, Run
    from benchsite.regressions.outcomes import outcomes_refresh

    _judge(history)
    wrong = history[(2, 2)]  # cuda graphs' newest finished run: fast, and its output is wrong
    Measurement.objects.filter(run=wrong, metric="correct").update(value=0.0)
    outcomes_refresh(run_ids=[wrong.pk])
    assert Run.objects.get(id=wrong.id).outcome == "incorrect"

    browser.get(f"{live_server.url}/runs/{wrong.pk}/")
    found = _badges(browser, "#run-state .outcome", "#run-state")
    assert [(b["text"], b["background"]) for b in found["badges"]] == [("incorrect", found["red"])]
    assert not found["anyGreen"], "the run's state line has a green element"
    assert browser.find_element("css selector", "#run-state .state").text == "SUCCEEDED"  # how it ran, kept
    _screenshot(browser, "run-incorrect.png")

    browser.get(f"{live_server.url}/b/{ladder_benchmark.slug}/")
    row = f"#recent-run-{wrong.pk}"
    found = _badges(browser, f"{row} .outcome", row)
    assert [(b["text"], b["background"]) for b in found["badges"]] == [("incorrect", found["red"])]
    assert not found["anyGreen"], "the run's row in the list has a green element"

    browser.get(f"{live_server.url}/")
    row = "#home-variant-" + str(wrong.variant_id)
    found = _badges(browser, f"{row} .latest-outcome .outcome", row)
    assert [(b["text"], b["background"]) for b in found["badges"]] == [("incorrect", found["red"])]
    assert not found["anyGreen"], "the variant's row on the home page has a green element"
    _screenshot(browser, "home-incorrect.png")
