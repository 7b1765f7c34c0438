"""One run's figure for the run-to-run history, from its clean samples only: a repeat the decode
probe flagged (a held-back stream delivered in one burst) is never a sample. Which samples are
clean is decided in one place, `benchsite.bench.domain.samples.split_samples`."""
from statistics import median

from benchsite.bench.domain.samples import split_samples


def run_figure(measurement) -> float | None:
    """The median of the measurement's clean samples; the stored value when it has no samples
    at all; None when every sample was flagged."""
    if not measurement.samples:
        return measurement.value
    clean, _flagged = split_samples(measurement)
    return median(clean) if clean else None
