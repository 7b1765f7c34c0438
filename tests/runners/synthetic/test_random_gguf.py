"""`runners random-gguf`: the tiny model as GGUF, read back by the gguf package; the swapped-shards variant."""
import gguf  # the dev extra
import numpy as np
import pytest

from runners.__main__ import main as runners_main
from runners.synthetic import random_gguf, tiny_model

Q8_0, F16, F32 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.F32
SWAPPED = "blk.1.ffn_up.weight"


@pytest.fixture(scope="module")
def files(tiny_model_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    assert runners_main(["random-gguf", str(d / "ok.gguf"), "--from", str(tiny_model_dir)]) == 0
    assert runners_main(["random-gguf", str(d / "bad.gguf"), "--from", str(tiny_model_dir),
                         "--swap-shards", SWAPPED]) == 0
    return d / "ok.gguf", d / "bad.gguf"


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


def test_read_back_names_types_and_shapes(files):
    read = tensors(files[0])
    hf = tiny_model.tensor_shapes()
    assert set(read) == {random_gguf.gguf_name(n) for n in hf} and len(read) == 2 + 4 * 9 + 1
    for name, shape in hf.items():
        t = read[random_gguf.gguf_name(name)]
        assert tuple(int(x) for x in t.shape) == tuple(reversed(shape)), name  # GGUF lists ne0 first
        want = F32 if len(shape) == 1 else F16 if shape[1] % 32 else Q8_0  # 688-wide rows: no whole Q8_0 block
        assert t.tensor_type == want, name
    assert read["blk.0.ffn_down.weight"].tensor_type == F16 and read["blk.0.ffn_up.weight"].tensor_type == Q8_0


def test_metadata_and_tokenizer(files):
    reader = gguf.GGUFReader(str(files[0]))
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    assert field("general.architecture") == "llama"
    assert (field("llama.block_count"), field("llama.embedding_length"), field("llama.attention.head_count_kv")) == (4, 256, 4)
    assert field("general.file_type") == gguf.LlamaFileType.MOSTLY_Q8_0
    tokens = field("tokenizer.ggml.tokens")
    assert len(tokens) == tiny_model.VOCAB_SIZE and tokens[tiny_model.EOS_ID] == "</s>"


def test_values_are_the_tiny_models_up_to_q8_0(files, tiny_model_dir):
    from safetensors.numpy import load_file

    hf = load_file(str(tiny_model_dir / "model.safetensors"))
    read = tensors(files[0])
    up = gguf.quants.dequantize(read["blk.0.ffn_up.weight"].data, Q8_0)
    assert np.abs(up - hf["model.layers.0.mlp.up_proj.weight"]).max() < 0.01 * np.abs(up).max()
    q = gguf.quants.dequantize(read["blk.0.attn_q.weight"].data, Q8_0)  # llama.cpp's rotary permutation
    want = random_gguf.permute_rotary(hf["model.layers.0.self_attn.q_proj.weight"], tiny_model.NUM_HEADS)
    assert np.abs(q - want).max() < 0.01 * np.abs(q).max()
    assert not np.allclose(want, hf["model.layers.0.self_attn.q_proj.weight"])


def test_swapped_file_differs_exactly_in_one_tensor(files):
    ok_bytes, bad_bytes = (np.fromfile(p, dtype=np.uint8) for p in files)
    assert ok_bytes.size == bad_bytes.size
    ok, bad = tensors(files[0]), tensors(files[1])
    t = bad[SWAPPED]
    differ = np.nonzero(ok_bytes != bad_bytes)[0]
    assert differ.size and t.data_offset <= differ.min() and differ.max() < t.data_offset + t.n_bytes
    rows = ok[SWAPPED].data.shape[0]
    halves = np.concatenate([ok[SWAPPED].data[rows // 2:], ok[SWAPPED].data[:rows // 2]])
    assert np.array_equal(bad[SWAPPED].data, halves)  # the quantized rows, moved whole
    for name in set(ok) - {SWAPPED}:
        assert np.array_equal(ok[name].data, bad[name].data), name


def test_swap_row_shards_in_three():
    w = np.arange(12).reshape(6, 2)
    assert random_gguf.swap_row_shards(w, 3).tolist() == [[8, 9], [10, 11], [4, 5], [6, 7], [0, 1], [2, 3]]


def test_q4_k_is_not_quantized_by_the_package():
    with pytest.raises(NotImplementedError):
        gguf.quants.quantize(np.zeros((1, 256), dtype=np.float32), gguf.GGMLQuantizationType.Q4_K)


@pytest.mark.parametrize("extra, message", [
    (["--type", "Q4_K"], "--type Q4_K: the gguf package quantizes only Q8_0, Q4_0, Q5_0, F16, F32"),
    (["--arch", "deepseek2"], "--arch deepseek2: only llama"),
    (["--swap-shards", "blk.9.ffn_up.weight"], "no tensor 'blk.9.ffn_up.weight'"),
    (["--swap-shards", "blk.0.ffn_up.weight", "--shards", "5"], "cannot cut 688 rows into 5 equal shards"),
])
def test_bad_requests_are_refused(tiny_model_dir, tmp_path, capsys, extra, message):
    out = tmp_path / "x.gguf"
    assert runners_main(["random-gguf", str(out), "--from", str(tiny_model_dir), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_missing_model_says_how_to_make_it(tmp_path, capsys):
    assert runners_main(["random-gguf", str(tmp_path / "x.gguf"), "--from", str(tmp_path)]) == 2
    assert "python -m runners tiny-model" in capsys.readouterr().err
