"""runners.analysis.evidence: did each setting of a variant take effect? Judged from the engine's
own start-up log. Excerpts: vLLM 0.24.0 on 2 x H200 (docs/data/ladder-h200x2.json server logs,
and NCCL's own start-up lines), vLLM 0.32.0 on this CPU host; then one real engine."""
from pathlib import Path

import pytest

from runners.analysis.evidence import APPLIED, NO_EFFECT, NOT_APPLIED, SUPERSEDED, UNVERIFIED, took_effect

H200_CONFIG = (
    "(EngineCore pid=2301) INFO 11-30 06:05:35 [core.py:114] Initializing a V1 LLM engine (v0.24.0) with config: "
    "model='/tmp/models/llama-8b', disable_custom_all_reduce=False, enforce_eager=False, "
    "compilation_config={'mode': <CompilationMode.VLLM_COMPILE: 3>, 'backend': 'inductor', "
    "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'pass_config': {'fuse_norm_quant': False, "
    "'fuse_allreduce_rms': True}}"
)
H200_COMPILED = [
    "(APIServer pid=2187) INFO 11-30 06:05:21 [compilation.py:310] Enabled custom fusions: allreduce_rms",
    H200_CONFIG,
    "(Worker pid=2408) INFO 11-30 06:05:55 [cuda_communicator.py:245] Using ['CUSTOM', 'PYNCCL'] all-reduce "
    "backends (in dispatch order) for group 'tp:0' out of potential backends: ['NCCL_SYMM_MEM', 'QUICK_REDUCE', "
    "'FLASHINFER', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].",
    "(Worker_TP0 pid=2408) INFO 11-30 06:06:05 [backends.py:1148] Dynamo bytecode transform time: 6.26 s",
    "(Worker_TP0 pid=2408) WARNING 11-30 06:06:05 [allreduce_rms_fusion.py:950] Flashinfer is not installed or "
    "comm module not found, skipping allreduce fusion pass",
    "(Worker_TP0 pid=2408) WARNING 11-30 06:06:07 [allreduce_rms_fusion.py:1074] AllReduce fusion pass is disabled.",
    "(Worker_TP0 pid=2408) INFO 11-30 06:06:19 [monitor.py:53] torch.compile took 19.68 s in total",
    "Capturing CUDA graphs (PIECEWISE): 100%|██████████| 4/4 [00:00<00:00, 23.76it/s]",
    "Capturing CUDA graphs (FULL): 100%|██████████| 3/3 [00:00<00:00, 33.06it/s]",
    "(Worker_TP0 pid=2408) INFO 11-30 06:06:23 [model_runner.py:726] Graph capturing finished in 1 secs, took 0.09 GiB",
]
PYNCCL_ONLY = ("(Worker pid=4031) INFO 11-30 06:10:13 [cuda_communicator.py:245] Using ['PYNCCL'] all-reduce backends "
               "(in dispatch order) for group 'tp:0' out of potential backends: ['NCCL_SYMM_MEM', 'QUICK_REDUCE', "
               "'FLASHINFER', 'CUSTOM', 'SYMM_MEM', 'PYNCCL'].")
