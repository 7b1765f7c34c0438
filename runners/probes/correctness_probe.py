"""The correctness probe as a plug-in: a greedy request with top-5 logprobs (greedy.json), which
the service judges against the benchmark's reference (runners.probes.correctness.compare_outputs)
and records as the `correct` metric it declares."""
from __future__ import annotations

from runners.contract import CORRECT, GREEDY_ARTIFACT, Metric

from .correctness import greedy_completion
from .probe_kit import json_artifact
from .registry import ProbeBase, ProbeContext, ProbeOutput, register

METRICS = (Metric(CORRECT, "", "higher", "output correct (1 = yes)"),)


# The greedy request is one non-streamed answer with top-5 logprobs for every token: nothing to
# watch progress by, so it gets longer than a streamed probe's deadline (300 s at the default 120 s).
GREEDY_DEADLINE_FACTOR = 2.5


class CorrectnessProbe(ProbeBase):
    """A greedy request with top-5 logprobs; the service judges it against the reference."""
    name, stage, phase = "correctness", "engine", "probing correctness"
    metrics = METRICS

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        greedy = greedy_completion(base_url=ctx.base_url, model=ctx.served_model, prompt=ctx.spec.prompt,
                                   max_tokens=int(ctx.spec.max_tokens), timeout_s=GREEDY_DEADLINE_FACTOR * ctx.timeout_s)
        return ProbeOutput(artifacts=[json_artifact(GREEDY_ARTIFACT, greedy, indent=None)] if greedy else [], raw=greedy)


PROBE = register(CorrectnessProbe())
