"""The buttons of a finished check run (GitHub's requested_action): "Add starts" measures both
sides again with one more start each while the cap allows, else opens a new comparison;
"Accept" marks a slowdown as intended, and the check concludes neutral. GitHub is asked who
pressed: only admin, maintain or write may act, and every press is recorded. The runs' results
are the worker's shape (test_adaptive_starts); GitHub is the local FakeForge."""
import pytest

from benchsite.integrations.models import Comparison, PullAction
from benchsite.integrations.github.checks import check_run_payload
from benchsite.integrations.github.payloads import github_classify
from benchsite.integrations.pulls.events import CheckAction
from benchsite.integrations.actions import Ignored

from .conftest import INSTALLATION_TOKEN
from .events import github_check_run
from .test_adaptive_starts import _finish_queued, _open
from .test_pull_webhooks import deliver  # noqa: F401 (fixture)
from .test_results import _quiet_series

API = "/api/pulls/github.com/vllm-project/vllm/12/"
PAGE = "/pr/github.com/vllm-project/vllm/12/"


@pytest.fixture
def slower(watched, deliver, github, django_capture_on_commit_callbacks):  # noqa: F811
    """PR #12's tiny-a check, done: the head is clearly half as fast (2 starts a side of 6)."""
    comparison = _open(watched, deliver)
    _quiet_series(comparison, relative=0.025, starts=14)
    comparison = _finish_queued(comparison, django_capture_on_commit_callbacks, head_factor=0.5)
    assert (comparison.state, comparison.outcome, comparison.rounds) == ("done", "regressed", 2)
    return comparison


def _press(deliver, comparison, identifier, sender="carol"):  # noqa: F811
    return deliver(github_check_run("requested_action", external_id=str(comparison.id), identifier=identifier,
                                    sender=sender), "check_run")


def _buttons(comparison) -> list[str]:
    return [b["identifier"] for b in check_run_payload(comparison)["actions"]]


def test_a_requested_action_is_read_as_the_button_and_who_pressed_it():
    event = github_classify("check_run", github_check_run("requested_action", external_id="7", identifier="accept"))
    assert event == CheckAction("accept", 12, "carol", check_run_id="555", external_id="7", head_sha="1" * 40)
    other = github_classify("check_run", github_check_run("requested_action", name="ci/lint", identifier="accept"))
    assert isinstance(other, Ignored)


def test_a_slowdown_offers_both_buttons_within_githubs_limits_and_a_running_check_none(slower):
    assert _buttons(slower) == ["add_starts", "accept"]
    for button in check_run_payload(slower)["actions"]:
        assert len(button["label"]) <= 20 and len(button["description"]) <= 40 and len(button["identifier"]) <= 20
    slower.outcome = "passed"
    assert _buttons(slower) == ["add_starts"]
    slower.outcome = "incorrect"
    assert _buttons(slower) == []  # more starts do not mend a wrong output
    slower.state = "running"
    assert check_run_payload(slower)["actions"] == []


def test_accept_by_a_maintainer_concludes_neutral_and_says_who_and_when_everywhere(
        slower, deliver, github, client):  # noqa: F811
    github.roles["carol"] = "maintain"
    assert check_run_payload(slower)["conclusion"] == "failure"
    response = _press(deliver, slower, "accept")
    assert response.status_code == 200 and "accepted by carol" in response.json()["detail"]
    [asked] = github.calls("GET", "/collaborators/carol/permission")
    assert asked["path"] == "/api/v3/repos/vllm-project/vllm/collaborators/carol/permission"
    assert asked["headers"]["Authorization"] == f"token {INSTALLATION_TOKEN}"
    slower.refresh_from_db()
    assert slower.accepted_by == "carol" and slower.accepted_at is not None
    payload = check_run_payload(slower)
    assert payload["conclusion"] == "neutral" and _buttons(slower) == ["add_starts"]
    assert payload["output"]["title"].startswith("regressed, accepted by carol on ")
    assert "**Accepted by carol on " in payload["output"]["summary"]
    [api] = [c for c in client.get(API).json()["comparisons"] if c["benchmark"] == "tiny-a"]
    assert api["outcome"] == "regressed" and api["accepted_by"] == "carol" and api["accepted_at"]
    page = client.get(PAGE).content.decode()
    assert 'id="comparison-accepted-tiny-a"' in page and "accepted by carol on" in page
    action = PullAction.objects.get(kind="Accept")
    assert action.accepted and action.actor == "carol" and "decode-bench/tiny-a (regressed)" in action.detail
    again = _press(deliver, slower, "accept")
    assert "refused: already accepted by carol" in again.json()["detail"]


