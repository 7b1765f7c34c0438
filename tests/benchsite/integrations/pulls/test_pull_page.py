"""The pull-request page, the run page's link to it, and the admin of pull requests."""
import html

import pytest

from benchsite.integrations.models import RepoWatch
from benchsite.integrations.pulls.models import Comparison, PullAction, PullRequest

from ..conftest import make_benchmark
from .pull_scene import BASE, H1, H2, pull_scene

pytestmark = pytest.mark.django_db
PAGE = "/pr/github.com/acme/vllm/12/"


@pytest.fixture
def scene():
    return pull_scene()


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return html.unescape(response.content.decode())


def test_the_page_shows_the_pull_request_and_its_pending_outcome(client, scene):
    page = text(client.get(PAGE))
    assert "Fuse RMSNorm into the GEMM" in page and 'href="https://github.com/acme/vllm/pull/12"' in page
    for fact in ("alice", H2, "fuse-rms", "github.com/bob/vllm", "perf"):
        assert fact in page, fact
    assert 'id="pull-fork">yes' in page
    # tiny-b is still running: the PR reads pending, not passed, though tiny-a passed
    assert 'class="outcome outcome-pending not-final"' in page.split('id="pull-outcome"')[1].split("</h2>")[0]


def test_the_latest_comparison_shows_its_table_with_units_and_its_runs(client, scene):
    page = text(client.get(PAGE))
    section = page.split('id="comparison-tiny-a"')[1].split("</section>")[0]
    for shown in ("41.2 tok/s", "40.9 tok/s", "\u22120.7% [\u22122.0%, +0.6%]", "42.0% \u2192 40.0%", "±3.0%",
                  "identical", "same greedy tokens", "no change past 3%", "gpu-7", BASE[:12], "carol"):
        assert shown in section, shown
    assert f'href="/runs/{scene.base_run.id}/"' in section and f'href="/runs/{scene.head_run.id}/"' in section
    assert f'href="/compare/?a={scene.base_run.id}&b={scene.head_run.id}"' in section
    other = section.split('class="pull-other-metric"')[1].split("</tr>")[0]  # a metric besides the headline
    assert "24.3 ms" in other and "26.1 ms" in other and "+7.4% [+5.0%, +10.0%]" in other and "regressed" in other
    assert section.count('class="pull-other-metric"') == 1
    assert "running" in page.split('id="comparison-tiny-b"')[1].split("</section>")[0]


def test_the_compare_link_opens_the_compare_page(client, scene):
    response = client.get(f"/compare/?a={scene.base_run.id}&b={scene.head_run.id}")
    assert response.status_code == 200


def test_earlier_pushes_and_actions(client, scene):
    page = text(client.get(PAGE))
    earlier = page.split('id="pull-earlier"')[1].split("</section>")[0]
    assert H1[:12] in earlier and "regressed" in earlier and "cancelled" in earlier
    actions = page.split('id="pull-actions"')[1].split("</section>")[0]
    assert "carol" in actions and "(member)" in actions and "accepted" in actions and "label perf added" in actions
    assert "mallory" in actions and "refused" in actions and "only members and collaborators" in actions


@pytest.mark.parametrize("outcome_b, expected", [("passed", "passed"), ("regressed", "regressed"),
                                                 ("incorrect", "incorrect"), ("", "not_judged")])
def test_the_outcome_is_the_worst_of_the_latest_heads_comparisons(client, scene, outcome_b, expected):
    Comparison.objects.filter(pk=scene.running.pk).update(state="done", outcome=outcome_b)
    block = text(client.get(PAGE)).split('id="pull-outcome"')[1].split("</h2>")[0]
    assert f'class="outcome outcome-{expected}"' in block  # final: no not-final mark


def test_a_benchmark_not_compared_yet_keeps_the_outcome_pending(client, scene):
    Comparison.objects.filter(pk=scene.running.pk).update(state="done", outcome="passed")
    scene.pull.watch.benchmarks.add(make_benchmark("tiny-c", "https://github.com/acme/vllm.git"))
    page = text(client.get(PAGE))
    assert "outcome-pending not-final" in page.split('id="pull-outcome"')[1].split("</h2>")[0]
    assert "tiny-c" in page.split('id="pull-missing-benchmarks"')[1].split("</p>")[0]


