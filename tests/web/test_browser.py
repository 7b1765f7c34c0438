"""The dashboard in real headless Chromium (Debian `chromium` + `chromium-driver`, driven by Selenium).

The chart must render from the JSON endpoint with Chart.js served from static files, and its
points must be the database's. Screenshots go to $BENCH_SCREENSHOT_DIR (default /tmp).
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
SCREENSHOT_DIR = Path(os.environ.get("BENCH_SCREENSHOT_DIR", "/tmp"))
WAIT_S = 20

from selenium import webdriver  # a dev dependency: its absence is an install error, not a skip

if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
    # `make test` installs them (the `browser` target checks these same paths). A skip would hide
    # a missing browser in CI, so only an explicit opt-out skips.
    message = f"headless Chromium is required: {CHROMIUM} or {CHROMEDRIVER} is missing (run `make browser`)"
    if os.environ.get("BENCH_SKIP_BROWSER") != "1":
        raise RuntimeError(message)
    pytest.skip(message, allow_module_level=True)

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


def _chart_state(driver):
    return driver.execute_script(
        """
        const canvas = document.getElementById('metric-chart');
        const chart = Chart.getChart(canvas);
        if (!chart || canvas.dataset.rendered !== '1') return null;
        return {
          metric: canvas.dataset.metric,
          datasets: chart.data.datasets.map(ds => ({
            label: ds.label, points: ds.data.map(p => [p.run, p.y, p.x]),
          })),
        };
        """
    )


def _severe_console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_benchmark_page_chart_renders_db_points(browser, live_server, history, ladder_benchmark):
    browser.get(f"{live_server.url}/b/{ladder_benchmark.slug}/")
    state = _wait(browser, _chart_state, "the Chart.js chart")
    assert state["metric"] == "decode_tok_s"

    expected = {}
    for variant in ladder_benchmark.variants.order_by("position"):
        runs = Run.objects.filter(variant=variant, state=Run.State.SUCCEEDED).order_by("created_at")
        expected[f"{variant.position}. {variant.name}"] = [(r.pk, r.measurements.get(metric="decode_tok_s").value) for r in runs]
    got = {ds["label"]: [(run, y) for run, y, _ in ds["points"]] for ds in state["datasets"]}
    assert got == expected
    assert list(got) == ["1. eager", "2. cuda graphs", "3. nccl LL"]
    # Runs of one trigger batch share an x position; three batches had successful runs.
    xs = {run: x for ds in state["datasets"] for run, _, x in ds["points"]}
    assert xs[history[(0, 1)].pk] == xs[history[(0, 2)].pk] == xs[history[(0, 3)].pk] == 0
    assert xs[history[(2, 1)].pk] == xs[history[(2, 2)].pk] == 2
    assert "7 successful run(s) in 3 batch(es)" in browser.find_element("id", "chart-status").text
    assert _severe_console_errors(browser) == []

    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT_DIR / "bench-benchmark-page.png"))

    # Another metric from the selector: the chart reloads from the endpoint.
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "chart-metric")).select_by_value("ttft_ms")
    state = _wait(browser, lambda d: (s := _chart_state(d)) and s["metric"] == "ttft_ms" and s, "the ttft_ms chart")
    assert [len(ds["points"]) for ds in state["datasets"]] == [3, 2, 2]
    assert state["datasets"][0]["points"][0][1] == pytest.approx(3000 / 49.5)

    # The list page and a finished run's page, for a look at them.
    browser.get(f"{live_server.url}/")
    assert "301.2" in browser.find_element("css selector", ".benchmark-summary").text
    browser.save_screenshot(str(SCREENSHOT_DIR / "bench-list-page.png"))
    done = history[(0, 1)]
    add_server_log(done, lines=100)
    browser.get(f"{live_server.url}/runs/{done.pk}/")
    assert browser.find_element("css selector", "pre.log").text.splitlines()[-1] == "INFO log line 100"
    browser.save_screenshot(str(SCREENSHOT_DIR / "bench-run-done-page.png"))
    assert _severe_console_errors(browser) == []


def test_login_trigger_and_run_page_in_browser(browser, live_server, history, ladder_benchmark, user, monkeypatch):
    enqueued = []
    monkeypatch.setattr(services, "enqueue_run", enqueued.append)  # the live server runs in this process
    browser.get(f"{live_server.url}/b/{ladder_benchmark.slug}/")
    browser.find_element("link text", "Log in to trigger").click()
    browser.find_element("name", "username").send_keys("alice")
    browser.find_element("name", "password").send_keys("pw-alice-123")
    browser.find_element("css selector", "form button[type=submit]").click()
    _wait(browser, lambda d: d.find_elements("name", "variants"), "the trigger form")

    boxes = browser.find_elements("name", "variants")
    assert len(boxes) == 3 and all(b.is_selected() for b in boxes)
    boxes[1].click()  # leave out "cuda graphs"
    # this benchmark runs the installed engine: no ref (the ref field is tested in tests/build)
    browser.find_element("css selector", ".trigger-form button[type=submit]").click()
    message = _wait(browser, lambda d: d.find_elements("css selector", ".messages li"), "the success message")
    assert "Queued 2 run(s): eager, nccl LL." in message[0].text
    browser.save_screenshot(str(SCREENSHOT_DIR / "bench-triggered.png"))

    batch = Run.objects.filter(trigger=Run.Trigger.FORM)
    assert sorted(batch.values_list("variant__name", flat=True)) == ["eager", "nccl LL"]
    assert sorted(enqueued) == sorted(batch.values_list("pk", flat=True))

    # The run page of a queued run polls the JSON endpoint and reloads when the state changes.
    run = batch.get(variant__name="eager")
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    assert "QUEUED" in browser.find_element("id", "run-status").text
    Run.objects.filter(pk=run.pk).update(state=Run.State.RUNNING, phase="probe: decode")
    _wait(browser, lambda d: "RUNNING" in d.find_element("id", "run-status").text, "the page to follow the run")
    _wait(browser, lambda d: "probe: decode" in d.find_element("id", "run-phase").text, "the new phase")
    browser.save_screenshot(str(SCREENSHOT_DIR / "bench-run-page.png"))
    _wait(browser, lambda d: d.find_element("css selector", "#run-status button.danger"), "the cancel button").click()
    _wait(browser, lambda d: "CANCELLED" in d.find_element("id", "run-status").text, "the cancelled run")
    assert _severe_console_errors(browser) == []