@pytest.mark.parametrize("role", ["read", "triage", "none"])
def test_anyone_without_write_access_is_refused_and_the_refusal_recorded(slower, deliver, github, role):  # noqa: F811
    github.roles["mallory"] = role
    response = _press(deliver, slower, "accept", sender="mallory")
    assert response.status_code == 200
    assert f"mallory has '{role}' access to github.com/vllm-project/vllm" in response.json()["detail"]
    slower.refresh_from_db()
    assert slower.accepted_by == "" and check_run_payload(slower)["conclusion"] == "failure"
    action = PullAction.objects.get(kind="Accept")
    assert not action.accepted and "only admin, maintain or write may act" in action.detail


def test_when_github_cannot_say_who_may_act_nothing_is_done_and_the_press_can_be_repeated(
        slower, deliver, github):  # noqa: F811
    github.roles["carol"] = "admin"
    github.fail("GET", "/permission", 502)
    response = _press(deliver, slower, "accept")
    assert "GitHub did not say what carol may do" in response.json()["detail"]
    assert "press the button again" in response.json()["detail"]
    assert _press(deliver, slower, "accept").status_code == 200
    slower.refresh_from_db()
    assert slower.accepted_by == "carol"


def test_an_unknown_button_or_one_that_does_not_fit_is_ignored_and_recorded(slower, deliver, github):  # noqa: F811
    github.roles["carol"] = "write"
    response = _press(deliver, slower, "merge_it")
    assert response.status_code == 200 and "unknown check-run action 'merge_it': ignored" in response.json()["detail"]
    assert PullAction.objects.get(kind="check action").detail == "unknown check-run action 'merge_it': ignored"
    assert not github.calls("GET", "/permission")  # refused before GitHub is asked
    Comparison.objects.filter(id=slower.id).update(outcome="passed")
    assert "nothing to accept: decode-bench/tiny-a reads passed" in _press(deliver, slower, "accept").json()["detail"]


def test_add_starts_below_the_cap_measures_both_sides_once_more_on_the_same_host(
        slower, deliver, github, sent, django_capture_on_commit_callbacks):  # noqa: F811
    github.roles["carol"] = "write"
    before = {o.get("queue") for name, args, o in sent if name == "bench.execute_run"}
    sent.clear()
    response = _press(deliver, slower, "add_starts")
    assert response.status_code == 202, response.json()
    assert response.json()["detail"] == "adding start 3 of up to 6 a side"
    queued = [o.get("queue") for name, args, o in sent if name == "bench.execute_run"]
    assert len(queued) == 4 and set(queued) == before  # base and head of both variants, the same host
    slower.refresh_from_db()
    assert (slower.state, slower.rounds) == ("running", 3) and "asked by carol" in slower.summary
    assert check_run_payload(slower)["actions"] == []
    slower = _finish_queued(slower, django_capture_on_commit_callbacks, head_factor=0.5)
    assert (slower.state, slower.outcome) == ("done", "regressed")
    assert slower.table[0]["starts"] == {"base": 3, "head": 3}
    assert PullAction.objects.get(kind="Add starts").accepted


def test_add_starts_at_the_cap_opens_a_new_comparison_shown_apart(
        watched, deliver, github, client, django_capture_on_commit_callbacks):  # noqa: F811
    github.roles["carol"] = "admin"
    first = _open(watched, deliver, max_starts_per_side=2)
    _quiet_series(first, relative=0.025, starts=14)
    first = _finish_queued(first, django_capture_on_commit_callbacks, head_factor=0.5)
    assert (first.state, first.rounds) == ("done", 2)
    response = _press(deliver, first, "add_starts")
    assert response.status_code == 202
    assert "used its 2 starts a side: a new comparison of 8 run(s)" in response.json()["detail"]
    newer = Comparison.objects.filter(benchmark__slug="tiny-a").exclude(id=first.id).get()
    assert (newer.state, newer.rounds, newer.requested_by) == ("queued", 2, "Add starts by carol")
    assert Comparison.objects.filter(benchmark__slug="tiny-b").count() == 1  # the other benchmark untouched
    data = client.get(API).json()
    assert [c["state"] for c in data["comparisons"] if c["benchmark"] == "tiny-a"] == ["queued"]
    assert {"benchmark": "tiny-a", "state": "done", "outcome": "regressed"}.items() <= data["earlier"][0].items()
    stale = _press(deliver, first, "add_starts")
    assert "a newer comparison of tiny-a replaced this one" in stale.json()["detail"]
