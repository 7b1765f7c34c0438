"""The tiny model: deterministic, complete, loadable, reused when up to date."""
import json
import os
import shutil
import time

import pytest

from runners.synthetic import tiny_model
from runners.synthetic.tiny_model import FILES, STAMP_FILE, build_tiny_model, is_complete


@pytest.fixture(scope="module")
def second_build(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-again") / "model")


def test_rebuild_is_byte_identical(tiny_model_dir, second_build):
    for name in (*FILES, STAMP_FILE):
        assert (tiny_model_dir / name).read_bytes() == (second_build / name).read_bytes(), name
    assert sorted(os.listdir(second_build)) == sorted((*FILES, STAMP_FILE))


def test_shape_and_size(tiny_model_dir):
    from safetensors import safe_open

    config = json.loads((tiny_model_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["hidden_size"], config["num_hidden_layers"]) == (256, 4)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (8, 4)
    assert 512 <= config["intermediate_size"] <= 688
    assert config["vocab_size"] >= 10_000
    weights = tiny_model_dir / "model.safetensors"
    assert weights.stat().st_size < 60 * 2**20
    with safe_open(str(weights), "pt") as f:
        assert f.get_tensor("lm_head.weight").shape == (config["vocab_size"], 256)
        assert str(f.get_tensor("model.layers.0.self_attn.k_proj.weight").dtype) == "torch.float32"
        assert len(list(f.keys())) == 2 + 4 * 9 + 1


def test_tokenizer(tiny_model_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    assert 10_000 <= tok.get_vocab_size() <= json.loads((tiny_model_dir / "config.json").read_text())["vocab_size"]
    text = "def main(argv):\n    return 0  # é ✓"
    enc = tok.encode(text)
    assert enc.ids[0] == tiny_model.BOS_ID
    assert tok.decode(enc.ids) == text  # byte-level: lossless round trip
    code = "def main(argv):\n    return 0\n"
    assert len(tok.encode(code).ids) < len(code) // 2  # it learned merges
    cfg = json.loads((tiny_model_dir / "tokenizer_config.json").read_text())
    assert (cfg["bos_token"], cfg["eos_token"], cfg["pad_token"]) == ("<s>", "</s>", "<pad>")
    gen = json.loads((tiny_model_dir / "generation_config.json").read_text())
    assert (gen["bos_token_id"], gen["eos_token_id"]) == (tiny_model.BOS_ID, tiny_model.EOS_ID)


def test_transformers_loads_and_generates(tiny_model_dir):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")

    tok = transformers.AutoTokenizer.from_pretrained(str(tiny_model_dir))
    assert tok.eos_token_id == tiny_model.EOS_ID and len(tok) >= 10_000
    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    ids = torch.tensor([tok("import os\n")["input_ids"]])
    out1 = model.generate(ids, max_new_tokens=8, do_sample=False)
    out2 = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out1.shape[1] == ids.shape[1] + 8
    assert out1.tolist() == out2.tolist()


def test_up_to_date_model_is_reused(tiny_model_dir):
    before = {n: (tiny_model_dir / n).stat().st_mtime_ns for n in FILES}
    t0 = time.monotonic()
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert time.monotonic() - t0 < 5
    assert {n: (tiny_model_dir / n).stat().st_mtime_ns for n in FILES} == before


def test_damaged_or_stale_model_is_not_complete(tiny_model_dir, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    assert is_complete(copy)
    with open(copy / "tokenizer.json", "ab") as f:
        f.write(b" ")
    assert not is_complete(copy)
    shutil.copy(tiny_model_dir / "tokenizer.json", copy / "tokenizer.json")
    stamp = json.loads((copy / STAMP_FILE).read_text())
    stamp["stamp"] = "0" * 64
    (copy / STAMP_FILE).write_text(json.dumps(stamp))
    assert not is_complete(copy)
    (copy / STAMP_FILE).unlink()
    assert not is_complete(copy)


def test_refuses_to_overwrite_a_foreign_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_tiny_model(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_cli_reports_up_to_date(tiny_model_dir, capsys):
    from runners.__main__ import main

    assert main(["tiny-model", str(tiny_model_dir)]) == 0
    assert "up to date" in capsys.readouterr().out
