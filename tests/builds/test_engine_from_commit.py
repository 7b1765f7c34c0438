"""End to end on the real CPU engine: a pushed commit whose Python change forces every greedy
token to one id runs through runners.job.run_job; the measured output shows the change."""
import json

import pytest

from runners.job import run_job

from .conftest import installed_vllm

LLAMA = "vllm/model_executor/models/llama.py"
FORCED_TOKEN = 7
ORIGINAL = """        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits
"""
FORCED = f"""        logits = self.logits_processor(self.lm_head, hidden_states)
        if logits is not None:  # bench test commit: every greedy token becomes {FORCED_TOKEN}
            logits = torch.full_like(logits, -1e4)
            logits[..., {FORCED_TOKEN}] = 0.0
        return logits
"""


@pytest.mark.engine
def test_pushed_python_commit_changes_the_measured_output(fresh_main, build_config, tiny_model_dir, tmp_path):
    source = (installed_vllm() / "model_executor/models/llama.py").read_text()
    assert source.count(ORIGINAL) == 1
    sha = fresh_main.commit({LLAMA: source.replace(ORIGINAL, FORCED)}, "force token 7")
    spec = {"model": str(tiny_model_dir), "prompt": "The history of computing began with", "max_tokens": 8,
            "repeats": 1, "warmup": 0, "probes": ["decode", "correctness"], "startup_timeout_s": 300,
            "engine_args": ["--enforce-eager", "--dtype", "float32", "--max-model-len", "512", "--max-num-seqs", "2"],
            "engine": {"kind": "git", "repo": fresh_main.url, "ref": "main"}}
    result = run_job(spec, work_dir=tmp_path / "work", build_config=build_config)
    assert result["build"]["path"] == "overlay" and result["build"]["commit"] == sha
    assert result["build"]["base_commit"] == fresh_main.base and result["build"]["ref"] == "main"
    greedy = next(a for a in result["artifacts"] if a["name"] == "greedy.json")
    assert json.loads(greedy["content"])["token_ids"] == [FORCED_TOKEN] * 8
    assert any(a["kind"] == "build_log" for a in result["artifacts"])
    assert {m["metric"] for m in result["measurements"]} >= {"decode_tok_s"}