NCCL_SIMPLE = [
    "h200:4031:4031 [0] NCCL INFO NCCL_PROTO set by environment to Simple",
    *[f"h200:4031:4031 [0] NCCL INFO AllReduce: 8192 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..1}}"] * 3,
]
CPU_EAGER = [
    "(APIServer pid=6247) WARNING 11-30 10:37:23 [vllm.py:1703] Enforce eager set, disabling torch.compile, "
    "CUDAGraphs, and JIT kernel warmup. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none",
    "(APIServer pid=6247) WARNING 11-30 10:37:23 [vllm.py:1727] Inductor compilation was disabled by user settings, "
    "optimizations settings that are only active during inductor compilation will be ignored.",
    "(APIServer pid=6247) INFO 11-30 10:37:23 [compilation.py:317] Enabled custom fusions: norm_quant, act_quant",
    "(EngineCore pid=6278) INFO 11-30 10:37:32 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='/work/main/var/tiny-model', disable_custom_all_reduce=True, enforce_eager=True, "
    "compilation_config={'mode': <CompilationMode.NONE: 0>, 'cudagraph_mode': <CUDAGraphMode.NONE: 0>}",
    "(Worker pid=6327) WARNING 11-30 10:37:41 [cpu_worker.py:114] libtcmalloc is not found in LD_PRELOAD.",
    "(EngineCore pid=6278) INFO 11-30 10:37:42 [kv_cache_utils.py:2327] CPU KV cache size: 262,144 tokens",
]
# vLLM 0.32's CPU platform compiles with mode DYNAMO_TRACE_ONCE and its CPU model runner logs the
# warm-up (format strings of vllm/platforms/cpu.py and vllm/v1/worker/cpu_model_runner.py).
CPU_COMPILED = [
    "(APIServer pid=7001) INFO 11-30 10:40:01 [compilation.py:317] Enabled custom fusions: norm_quant, act_quant",
    "(EngineCore pid=7020) INFO 11-30 10:40:09 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='/work/main/var/tiny-model', enforce_eager=False, "
    "compilation_config={'mode': <CompilationMode.DYNAMO_TRACE_ONCE: 2>, 'cudagraph_mode': <CUDAGraphMode.NONE: 0>}",
    "(Worker pid=7050) INFO 11-30 10:40:15 [cpu_model_runner.py:87] Warming up model for the compilation...",
    "(Worker pid=7050) INFO 11-30 10:40:58 [cpu_model_runner.py:91] Warming up done.",
    "(EngineCore pid=7020) INFO 11-30 10:40:59 [kv_cache_utils.py:2327] CPU KV cache size: 262,144 tokens",
]


def by_setting(report: dict) -> dict:
    return {c["setting"]: c for c in report["checks"]}


def test_compiled_with_cuda_graphs_and_custom_allreduce_on_h200():
    report = took_effect("\n".join(H200_COMPILED), engine_args=[], engine_env={}, tensor_parallel_size=2)
    checks = by_setting(report)
    mode = checks["execution mode"]
    assert (mode["asked"], mode["verdict"]) == ("compiled", APPLIED)
    assert mode["effective"] == "compiled + CUDA graphs (FULL, PIECEWISE)"
    assert [ln[ln.index("] ") + 2:][:24] for ln in mode["evidence"]] == [
        "Dynamo bytecode transfor", "torch.compile took 19.68", "Graph capturing finished"]
    ar = checks["custom allreduce"]
    assert (ar["asked"], ar["effective"], ar["verdict"], ar["source"]) == ("on", "on", APPLIED, "default")
    eff = report["effective"]
    assert eff["platform"] == "cuda" and eff["allreduce_backends"] == ["CUSTOM", "PYNCCL"]
    assert eff["compilation_mode"] == "VLLM_COMPILE" and eff["cudagraph_mode"] == "FULL_AND_PIECEWISE"


def test_announced_allreduce_fusion_that_a_worker_disabled_is_not_applied():
    """A trap: the API server announces allreduce_rms, each worker skips it."""
    args = ["--compilation-config", '{"pass_config": {"fuse_allreduce_rms": true}}']
    report = took_effect("\n".join(H200_COMPILED), engine_args=args, engine_env={}, tensor_parallel_size=2)
    fusion = by_setting(report)["fusion allreduce_rms"]
    assert (fusion["verdict"], fusion["source"], fusion["flag"]) == (NOT_APPLIED, "variant", True)
    assert any("AllReduce fusion pass is disabled" in ln for ln in fusion["evidence"])
    assert report["flagged"] is True and report["flagged_settings"] == ["fusion allreduce_rms"]
    # by default (not asked for), the same finding is shown but does not flag the variant
    report = took_effect("\n".join(H200_COMPILED), engine_args=[], engine_env={}, tensor_parallel_size=2)
    fusion = by_setting(report)["fusion allreduce_rms"]
    assert (fusion["verdict"], fusion["source"], fusion["flag"]) == (NOT_APPLIED, "default", False)
    assert report["flagged"] is False


