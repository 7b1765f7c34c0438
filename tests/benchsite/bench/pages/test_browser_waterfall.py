"""The 2 x H200 ladder (docs/data/ladder-h200x2.json, as `make run` imports it) in real headless
Chromium: the waterfall draws a bar for each of its four steps, the NCCL steps' losses in their
own colour, and every share axis reads %."""
import json

import pytest

from benchsite.bench.lifecycle import imports
from benchsite.bench.definitions.demo import H200_LADDER

from .test_browser import _all_canvases_drawn, _screenshot, _severe_console_errors, _wait

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def h200_ladder():
    return imports.runs_import(data=json.loads(H200_LADDER.read_text()), gpu_pool="h200x2")[0].benchmark


def test_the_h200_waterfall_shows_four_bars_and_the_share_axis_reads_percent(browser, live_server, h200_ladder):
    browser.get(f"{live_server.url}/b/{h200_ladder.slug}/waterfall/")
    _wait(browser, _all_canvases_drawn, "the waterfall chart")
    assert _severe_console_errors(browser) == []
    chart = browser.execute_script(
        """
        const chart = Chart.getChart(document.getElementById('waterfall-chart'));
        const bars = chart.getDatasetMeta(0);
        chart.scales.share.ticks.forEach(t => t.label);  // built
        return {
          labels: chart.data.labels,
          heights: bars.data.map(b => Math.abs(b.base - b.y)),
          colours: chart.data.datasets[0].backgroundColor,
          theme: {ok: benchTheme.ok, loss: benchTheme.loss, muted: benchTheme.muted},
          shareTicks: chart.scales.share.ticks.map(t => chart.scales.share.options.ticks.callback(t.value)),
          shareTitle: chart.scales.share.options.title.text,
          shares: chart.data.datasets[1].data,
        };
        """
    )
    assert chart["labels"] == ["eager", "cuda graphs (custom allreduce)", "NCCL LL (custom allreduce off)",
                               "NCCL Simple (custom allreduce off)"]
    assert len(chart["heights"]) == 4 and all(h > 0 for h in chart["heights"])
    theme = chart["theme"]
    assert chart["colours"] == [theme["muted"], theme["ok"], theme["loss"], theme["loss"]]  # LL and Simple lose
    assert chart["shareTitle"] == "allreduce share of a decode step (%)"
    assert chart["shareTicks"] and all(t.endswith("%") for t in chart["shareTicks"])
    assert chart["shares"] == pytest.approx([15.5019, 8.4778, 9.5186, 33.2807])
    story = browser.find_element("id", "waterfall-story").text
    assert story.startswith("eager 49.42 tok/s -> cuda graphs (custom allreduce) 293.2 (+493.3%)")
    assert "NCCL LL (custom allreduce off) 271.1 (\u22127.5%)" in story and "205.8 (\u221224.1%)" in story
    _screenshot(browser, "waterfall.png")

    # the history's share chart reads % too
    browser.get(f"{live_server.url}/b/{h200_ladder.slug}/")
    _wait(browser, lambda d: d.execute_script(
        "const c = document.getElementById('chart-allreduce_share'); return c && c.dataset.rendered === '1';"),
        "the allreduce share chart")
    axis = browser.execute_script(
        """
        const y = window.benchCharts.allreduce_share.scales.y;
        return {title: y.options.title.text, ticks: y.ticks.map(t => t.label)};
        """
    )
    assert axis["title"] == "allreduce share of a decode step (%)"
    assert axis["ticks"] and all(t.endswith("%") for t in axis["ticks"])
    assert not any(t.startswith("0.") for t in axis["ticks"])


def test_the_h200_run_page_has_one_headline_ceiling(browser, live_server, h200_ladder):
    run = h200_ladder.runs.get(variant__name="cuda graphs (custom allreduce)")
    browser.get(f"{live_server.url}/runs/{run.pk}/")
    _wait(browser, _all_canvases_drawn, "the time budget chart")
    assert browser.find_element("id", "budget-ceiling").text == "320.3 tok/s"
    assert browser.find_element("id", "budget-allreduce").text == "289.2 us · 8.5%"
    estimates = browser.find_element("id", "budget-estimates").text
    assert "headline" in estimates and estimates.count("estimate") == 2
    browser.execute_script("document.getElementById('time-budget').scrollIntoView()")
    _screenshot(browser, "run-time-budget.png")
