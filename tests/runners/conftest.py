"""Fixtures of the runners tests (no Django needed)."""
import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny model: BENCH_TINY_MODEL_DIR (the Makefile builds it there) or a fresh build.

    build_tiny_model() is a no-op (well under a second) when the folder is up to date.
    """
    from runners.synthetic.tiny_model import build_tiny_model

    configured = os.environ.get("BENCH_TINY_MODEL_DIR")
    path = Path(configured) if configured else tmp_path_factory.mktemp("tiny") / "model"
    return build_tiny_model(path)

