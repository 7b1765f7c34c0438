"""Run-to-run and within-run noise per variant on the benchmark page, with
answers worked out by hand from the history fixture (tests/benchsite/bench/pages/conftest.py)."""
import statistics
import uuid

import pytest

from benchsite.bench.models import Measurement, Variant
from benchsite.bench.pages.noise import variant_noise

pytestmark = pytest.mark.django_db


def test_noise_across_and_within_runs(history, ladder_benchmark):
    variants = list(ladder_benchmark.variants.order_by("position"))
    noise = variant_noise(variants=variants)
    eager, graphs, ll = (noise[v.pk] for v in variants)
    # eager: 49.5, 48.7, 50.1 tok/s in three successful runs (the RUNNING one has no figure)
    assert eager["runs"] == 3
    assert eager["across_cv"] == pytest.approx(0.70238 / 49.4333, rel=1e-3)  # 1.42 %
    # each run's repeats are t-1, t, t+0.5, t-0.2, t+1: stdev 0.7537, over t+0.06; median of 3 runs
    assert eager["within_cv"] == pytest.approx(0.75366 / 49.56, rel=1e-3)
    # two successful runs are too few for a run-to-run figure; within-run noise still shows
    assert graphs["runs"] == 2 and graphs["across_cv"] is None and graphs["within_cv"] > 0
    assert ll["runs"] == 2


def test_flagged_repeats_are_no_samples(history, ladder_benchmark):
    m = Measurement.objects.get(run=history[(0, 1)], metric="decode_tok_s")
    m.samples, m.sample_flags = [100.0, 100.0, 100.0, 5000.0], ["", "", "", "burst"]
    m.save()
    eager = Variant.objects.get(benchmark=ladder_benchmark, position=1)
    within = variant_noise(variants=[eager])[eager.pk]["within_cv"]
    others = [0.75366 / (t + 0.06) for t in (48.7, 50.1)]
    assert within == pytest.approx(statistics.median([0.0, *others]), rel=1e-4)


def test_the_benchmark_page_shows_it(client, history, ladder_benchmark):
    html = client.get(f"/b/{ladder_benchmark.slug}/").content.decode()
    assert "noise: runs (repeats)" in html
    assert "±1.4%" in html and "(±1.5%)" in html


def test_runs_of_other_settings_are_not_noise(history, ladder_benchmark):
    """The benchmark re-applied with another max_tokens halves the figures: the runs before it are
    another series, not run-to-run noise of the runs after it."""
    from benchsite.bench.lifecycle import jobspec
    from benchsite.bench.models import Run

    eager = Variant.objects.get(benchmark=ladder_benchmark, position=1)
    old = jobspec.spec_keep(jobspec.spec_template(ladder_benchmark, eager, repeats=None, ref="", commit="",
                                                  merge_base_with=""))
    Run.objects.filter(variant=eager).update(kept_spec=old)
    ladder_benchmark.max_tokens = 16
    ladder_benchmark.save()
    new = jobspec.spec_keep(jobspec.spec_template(ladder_benchmark, eager, repeats=None, ref="", commit="",
                                                  merge_base_with=""))
    assert new.settings != old.settings
    before = variant_noise(variants=[eager])[eager.pk]
    for value in (25.0, 25.2, 24.8):
        run = Run.objects.create(benchmark=ladder_benchmark, variant=eager, state=Run.State.SUCCEEDED,
                                 batch=uuid.uuid4(), kept_spec=new)
        Measurement.objects.create(run=run, metric="decode_tok_s", value=value, samples=[value] * 3,
                                   sample_flags=[""] * 3)
    after = variant_noise(variants=[eager])[eager.pk]
    assert before["runs"] == 3 and after["runs"] == 3
    assert after["across_cv"] == pytest.approx(statistics.stdev([25.0, 25.2, 24.8]) / 25.0, rel=1e-6)
