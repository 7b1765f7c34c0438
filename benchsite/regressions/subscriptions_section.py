"""The `subscriptions:` section of a benchmarks file (bench/definitions/sections.py): who is
alerted, by webhook or email, of each benchmark's regressions."""
from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator, URLValidator

from benchsite.bench.definitions import sections
from benchsite.bench.definitions.entries import ApplyError, Outcome, clean, diff, mapping, snapshot
from benchsite.bench.models import Benchmark

from .models import Subscription

_SUBSCRIPTION_FIELDS = {"name", "kind", "target", "benchmarks"}


def register() -> None:
    sections.register("subscriptions", sections.Section(apply=subscriptions_apply))


def subscriptions_apply(specs: list, outcome: Outcome) -> None:
    names = set()
    for i, spec in enumerate(specs):
        name = _subscription_apply(mapping(spec, f"subscriptions[{i}]"), f"subscriptions[{i}]", outcome)
        if name in names:
            raise ApplyError(f"subscriptions[{i}]: the name {name!r} is used twice; names are unique")
        names.add(name)


def _subscription_apply(spec: dict, where: str, outcome: Outcome) -> str:
    """One subscription per benchmark of the entry, found by its name and benchmark."""
    missing, unknown = sorted(_SUBSCRIPTION_FIELDS - set(spec)), sorted(set(spec) - _SUBSCRIPTION_FIELDS)
    if missing or unknown:
        raise ApplyError(f"{where}: missing fields {missing}, unknown fields {unknown}; a subscription has "
                         f"{sorted(_SUBSCRIPTION_FIELDS)}")
    name, kind, target = spec["name"], spec["kind"], spec["target"]
    if not isinstance(name, str) or not name.strip():
        raise ApplyError(f"{where}: `name` must be a non-empty string")
    where = f"{where} ({name})"
    if kind not in Subscription.Kind.values:
        raise ApplyError(f"{where}: kind must be one of {sorted(Subscription.Kind.values)}, not {kind!r}")
    _check_target(kind, target, where)
    if kind == Subscription.Kind.WEBHOOK and not django_settings.BENCH_ALERT_SECRET:
        outcome.notes.append(f"subscription {name}: BENCH_ALERT_SECRET is not set here; the webhook's alerts fail "
                             "unless each subscription is given a secret in the admin")
    for benchmark in _subscribed_benchmarks(spec["benchmarks"], where):
        _subscription_save(name, kind, target, benchmark, where, outcome)
    others = Subscription.objects.filter(name=name).exclude(benchmark__slug__in=spec["benchmarks"])
    for slug in others.values_list("benchmark__slug", flat=True):
        outcome.notes.append(f"subscription {name} of {slug} is not in the file: kept (delete it in the admin)")
    return name


def _check_target(kind: str, target, where: str) -> None:
    validator = EmailValidator() if kind == Subscription.Kind.EMAIL else URLValidator(schemes=["http", "https"])
    what = "an email address" if kind == Subscription.Kind.EMAIL else "an http(s) URL"
    try:
        if not isinstance(target, str):
            raise ValidationError("not a string")
        validator(target)
    except ValidationError:
        raise ApplyError(f"{where}: target must be {what} for kind {kind}, not {target!r}") from None


def _subscribed_benchmarks(slugs, where: str) -> list[Benchmark]:
    if not isinstance(slugs, list) or not slugs or not all(isinstance(s, str) for s in slugs):
        raise ApplyError(f"{where}: benchmarks must be a non-empty list of slugs")
    found = {b.slug: b for b in Benchmark.objects.filter(slug__in=slugs)}
    missing = [s for s in slugs if s not in found]
    if missing:
        raise ApplyError(f"{where}: no benchmarks {missing} (in the file or the database)")
    return [found[s] for s in dict.fromkeys(slugs)]


def _subscription_save(name: str, kind: str, target: str, benchmark: Benchmark, where: str, outcome: Outcome) -> None:
    subscription = Subscription.objects.filter(name=name, benchmark=benchmark).first()
    creating = subscription is None
    subscription = subscription or Subscription(name=name, benchmark=benchmark)
    before = snapshot(subscription, ["kind", "webhook_url", "email"])
    subscription.kind = kind
    subscription.email = target if kind == Subscription.Kind.EMAIL else ""
    subscription.webhook_url = "" if kind == Subscription.Kind.EMAIL else target
    clean(subscription, where)
    changed = diff(before, subscription)
    if creating or changed:
        subscription.save()
    if creating:
        outcome.changes.append(f"create subscription {name} of {benchmark.slug}: {kind} {target}")
    elif changed:
        outcome.changes.append(f"update subscription {name} of {benchmark.slug}: " + ", ".join(changed))
