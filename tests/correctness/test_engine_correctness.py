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


@pytest.mark.engine
def test_corrupting_patch_is_incorrect_and_harmless_patch_identical(tiny_model_dir, shared_engine, overlay_cache):
    cache = overlay_cache
    t0 = time.monotonic()
    corrupt = cached_overlay([{"name": "corrupt_rmsnorm.patch",
                               "content": (HERE / "corrupt_rmsnorm.patch").read_text()}], cache)
    harmless = cached_overlay([{"name": "harmless_comment.patch",
                                "content": (HERE / "harmless_comment.patch").read_text()}], cache)
    overlays_s = time.monotonic() - t0

    ref = greedy(shared_engine)
    bad, bad_start, bad_req = greedy_run(tiny_model_dir, overlay_env(corrupt))
    ok, ok_start, ok_req = greedy_run(tiny_model_dir, overlay_env(harmless))
    print(f"overlays {overlays_s:.1f} s; engine start / request: reference {ref_start:.0f}/{ref_req:.1f} s, "
          f"corrupt {bad_start:.0f}/{bad_req:.1f} s, harmless {ok_start:.0f}/{ok_req:.1f} s")

    assert len(ref["token_ids"]) == MAX_TOKENS
    assert len(ref["logprobs"]) == MAX_TOKENS and all(len(d) >= 5 for d in ref["logprobs"])

    verdict = compare_outputs(ref, bad)
    print("corrupt:", verdict["reason"])
    # The patch only exists in the overlay: a changed output proves the engine-core/worker
    # processes (where the model runs) imported vllm from PYTHONPATH, not site-packages.
    assert verdict["verdict"] == "incorrect", verdict
    assert verdict["correct"] is False
    assert verdict["first_divergence"] is not None and verdict["first_divergence"] < 4
    assert verdict["evidence"] == "logprobs"
    assert verdict["logprob_drift"]["ref_token_in_cand_top_k"] is False
    assert verdict["degenerate_reference"]["degenerate"] is False

    same = compare_outputs(ref, ok)
    assert same["verdict"] == "identical" and same["correct"] is True, same
    assert same["logprob_drift"]["prefix_max_abs_diff"] < 1e-4
