"""`subscriptions:` of the benchmarks-as-code file: one Subscription per named entry and benchmark,
applied idempotently, a target change updated in place, bad entries refused whole."""
import textwrap

import pytest

from benchsite.bench.definitions.apply import ApplyError, config_apply, config_load
from benchsite.bench.models import Benchmark
from benchsite.regressions.models import Subscription

pytestmark = pytest.mark.django_db

BENCHMARKS = """\
benchmarks:
  - {slug: tiny, name: Tiny, model: m}
  - {slug: small, name: Small, model: m}
"""
SUBSCRIPTIONS = """\
subscriptions:
  - name: perf-channel
    kind: slack
    target: https://hooks.slack.com/services/T0/B0/XYZ
    benchmarks: [tiny, small]
  - {name: perf-mail, kind: email, target: perf@example.com, benchmarks: [tiny]}
  - {name: ci-hook, kind: webhook, target: "https://ci.example.com/bench", benchmarks: [small]}
"""


def apply(text, **options):
    return config_apply(data=config_load(textwrap.dedent(text)), **options)


def rows():
    return sorted(Subscription.objects.values_list("name", "benchmark__slug", "kind", "webhook_url", "email"))


def test_subscriptions_applied_twice_change_nothing_the_second_time(settings):
    settings.BENCH_ALERT_SECRET = "s"
    first = apply(BENCHMARKS + SUBSCRIPTIONS)
    assert [c for c in first.changes if "subscription" in c] == [
        "create subscription perf-channel of tiny: slack https://hooks.slack.com/services/T0/B0/XYZ",
        "create subscription perf-channel of small: slack https://hooks.slack.com/services/T0/B0/XYZ",
        "create subscription perf-mail of tiny: email perf@example.com",
        "create subscription ci-hook of small: webhook https://ci.example.com/bench",
    ]
    assert rows() == [
        ("ci-hook", "small", "webhook", "https://ci.example.com/bench", ""),
        ("perf-channel", "small", "slack", "https://hooks.slack.com/services/T0/B0/XYZ", ""),
        ("perf-channel", "tiny", "slack", "https://hooks.slack.com/services/T0/B0/XYZ", ""),
        ("perf-mail", "tiny", "email", "", "perf@example.com"),
    ]
    ids = sorted(Subscription.objects.values_list("id", flat=True))
    second = apply(BENCHMARKS + SUBSCRIPTIONS)
    assert second.changes == [] and second.notes == []
    assert sorted(Subscription.objects.values_list("id", flat=True)) == ids


def test_a_changed_target_or_kind_updates_the_subscription_in_place():
    apply(BENCHMARKS + SUBSCRIPTIONS)
    before = Subscription.objects.get(name="perf-mail").id
    changed = SUBSCRIPTIONS.replace("perf@example.com", "oncall@example.com").replace(
        "hooks.slack.com/services/T0/B0/XYZ", "chat.example.com/hooks/abc")
    outcome = apply(BENCHMARKS + changed)
    assert outcome.changes == [
        "update subscription perf-channel of tiny: webhook_url: 'https://hooks.slack.com/services/T0/B0/XYZ' -> "
        "'https://chat.example.com/hooks/abc'",
        "update subscription perf-channel of small: webhook_url: 'https://hooks.slack.com/services/T0/B0/XYZ' -> "
        "'https://chat.example.com/hooks/abc'",
        "update subscription perf-mail of tiny: email: 'perf@example.com' -> 'oncall@example.com'",
    ]
    assert Subscription.objects.get(name="perf-mail").id == before
    outcome = apply(BENCHMARKS + changed.replace("kind: email, target: oncall@example.com",
                                                 "kind: slack, target: 'https://chat.example.com/x'"))
    assert outcome.changes == ["update subscription perf-mail of tiny: kind: 'email' -> 'slack', "
                               "webhook_url: '' -> 'https://chat.example.com/x', email: 'oncall@example.com' -> ''"]


def test_a_benchmark_left_out_of_an_entry_keeps_its_subscription_with_a_note():
    apply(BENCHMARKS + SUBSCRIPTIONS)
    outcome = apply(BENCHMARKS + SUBSCRIPTIONS.replace("[tiny, small]", "[tiny]"))
    assert outcome.changes == []
    assert "subscription perf-channel of small is not in the file: kept (delete it in the admin)" in outcome.notes
    assert Subscription.objects.filter(name="perf-channel").count() == 2


def test_the_dry_run_writes_no_subscription():
    outcome = apply(BENCHMARKS + SUBSCRIPTIONS, dry_run=True)
    assert len([c for c in outcome.changes if "subscription" in c]) == 4
    assert rows() == []


@pytest.mark.parametrize("entry, message", [
    ("{name: x, kind: teams, target: 'https://a.example.com', benchmarks: [tiny]}",
     "subscriptions[0] (x): kind must be one of ['email', 'slack', 'webhook'], not 'teams'"),
    ("{name: x, kind: slack, target: 'not a url', benchmarks: [tiny]}",
     "subscriptions[0] (x): target must be an http(s) URL for kind slack, not 'not a url'"),
    ("{name: x, kind: webhook, target: 'ftp://a.example.com/x', benchmarks: [tiny]}",
     "subscriptions[0] (x): target must be an http(s) URL for kind webhook"),
    ("{name: x, kind: email, target: 'https://a.example.com', benchmarks: [tiny]}",
     "subscriptions[0] (x): target must be an email address for kind email, not 'https://a.example.com'"),
    ("{name: x, kind: slack, target: 'https://a.example.com', benchmarks: [tiny, nope]}",
     "subscriptions[0] (x): no benchmarks ['nope'] (in the file or the database)"),
    ("{name: x, kind: slack, target: 'https://a.example.com'}",
     "subscriptions[0]: missing fields ['benchmarks'], unknown fields []"),
    ("{name: x, kind: slack, target: 'https://a.example.com', benchmarks: [tiny], active: false}",
     "subscriptions[0]: missing fields [], unknown fields ['active']"),
    ("{name: '', kind: slack, target: 'https://a.example.com', benchmarks: [tiny]}",
     "subscriptions[0]: `name` must be a non-empty string"),
    ("{name: x, kind: slack, target: 'https://a.example.com', benchmarks: []}",
     "subscriptions[0] (x): benchmarks must be a non-empty list of slugs"),
    ("just-a-string", "subscriptions[0]: expected a mapping, got str"),
])
def test_a_bad_entry_is_refused_naming_it_and_nothing_is_applied(entry, message):
    good = "  - {name: ok, kind: email, target: ok@example.com, benchmarks: [tiny]}\n"
    with pytest.raises(ApplyError) as info:
        apply(BENCHMARKS + "subscriptions:\n" + good + f"  - {entry}\n".replace("subscriptions[0]", ""))
    assert message.replace("subscriptions[0]", "subscriptions[1]") in str(info.value)
    assert not Subscription.objects.exists() and not Benchmark.objects.exists()


def test_a_name_used_twice_is_refused():
    twice = SUBSCRIPTIONS + "  - {name: perf-mail, kind: email, target: b@example.com, benchmarks: [small]}\n"
    with pytest.raises(ApplyError, match=r"subscriptions\[3\]: the name 'perf-mail' is used twice"):
        apply(BENCHMARKS + twice)
    assert not Subscription.objects.exists()


def test_subscriptions_must_be_a_list():
    with pytest.raises(ApplyError, match="`subscriptions` must be a list"):
        config_load("subscriptions: {name: x}\n")
