"""A patch a run was triggered with is what ran: the admin shows its content but cannot change it;
a patch nothing used yet stays editable."""
import uuid

import pytest

from benchsite.bench.models import Benchmark, Patch, Run, Variant

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_logged(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def _post(client, patch, content):
    return client.post(f"/admin/bench/patch/{patch.pk}/change/", {"name": patch.name, "content": content})


def test_a_patch_a_run_used_cannot_be_edited(admin_client_logged):
    benchmark = Benchmark.objects.create(name="b", slug="b", model="m")
    variant = Variant.objects.create(benchmark=benchmark, position=1, name="v")
    used = Patch.objects.create(name="fix.diff", content="--- a\n+++ b\n")
    run = Run.objects.create(benchmark=benchmark, variant=variant, batch=uuid.uuid4())
    run.patches.add(used)
    page = admin_client_logged.get(f"/admin/bench/patch/{used.pk}/change/").content.decode()
    assert 'name="content"' not in page and "+++ b" in page
    _post(admin_client_logged, used, "--- a\n+++ c\n")
    used.refresh_from_db()
    assert used.content == "--- a\n+++ b\n"


def test_an_unused_patch_can_be_edited(admin_client_logged):
    free = Patch.objects.create(name="draft.diff", content="--- a\n+++ b\n")
    assert 'name="content"' in admin_client_logged.get(f"/admin/bench/patch/{free.pk}/change/").content.decode()
    assert _post(admin_client_logged, free, "--- a\n+++ c\n").status_code == 302
    free.refresh_from_db()
    assert free.content == "--- a\n+++ c\n" and free.sha256 != ""
