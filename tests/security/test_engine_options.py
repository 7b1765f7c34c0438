"""Variant flags and environment from the web: an allow-list with types. Through the model's
validation, which the admin and benchmarks-as-code files both run."""
import pytest
from django.core.exceptions import ValidationError

from benchsite.bench.definitions.engine_options import OptionError, check_env, check_flags
from benchsite.bench.models import Benchmark, Variant

GOOD_FLAGS = [
    ["--enforce-eager"],
    ["--max-model-len", "1024", "--max-num-seqs=4", "--dtype", "bfloat16"],
    ["--gpu-memory-utilization", "0.9", "--disable-custom-all-reduce"],
    ["--compilation-config", '{"cudagraph_mode": "FULL_DECODE_ONLY", "level": 3}'],
    ["--compilation-config={\"custom_ops\": [\"+rms_norm\"]}"],
]
BAD_FLAGS = [
    (["--trust-remote-code"], "'--trust-remote-code' is not allowed"),
    (["--served-model-name", "x"], "is not allowed"),
    (["--max-model-len", "lots"], "is not an integer"),
    (["--max-model-len", "0"], "out of range [16,"),
    (["--gpu-memory-utilization", "1.5"], "out of range"),
    (["--dtype", "int4"], "choose one of"),
    (["--enforce-eager=1"], "is a switch"),
    (["--max-num-seqs"], "needs a value"),
    (["--compilation-config", "{level: 3}"], "is not valid JSON"),
    (["--compilation-config", "[3]"], "takes a JSON object"),
    (["--enforce-eager", "; rm -rf /"], "'; rm -rf /' is not allowed"),
    ("--enforce-eager", "a list of strings"),
]


@pytest.mark.parametrize("flags", GOOD_FLAGS)
def test_allowed_flags_pass(flags):
    check_flags(flags)


@pytest.mark.parametrize("flags, message", BAD_FLAGS)
def test_other_flags_and_mistyped_values_are_refused(flags, message):
    with pytest.raises(OptionError, match=None) as info:
        check_flags(flags)
    assert message in str(info.value)


@pytest.mark.parametrize("env, message", [
    ({"NCCL_PROTO": "LL", "VLLM_USE_V1": "1", "OMP_NUM_THREADS": "8"}, None),
    ({"LD_PRELOAD": "/tmp/evil.so"}, "'LD_PRELOAD' is not allowed"),
    ({"PYTHONPATH": "/tmp"}, "not allowed"),
    ({"VLLM_PLUGINS": "evil"}, "'VLLM_PLUGINS' is not allowed"),
    ({"NCCL_PROTO": "LL; reboot"}, "a value is up to 200 characters"),
    ({"NCCL_PROTO": 3}, "a value is up to 200 characters"),
    ({"nccl_proto": "LL"}, "not allowed"),
])
def test_environment_allow_list(env, message):
    if message is None:
        check_env(env)
        return
    with pytest.raises(OptionError) as info:
        check_env(env)
    assert message in str(info.value)


@pytest.mark.django_db
def test_model_validation_names_the_field():
    benchmark = Benchmark(name="b", slug="b", model="/m", engine_args=["--max-num-seqs", "4"], engine_env={})
    benchmark.full_clean()
    benchmark.save()
    variant = Variant(benchmark=benchmark, position=1, name="v", flags=["--trust-remote-code"], env={"NCCL_ALGO": "Ring"})
    with pytest.raises(ValidationError) as info:
        variant.full_clean()
    assert list(info.value.message_dict) == ["flags"]
    variant.flags, variant.env = ["--enforce-eager"], {"LD_PRELOAD": "x"}
    with pytest.raises(ValidationError) as info:
        variant.full_clean()
    assert list(info.value.message_dict) == ["env"]
