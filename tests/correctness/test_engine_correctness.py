"""The real CPU engine on the tiny model: the shared unpatched engine is the reference; the
corrupting patch and the harmless one are applied through the overlay (two engine starts)."""
import time
from pathlib import Path

import pytest

from runners.probes.correctness import compare_outputs, greedy_completion
from runners.engine import Engine, EngineSpec
from runners.build.overlay import cached_overlay, overlay_env
from runners.probes.decode import DEFAULT_PROMPT
from tests.conftest import TEST_ENGINE_ARGS

HERE = Path(__file__).parent

MAX_TOKENS = 64


def greedy(engine: Engine) -> dict:
    return greedy_completion(base_url=engine.base_url, model=engine.spec.served_model_name,
                             prompt=DEFAULT_PROMPT, max_tokens=MAX_TOKENS)


def greedy_run(model_dir: Path, env: dict) -> tuple[dict, float, float]:
    t0 = time.monotonic()
    with Engine(EngineSpec(model=str(model_dir), args=TEST_ENGINE_ARGS, env=env)) as engine:
        t1 = time.monotonic()
        return greedy(engine), t1 - t0, time.monotonic() - t1


def overlay_of(name: str, cache: Path) -> Path:
    return cached_overlay([{"name": name, "content": (HERE / name).read_text()}], cache)


@pytest.fixture(scope="module")
def reference(shared_engine) -> dict:
    ref = greedy(shared_engine)
    assert len(ref["token_ids"]) == MAX_TOKENS
    assert len(ref["logprobs"]) == MAX_TOKENS and all(len(d) >= 5 for d in ref["logprobs"])
    return ref


@pytest.mark.engine
def test_corrupting_patch_is_incorrect(tiny_model_dir, reference, overlay_cache):
    bad, start_s, request_s = greedy_run(tiny_model_dir, overlay_env(overlay_of("corrupt_rmsnorm.patch", overlay_cache)))
    print(f"corrupt engine: start {start_s:.0f} s, request {request_s:.1f} s")
    verdict = compare_outputs(reference, bad)
    print("corrupt:", verdict["reason"])
    # The patch only exists in the overlay: a changed output proves the engine-core/worker
    # processes (where the model runs) imported vllm from PYTHONPATH, not site-packages.
    assert verdict["verdict"] == "incorrect", verdict
    assert verdict["correct"] is False
    assert verdict["first_divergence"] is not None and verdict["first_divergence"] < 4
    assert verdict["evidence"] == "logprobs"
    assert verdict["logprob_drift"]["ref_token_in_cand_top_k"] is False
    assert verdict["degenerate_reference"]["degenerate"] is False


@pytest.mark.engine
def test_harmless_patch_is_identical(tiny_model_dir, reference, overlay_cache):
    ok, start_s, request_s = greedy_run(tiny_model_dir, overlay_env(overlay_of("harmless_comment.patch", overlay_cache)))
    print(f"harmless engine: start {start_s:.0f} s, request {request_s:.1f} s")
    same = compare_outputs(reference, ok)
    assert same["verdict"] == "identical" and same["correct"] is True, same
    assert same["logprob_drift"]["prefix_max_abs_diff"] < 1e-4
