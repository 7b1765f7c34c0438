"""runners comm --mode interleaved: the arithmetic on known answers, and one real gloo run (2 CPU ranks)."""
import contextlib
import io
import json
from types import SimpleNamespace

import pytest

from runners.probes.comm.options import CommError, parse_gemv_mb
from runners.probes.comm.interleaved import (MAX_PROXY_WEIGHT_BYTES, gemv_blocks_from_config, inner_dim, marginal_us,
                                             proxy_layers)

LLAMA_3_8B = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
              "intermediate_size": 14336}
# hidden 64, 4 heads of 16, 2 kv heads, MLP 128: attention 64*(4+2*2)*16 + 4*16*64 = 12,288 weights,
# MLP 3*64*128 = 24,576; in float32 (CPU) over 2 ranks: 24,576 and 49,152 bytes per rank.
TINY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128}


def run_cli(*argv):
    from runners.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["comm", "--mode", "interleaved", *argv])
    return SimpleNamespace(returncode=rc, stdout=out.getvalue(), stderr=err.getvalue())


@pytest.fixture(scope="module")
def gloo_doc(tmp_path_factory):
    """One real interleaved run: 2 gloo ranks, the tiny config's two blocks, 2 layers."""
    d = tmp_path_factory.mktemp("interleaved")
    (d / "config.json").write_text(json.dumps(TINY))
    done = run_cli("--backend", "gloo", "--world-size", "2", "--model-config", str(d), "--layers", "2",
                   "--iters", "4", "--warmup", "1", "--json", "--output", str(d / "out.json"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert json.loads((d / "out.json").read_text()) == doc
    return doc


def test_llama_8b_blocks_per_gpu():
    # attention: 4096 x (32 + 2*8) x 128 + 32*128 x 4096 = 41,943,040 weights; MLP: 3 x 4096 x 14336 =
    # 176,160,768; bf16 (2 bytes) over TP=2 leaves the same numbers in bytes per GPU.
    assert gemv_blocks_from_config(LLAMA_3_8B, tensor_parallel_size=2, elem_bytes=2) == [41_943_040, 176_160_768]
    assert gemv_blocks_from_config(LLAMA_3_8B, tensor_parallel_size=4, elem_bytes=2) == [20_971_520, 88_080_384]
    # head_dim and kv heads default to hidden / heads and heads (no GQA)
    plain = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
    assert gemv_blocks_from_config(plain, tensor_parallel_size=1, elem_bytes=1) == [4 * 64 * 64, 3 * 64 * 128]


def test_config_errors():
    with pytest.raises(CommError, match="intermediate_size"):
        gemv_blocks_from_config({"hidden_size": 64, "num_attention_heads": 4}, tensor_parallel_size=2, elem_bytes=2)
    with pytest.raises(CommError, match="positive"):
        gemv_blocks_from_config(TINY, tensor_parallel_size=0, elem_bytes=2)


def test_inner_dim():
    # 144 MiB of bf16 at hidden 6144 is two 6144 x 6144 matrices (the synthetic step's block)
    assert inner_dim(144 << 20, hidden_size=6144, elem_bytes=2) == 6144
    # the MLP of Llama-3-8B at TP=2: gate+up+down hold 3 x 14336 / 2 columns per GPU, 2 x 10752 here
    assert inner_dim(176_160_768, hidden_size=4096, elem_bytes=2) == 10752
    assert inner_dim(10, hidden_size=4096, elem_bytes=2) == 1


def test_marginal_known_answers():
    # The step: 11.0 ms with 156 allreduces, 9.31 ms without: 1.69 ms / 156 = 10.83 us per call.
    assert marginal_us(with_us_by_rank=[11000.0, 10990.0], without_us_by_rank=[9300.0, 9310.0],
                       calls=156) == pytest.approx(1690 / 156)
    # the slowest rank on each side, not the same rank
    assert marginal_us(with_us_by_rank=[100.0, 120.0], without_us_by_rank=[90.0, 80.0], calls=3) == pytest.approx(10.0)
    # an allreduce that hides behind other work can cost nothing, or less than nothing
    assert marginal_us(with_us_by_rank=[95.0], without_us_by_rank=[100.0], calls=5) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        marginal_us(with_us_by_rank=[1.0], without_us_by_rank=[1.0], calls=0)


def test_proxy_depth_is_the_models():
    llama = {**LLAMA_3_8B, "num_hidden_layers": 32}
    blocks = gemv_blocks_from_config(llama, tensor_parallel_size=2, elem_bytes=2)
    assert proxy_layers(requested=None, config=llama, block_bytes=blocks) == (32, "")  # 6.9 GB per GPU
    assert proxy_layers(requested=8, config=llama, block_bytes=blocks) == (8, "")  # --layers wins
    assert proxy_layers(requested=None, config=None, block_bytes=[144 << 20] * 2) == (8, "")  # no config
    # Llama-3-405B at TP=8 (126 layers of 16384 x (128 + 2*8) x 128 attention and 3 x 16384 x 53248 MLP,
    # bf16): 796,917,760 bytes (0.74 GiB) per layer per GPU; 48 GiB holds 64 of them
    big = {"hidden_size": 16384, "num_attention_heads": 128, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 53248, "num_hidden_layers": 126}
    blocks = gemv_blocks_from_config(big, tensor_parallel_size=8, elem_bytes=2)
    assert sum(blocks) == (16384 * 144 * 128 + 16384 * 16384 + 3 * 16384 * 53248) * 2 // 8
    depth, note = proxy_layers(requested=None, config=big, block_bytes=blocks)
    assert sum(blocks) == 796_917_760 and depth == 64
    assert "capped at 64 of the model's 126 layers" in note


def test_parse_gemv_mb():
    assert parse_gemv_mb("144,144") == [144 << 20, 144 << 20]
    assert parse_gemv_mb("0.5") == [1 << 19]
    for bad in ["", ",", "0", "-1", "x", "nan"]:
        with pytest.raises(CommError):
            parse_gemv_mb(bad)


def test_gloo_run_shape(gloo_doc):
    doc = gloo_doc
    assert doc["mode"] == "interleaved" and doc["timing"] == "eager"
    assert doc["backend"] == "gloo" and doc["world_size"] == 2
    assert doc["dtype"] == "fp32" and any("float32" in n for n in doc["notes"])
    assert doc["hidden_size"] == 64 and doc["bytes"] == 64 * 4
    assert doc["gemv_inner_dims"] == [48, 96] and doc["gemv_bytes"] == [24_576, 49_152]
    assert doc["calls_per_step"] == 4  # 2 layers x 2 blocks
    assert doc["norm"] == "fused"  # vLLM's kind of norm, unless --norm ops
    [row] = doc["results"]
    assert row["proto"] == "default" and row["calls"] == 4
    assert row["step_us_with"] > 0 and row["step_us_without"] > 0
    assert len(row["us_by_rank"]) == 2 and len(row["step_us_with_by_rank"]) == 2
    assert row["step_us_with"] == max(row["step_us_with_by_rank"])
    assert row["us"] == pytest.approx((row["step_us_with"] - row["step_us_without"]) / 4, abs=0.01)
    assert row["samples"] == 4


def test_the_two_norms_compute_the_same_step():
    """--norm ops launches separate kernels for the RMSNorm; the step's result is the same."""
    import torch

    from runners.probes.comm.interleaved import _build_step

    cfg = {"dtype": "float32", "hidden_size": 64, "inner_dims": [48, 96], "layers": 3, "batch": 1}
    fused = _build_step(0, {**cfg, "norm": "fused"}, torch.device("cpu"), allreduce=lambda t: 2 * t)(True)
    ops = _build_step(0, {**cfg, "norm": "ops"}, torch.device("cpu"), allreduce=lambda t: 2 * t)(True)
    assert fused.shape == (1, 64)
    torch.testing.assert_close(ops, fused, rtol=1e-5, atol=1e-6)
    # and the norm did its job: unit RMS (the weight is ones)
    assert float(fused.pow(2).mean().sqrt()) == pytest.approx(1.0, rel=1e-3)


@pytest.mark.parametrize("argv, message", [
    (["--backend", "gloo"], "needs --gemv-mb or --model-config"),
    (["--backend", "gloo", "--gemv-mb", "1", "--sizes", "12K"], "--sizes belongs to the sweep"),
    (["--backend", "gloo", "--gemv-mb", "0"], "bad --gemv-mb"),
    (["--backend", "gloo", "--model-config", "/nonexistent/dir"], "cannot read model config"),
    (["--backend", "gloo", "--gemv-mb", "1", "--layers", "0"], "at least 1"),
    (["--backend", "gloo", "--gemv-mb", "1", "--protos", "LL"], "NCCL only"),
    (["--backend", "gloo", "--gemv-mb", "1", "--protos", "custom"], "custom allreduce needs CUDA GPUs"),
])
def test_cli_errors(argv, message):
    done = run_cli(*argv)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr
    assert done.stdout == ""
