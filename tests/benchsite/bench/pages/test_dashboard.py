"""Dashboard pages and endpoints: annotations, waterfall, compare, run page extras, bad input,
downsampling and constant query counts."""
import json
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchsite.bench.lifecycle import results
from benchsite.bench.domain.downsample import lttb_indices
from benchsite.bench.models import Annotation, Benchmark, Measurement, Run, Variant

pytestmark = pytest.mark.django_db

SHA_A, SHA_B = "a" * 40, "b" * 40


def _run(benchmark, variant, *, commit="", tok_s=None, correct=None, state="SUCCEEDED", hours=0, batch=None, **metrics):
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=batch or uuid.uuid4(), state=state, commit=commit)
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() + timedelta(hours=hours))
    if tok_s is not None:
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher",
                                   ci_low=tok_s * 0.99, ci_high=tok_s * 1.01)
    if correct is not None:
        Measurement.objects.create(run=run, metric="correct", value=float(correct), direction="higher")
    for name, value in metrics.items():
        Measurement.objects.create(run=run, metric=name, value=value)
    return run


@pytest.fixture
def h200_ladder(db):
    """The seeds' story: eager 20 -> +CUDA graphs 43 -> +NCCL LL 57.6 tok/s, and a faster but
    incorrect fourth step."""
    benchmark = Benchmark.objects.create(name="H200 ladder", slug="h200", model="m", tensor_parallel_size=2, gpu_pool="h200x2")
    eager = Variant.objects.create(benchmark=benchmark, position=1, name="eager", is_reference=True)
    graphs = Variant.objects.create(benchmark=benchmark, position=2, name="CUDA graphs")
    ll = Variant.objects.create(benchmark=benchmark, position=3, name="NCCL LL", env={"NCCL_PROTO": "LL"})
    broken = Variant.objects.create(benchmark=benchmark, position=4, name="broken fusion", builds_on=graphs)
    batch = uuid.uuid4()
    runs = {v.name: _run(benchmark, v, commit=SHA_B, tok_s=t, correct=c, batch=batch, hours=-1)
            for v, t, c in ((eager, 20.0, 1), (graphs, 43.0, 1), (ll, 57.6, 1), (broken, 90.0, 0))}
    return benchmark, runs


def test_waterfall_tells_the_whole_ladder_story(client, h200_ladder):
    benchmark, runs = h200_ladder
    response = client.get(f"/b/{benchmark.slug}/waterfall/", {"commit": SHA_B[:8]})
    assert response.status_code == 200
    data = response.context["waterfall"]
    story = "eager 20 tok/s -> CUDA graphs 43 (+115.0%) -> NCCL LL 57.6 (+34.0%) -> broken fusion: incorrect output"
    assert data["story"] == story
    # every step, the incorrect one too (after the fastest correct one)
    assert [s["variant"].name for s in data["steps"]] == ["eager", "CUDA graphs", "NCCL LL", "broken fusion"]
    assert [s["gain"] for s in data["steps"]] == [None, 23.0, pytest.approx(14.6), 47.0]
    assert data["fastest"]["variant"].name == "NCCL LL"
    bars = response.context["chart_data"]
    assert [(b["from"], b["to"]) for b in bars] == [(0.0, 20.0), (20.0, 43.0), (43.0, 57.6), (43.0, 90.0)]
    assert [b["incorrect"] for b in bars] == [False, False, False, True]
    assert story.replace(">", "&gt;") in response.content.decode()


def test_waterfall_shows_losses_shares_and_what_took_effect(client, h200_ladder):
    benchmark, runs = h200_ladder
    Measurement.objects.filter(run=runs["NCCL LL"], metric="decode_tok_s").update(value=38.7)  # -10% against graphs
    for name, share in (("CUDA graphs", 0.084778), ("NCCL LL", 0.095186)):
        Measurement.objects.create(run=runs[name], metric="allreduce_share", value=share)
    Run.objects.filter(pk=runs["NCCL LL"].pk).update(took_effect={"checks": [
        {"setting": "NCCL_PROTO", "asked": "LL", "effective": "LL x2", "verdict": "superseded", "source": "variant",
         "flag": True, "why": "the allreduce + RMSNorm fusion (FlashInfer) reduces every layer"}]})
    response = client.get(f"/b/{benchmark.slug}/waterfall/")
    ll = response.context["chart_data"][2]
    assert (ll["from"], ll["to"], ll["loss"]) == (43.0, 38.7, True)
    assert ll["share"] == 0.095186 and ll["no_effect"] and ll["no_effect_settings"] == ["NCCL_PROTO"]
    assert "(\u221210.0%)" in response.context["waterfall"]["story"]
    html = response.content.decode()
    assert "8.5%" in html and "9.5%" in html  # shares as %
    assert "no effect: NCCL_PROTO" in html
    assert '"unit": "%"' in html  # the share axis's unit, passed to the chart


