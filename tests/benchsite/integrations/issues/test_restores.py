"""When a later level counts as the level before a regression: within the bound, in the metric's
better direction."""
import pytest

from benchsite.integrations.issues.state import restores


@pytest.mark.parametrize("metric, before, level, bound, expected", [
    ("decode_tok_s", 100.0, 97.0, 0.03, True),   # higher is better: 3% below counts as back
    ("decode_tok_s", 100.0, 96.9, 0.03, False),
    ("decode_tok_s", 100.0, 120.0, 0.03, True),  # better than before
    ("ttft_ms", 50.0, 51.5, 0.03, True),          # lower is better
    ("ttft_ms", 50.0, 51.6, 0.03, False),
    ("ttft_ms", 50.0, 40.0, 0.03, True),
])
def test_restores(metric, before, level, bound, expected):
    assert restores(metric, before, level, bound) is expected
