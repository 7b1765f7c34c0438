"""The trigger form's review step: the form's button shows what will run and on which pool,
queues nothing, and the confirm page's button queues exactly that (an uploaded patch included)."""
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from benchsite.bench.models import EngineSource, Run

from tests.benchsite.bench.pages.helpers import hidden_fields

pytestmark = pytest.mark.django_db

PATCH = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"


@pytest.fixture
def git_benchmark(ladder_benchmark):
    ladder_benchmark.engine_source = EngineSource.objects.create(
        name="vllm", kind=EngineSource.Kind.GIT, repo_url="https://github.com/vllm-project/vllm.git", default_ref="main")
    ladder_benchmark.engine_args = ["--max-model-len", "1024"]
    ladder_benchmark.save()
    return ladder_benchmark


def test_review_shows_runs_pool_engine_and_settings_and_queues_nothing(auth_client, git_benchmark, queued):
    first, _, third = git_benchmark.variants.order_by("position")
    upload = SimpleUploadedFile("<b>fix.diff", PATCH.encode())
    response = auth_client.post(f"/b/{git_benchmark.slug}/trigger/",
                                {"variants": [first.pk, third.pk], "ref": "perf/x", "patch": upload, "step": "review"})
    assert response.status_code == 200
    page = response.content.decode()
    summary = re.sub(r"\s+", " ", page[page.index('id="trigger-plan-summary"'):page.index("</p>", page.index('id="trigger-plan-summary"'))])
    assert "2 runs of <code>/models/llama-8b-random</code> (TP 2, 256 new tokens, 5 repeats after 1 warmup)" in summary
    assert "on pool <code>h200x2</code> (queue <code>gpu.h200x2</code>)" in summary
    assert "built from https://github.com/vllm-project/vllm.git at perf/x" in summary
    assert f"<code>&lt;b&gt;fix.diff</code> ({len(PATCH)} bytes, 1 file," in summary
    table = page[page.index('id="trigger-plan-variants"'):page.index("</table>")]
    assert "--max-model-len 1024 --enforce-eager" in table and "NCCL_PROTO=LL" in table and "cuda graphs" not in table
    assert "Queue 2 runs" in page
    assert Run.objects.count() == 0 and queued == []


def test_confirm_queues_what_the_review_showed_with_the_patch_byte_for_byte(auth_client, git_benchmark, queued,
                                                                           django_capture_on_commit_callbacks):
    first, _, third = git_benchmark.variants.order_by("position")
    upload = SimpleUploadedFile("fix.diff", PATCH.encode())
    review = auth_client.post(f"/b/{git_benchmark.slug}/trigger/",
                              {"variants": [first.pk, third.pk], "ref": "perf/x", "patch": upload, "step": "review"})
    fields = hidden_fields(review.content.decode())
    assert fields["variants"] == [str(first.pk), str(third.pk)] and fields["ref"] == ["perf/x"]
    with django_capture_on_commit_callbacks(execute=True):
        response = auth_client.post(f"/b/{git_benchmark.slug}/trigger/", {**fields, "step": "confirm"})
    assert response.status_code == 302
    runs = list(Run.objects.order_by("variant__position"))
    assert [r.variant.name for r in runs] == ["eager", "nccl LL"] and {r.ref for r in runs} == {"perf/x"}
    assert [[p.content for p in r.patches.all()] for r in runs] == [[PATCH], [PATCH]]
    assert sorted(queued) == sorted(r.pk for r in runs)


@pytest.mark.parametrize("carried, message", [("not base64!", "not base64"),
                                              ("aGVsbG8=", "not a unified diff")])
def test_a_tampered_carried_patch_is_refused(auth_client, git_benchmark, queued, carried, message):
    data = {"variants": [git_benchmark.variants.first().pk], "patch_name": "p.diff", "patch_b64": carried,
            "step": "confirm"}
    response = auth_client.post(f"/b/{git_benchmark.slug}/trigger/", data)
    assert response.status_code == 400 and message in response.context["form"].errors["patch"][0]
    assert Run.objects.count() == 0 and queued == []


def test_review_of_an_invalid_form_shows_the_errors_not_a_summary(auth_client, ladder_benchmark, queued):
    response = auth_client.post(f"/b/{ladder_benchmark.slug}/trigger/", {"ref": "", "step": "review"})
    assert response.status_code == 400 and "Choose at least one variant." in response.content.decode()
    assert "trigger-plan" not in response.content.decode()


def test_the_benchmark_page_button_asks_for_the_review(auth_client, ladder_benchmark):
    page = auth_client.get(f"/b/{ladder_benchmark.slug}/").content.decode()
    assert '<button type="submit" name="step" value="review">' in page
