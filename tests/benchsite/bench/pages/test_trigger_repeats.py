"""The trigger's optional repeats: checked on the form and the API, shown on the review page,
carried by the confirm POST, stored on the runs and sent to the GPU worker in the job spec."""
import base64
import json
import re

import pytest
import redis

from benchsite.bench.lifecycle import dispatch, trigger
from benchsite.bench.pages.forms import TriggerForm
from benchsite.bench.models import Run
from benchsite.integrations import tokens

from tests.benchsite.bench.pages.helpers import hidden_fields

pytestmark = pytest.mark.django_db


def _summary(page: str) -> str:
    start = page.index('id="trigger-plan-summary"')
    return re.sub(r"\s+", " ", page[start:page.index("</p>", start)])


def _broker_specs(broker_url: str, queue: str) -> list[dict]:
    """The job specs of the bench.execute_run messages waiting on QUEUE of the real Redis broker."""
    client = redis.Redis.from_url(broker_url)
    specs = []
    for raw in client.lrange(queue, 0, -1):
        message = json.loads(raw)
        assert message["headers"]["task"] == "bench.execute_run"
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        specs.append(args[1])
    return specs


@pytest.mark.parametrize("given, expected", [("7", 7), ("", None), ("1", 1), ("50", 50)])
def test_the_form_takes_repeats_from_1_to_50_or_blank(ladder_benchmark, given, expected):
    form = TriggerForm({"variants": [ladder_benchmark.variants.first().pk], "repeats": given},
                       benchmark=ladder_benchmark)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["repeats"] == expected


@pytest.mark.parametrize("given, message", [("0", "At least 1 repeat."),
                                            ("1000", "At most 50 repeats per run"),
                                            ("abc", "Repeats is a whole number."),
                                            ("2.5", "Repeats is a whole number.")])
@pytest.mark.parametrize("step", ["review", "confirm"])
def test_bad_repeats_give_a_form_error_and_queue_nothing(auth_client, ladder_benchmark, queued, given, message, step):
    response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                                {"variants": [ladder_benchmark.variants.first().pk], "repeats": given, "step": step})
    assert response.status_code == 400
    assert message in response.context["form"].errors["repeats"][0]
    assert message in response.content.decode()
    assert "trigger-plan" not in response.content.decode()
    assert Run.objects.count() == 0 and queued == []


def test_the_benchmark_page_offers_repeats_with_the_benchmarks_own_as_placeholder(auth_client, ladder_benchmark):
    page = auth_client.get(f"/b/{ladder_benchmark.slug}/").content.decode()
    field = re.search(r'<input type="number" name="repeats"[^>]*>', page).group(0)
    assert 'min="1"' in field and 'max="50"' in field and 'placeholder="5"' in field


def test_review_shows_the_asked_repeats_and_carries_them(auth_client, ladder_benchmark, queued):
    first = ladder_benchmark.variants.order_by("position").first()
    response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                                {"variants": [first.pk], "repeats": "12", "step": "review"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "(TP 2, 256 new tokens, 12 repeats (asked; the benchmark's is 5) after 1 warmup)" in _summary(page)
    assert hidden_fields(page)["repeats"] == ["12"]
    assert Run.objects.count() == 0 and queued == []


def test_review_without_repeats_shows_the_benchmarks_and_carries_none(auth_client, ladder_benchmark, queued):
    first = ladder_benchmark.variants.order_by("position").first()
    page = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                            {"variants": [first.pk], "repeats": "", "step": "review"}).content.decode()
    assert "(TP 2, 256 new tokens, 5 repeats after 1 warmup)" in _summary(page)
    assert "repeats" not in hidden_fields(page)


def test_confirm_stores_the_repeats_and_the_job_spec_on_the_broker_carries_them(
        auth_client, ladder_benchmark, redis_broker, django_capture_on_commit_callbacks):
    first, _, third = ladder_benchmark.variants.order_by("position")
    review = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                              {"variants": [first.pk, third.pk], "repeats": "3", "step": "review"})
    with django_capture_on_commit_callbacks(execute=True):
        response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                                    {**hidden_fields(review.content.decode()), "step": "confirm"})
    assert response.status_code == 302
    runs = list(Run.objects.order_by("variant__position"))
    assert [(r.variant.name, r.repeats) for r in runs] == [("eager", 3), ("nccl LL", 3)]
    specs = _broker_specs(redis_broker, ladder_benchmark.queue)
    assert sorted((s["run_id"], s["repeats"]) for s in specs) == [(runs[0].pk, 3), (runs[1].pk, 3)]
    assert ladder_benchmark.repeats == 5  # the benchmark itself is unchanged
    run_page = re.sub(r"\s+", " ", auth_client.get(f"/runs/{runs[0].pk}/").content.decode())
    assert "<dd id=\"run-repeats\">3 <span class=\"muted\">(asked at the trigger; the benchmark's is 5)" in run_page


def test_confirm_without_repeats_keeps_the_benchmarks_in_the_job_spec(
        auth_client, ladder_benchmark, redis_broker, django_capture_on_commit_callbacks):
    first = ladder_benchmark.variants.order_by("position").first()
    with django_capture_on_commit_callbacks(execute=True):
        response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/",
                                    {"variants": [first.pk], "repeats": "", "step": "confirm"})
    assert response.status_code == 302
    (run,) = Run.objects.all()
    assert run.repeats is None
    assert [s["repeats"] for s in _broker_specs(redis_broker, ladder_benchmark.queue)] == [5]


@pytest.mark.parametrize("bad", [0, 51, 1000, "3", 2.5, True])
def test_runs_trigger_refuses_repeats_out_of_range(ladder_benchmark, queued, bad):
    with pytest.raises(trigger.TriggerError, match="give a whole number from 1 to 50"):
        trigger.runs_trigger(benchmark=ladder_benchmark, trigger=Run.Trigger.CLI, repeats=bad)
    assert Run.objects.count() == 0


@pytest.fixture
def api_token(django_user_model):
    user = django_user_model.objects.create_user(username="ci", password="x")
    return tokens.api_token_create(user=user, name="ci")[1]


def _api_post(client, body, token):
    return client.post("/api/runs/", data=json.dumps(body), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_api_trigger_takes_repeats(client, ladder_benchmark, queued, api_token):
    response = _api_post(client, {"benchmark": ladder_benchmark.slug, "variants": ["eager"], "repeats": 9}, api_token)
    assert response.status_code == 201, response.content
    (run,) = Run.objects.all()
    assert run.repeats == 9 and dispatch.run_spec(run)["repeats"] == 9


@pytest.mark.parametrize("bad", [0, 1000, "abc", 2.5, True])
def test_the_api_refuses_bad_repeats_with_a_message(client, ladder_benchmark, queued, api_token, bad):
    response = _api_post(client, {"benchmark": ladder_benchmark.slug, "repeats": bad}, api_token)
    assert response.status_code == 400
    assert "give a whole number from 1 to 50" in response.json()["error"]
    assert Run.objects.count() == 0 and queued == []