def test_a_waiting_fork_pull_request_never_reads_as_passed(client, scene):
    Comparison.objects.filter(head_sha=H2).update(state="waiting", outcome="")
    block = text(client.get(PAGE)).split('id="pull-outcome"')[1].split("</h2>")[0]
    assert "outcome-pending" in block


def test_a_gitlab_subgroup_pull_request(client, scene):
    watch = RepoWatch.objects.create(repo_url="https://gitlab.com/group/sub/name", branches=["main"], secret_env="X")
    PullRequest.objects.create(watch=watch, provider="gitlab", repo_key="gitlab.com/group/sub/name", number=3,
                               title="MR three", base_branch="main", head_sha=H1)
    page = text(client.get("/pr/gitlab.com/group/sub/name/3/"))
    assert "MR three" in page and "nothing compared" in page


def test_the_repository_keeps_its_case_on_pages_and_is_found_in_any_case(client, scene):
    watch = RepoWatch.objects.create(repo_url="https://github.com/Codertocat/Hello-World.git", branches=["main"],
                                     secret_env="X")
    assert (watch.repo_key, watch.repo_name) == ("github.com/codertocat/hello-world", "github.com/Codertocat/Hello-World")
    PullRequest.objects.create(watch=watch, provider="github", repo_key=watch.repo_key, number=2,
                               title="Update the README", base_branch="main", head_sha=H1)
    for path in ("/pr/github.com/Codertocat/Hello-World/2/", "/pr/github.com/codertocat/hello-world/2/"):
        content = text(client.get(path)).split("</header>", 1)[1]  # the header's login link repeats the path
        assert "<code>github.com/Codertocat/Hello-World</code>" in content and "hello-world" not in content


def test_an_unknown_pull_request_is_a_404_that_says_so(client, scene):
    response = client.get("/pr/github.com/acme/vllm/13/")
    assert response.status_code == 404
    assert "no pull request 13 of github.com/acme/vllm" in response.content.decode()
    assert client.get("/pr/github.com/acme/other/12/").status_code == 404


def test_the_page_reads_a_fixed_number_of_queries(client, scene, django_assert_max_num_queries):
    with django_assert_max_num_queries(5):
        text(client.get(PAGE))
    for _ in range(3):  # more pushes, comparisons and actions: no more queries
        from .pull_scene import comparison
        comparison(scene.pull, scene.benchmarks[0], "9" * 40, "done", "passed")
        PullAction.objects.create(pull=scene.pull, kind="/bench", actor="dan", accepted=True)
    with django_assert_max_num_queries(5):
        text(client.get(PAGE))


def test_a_private_dashboard_sends_anonymous_visitors_to_log_in(client, scene, settings, django_user_model):
    settings.BENCH_PRIVATE_DASHBOARD = True
    response = client.get(PAGE)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    client.force_login(django_user_model.objects.create_user("vera", password="x"))
    assert client.get(PAGE).status_code == 200


def test_the_run_page_links_its_pull_request(client, scene):
    page = text(client.get(f"/runs/{scene.head_run.id}/"))
    assert f'<a href="{PAGE}">PR #12</a> (head)' in page
    assert f'<a href="{PAGE}">PR #12</a> (base)' in text(client.get(f"/runs/{scene.base_run.id}/"))
    assert 'id="run-pull"' not in text(client.get(f"/runs/{scene.other_run.id}/"))


def test_the_admin_lists_pull_requests_comparisons_and_actions(client, scene, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="x"))
    pulls = text(client.get("/admin/hooks/pullrequest/"))
    assert "github.com/acme/vllm" in pulls and "Fuse RMSNorm" in pulls
    change = text(client.get(f"/admin/hooks/pullrequest/{scene.pull.pk}/change/"))
    assert "mallory" in change and "only members and collaborators" in change  # its actions, inline
    comparisons = text(client.get("/admin/hooks/comparison/"))
    assert H2[:12] in comparisons and "regressed" in comparisons
    assert str(scene.head_run.id) in text(client.get(f"/admin/hooks/comparison/{scene.latest.pk}/change/"))
    actions = text(client.get("/admin/hooks/pullaction/"))
    assert "carol" in actions and "MEMBER" in actions and "mallory" in actions
    assert client.get("/admin/hooks/pullaction/add/").status_code == 403