def test_announced_fusion_without_contrary_lines_is_only_unverified():
    lines = [ln for ln in H200_COMPILED if "fusion pass" not in ln]
    fusion = by_setting(took_effect("\n".join(lines), engine_args=[], engine_env={},
                                    tensor_parallel_size=2))["fusion allreduce_rms"]
    assert fusion["verdict"] == UNVERIFIED and fusion["effective"] == "announced"


def test_nccl_proto_from_nccls_own_lines():
    log = "\n".join([PYNCCL_ONLY, *NCCL_SIMPLE])
    args = ["--disable-custom-all-reduce"]
    checks = by_setting(took_effect(log, engine_args=args, engine_env={"NCCL_PROTO": "Simple"}, tensor_parallel_size=2))
    assert (checks["NCCL_PROTO"]["verdict"], checks["NCCL_PROTO"]["effective"]) == (APPLIED, "SIMPLE x3")
    assert checks["NCCL_PROTO"]["evidence"][0].endswith("NCCL_PROTO set by environment to Simple")
    assert (checks["custom allreduce"]["asked"], checks["custom allreduce"]["verdict"]) == ("off", APPLIED)
    # asked for LL, NCCL ran Simple: not applied, and the variant is flagged
    report = took_effect(log, engine_args=args, engine_env={"NCCL_PROTO": "LL"}, tensor_parallel_size=2)
    assert by_setting(report)["NCCL_PROTO"]["verdict"] == NOT_APPLIED and report["flagged"] is True
    # exclusion syntax: ^LL allows SIMPLE
    checks = by_setting(took_effect(log, engine_args=args, engine_env={"NCCL_PROTO": "^LL"}, tensor_parallel_size=2))
    assert checks["NCCL_PROTO"]["verdict"] == APPLIED


def test_nccl_proto_without_debug_lines_is_unverified_and_says_how_to_see_it():
    checks = by_setting(took_effect("\n".join(H200_COMPILED), engine_args=[], engine_env={"NCCL_PROTO": "LL"},
                                    tensor_parallel_size=2))
    assert checks["NCCL_PROTO"]["verdict"] == UNVERIFIED
    assert "NCCL_DEBUG=INFO" in checks["NCCL_PROTO"]["why"]


def test_custom_allreduce_asked_on_but_vllm_turned_it_off():
    log = "\n".join([H200_CONFIG, PYNCCL_ONLY, "Graph capturing finished in 1 secs",
                     "Capturing CUDA graphs (FULL): 100%", "torch.compile took 5.01 s in total"])
    ar = by_setting(took_effect(log, engine_args=[], engine_env={}, tensor_parallel_size=2))["custom allreduce"]
    assert (ar["asked"], ar["effective"], ar["verdict"], ar["flag"]) == ("on", "off", NOT_APPLIED, False)


def test_graphs_captured_per_batch_kind_are_applied():
    """vLLM 0.24.0 on one H100 with an MLA model (docs/data/gpu-h100-moe-2026-12-06.json) names the
    batch kind each capture serves."""
    log = "\n".join([H200_CONFIG,
                     "(EngineCore pid=1849) INFO 12-06 09:17:55 [monitor.py:53] torch.compile took 16.94 s in total",
                     "(EngineCore pid=1849) Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| "
                     "4/4 [00:01<00:00,  2.20it/s]",
                     "(EngineCore pid=1849) Capturing CUDA graphs (decode, FULL): 100%|██████████| 3/3 "
                     "[00:00<00:00, 115.88it/s]",
                     "(EngineCore pid=1849) INFO 12-06 09:18:09 [gpu_model_runner.py:6656] Graph capturing finished in "
                     "3 secs, took 0.07 GiB"])
    report = took_effect(log, engine_args=[], engine_env={}, tensor_parallel_size=1)
    mode = by_setting(report)["execution mode"]
    assert (mode["verdict"], mode["effective"]) == (
        APPLIED, "compiled + CUDA graphs (FULL decode, PIECEWISE mixed prefill-decode)")
    assert not mode["flag"]


