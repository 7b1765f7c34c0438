"""A git benchmark's history in Chromium: main's commits make the line, a run of another branch is
a grey ring at the commit it branched from, named in its tooltip and in the table under the chart."""
import uuid

import pytest

from benchsite.bench.models import Benchmark, Build, EngineSource, Measurement, Run, Variant

from .test_browser import _chart_state, _severe_console_errors, _wait

pytestmark = pytest.mark.django_db(transaction=True)


def _run(bench, variant, commit, branch, value, *, parent="", depth=None):
    build = Build.objects.create(commit=commit, parent_commit=parent, first_parent_depth=depth)
    run = Run.objects.create(benchmark=bench, variant=variant, batch=uuid.uuid4(), state=Run.State.SUCCEEDED,
                             commit=commit, ref=branch, branch=branch, build=build)
    Measurement.objects.create(run=run, metric="decode_tok_s", value=value, unit="tok/s", direction="higher")
    Measurement.objects.create(run=run, metric="correct", value=1.0)
    return run


def test_a_branch_run_is_drawn_apart_at_its_fork(browser, live_server):  # noqa: F811
    source = EngineSource.objects.create(name="vllm", kind=EngineSource.Kind.GIT, repo_url="https://x/o/vllm",
                                         default_ref="main")
    bench = Benchmark.objects.create(name="git bench", slug="git-bench", model="m", engine_source=source)
    variant = Variant.objects.create(benchmark=bench, position=1, name="eager")
    main = [f"{i:x}" * 40 for i in (1, 2, 3)]
    line = [_run(bench, variant, main[0], "main", 100.0, depth=1),
            _run(bench, variant, main[1], "main", 101.0, parent=main[0], depth=2)]
    feature = _run(bench, variant, "f" * 40, "perf/x", 60.0, parent=main[0], depth=2)
    line.append(_run(bench, variant, main[2], "main", 99.0, parent=main[1], depth=3))

    browser.get(f"{live_server.url}/b/{bench.slug}/")
    state = _wait(browser, _chart_state, "the Chart.js chart")
    got = {ds["label"]: ds["points"] for ds in state["datasets"]}
    assert got["1. eager"] == [[run.pk, run.measurements.get(metric="decode_tok_s").value, x]
                               for x, run in enumerate(line)]
    assert got["other branches"] == [[feature.pk, 60.0, 0]]  # at main[0], the commit it branched from
    title = browser.execute_script(
        "const chart = Chart.getChart(document.getElementById('chart-decode_tok_s'));"
        "return chart.options.plugins.tooltip.callbacks.title([{raw: chart.data.datasets[2].data[0]}]);")
    assert title == "f" * 12 + " · perf/x"
    axis = browser.execute_script(
        "return Chart.getChart(document.getElementById('chart-decode_tok_s')).options.scales.x.title.text")
    assert axis == "commit of main (first-parent order)"
    row = browser.find_element("css selector", f"#history-decode_tok_s a[href='/runs/{feature.pk}/']")
    assert "off main: perf/x" in row.find_element("xpath", "../..").get_attribute("textContent")
    assert _severe_console_errors(browser) == []
