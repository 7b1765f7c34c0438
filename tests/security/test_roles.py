"""Every state-changing view, for each role: anonymous, viewer (logged in, not a member),
member (BENCH_MEMBER_GROUP) and staff. Members cancel only the runs they triggered."""
import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from benchsite.bench.worker import pools
from benchsite.bench.lifecycle import trigger
from benchsite.bench.models import Annotation, Benchmark, Run
from benchsite.integrations import tokens

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "viewer", "member", "staff")


@pytest.fixture(autouse=True)
def member_group(settings):
    settings.BENCH_MEMBER_GROUP = "members"
    return Group.objects.create(name="members")


@pytest.fixture
def users(django_user_model, member_group):
    viewer = django_user_model.objects.create_user("vera", password="pw")
    member = django_user_model.objects.create_user("mia", password="pw")
    member.groups.add(member_group)
    other = django_user_model.objects.create_user("otto", password="pw")
    other.groups.add(member_group)
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    return {"viewer": viewer, "member": member, "other": other, "staff": staff}


def client_for(role, users) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(users[role])
    return client


@pytest.fixture
def benchmark(sent):
    benchmark = Benchmark.objects.create(name="roles", slug="roles", model="/models/m")
    trigger.variant_create(benchmark=benchmark, name="eager")
    pools.pool_workers_seen(worker="gpu@test-host", pools=[benchmark.gpu_pool])  # a GPU worker serves its pool
    return benchmark


@pytest.fixture
def sent(monkeypatch):
    calls = []

    class Result:
        id = "t-1"

    from benchsite.celery import app

    monkeypatch.setattr(app, "send_task", lambda name, args=None, **kw: calls.append(name) or Result())
    monkeypatch.setattr(app.control, "revoke", lambda *a, **kw: calls.append("revoke"))
    return calls


EXPECTED = {  # role -> (HTTP status, whether it acted)
    "anonymous": (302, False), "viewer": (403, False), "member": (302, True), "staff": (302, True)}


@pytest.mark.parametrize("role", ROLES)
def test_trigger_form(role, users, benchmark):
    response = client_for(role, users).post("/b/roles/trigger/", {"variants": [benchmark.variants.get().pk]})
    status, acted = EXPECTED[role]
    assert response.status_code == status
    assert Run.objects.exists() is acted
    if role == "anonymous":
        assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("role", ROLES)
def test_annotation(role, users, benchmark):
    response = client_for(role, users).post("/b/roles/annotations/", {"text": "enabled CUDA graphs", "commit": "abcdef12"})
    status, acted = EXPECTED[role]
    assert response.status_code == status
    assert Annotation.objects.exists() is acted


@pytest.mark.parametrize("role, own, allowed", [
    ("anonymous", False, False), ("viewer", False, False),
    ("member", True, True), ("member", False, False),  # another member's run
    ("staff", False, True),
])
def test_cancel(role, own, allowed, users, benchmark):
    owner = users["member"] if own else users["other"]
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM, user=owner)
    response = client_for(role, users).post(f"/runs/{run.pk}/cancel/")
    run.refresh_from_db()
    assert (run.state == Run.State.CANCELLED) is allowed
    assert response.status_code == (302 if allowed or role == "anonymous" else 403)


@pytest.mark.parametrize("role, own, offered", [
    ("anonymous", False, False), ("viewer", False, False),
    ("member", True, True), ("member", False, False),  # another member's run
    ("staff", False, True),
])
def test_the_run_page_offers_cancel_only_to_who_may_cancel(role, own, offered, users, benchmark):
    owner = users["member"] if own else users["other"]
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM, user=owner)
    client = client_for(role, users)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert (f'action="/runs/{run.pk}/cancel/"' in page) is offered
    if not offered:  # hiding the button is not the check: the POST is still refused
        assert client.post(f"/runs/{run.pk}/cancel/").status_code == (302 if role == "anonymous" else 403)
        run.refresh_from_db()
        assert run.state == Run.State.QUEUED
    Run.objects.filter(pk=run.pk).update(state=Run.State.SUCCEEDED)  # nothing left to cancel: no button
    assert f'action="/runs/{run.pk}/cancel/"' not in client.get(f"/runs/{run.pk}/").content.decode()


def test_the_benchmark_page_offers_forms_to_members_only(users, benchmark):
    for role, offered in (("anonymous", False), ("viewer", False), ("member", True), ("staff", True)):
        page = client_for(role, users).get("/b/roles/").content.decode()
        assert ('action="/b/roles/trigger/"' in page) is offered, role


@pytest.mark.parametrize("role, status", [("viewer", 403), ("member", 201), ("staff", 201)])
def test_api_trigger_by_token_of_each_role(role, status, users, benchmark, client):
    _, raw = tokens.api_token_create(user=users[role], name=role)
    response = client.post("/api/runs/", data=json.dumps({"benchmark": "roles", "ref": "main"}),
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    # an installed-engine benchmark takes no ref: a member gets that 400, a viewer never gets so far
    assert response.status_code == (403 if status == 403 else 400), response.content
    if status == 403:
        assert "only members trigger runs" in response.json()["error"]


@pytest.mark.parametrize("path", ["/admin/bench/benchmark/add/", "/admin/hooks/repowatch/add/",
                                  "/admin/hooks/apitoken/"])
def test_benchmarks_watches_and_tokens_are_managed_by_staff_only(path, users):
    for role in ("anonymous", "viewer", "member"):
        response = client_for(role, users).get(path)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], (role, path)
    assert client_for("staff", users).get(path).status_code in (200, 403)  # staff reach the admin; its permissions decide


def test_without_a_member_group_every_logged_in_user_is_a_member(settings, users, benchmark):
    settings.BENCH_MEMBER_GROUP = ""
    response = client_for("viewer", users).post("/b/roles/trigger/", {"variants": [benchmark.variants.get().pk]})
    assert response.status_code == 302 and Run.objects.count() == 1


def test_a_private_dashboard_sends_anonymous_visitors_to_the_login_page(settings, users, benchmark, client):
    settings.BENCH_PRIVATE_DASHBOARD = True
    for path in ("/", "/b/roles/", "/api/benchmarks/roles/chart/?metric=decode_tok_s"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), path
    for path in ("/api/runs/", "/api/commits/abcdef0/", "/api/pulls/github.com/o/r/1/"):
        assert client.get(path).status_code == 401, path  # the JSON API takes a token instead
    assert client.get("/accounts/login/").status_code == 200
    assert client_for("viewer", users).get("/b/roles/").status_code == 200
    settings.BENCH_PRIVATE_DASHBOARD = False
    assert client.get("/b/roles/").status_code == 200


@pytest.mark.parametrize("path", ["/b/roles/trigger/", "/b/roles/annotations/", "/runs/{run}/cancel/",
                                  "/accounts/logout/"])
def test_csrf_on_every_form(path, users, benchmark):
    [run] = trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.FORM, user=users["staff"])
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["staff"])
    response = client.post(path.format(run=run.pk), {"text": "x", "variants": [benchmark.variants.get().pk]})
    assert response.status_code == 403 and b"CSRF" in response.content
    run.refresh_from_db()
    assert run.state == Run.State.QUEUED and not Annotation.objects.exists() and Run.objects.count() == 1
