"""Verdicts that compare runs with each other, stored as measurements when a run completes:
correctness against the reference variant, and the communication A/B between ladder steps."""
import json
import logging

from runners.probes.correctness import compare_outputs
from runners.contract import (AB_ALLREDUCE_MS_DELTA, ALLREDUCE_CALLS_PER_STEP, ALLREDUCE_SHARE, CORRECT, DECODE_TOK_S,
                              GREEDY_ARTIFACT)

from ..storage.artifacts import ArtifactError
from ..models import Artifact, Measurement, Run, Variant

log = logging.getLogger(__name__)


def greedy_output(run: Run) -> dict | None:
    """The greedy output the run stored (its probe JSON), or None; ArtifactError when unreadable."""
    artifact = run.artifacts.filter(kind=Artifact.Kind.PROBE_JSON, name=GREEDY_ARTIFACT).exclude(file="").first()
    return json.loads(artifact.read_text()) if artifact else None


def _reference_run_for(run: Run) -> Run | None:
    """The run to compare with: the reference variant's run of the same batch, else its latest
    earlier success; a reference run is compared with the previous reference run."""
    reference_variant = run.benchmark.variants.filter(is_reference=True).first() or run.benchmark.variants.first()
    candidates = Run.objects.filter(variant=reference_variant, state=Run.State.SUCCEEDED).exclude(id=run.id)
    candidates = candidates.filter(artifacts__name=GREEDY_ARTIFACT, artifacts__size__gt=0)
    if run.trigger != Run.Trigger.PULL:  # a pull request's output is never another run's reference
        candidates = candidates.exclude(trigger=Run.Trigger.PULL)
    if run.variant_id != reference_variant.id:
        same_batch = candidates.filter(batch=run.batch).first()
        if same_batch:
            return same_batch
    return candidates.filter(created_at__lte=run.created_at).order_by("-created_at", "-id").first()


def _judge_correctness(run: Run) -> Measurement | None:
    """Compare a run's greedy output with its reference and store the verdict as `correct`."""
    candidate = greedy_output(run)
    if candidate is None:
        return None
    reference_run = _reference_run_for(run)
    if reference_run is None:
        details = {"verdict": "baseline", "reason": "no earlier reference output: this run becomes the baseline"}
        correct = True
    else:
        details = compare_outputs(greedy_output(reference_run), candidate)
        details["reference_run"] = reference_run.id
        correct = details["correct"]
    measurement, _ = Measurement.objects.update_or_create(
        run=run, metric=CORRECT,
        defaults={"value": float(correct), "unit": "", "direction": Measurement.Direction.HIGHER, "details": details,
                  "point": run.benchmark.default_point},
    )
    return measurement


# A ladder step that changes only these is a communication A/B against its neighbour.
COMM_ENV_PREFIXES = ("NCCL_", "VLLM_ALLREDUCE", "VLLM_CUSTOM_ALL_REDUCE", "VLLM_USE_SYMM_MEM")
COMM_FLAG_WORDS = ("all-reduce", "allreduce")
AB_DISAGREEMENT_MS = 0.25  # A/B and profiler deltas further apart than this (and 30 %) are flagged


def _comm_only_difference(a: Variant, b: Variant) -> list[str] | None:
    """The settings that differ between two variants, if all of them are communication ones."""
    flags = set(a.flags) ^ set(b.flags)
    env = {k for k in set(a.env) | set(b.env) if a.env.get(k) != b.env.get(k)}
    if not (flags or env):
        return None
    comm_flags = all(any(word in f for word in COMM_FLAG_WORDS) for f in flags if f.startswith("--"))
    values_only = all(f.startswith("--") or any(w in f for w in COMM_FLAG_WORDS) for f in flags)
    if comm_flags and values_only and all(k.startswith(COMM_ENV_PREFIXES) for k in env):
        return sorted(flags) + [f"{k}={b.env.get(k, '')}" for k in sorted(env)]
    return None


def _values(run: Run) -> dict:
    return dict(run.measurements.values_list("metric", "value"))


def runs_compare_comm_ab(*, run: Run) -> None:
    """A/B estimate of allreduce cost: decode time per token against each earlier step of
    the same batch that differs only in a communication setting, checked against the
    profiler's allreduce time per token of both runs."""
    mine = _values(run)
    if DECODE_TOK_S not in mine:
        return
    earlier = Run.objects.filter(batch=run.batch, state=Run.State.SUCCEEDED, variant__position__lt=run.variant.position)
    for other in earlier.select_related("variant").order_by("-variant__position"):
        differs = _comm_only_difference(other.variant, run.variant)
        theirs = _values(other)
        if differs is None or DECODE_TOK_S not in theirs:
            continue
        step_delta = 1000 / mine[DECODE_TOK_S] - 1000 / theirs[DECODE_TOK_S]
        details = {"method": "A/B", "against_run": other.id, "against_variant": other.variant.name,
                   "differs_in": differs, "meaning": "ms per token this step adds (+) or saves (-) against the other"}
        calls = mine.get(ALLREDUCE_CALLS_PER_STEP) or theirs.get(ALLREDUCE_CALLS_PER_STEP)
        if calls:
            details["us_per_call_delta"] = step_delta * 1000 / calls
        if ALLREDUCE_SHARE in mine and ALLREDUCE_SHARE in theirs:
            profiled = (mine[ALLREDUCE_SHARE] * 1000 / mine[DECODE_TOK_S]
                        - theirs[ALLREDUCE_SHARE] * 1000 / theirs[DECODE_TOK_S])
            details["profiler_delta_ms"] = profiled
            gap = abs(profiled - step_delta)
            details["disagree"] = gap > AB_DISAGREEMENT_MS and gap > 0.3 * abs(step_delta)
        Measurement.objects.update_or_create(
            run=run, metric=AB_ALLREDUCE_MS_DELTA,
            defaults={"value": step_delta, "unit": "ms", "direction": Measurement.Direction.LOWER, "details": details,
                      "point": run.benchmark.default_point},
        )
        return


def correctness_judge(*, run: Run) -> None:
    """Judge RUN, and when it is a reference, the runs of its batch that finished before it (one
    whose output cannot be read keeps its earlier judgement; it never costs RUN its own)."""
    _judge_correctness(run)
    if run.variant.is_reference:
        for other in Run.objects.filter(batch=run.batch, state=Run.State.SUCCEEDED).exclude(id=run.id):
            if not other.measurements.filter(metric=CORRECT, details__reference_run=run.id).exists():
                try:
                    _judge_correctness(other)
                except ArtifactError as exc:
                    log.warning("run %s: not judged again against reference run %s: %s", other.id, run.id, exc)