def test_waterfall_measures_a_step_against_the_step_it_builds_on(client, h200_ladder):
    benchmark, runs = h200_ladder
    Measurement.objects.filter(run=runs["broken fusion"], metric="correct").update(value=1.0)
    data = client.get(f"/b/{benchmark.slug}/waterfall/").context["waterfall"]
    step = data["steps"][3]
    assert step["base"].name == "CUDA graphs" and step["gain"] == 47.0  # 90 - 43, not 90 - 57.6


def test_waterfall_bad_and_unknown_commit(client, h200_ladder):
    benchmark, _ = h200_ladder
    bad = client.get(f"/b/{benchmark.slug}/waterfall/", {"commit": "not-a-sha!"})
    assert bad.status_code == 400 and "hex commit" in bad.content.decode()
    assert client.get(f"/b/{benchmark.slug}/waterfall/", {"commit": "c" * 40}).status_code == 404
    assert client.get("/b/nope/waterfall/").status_code == 404


def test_annotation_with_script_is_escaped_and_placed_on_every_chart(client, django_user_model, h200_ladder):
    benchmark, _ = h200_ladder
    user = django_user_model.objects.create_user(username="bob", password="pw")
    client.force_login(user)
    text = '<script>alert("x")</script> enabled CUDA graphs'
    response = client.post(f"/b/{benchmark.slug}/annotations/", {"text": text, "commit": SHA_B[:10]})
    assert response.status_code == 302
    note = Annotation.objects.get()
    assert (note.text, note.commit, note.created_by) == (text, SHA_B[:10], user)

    html = client.get(f"/b/{benchmark.slug}/").content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; enabled CUDA graphs" in html
    for metric in ("decode_tok_s", "correct"):  # every chart of the benchmark
        chart = client.get(f"/api/benchmarks/{benchmark.slug}/chart/", {"metric": metric}).json()
        # JSON, drawn on the canvas with fillText: never parsed as HTML
        assert [(a["text"], a["x_from"], a["x_to"]) for a in chart["annotations"]] == [(text, 0, 0)]


def test_annotation_over_a_date_range_covers_the_commits_in_it(client, h200_ladder):
    benchmark, runs = h200_ladder
    graphs = benchmark.variants.get(position=2)
    _run(benchmark, graphs, commit=SHA_A, tok_s=44.0, hours=1)
    _run(benchmark, graphs, commit="c" * 40, tok_s=45.0, hours=3)
    Annotation.objects.create(benchmark=benchmark, text="range", starts_at=timezone.now(), ends_at=timezone.now() + timedelta(hours=2))
    chart = client.get(f"/api/benchmarks/{benchmark.slug}/chart/").json()
    assert [(a["x_from"], a["x_to"]) for a in chart["annotations"]] == [(1, 1)]  # only SHA_A's commit


@pytest.mark.parametrize("data, message", [
    ({"text": "x"}, "either a commit or a start date"),
    ({"text": "x", "commit": "zz"}, "hex"),
    ({"text": "x", "starts_at": "2026-01-02T00:00", "ends_at": "2026-01-01T00:00"}, "before the start"),
])
def test_annotation_bad_input_is_a_400_with_the_reason(client, django_user_model, h200_ladder, data, message):
    benchmark, _ = h200_ladder
    client.force_login(django_user_model.objects.create_user(username="bob", password="pw"))
    response = client.post(f"/b/{benchmark.slug}/annotations/", data)
    assert response.status_code == 400 and message in response.content.decode()
    assert Annotation.objects.count() == 0


def test_annotation_needs_login(client, h200_ladder):
    benchmark, _ = h200_ladder
    response = client.post(f"/b/{benchmark.slug}/annotations/", {"text": "x", "commit": "abcd"})
    assert response.status_code == 302 and "/login" in response["Location"]


def test_compare_runs_has_deltas_significance_and_config_differences(client, h200_ladder):
    _, runs = h200_ladder
    a, b = runs["CUDA graphs"], runs["NCCL LL"]
    Run.objects.filter(pk=b.pk).update(worker_host="gpu-7")
    response = client.get("/compare/", {"a": a.pk, "b": b.pk})
    assert response.status_code == 200
    [pair] = response.context["pairs"]
    tok = next(r for r in pair["metrics"] if r["metric"] == "decode_tok_s")
    assert tok["delta"] == pytest.approx(14.6) and tok["significance"] == "significant" and tok["verdict"] == "better"
    differs = {r["key"]: (r["a"], r["b"]) for r in pair["config"] if r["differs"]}
    assert differs == {"variant": ("CUDA graphs", "NCCL LL"), "host": ("", "gpu-7"), "env NCCL_PROTO": ("", "LL")}


