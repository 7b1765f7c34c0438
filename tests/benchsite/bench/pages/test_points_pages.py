"""Workload points on the pages: the run page shows its points side by side (numbers with their
units), the benchmark page has a point selector, and the chart JSON takes `point`."""
import pytest

from benchsite.bench.lifecycle import claim, complete
from benchsite.bench.lifecycle.trigger import runs_trigger
from benchsite.bench.models import Run
from runners.contract import Measurement as Figure

pytestmark = pytest.mark.django_db
C16 = "c16-p8192-m256"


def _figure(metric, value, point=""):
    return {**Figure.of(metric, value).to_dict(), **({"point": point} if point else {})}


@pytest.fixture
def run(ladder_benchmark, sent):
    ladder_benchmark.workloads = [{"max_tokens": 256}, {"concurrency": 16, "prompt_tokens": 8192, "max_tokens": 256}]
    ladder_benchmark.save()
    [run] = runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API, variants=[ladder_benchmark.variants.first()])
    claim.run_claim(run_id=run.id, task_id="t", worker_host="gpu-1")
    figures = [_figure("decode_tok_s", 50.1, "c1-p0-m256"), _figure("ttft_ms", 41.0, "c1-p0-m256"),
               _figure("itl_ms_p50", 19.9, "c1-p0-m256"), _figure("allreduce_share", 0.0848),
               _figure("decode_tok_s", 31.5, C16), _figure("ttft_ms", 880.0, C16), _figure("itl_ms_p50", 0.75, C16),
               # the floor's inputs, once a run: 16 GB of weights, 128 KiB of KV a token, 4 TB/s
               _figure("weight_bytes_per_gpu", 16e9), _figure("kv_bytes_per_token", 131072),
               _figure("mem_bandwidth_gb_s", 4000.0)]
    assert complete.run_complete(run_id=run.id, task_id="t", result={"measurements": figures, "notes": [SKIPPED]})
    return Run.objects.get(id=run.id)


SKIPPED = ("point c64-p32768-m128 skipped: 64 streams of 32896 tokens need 2105344 tokens of KV cache, "
           "the engine has 912206")


def _table(page: str) -> str:
    start = page.index('id="run-points"')
    return page[start:page.index("</table>", start)]


def test_the_run_page_shows_its_points_side_by_side(client, run):
    table = _table(client.get(f"/runs/{run.id}/").content.decode())
    for heading in ("decode tok/s", "slowest stream", "aggregate", "TTFT p50", "ITL p50", "allreduce share"):
        assert f"<th class=\"num\">{heading}</th>" in table
    first, sixteen = table.split("<code>")[1:]
    assert first.startswith("c1-p0-m256") and sixteen.startswith(C16)
    assert all(cell in first for cell in ("50.1 tok/s", "41 ms", "19.9 ms", "8.5%"))
    assert all(cell in sixteen for cell in ("31.5 tok/s", "880 ms", "750 us", "–"))
    # the floor: weights 4.0 ms a step; KV 128 tokens x 128 KiB alone, 16 x (8192 + 128) with 16 streams
    assert "<th class=\"num\">floor of the step</th>" in table
    assert "4.004 ms of 19.96 ms (20%)" in first and "8.362 ms of 31.75 ms (26%)" in sixteen


def test_a_run_of_one_point_has_no_points_table(client, ladder_benchmark, sent):
    [single] = runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API, variants=[ladder_benchmark.variants.first()])
    assert 'id="run-points"' not in client.get(f"/runs/{single.id}/").content.decode()


def test_the_chart_json_and_the_benchmark_page_take_a_point(client, run):
    url = f"/api/benchmarks/{run.benchmark.slug}/chart/"
    default = client.get(url).json()
    at16 = client.get(url, {"point": C16}).json()
    assert (default["point"], at16["point"]) == ("c1-p0-m256", C16)
    assert [p["y"] for p in default["variants"][0]["points"]] == [50.1]
    assert [p["y"] for p in at16["variants"][0]["points"]] == [31.5]
    bad = client.get(url, {"point": "c2-p0-m8"})
    assert bad.status_code == 400 and f"this benchmark's points: c1-p0-m256, {C16}" in bad.json()["error"]
    page = client.get(f"/b/{run.benchmark.slug}/", {"point": C16}).content.decode()
    assert f'<option value="{C16}" selected>' in page and f'data-point="{C16}"' in page