def test_an_environment_variable_of_vllms_gets_its_own_row_unverified():
    """A variant's VLLM_* variable (the MoE ladder's unfused grouped top-k): no log line of vLLM
    confirms it, so its row says it was in the engine's environment, unverified, and flags nothing."""
    log = "\n".join(["# engine command: vllm serve /m", "# engine env: VLLM_USE_FUSED_MOE_GROUPED_TOPK=0",
                     H200_CONFIG])
    report = took_effect(log, engine_args=[], engine_env={"VLLM_USE_FUSED_MOE_GROUPED_TOPK": "0",
                                                          "VLLM_OTHER": "1"}, tensor_parallel_size=1)
    rows = by_setting(report)
    topk, other = rows["VLLM_USE_FUSED_MOE_GROUPED_TOPK"], rows["VLLM_OTHER"]
    assert (topk["asked"], topk["effective"], topk["verdict"], topk["flag"]) == ("0", "set", UNVERIFIED, False)
    assert topk["evidence"] == ["# engine env: VLLM_USE_FUSED_MOE_GROUPED_TOPK=0"]
    assert (other["effective"], other["verdict"], other["evidence"]) == ("unknown", UNVERIFIED, [])
    assert not report["flagged"] and report["flagged_settings"] == []


def test_graphs_asked_but_none_captured_is_not_applied():
    log = "\n".join([H200_CONFIG, "(Worker_TP0 pid=1) INFO [monitor.py:53] torch.compile took 19.68 s in total",
                     PYNCCL_ONLY])
    mode = by_setting(took_effect(log, engine_args=[], engine_env={}, tensor_parallel_size=2))["execution mode"]
    assert mode["verdict"] == NOT_APPLIED and "no CUDA graph was captured" in mode["why"]


def test_cpu_eager_and_nccl_proto_has_no_effect_here():
    report = took_effect("\n".join(CPU_EAGER), engine_args=["--enforce-eager"], engine_env={"NCCL_PROTO": "LL"},
                         tensor_parallel_size=1)
    checks = by_setting(report)
    assert report["effective"]["platform"] == "cpu"
    assert (checks["execution mode"]["effective"], checks["execution mode"]["verdict"]) == ("eager", APPLIED)
    assert checks["NCCL_PROTO"]["verdict"] == NO_EFFECT
    # eager: inductor off, so the announced default fusions did not run (shown, not flagged)
    assert checks["fusion norm_quant"]["verdict"] == NOT_APPLIED and checks["fusion norm_quant"]["flag"] is False
    assert report["flagged"] is False
    assert "custom allreduce" not in checks  # not asked for, and nothing to judge at TP=1 on a CPU


def test_cpu_compiled_asked_and_applied_and_eager_asked_but_compiled():
    log = "\n".join(CPU_COMPILED)
    mode = by_setting(took_effect(log, engine_args=[], engine_env={}, tensor_parallel_size=1))["execution mode"]
    assert (mode["asked"], mode["effective"], mode["verdict"]) == ("compiled", "compiled", APPLIED)
    assert "Warming up model for the compilation" in mode["evidence"][0]
    report = took_effect(log, engine_args=["--enforce-eager"], engine_env={}, tensor_parallel_size=1)
    assert by_setting(report)["execution mode"]["verdict"] == NOT_APPLIED and report["flagged"] is True
    # compiled asked, eager ran
    report = took_effect("\n".join(CPU_EAGER), engine_args=[], engine_env={}, tensor_parallel_size=1)
    assert by_setting(report)["execution mode"]["verdict"] == NOT_APPLIED and report["flagged"] is True