def test_compare_rows_keep_their_order_the_time_budget_last():
    from benchsite.bench.pages.compare import metric_order
    from runners import contract

    names = {contract.LAUNCH_GAP_MS, contract.KV_BYTES_PER_TOKEN, contract.MEM_BANDWIDTH_GB_S, contract.CORRECT,
             contract.WEIGHT_BYTES_PER_GPU, contract.ALLREDUCE_SHARE, contract.DECODE_TOK_S, "a_plugin_figure"}
    assert metric_order(names) == [
        contract.DECODE_TOK_S, contract.CORRECT, contract.ALLREDUCE_SHARE, contract.MEM_BANDWIDTH_GB_S,
        contract.WEIGHT_BYTES_PER_GPU, contract.KV_BYTES_PER_TOKEN, contract.LAUNCH_GAP_MS, "a_plugin_figure"]


def test_compare_commits_pairs_each_variant(client, h200_ladder):
    benchmark, runs = h200_ladder
    _run(benchmark, runs["eager"].variant, commit=SHA_A, tok_s=21.0, hours=1)
    response = client.get(f"/b/{benchmark.slug}/compare/", {"a": SHA_B[:7], "b": SHA_A[:7]})
    assert response.status_code == 200
    [pair] = response.context["pairs"]
    assert pair["a"] == runs["eager"] and pair["b"].commit == SHA_A


@pytest.mark.parametrize("url, params", [
    ("/compare/", {"a": "1"}), ("/compare/", {"a": "x", "b": "2"}),
    ("/b/h200/compare/", {"a": "xyz!", "b": "abcd"}),
    ("/api/benchmarks/h200/chart/", {"max_points": "lots"}), ("/api/benchmarks/h200/chart/", {"max_points": "2"}),
    ("/api/benchmarks/h200/chart/", {"metric": "<script>"}),
])
def test_malformed_query_parameters_are_400_with_a_message(client, h200_ladder, url, params):
    response = client.get(url, params)
    assert response.status_code == 400
    body = response.content.decode()
    assert "must" in body or "needs" in body or "unknown" in body
    if response["Content-Type"].startswith("text/html"):
        assert "<script>" not in body


def test_unknown_ids_are_404(client, h200_ladder):
    _, runs = h200_ladder
    run = runs["eager"]
    other = results.artifact_create(run=runs["NCCL LL"], kind="server_log", name="s.log", content="x")
    for url in ("/compare/?a=1&b=999999", "/runs/999999/", f"/runs/{run.pk}/artifacts/{other.pk}/",
                "/runs/999999/spec.json", "/api/runs/999999/", "/api/benchmarks/nope/chart/",
                f"/b/h200/compare/?a={'c' * 8}&b={'d' * 8}"):
        assert client.get(url).status_code == 404, url


def test_run_page_correctness_texts_artifacts_reproduce_and_budget(client, h200_ladder):
    _, runs = h200_ladder
    ref, run = runs["eager"], runs["broken fusion"]
    for r, text in ((ref, "The history of computing"), (run, "The history of <b>cats</b>")):
        results.artifact_create(run=r, kind="probe_json", name="greedy.json",
                                 content=json.dumps({"text": text, "token_ids": [1]}))
    Measurement.objects.filter(run=run, metric="correct").update(details={
        "verdict": "incorrect", "reference_run": ref.pk, "first_divergence": 3, "match_len": 3,
        "reason": "diverges far from the top-5"})
    # 3.4 ms per token, profiler 30 % allreduce; 7.1 GB per GPU at 4300 GB/s: a 1.651 ms floor
    for metric, value in (("allreduce_share", 0.3), ("mem_bandwidth_gb_s", 4300.0), ("weight_bytes_per_gpu", 7.1e9)):
        Measurement.objects.create(run=run, metric=metric, value=value)
    Measurement.objects.filter(run=run, metric="decode_tok_s").update(value=1000 / 3.4)
    log = results.artifact_create(run=run, kind="server_log", name="server.log", content="line 1\nline 2")

    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "token 3" in html and "The history of &lt;b&gt;cats&lt;/b&gt;" in html and "The history of computing" in html
    assert "python -m runners execute run-%d-spec.json --out run-%d-result.json" % (run.pk, run.pk) in html
    assert "1.651 ms · 48.6% of the step" in html  # 1.651 / 3.4
    assert "1.02 ms · 30.0%" in html and "420.2 tok/s" in html  # 0.3 x 3.4; 1000 / 2.38
    download = client.get(f"/runs/{run.pk}/artifacts/{log.pk}/")
    assert download.status_code == 200 and download.getvalue() == b"line 1\nline 2"  # streamed
    assert download["Content-Disposition"] == f'attachment; filename="run-{run.pk}-server.log"'
    spec = json.loads(client.get(f"/runs/{run.pk}/spec.json").content)
    assert spec["run_id"] == run.pk and spec["model"] == "m" and spec["tensor_parallel_size"] == 2


