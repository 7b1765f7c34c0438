"""Headless Chromium for the dashboard's browser tests (Debian `chromium` + `chromium-driver`,
driven by Selenium): one per test process, handed to each test as a fresh one."""
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/lib/chromium/chromium")  # the binary, not the /usr/bin wrapper
CHROMEDRIVER = os.environ.get("BENCH_CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver")
WAIT_S = 20


@pytest.fixture(scope="session")
def _chromium(tmp_path_factory):
    """One headless Chromium per test process: starting one costs more than most of these tests."""
    from selenium import webdriver  # a dev dependency: its absence is an install error, not a skip
    from selenium.webdriver.chrome.service import Service

    # `make test` installs them (the `os-packages` target checks these same paths): a missing
    # browser fails the test, never skips it.
    assert Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file(), (
        f"headless Chromium is required: {CHROMIUM} or {CHROMEDRIVER} is missing (run `make browser`)")

    profile = tmp_path_factory.mktemp("chromium")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1280,1500", f"--user-data-dir={profile / 'profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER, log_output=str(profile / "chromedriver.log")))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture
def browser(_chromium):
    """The process's Chromium as a fresh one: a blank page, no cookies (no login), no console
    messages of an earlier test."""
    _chromium.get("about:blank")
    _chromium.execute_cdp_cmd("Network.clearBrowserCookies", {})
    _chromium.get_log("browser")
    yield _chromium
    _chromium.get("about:blank")  # stop the page's timers before the live server's database is flushed
