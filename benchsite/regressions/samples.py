"""Clean samples: the repeats a verdict may use. The decode probe flags a repeat whose stream
was held back and delivered in one burst; such a repeat is never a sample.

The flags' source is plugged in here and nowhere else: `Measurement.sample_flags` (bench
migration 0004: a list parallel to `samples`, '' for a clean repeat, else the reason, e.g.
'burst'); `details["sample_flags"]` for a model without that field. Flags that do not line up
with the samples (an older row: empty list) flag nothing."""
from statistics import median

CLEAN_FLAGS = (None, "", False, "ok", 0)


def sample_flags(measurement) -> list | None:
    flags = getattr(measurement, "sample_flags", None)
    if not flags:
        flags = (measurement.details or {}).get("sample_flags")
    return flags if isinstance(flags, list) else None


def clean_samples(measurement) -> list[float]:
    """The measurement's samples without the flagged ones (flags that do not line up with the
    samples are not trusted: every sample is then kept)."""
    samples = [float(s) for s in (measurement.samples or []) if isinstance(s, (int, float))]
    flags = sample_flags(measurement)
    if flags is None or len(flags) != len(samples):
        return samples
    return [s for s, flag in zip(samples, flags) if flag in CLEAN_FLAGS]


def run_figure(measurement) -> float | None:
    """One run's figure for the run-to-run history: the median of its clean samples; the stored
    value when the measurement has no samples at all; None when every sample was flagged."""
    if not measurement.samples:
        return measurement.value
    clean = clean_samples(measurement)
    return median(clean) if clean else None