def test_run_page_without_bandwidth_says_not_measured(client, h200_ladder):
    _, runs = h200_ladder
    html = client.get(f"/runs/{runs['eager'].pk}/").content.decode()
    assert 'id="budget-floor"' in html and "not measured" in html.split('id="budget-floor"')[1][:200]


def test_run_endpoint_has_elapsed_and_log_tail(client, h200_ladder):
    benchmark, runs = h200_ladder
    run = _run(benchmark, runs["eager"].variant, state="RUNNING")
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=90), phase="probe: decode")
    results.artifact_create(run=run, kind="server_log", name="server.log", content="\n".join(f"l{i}" for i in range(100)))
    data = client.get(f"/api/runs/{run.pk}/").json()
    assert 89 <= data["elapsed_s"] < 150 and data["phase"] == "probe: decode"
    assert data["log_tail"].splitlines()[0] == "l40" and data["log_tail"].splitlines()[-1] == "l99"


def test_lttb_keeps_peaks_and_the_ends():
    x = np.arange(10_000)
    y = np.sin(x / 300.0)
    y[4321], y[8765] = 50.0, -50.0
    kept = lttb_indices(x, y, 2000)
    assert len(kept) == 2000 and kept[0] == 0 and kept[-1] == 9999
    assert 4321 in kept and 8765 in kept and np.all(np.diff(kept) > 0)
    assert list(lttb_indices([0, 1, 2], [1, 2, 3], 2000)) == [0, 1, 2]


def test_chart_endpoint_downsamples_each_series_keeping_a_spike(client, h200_ladder):
    benchmark, _ = h200_ladder
    eager = benchmark.variants.get(position=1)
    rows = [Run(benchmark=benchmark, variant=eager, batch=uuid.uuid4(), state="SUCCEEDED", commit=f"{i:040x}")
            for i in range(60)]
    Run.objects.bulk_create(rows)
    created = list(Run.objects.filter(commit__in=[r.commit for r in rows]).order_by("id"))
    Measurement.objects.bulk_create([Measurement(run=r, metric="decode_tok_s", value=999.0 if i == 31 else 20.0 + (i % 2))
                                     for i, r in enumerate(created)])
    data = client.get(f"/api/benchmarks/{benchmark.slug}/chart/", {"max_points": "10"}).json()
    series = data["variants"][0]
    assert len(series["points"]) == 10 and series["total"] == 61
    assert created[31].pk in [p["run"] for p in series["points"]]


def _queries(client, url):
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx)


def _more_history(benchmark, n):
    variants = list(benchmark.variants.all())
    for i in range(n):
        batch = uuid.uuid4()
        for v in variants:
            _run(benchmark, v, commit=f"{i + 100:040x}", tok_s=30.0 + i, correct=1, batch=batch, ttft_ms=5.0)
        _run(benchmark, variants[0], state="QUEUED")


def test_query_counts_do_not_grow_with_runs(client, h200_ladder, django_user_model):
    benchmark, runs = h200_ladder
    Annotation.objects.create(benchmark=benchmark, text="n", commit=SHA_B[:8])
    run = runs["NCCL LL"]
    urls = ["/", f"/b/{benchmark.slug}/", f"/api/benchmarks/{benchmark.slug}/chart/", f"/b/{benchmark.slug}/waterfall/",
            f"/runs/{run.pk}/", f"/api/runs/{run.pk}/", f"/compare/?a={runs['eager'].pk}&b={run.pk}"]
    before = {u: _queries(client, u) for u in urls}
    _more_history(benchmark, 12)
    other = Benchmark.objects.create(name="second", slug="second", model="m")
    Variant.objects.create(benchmark=other, position=1, name="only")
    after = {u: _queries(client, u) for u in urls}
    assert after == before
    # the chart: benchmark, variants, rollup, annotations; its series rebuilt first here (new runs
    # stored in a test transaction that never commits): the raw data's version, series, write
    chart = f"/api/benchmarks/{benchmark.slug}/chart/"
    assert before["/"] <= 5 and before[chart] <= 7 and _queries(client, chart) == 4