def test_a_skipped_point_is_said_on_the_run_page_and_in_the_api(client, run):
    page = client.get(f"/runs/{run.id}/").content.decode()
    notes = page[page.index('id="run-notes"'):]
    assert SKIPPED in notes[:notes.index("</ul>")]
    assert client.get(f"/api/runs/{run.id}/").json()["notes"] == [SKIPPED]


def _second_run(run, ladder_benchmark, c16_tok_s):
    [other] = runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API, variants=[run.variant])
    claim.run_claim(run_id=other.id, task_id="t2", worker_host="gpu-1")
    figures = [_figure("decode_tok_s", 49.0, "c1-p0-m256"), _figure("decode_tok_s", c16_tok_s, C16),
               _figure("aggregate_tok_s", 16 * c16_tok_s, C16)]
    assert complete.run_complete(run_id=other.id, task_id="t2", result={"measurements": figures})
    return other


def test_the_compare_page_puts_the_points_of_both_runs_side_by_side(client, run, ladder_benchmark):
    other = _second_run(run, ladder_benchmark, 25.2)
    page = client.get(f"/compare/?a={run.id}&b={other.id}").content.decode()
    table = page[page.index('id="compare-points"'):]
    table = table[:table.index("</table>")]
    rows = [r for r in table.split("<tr>")[2:]]
    assert rows[0].startswith("<td><code>c1-p0-m256</code>") and "50.1 tok/s" in rows[0] and "49 tok/s" in rows[0]
    c16 = next(r for r in rows if C16 in r and "decode throughput<" in r)
    assert "31.5 tok/s" in c16 and "25.2 tok/s" in c16 and "−20.0%" in c16


def test_the_waterfall_takes_a_point(client, run):
    page = client.get(f"/b/{run.benchmark.slug}/waterfall/?point={C16}").content.decode()
    assert 'id="waterfall-point"' in page and f"point <code>{C16}</code>" in page
    assert "31.5 tok/s" in page.split('id="waterfall-story"')[1][:300]
    first = client.get(f"/b/{run.benchmark.slug}/waterfall/").content.decode()
    assert "50.1 tok/s" in first.split('id="waterfall-story"')[1][:300]
    bad = client.get(f"/b/{run.benchmark.slug}/waterfall/?point=c9-p9-m9")
    assert bad.status_code == 400 and "unknown point &#x27;c9-p9-m9&#x27;" in bad.content.decode()


def _share_chart(page: str):
    import json
    start = page.index('<script id="point-share-data" type="application/json">') + len(
        '<script id="point-share-data" type="application/json">')
    return json.loads(page[start:page.index("</script>", start)])


def test_the_run_page_charts_the_allreduce_share_against_concurrency(client, ladder_benchmark, sent):
    ladder_benchmark.workloads = [{"max_tokens": 256}, {"concurrency": 4, "max_tokens": 256},
                                  {"concurrency": 4, "prompt_tokens": 256, "max_tokens": 256},
                                  {"concurrency": 1, "prompt_tokens": 256, "max_tokens": 256}, {"concurrency": 8, "max_tokens": 256}]
    ladder_benchmark.save()
    [run] = runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.API, variants=[ladder_benchmark.variants.first()])
    claim.run_claim(run_id=run.id, task_id="t", worker_host="gpu-1")
    figures = [_figure("decode_tok_s", 50.0, "c1-p0-m256"), _figure("allreduce_share", 0.0848),  # the first point's
               _figure("allreduce_share", 0.1234, "c4-p0-m256"), _figure("allreduce_share", 0.2, "c4-p256-m256"),
               _figure("allreduce_share", 0.15, "c1-p256-m256"), _figure("decode_tok_s", 20.0, "c8-p0-m256")]
    assert complete.run_complete(run_id=run.id, task_id="t", result={"measurements": figures})
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="point-share-chart"' in page and "bench/pointshare.js" in page and "chart.umd.min.js" in page
    chart = _share_chart(page)
    assert chart["unit"] == "%" and "concurrency" in chart["x_label"]
    assert [(line["label"], [(p["x"], p["y"], p["point"]) for p in line["points"]]) for line in chart["lines"]] == [
        ("the benchmark's prompt", [(1, 8.48, "c1-p0-m256"), (4, 12.34, "c4-p0-m256")]),  # c8 has no share
        ("256-token prompt", [(1, 15.0, "c1-p256-m256"), (4, 20.0, "c4-p256-m256")])]
    assert "12.3%" in _table(page)  # the table is the chart's fallback, numbers with units


def test_one_share_draws_no_chart(client, run):
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="run-points"' in page and 'id="point-share-chart"' not in page and "pointshare.js" not in page
