"""The pull-request page in real headless Chromium: it loads without console errors, and a run's
link opens the run page, which links back."""
import pytest

from tests.benchsite.bench.pages.test_browser import _screenshot, _severe_console_errors

from .pull_scene import pull_scene

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_pull_request_page_loads_clean_and_links_its_runs(browser, live_server):
    scene = pull_scene()
    browser.get(f"{live_server.url}/pr/github.com/acme/vllm/12/")
    assert "Fuse RMSNorm" in browser.title + browser.page_source
    assert _severe_console_errors(browser) == []
    _screenshot(browser, "pull-request.png")
    browser.find_element("css selector", f'#comparison-tiny-a a[href="/runs/{scene.head_run.id}/"]').click()
    link = browser.find_element("css selector", "#run-pull a")
    assert link.text == "PR #12" and link.get_attribute("href").endswith("/pr/github.com/acme/vllm/12/")
    assert _severe_console_errors(browser) == []
