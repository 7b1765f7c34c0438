"""HTML pages, the JSON endpoints, the trigger form and cancel, through Django's test client."""
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from benchsite.bench.pages import selectors
from benchsite.bench.lifecycle import dispatch, trigger
from benchsite.bench.models import Benchmark, EngineSource, Run, Variant

from .conftest import add_server_log

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch):
    """Run ids handed to the broker, recorded instead of sent (no broker in these tests)."""
    calls = []
    monkeypatch.setattr(dispatch, "enqueue_run", lambda run_id, *args, **kwargs: calls.append(run_id))
    return calls


# --- pages -----------------------------------------------------------------------------


def test_benchmark_list_shows_latest_state_and_decode_per_variant(client, history):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Llama-8B TP=2" in html and "/models/llama-8b-random" in html and "h200x2" in html
    [summary] = response.context["summaries"]
    rows = {v["variant"].name: v for v in summary["variants"]}
    # latest decode tok/s of a SUCCEEDED run, against the previous commit's (or batch's)
    assert rows["eager"]["latest"]["value"] == 50.1 and rows["eager"]["previous"]["value"] == 48.7
    assert rows["cuda graphs"]["latest"]["value"] == 301.2 and rows["cuda graphs"]["previous"]["value"] == 297.9
    assert rows["nccl LL"]["latest"]["value"] == 275.4 and rows["nccl LL"]["previous"]["value"] == 276.0
    assert rows["cuda graphs"]["change"] == pytest.approx(301.2 / 297.9 - 1)
    # the running and the queued run of the newest batch
    assert sorted(r.state for r in summary["active"]) == ["QUEUED", "RUNNING"]
    assert "301.2" in html and "275.4" in html


def test_a_home_row_of_two_commits_gives_the_outcome_its_commit(client, history):
    """cuda graphs' newest run is wrong: its tok/s is not the row's figure, its outcome is, so the
    outcome says which commit it is of; eager's figure and outcome are of one run: no commit added."""
    from benchsite.bench.models import Measurement
    from benchsite.regressions.outcomes import outcomes_refresh

    older, wrong = history[(0, 2)], history[(2, 2)]
    Run.objects.filter(pk=older.pk).update(commit="a451932" + "0" * 33)
    Measurement.objects.create(run=wrong, metric="correct", value=0.0)
    outcomes_refresh(run_ids=[wrong.pk])
    response = client.get("/")
    rows = {v["variant"].name: v for v in response.context["summaries"][0]["variants"]}
    graphs, eager = rows["cuda graphs"], rows["eager"]
    assert (graphs["latest"]["run_id"], graphs["latest"]["run__commit"][:7]) == (older.pk, "a451932")
    assert (graphs["outcome"], graphs["outcome_commit"]) == ("incorrect", wrong.commit)
    assert eager["latest"]["run_id"] == history[(2, 1)].pk and eager["outcome_commit"] == ""
    html = response.content.decode()
    row = html[html.index(f'id="home-variant-{wrong.variant_id}"'):]
    row = row[:row.index("</tr>")]
    assert "a451932" in row and "at <code>0123abcd</code>" in row
    eager_row = html[html.index(f'id="home-variant-{eager["variant"].pk}"'):]
    assert "outcome-commit" not in eager_row[:eager_row.index("</tr>")]


@pytest.mark.parametrize("tp, allreduce", [(1, False), (2, True)])
def test_the_benchmark_page_charts_allreduce_only_above_tp_1(client, ladder_benchmark, tp, allreduce):
    Benchmark.objects.filter(pk=ladder_benchmark.pk).update(tensor_parallel_size=tp)
    html = client.get(f"/b/{ladder_benchmark.slug}/").content.decode()
    assert 'id="chart-decode_tok_s"' in html and 'id="chart-ttft_ms"' in html
    assert ('id="chart-allreduce_share"' in html, 'id="chart-allreduce_us_per_call"' in html) == (allreduce, allreduce)


