"""The fixture that loads the test-only probe module (sample_probe.py) in this process, as the
setting BENCH_PROBE_MODULES loads it in the service's processes, and removes it afterwards."""
import sys

import pytest

from runners.probes import registry

SAMPLE = "tests.runners.probes.sample_probe"


@pytest.fixture
def sample_probe():
    registry.load_probe_modules(SAMPLE)
    yield sys.modules[SAMPLE]
    registry.unregister("sample_health")
    sys.modules.pop(SAMPLE, None)