def test_an_empty_log_is_unverified_not_applied():
    report = took_effect("", engine_args=["--enforce-eager"], engine_env={}, tensor_parallel_size=1)
    assert by_setting(report)["execution mode"]["verdict"] == UNVERIFIED and report["flagged"] is False


@pytest.mark.engine
def test_the_real_cpu_engine_says_it_ran_eager(shared_engine):
    """The shared engine (TP=1, --enforce-eager): its own log proves eager, and NCCL_PROTO would
    have had no effect on it."""
    from tests.conftest import TEST_ENGINE_ARGS

    log = shared_engine.log_path.read_text(errors="replace")
    report = took_effect(log, engine_args=TEST_ENGINE_ARGS, engine_env={"NCCL_PROTO": "LL"}, tensor_parallel_size=1)
    checks = by_setting(report)
    assert report["effective"]["platform"] == "cpu" and report["effective"]["enforce_eager"] is True
    assert (checks["execution mode"]["effective"], checks["execution mode"]["verdict"]) == ("eager", APPLIED)
    assert any("Enforce eager set" in ln for ln in checks["execution mode"]["evidence"])
    assert checks["NCCL_PROTO"]["verdict"] == NO_EFFECT
    assert report["flagged"] is False


DATA = Path(__file__).parent / "data"


def test_the_fusion_that_fired_supersedes_nccl_proto_and_custom_allreduce():
    """Real lines from vLLM 0.24 on 2 x H200 (the service run of 2026-11-30, NCCL LL step): with
    flashinfer.comm importable the allreduce + RMSNorm fusion runs by default, FlashInfer's fused
    kernel reduces every layer, and LL, Simple and custom allreduce all decoded at 310-312 tok/s.
    NCCL_PROTO and --disable-custom-all-reduce were applied, but they changed nothing that matters."""
    log = (DATA / "h200-fused-nccl-ll.log").read_text()
    report = took_effect(log, engine_args=["--disable-custom-all-reduce"],
                         engine_env={"NCCL_PROTO": "LL", "NCCL_DEBUG": "INFO"}, tensor_parallel_size=2)
    checks = by_setting(report)
    assert report["effective"]["allreduce_fused"] is True
    fusion = checks["fusion allreduce_rms"]
    assert (fusion["verdict"], fusion["effective"], fusion["source"]) == (APPLIED, "on", "default")
    assert "Initialized FlashInfer Allreduce norm fusion workspace with backend=trtllm" in fusion["evidence"][0]
    proto, custom = checks["NCCL_PROTO"], checks["custom allreduce"]
    assert (proto["verdict"], proto["effective"], proto["flag"]) == (SUPERSEDED, "LL x2", True)
    assert "governs only NCCL's own 2 collective(s)" in proto["why"]
    assert (custom["verdict"], custom["effective"], custom["flag"]) == (SUPERSEDED, "off", True)
    assert report["flagged_settings"] == ["custom allreduce", "NCCL_PROTO"]


def test_a_fusion_asked_for_and_fired_is_applied_and_flags_nothing():
    log = (DATA / "h200-fusion-asked.log").read_text()
    args = ["--compilation-config", '{"pass_config": {"fuse_allreduce_rms": true}}']
    report = took_effect(log, engine_args=args, engine_env={}, tensor_parallel_size=2)
    checks = by_setting(report)
    assert (checks["fusion allreduce_rms"]["verdict"], checks["fusion allreduce_rms"]["source"]) == (APPLIED, "variant")
    # custom allreduce is on by default: superseded too, but not the variant's own setting
    assert (checks["custom allreduce"]["verdict"], checks["custom allreduce"]["flag"]) == (SUPERSEDED, False)
    assert report["flagged"] is False
