"""Fixtures of the engine tests."""
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fake_vllm_command() -> list[str]:
    """A stand-in for `vllm`: `serve MODEL --host H --port P ...`, behaviour set by FAKE_VLLM_MODE."""
    import sys

    return [sys.executable, str(Path(__file__).with_name("fake_vllm.py"))]
