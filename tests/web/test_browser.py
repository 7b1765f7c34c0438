"""The dashboard in real headless Chromium (Debian `chromium` + `chromium-driver`, driven by Selenium).

The chart must render from the JSON endpoint with Chart.js served from static files, and its
points must be the database's. Screenshots go to $BENCH_SCREENSHOT_DIR (default var/screenshots/; the README's
come from `BENCH_SCREENSHOT_DIR=docs/screenshots pytest tests/web/test_browser.py`), so a test run never dirties the tree.
"""
import os
import shutil
from pathlib import Path

import pytest

from benchsite.bench import services
from benchsite.bench.models import Run

from .conftest import add_server_log

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/lib/chromium/chromium")  # the binary, not the /usr/bin wrapper
CHROMEDRIVER = os.environ.get("BENCH_CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver")
SCREENSHOT_DIR = Path(os.environ.get("BENCH_SCREENSHOT_DIR", Path(__file__).resolve().parents[2] / "var" / "screenshots"))
WAIT_S = 20

from selenium import webdriver  # a dev dependency: its absence is an install error, not a skip

if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
    # `make test` installs them (the `browser` target checks these same paths): a missing browser
    # is an install error, never a skip.
    raise RuntimeError(f"headless Chromium is required: {CHROMIUM} or {CHROMEDRIVER} is missing (run `make browser`)")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def browser(tmp_path):
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1280,1500", f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


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

    for (index, position), run in history.items():
        if run.state == "SUCCEEDED":
            Measurement.objects.create(run=run, metric="correct", value=0.0 if (index, position) == (1, 3) else 1.0)


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
    pages = {
        "home.png": "/",
        "waterfall.png": f"/b/{ladder_benchmark.slug}/waterfall/",
        "run-time-budget.png": f"/runs/{run.pk}/",
        "compare.png": f"/compare/?a={history[(0, 2)].pk}&b={run.pk}",
    }
    for name, path in pages.items():
        browser.get(live_server.url + path)
        if browser.find_elements("css selector", "canvas"):
            _wait(browser, _all_canvases_drawn, f"the charts of {path}")
        assert _severe_console_errors(browser) == [], path
        _screenshot(browser, name)
    browser.get(f"{live_server.url}/")
    assert "301.2" in browser.find_element("css selector", ".benchmark-summary").text
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    assert browser.find_element("css selector", "pre.log").text.splitlines()[-1] == "INFO log line 100"
    assert "Estimates disagree" in browser.find_element("id", "time-budget").text


def test_login_trigger_and_run_page_in_browser(browser, live_server, history, ladder_benchmark, user, monkeypatch):
    enqueued = []
    # the live server runs in this process; enqueue_run(run_id, queue="")
    monkeypatch.setattr(services, "enqueue_run", lambda run_id, *args, **kwargs: enqueued.append(run_id))
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
    # this benchmark runs the installed engine: no ref (the ref field is tested in tests/builds)
    browser.find_element("css selector", ".trigger-form button[type=submit]").click()
    plan = _wait(browser, lambda d: d.find_elements("id", "trigger-plan-summary"), "the review page")[0].text
    assert "2 runs of /models/llama-8b-random" in plan and "on pool h200x2 (queue gpu.h200x2)" in plan
    assert enqueued == []  # nothing is queued before the confirm button
    _screenshot(browser, "trigger-review.png")
    browser.find_element("css selector", ".trigger-confirm button[type=submit]").click()
    message = _wait(browser, lambda d: d.find_elements("css selector", ".messages li"), "the success message")
    assert "Queued 2 run(s): eager, nccl LL." in message[0].text
    _screenshot(browser, "triggered.png")

    batch = Run.objects.filter(triggered_by=user)  # the history's runs have no user
    assert sorted(batch.values_list("variant__name", flat=True)) == ["eager", "nccl LL"]
    assert sorted(enqueued) == sorted(batch.values_list("pk", flat=True))

    # The run page of a queued run polls the JSON endpoint and reloads when the state changes.
    run = batch.get(variant__name="eager")
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    assert "QUEUED" in browser.find_element("id", "run-status").text
    browser.execute_script("window.sameDocument = true")  # gone if the page reloads
    from django.utils import timezone

    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, phase="probe: decode", started_at=timezone.now())
    _wait(browser, lambda d: "RUNNING" in _text(d, "run-status"), "the page to follow the run")
    _wait(browser, lambda d: "probe: decode" in _text(d, "run-phase"), "the new phase")
    add_server_log(run, lines=70)
    _wait(browser, lambda d: _text(d, "run-log").endswith("INFO log line 70"), "the log tail in place")
    assert "s" in browser.find_element("id", "run-elapsed").text
    assert browser.execute_script("return window.sameDocument === true"), "the page reloaded instead of updating"
    _screenshot(browser, "run-live.png")
    # Found and clicked in one try: a poll can replace the button between the two.
    _wait(browser, lambda d: d.find_element("css selector", "#run-status button.danger").click() or True, "the cancel button")
    _wait(browser, lambda d: "CANCELLED" in _text(d, "run-status"), "the cancelled run")
    assert _severe_console_errors(browser) == []