def test_benchmark_page_anonymous_sees_ladder_chart_runs_and_login_link(client, history, ladder_benchmark):
    response = client.get(f"/b/{ladder_benchmark.slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert [v.name for v in response.context["ladder"]] == ["eager", "cuda graphs", "nccl LL"]
    assert "--disable-custom-all-reduce" in html and "NCCL_PROTO=LL" in html
    assert 'id="chart-decode_tok_s"' in html and 'id="chart-itl_ms_p99"' in html
    assert f'data-url="/api/benchmarks/{ladder_benchmark.slug}/chart/"' in html
    assert "/static/vendor/chart.umd.min.js" in html and "/static/bench/chart.js" in html
    assert len(response.context["runs"]) == Run.objects.count()
    assert "Log in to trigger" in html
    assert 'name="variants"' not in html


def test_benchmark_page_logged_in_has_trigger_form_with_all_variants_checked(auth_client, ladder_benchmark):
    html = auth_client.get(f"/b/{ladder_benchmark.slug}/").content.decode()
    assert "Log in to trigger" not in html
    for variant in ladder_benchmark.variants.all():
        assert f'value="{variant.pk}"' in html
    boxes = [attrs for tag, attrs in _tags(html) if tag == "input" and attrs.get("name") == "variants"]
    assert sorted(int(b["value"]) for b in boxes) == sorted(ladder_benchmark.variants.values_list("pk", flat=True))
    assert all(b.get("type") == "checkbox" and "checked" in b for b in boxes)


def _tags(html: str) -> list[tuple[str, dict]]:
    """Every start tag with its attributes, as a browser's parser sees them."""
    from html.parser import HTMLParser

    found = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {k: (v if v is not None else "") for k, v in attrs}))

    Collector().feed(html)
    return found


def test_unknown_pages_are_404(client, db):
    assert client.get("/b/nope/").status_code == 404
    assert client.get("/runs/999/").status_code == 404
    assert client.get("/api/runs/999/").status_code == 404
    assert client.get("/api/benchmarks/nope/chart/").status_code == 404


def test_run_page_shows_state_measurements_error_and_log_tail(client, history):
    run = history[(0, 1)]
    add_server_log(run, lines=200)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "SUCCEEDED" in html and "gpu-1" in html
    assert "decode throughput" in html and "49.5 tok/s" in html and "48.5 – 50.5 tok/s" in html
    tail = response.context["log_tail"].splitlines()
    assert len(tail) == 60 and tail[-1] == "INFO log line 200" and tail[0] == "INFO log line 141"
    assert "INFO log line 140\n" not in html
    assert "Cancel run" not in html  # final
    assert "bench/run.js" not in html  # no polling for a final run

    failed = history[(1, 2)]
    html = client.get(f"/runs/{failed.pk}/").content.decode()
    assert '<pre class="error">Traceback (most recent call last):' in html


def test_run_page_of_active_run_polls_and_offers_cancel_to_its_member(auth_client, user, history):
    running = history[(3, 1)]
    html = Client().get(f"/runs/{running.pk}/").content.decode()
    assert "bench/run.js" in html and f'data-url="/api/runs/{running.pk}/"' in html
    assert "probe: decode" in html
    assert "Cancel run" not in html  # anonymous
    assert "Cancel run" not in auth_client.get(f"/runs/{running.pk}/").content.decode()  # not theirs
    Run.objects.filter(pk=running.pk).update(triggered_by=user)
    assert "Cancel run" in auth_client.get(f"/runs/{running.pk}/").content.decode()  # every role: tests/security


# --- JSON ------------------------------------------------------------------------------


