"""The sections of a benchmarks file that other apps apply: each app registers its handler at
start, the file's sections are applied in their order, and a section with no handler stops the
apply with nothing written."""
import pytest

from benchsite.bench.definitions import sections
from benchsite.bench.definitions.apply import ApplyError, config_apply, config_load
from benchsite.bench.models import Benchmark
from benchsite.integrations import watches_section
from benchsite.regressions import subscriptions_section

pytestmark = pytest.mark.django_db

FILE = """\
benchmarks:
  - {slug: tiny, name: Tiny, model: m, engine: {repo: "https://github.com/o/r"}}
watches:
  - {repo: "https://github.com/o/r", branches: [main], benchmarks: [tiny], secret_env: S}
subscriptions:
  - {name: mail, kind: email, target: perf@example.com, benchmarks: [tiny]}
"""


def test_the_apps_register_their_sections_at_start():
    assert sections.section("watches").apply is watches_section.watches_apply
    assert sections.section("watches").check_benchmark is watches_section.watches_still_fit
    assert sections.section("subscriptions").apply is subscriptions_section.subscriptions_apply
    assert sections.benchmark_checks() == [watches_section.watches_still_fit]


def test_sections_apply_after_the_benchmarks_in_the_files_order(monkeypatch):
    calls = []

    def recorder(name):
        def apply(specs, outcome):
            calls.append((name, Benchmark.objects.filter(slug="tiny").exists(), [s.get("name") or s.get("repo")
                                                                               for s in specs]))
            outcome.changes.append(f"{name} applied")
        return apply

    monkeypatch.setitem(sections._registered, "subscriptions", sections.Section(apply=recorder("subscriptions")))
    monkeypatch.setitem(sections._registered, "watches", sections.Section(apply=recorder("watches")))
    outcome = config_apply(data=config_load(FILE))
    assert calls == [("watches", True, ["https://github.com/o/r"]), ("subscriptions", True, ["mail"])]
    assert outcome.changes[-2:] == ["watches applied", "subscriptions applied"]


def test_a_section_without_a_handler_stops_the_apply_and_writes_nothing(monkeypatch):
    monkeypatch.delitem(sections._registered, "subscriptions")
    with pytest.raises(sections.SectionMissing, match="subscriptions"):
        config_apply(data=config_load(FILE))
    assert not Benchmark.objects.filter(slug="tiny").exists()
    # An empty or absent section needs no handler.
    outcome = config_apply(data=config_load(FILE.split("watches:")[0] + "subscriptions: []\n"))
    assert outcome.changes == ["create engine source github.com/o/r (https://github.com/o/r)", "create benchmark tiny"]


def test_only_the_files_sections_can_be_registered():
    with pytest.raises(ValueError, match="unknown section 'benchmarks'"):
        sections.register("benchmarks", sections.Section(apply=lambda specs, outcome: None))
    with pytest.raises(ValueError, match="unknown section 'dashboards'"):
        sections.register("dashboards", sections.Section(apply=lambda specs, outcome: None))


def test_a_benchmark_check_refuses_the_benchmark_with_its_entry(monkeypatch):
    def refuse(benchmark, where):
        raise ApplyError(f"{where}: refused for {benchmark.slug}")

    monkeypatch.setitem(sections._registered, "watches", sections.Section(apply=lambda specs, outcome: None,
                                                                           check_benchmark=refuse))
    with pytest.raises(ApplyError, match=r"^benchmarks\[0\] \(tiny\): refused for tiny$"):
        config_apply(data=config_load(FILE.split("watches:")[0]))
    assert not Benchmark.objects.exists()