def test_chart_endpoint_has_points_of_succeeded_runs_only(client, history, ladder_benchmark):
    response = client.get(f"/api/benchmarks/{ladder_benchmark.slug}/chart/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    data = response.json()
    assert data["benchmark"] == ladder_benchmark.slug
    assert data["metric"] == "decode_tok_s" and data["unit"] == "tok/s"
    assert [(v["position"], v["name"]) for v in data["variants"]] == [(1, "eager"), (2, "cuda graphs"), (3, "nccl LL")]
    values = {v["name"]: [p["y"] for p in v["points"]] for v in data["variants"]}
    assert values == {"eager": [49.5, 48.7, 50.1], "cuda graphs": [297.9, 301.2], "nccl LL": [276.0, 275.4]}
    succeeded = {r.pk for r in history.values() if r.state == Run.State.SUCCEEDED}
    point_runs = [p["run"] for v in data["variants"] for p in v["points"]]
    assert sorted(point_runs) == sorted(succeeded)
    p = data["variants"][1]["points"][1]
    run = history[(2, 2)]
    assert p == {"run": run.pk, "x": 2, "y": 301.2, "lo": 300.2, "hi": 302.2, "ref": "", "build": "installed"}
    assert data["axis"]["2"] == {"commit": "0123abcd" * 5, "batch": str(run.batch), "t": history[(2, 1)].created_at.isoformat()}
    # runs of one trigger (no commit: the installed engine) share an x position, so they line up
    assert data["variants"][0]["points"][0]["x"] == data["variants"][1]["points"][0]["x"] == 0
    assert data["x_count"] == 3


def test_chart_endpoint_other_metric_and_bad_metric(client, history, ladder_benchmark):
    url = f"/api/benchmarks/{ladder_benchmark.slug}/chart/"
    data = client.get(url, {"metric": "ttft_ms"}).json()
    assert data["metric"] == "ttft_ms" and data["unit"] == "ms"
    assert [len(v["points"]) for v in data["variants"]] == [3, 2, 2]
    for bad in ("nope", "decode_tok_s; drop table", ""):
        response = client.get(url, {"metric": bad})
        assert response.status_code == 400
        body = response.json()
        assert "unknown metric" in body["error"] and "decode_tok_s" in body["error"]


def test_chart_endpoint_empty_benchmark(client, ladder_benchmark):
    data = client.get(f"/api/benchmarks/{ladder_benchmark.slug}/chart/").json()
    assert [v["points"] for v in data["variants"]] == [[], [], []]


def test_run_endpoint(client, history):
    run = history[(3, 1)]
    data = client.get(f"/api/runs/{run.pk}/").json()
    assert data["id"] == run.pk and data["state"] == "RUNNING" and data["is_final"] is False
    assert data["phase"] == "probe: decode" and data["heartbeat_age_s"] > 0
    assert data["heartbeat_at"] == run.heartbeat_at.isoformat()
    assert data["measurements"] == []
    done = client.get(f"/api/runs/{history[(0, 3)].pk}/").json()
    assert done["is_final"] is True
    m = {m["metric"]: m for m in done["measurements"]}
    assert m["decode_tok_s"]["value"] == 276.0 and m["decode_tok_s"]["ci_low"] == 275.0
    assert len(m["decode_tok_s"]["samples"]) == 5


# --- trigger ---------------------------------------------------------------------------


def test_trigger_requires_login(client, ladder_benchmark, enqueued):
    url = f"/b/{ladder_benchmark.slug}/trigger/"
    ids = list(ladder_benchmark.variants.values_list("pk", flat=True))
    response = client.post(url, {"variants": ids})
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"
    assert Run.objects.count() == 0 and enqueued == []


def test_trigger_enforces_csrf(user, ladder_benchmark, enqueued):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(user)
    ids = list(ladder_benchmark.variants.values_list("pk", flat=True))
    response = csrf_client.post(f"/b/{ladder_benchmark.slug}/trigger/", {"variants": ids})
    assert response.status_code == 403
    assert Run.objects.count() == 0
    # The page's own form carries a token that makes the same POST pass.
    page = csrf_client.get(f"/b/{ladder_benchmark.slug}/")
    token = page.context["csrf_token"]
    response = csrf_client.post(f"/b/{ladder_benchmark.slug}/trigger/", {"variants": ids, "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302
    assert Run.objects.count() == 3


def test_trigger_creates_queued_runs_and_enqueues_on_commit(
    auth_client, user, ladder_benchmark, enqueued, django_capture_on_commit_callbacks
):
    ladder_benchmark.engine_source = EngineSource.objects.create(
        name="vllm", kind=EngineSource.Kind.GIT, repo_url="https://github.com/vllm-project/vllm.git")
    ladder_benchmark.save()
    variants = list(ladder_benchmark.variants.order_by("position"))
    with django_capture_on_commit_callbacks(execute=True):
        response = auth_client.post(
            f"/b/{ladder_benchmark.slug}/trigger/",
            {"variants": [variants[0].pk, variants[2].pk], "ref": " perf/x "},
        )
    assert response.status_code == 302 and response["Location"] == f"/b/{ladder_benchmark.slug}/"
    runs = list(Run.objects.order_by("variant__position"))
    assert [r.variant.name for r in runs] == ["eager", "nccl LL"]
    assert {r.state for r in runs} == {Run.State.QUEUED}
    assert {r.trigger for r in runs} == {Run.Trigger.FORM}
    assert {r.triggered_by for r in runs} == {user}
    assert {(r.ref, r.commit) for r in runs} == {("perf/x", "")}  # the worker resolves the ref
    assert len({r.batch for r in runs}) == 1
    assert sorted(enqueued) == sorted(r.pk for r in runs)
    page = auth_client.get(response["Location"]).content.decode()
    eager, ll = runs  # the message links each queued run
    assert (f'Queued 2 run(s): <a href="/runs/{eager.pk}/">#{eager.pk} eager</a>, '
            f'<a href="/runs/{ll.pk}/">#{ll.pk} nccl LL</a>.') in page


def test_trigger_get_redirects_to_benchmark_page(auth_client, ladder_benchmark):
    response = auth_client.get(f"/b/{ladder_benchmark.slug}/trigger/")
    assert response.status_code == 302 and response["Location"] == f"/b/{ladder_benchmark.slug}/"


@pytest.mark.parametrize(
    "case, field, message",
    [
        ("none", "variants", "Choose at least one variant."),
        ("foreign", "variants", "Select a valid choice."),
        ("installed-ref", "ref", "runs the worker's installed engine"),
        ("long-ref", "ref", "at most 250 characters"),
    ],
)
def test_trigger_invalid_form_rerenders_with_errors_and_400(auth_client, ladder_benchmark, enqueued, case, field, message):
    other = Benchmark.objects.create(name="other", slug="other", model="m")
    foreign = Variant.objects.create(benchmark=other, position=1, name="x")
    own = ladder_benchmark.variants.first().pk
    data = {
        "none": {"ref": ""},
        "foreign": {"variants": [own, foreign.pk]},
        "installed-ref": {"variants": [own], "ref": "main"},
        "long-ref": {"variants": [own], "ref": "a" * 251},
    }[case]
    response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/", data)
    assert response.status_code == 400
    form = response.context["form"]
    assert list(form.errors) == [field]
    assert message in form.errors[field][0]
    html = response.content.decode()
    assert 'class="errorlist' in html and "Run the ladder" in html and 'id="chart-decode_tok_s"' in html
    assert Run.objects.count() == 0 and enqueued == []


def test_trigger_domain_error_is_shown_as_form_error(auth_client, ladder_benchmark, monkeypatch):
    def refuse(**kwargs):
        raise trigger.TriggerError("pool h200x2 is paused")

    monkeypatch.setattr(trigger, "runs_trigger", refuse)
    ids = list(ladder_benchmark.variants.values_list("pk", flat=True))
    response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/", {"variants": ids})
    assert response.status_code == 400
    assert "pool h200x2 is paused" in response.content.decode()


# --- cancel ----------------------------------------------------------------------------


def test_cancel_requires_login_and_post(auth_client, history):
    queued = history[(3, 2)]
    url = f"/runs/{queued.pk}/cancel/"
    response = Client().post(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert auth_client.get(url).status_code == 405
    queued.refresh_from_db()
    assert queued.state == Run.State.QUEUED


def test_cancel_queued_run_and_final_run_is_left_alone(auth_client, user, history):
    queued = history[(3, 2)]
    Run.objects.filter(pk__in=[queued.pk, history[(0, 1)].pk]).update(triggered_by=user)  # members cancel their own
    response = auth_client.post(f"/runs/{queued.pk}/cancel/", follow=True)
    assert response.redirect_chain == [(f"/runs/{queued.pk}/", 302)]
    queued.refresh_from_db()
    assert queued.state == Run.State.CANCELLED
    assert f"Run {queued.pk} cancelled." in response.content.decode()

    done = history[(0, 1)]
    response = auth_client.post(f"/runs/{done.pk}/cancel/", follow=True)
    done.refresh_from_db()
    assert done.state == Run.State.SUCCEEDED
    assert "nothing to cancel" in response.content.decode()


# --- auth and admin --------------------------------------------------------------------


def test_login_page_and_login_flow(client, user):
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice-123", "next": "/b/x/"})
    assert response.status_code == 302 and response["Location"] == "/b/x/"
    assert "alice" in client.get("/").content.decode()
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert "_auth_user_id" not in client.session  # the session no longer names a user
    page = client.get("/").content.decode()
    assert "alice" not in page and "Log in" in page


def test_admin_pages_render(admin_client, history):
    run = history[(0, 1)]
    add_server_log(run, lines=3)
    for url in [
        "/admin/", "/admin/bench/benchmark/", f"/admin/bench/benchmark/{run.benchmark_id}/change/",
        "/admin/bench/variant/", "/admin/bench/run/", f"/admin/bench/run/{run.pk}/change/",
        "/admin/bench/measurement/", "/admin/bench/artifact/", "/admin/bench/build/", "/admin/bench/patch/",
        "/admin/bench/enginesource/", "/admin/bench/run/?state__exact=SUCCEEDED",
    ]:
        assert admin_client.get(url).status_code == 200, url


def test_chart_marks_runs_judged_incorrect_and_the_ladder_ignores_their_speed(client):
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Benchmark, Measurement, Run

    benchmark = Benchmark.objects.create(name="judged", slug="judged", model="m")
    variant = trigger.variant_create(benchmark=benchmark, name="graphs")
    good, bad = (Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=Run.State.SUCCEEDED)
                 for _ in range(2))
    for run, tok_s, correct in ((good, 100.0, 1.0), (bad, 300.0, 0.0)):
        Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher")
        Measurement.objects.create(run=run, metric="correct", value=correct, direction="higher")

    [series] = client.get("/api/benchmarks/judged/chart/").json()["variants"]

    # the incorrect run is marked and kept out of the line
    assert [p["run"] for p in series["points"]] == [good.id]
    assert [p["run"] for p in series["incorrect"]] == [bad.id]
    [step] = selectors.benchmark_ladder(benchmark=benchmark)
    assert step.latest_decode_tok_s == 100.0  # the faster but wrong run is not the latest figure


def test_run_page_shows_the_step_decomposition(client):
    from benchsite.bench.lifecycle import trigger
    from benchsite.bench.models import Benchmark, Measurement, Run

    benchmark = Benchmark.objects.create(name="glm", slug="glm", model="m", tensor_parallel_size=8)
    variant = trigger.variant_create(benchmark=benchmark, name="LL")
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4(), state=Run.State.SUCCEEDED)
    # The seed's figures: 57.87 tok/s (17.28 ms), 156 allreduces of 60 us.
    for metric, value in (("decode_tok_s", 1000 / 17.28), ("allreduce_calls_per_step", 156), ("allreduce_us_per_call", 60)):
        Measurement.objects.create(run=run, metric=metric, value=value)

    page = client.get(f"/runs/{run.id}/").content.decode()

    assert "Where the time goes" in page and "17.28 ms per token" in page and "156 allreduces per step" in page
    estimates = page.split('id="budget-estimates"')[1].split("</table>")[0]
    assert "profiler, per call" in estimates and "estimate" in estimates
    assert "9.36 ms" in estimates  # 156 x 60 us
    assert "54.2%" in estimates  # 9.36 / 17.28
    assert "126.3 tok/s" in estimates  # 1000 / (17.28 - 9.36)
    # no share was measured: no headline, and the page says so
    assert 'id="budget-ceiling"><span class="muted">not measured' in page
