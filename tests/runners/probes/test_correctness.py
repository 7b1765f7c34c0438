"""compare_outputs / degenerate_output on crafted inputs (no engine)."""
import json
import random

import pytest

from runners.probes.correctness import (CorrectnessError, MAX_GAP_NATS, compare_outputs, degenerate_output,
                                 normalize_logprobs)


def healthy(n=64, seed=0):
    """Varied ids like the tiny model's real greedy output (64 distinct in 64)."""
    return random.Random(seed).sample(range(100, 16000), n)


def tops(ids, alt_gap=1.5, alt_offset=1, overrides=None):
    """Top-5 logprobs with the chosen id first and runners-up ALT_GAP nats and more behind."""
    out = []
    for i, t in enumerate(ids):
        d = {f"token_id:{t}": -1.0}
        for j in range(4):
            d[f"token_id:{20000 + 10 * i + j + alt_offset}"] = -1.0 - alt_gap - j
        out.append(d)
    for pos, d in (overrides or {}).items():
        out[pos] = d
    return out


def test_identical():
    ids = healthy()
    r = compare_outputs({"token_ids": ids, "logprobs": tops(ids)}, {"token_ids": list(ids), "logprobs": tops(ids)})
    assert r["verdict"] == "identical" and r["correct"] is True
    assert r["match_len"] == 64 and r["first_divergence"] is None
    assert r["length_ref"] == r["length_cand"] == 64
    assert r["logprob_drift"]["prefix_mean_abs_diff"] == 0.0
    assert r["degenerate"]["degenerate"] is False
    json.dumps(r)


def test_identical_ids_with_moved_logprobs_warns():
    ids = healthy()
    cand = [{k: v * 2 for k, v in d.items()} for d in tops(ids)]
    r = compare_outputs({"token_ids": ids, "logprobs": tops(ids)}, {"token_ids": ids, "logprobs": cand})
    assert r["verdict"] == "identical"
    assert r["logprob_drift"]["prefix_mean_abs_diff"] == pytest.approx(1.0)
    assert any("distribution moved" in w for w in r["warnings"])


def near_tie_pair(d=40, gap=0.05):
    """Reference and candidate that flip a near-tie at token D (each other's runner-up)."""
    ref = healthy()
    cand = ref[:d] + healthy(seed=1)[: 64 - d]
    a, b = ref[d], cand[d]
    ref_lp = tops(ref, overrides={d: {f"token_id:{a}": -0.90, f"token_id:{b}": -0.90 - gap, "token_id:7": -3.0}})
    cand_lp = tops(cand, overrides={d: {f"token_id:{b}": -0.91, f"token_id:{a}": -0.91 - gap, "token_id:7": -3.1}})
    for i in range(d):  # matched prefix: tiny numerical noise
        cand_lp[i] = {k: v - 0.002 for k, v in ref_lp[i].items()}
    return ref, ref_lp, cand, cand_lp


def test_drift_at_near_tie():
    ref, ref_lp, cand, cand_lp = near_tie_pair()
    r = compare_outputs({"token_ids": ref, "logprobs": ref_lp}, {"token_ids": cand, "logprobs": cand_lp})
    assert r["verdict"] == "drift" and r["correct"] is True, r["reason"]
    assert r["evidence"] == "logprobs"
    assert r["match_len"] == 40 and r["first_divergence"] == 40
    lp = r["logprob_drift"]
    assert lp["ref_token_rank_in_cand"] == 2
    assert lp["ref_token_logprob_in_cand"] == pytest.approx(-0.96)
    assert lp["gap_cand"] == pytest.approx(0.05)
    assert lp["cand_token_rank_in_ref"] == 2 and lp["gap_ref"] == pytest.approx(0.05)
    assert lp["prefix_mean_abs_diff"] == pytest.approx(0.002)
    assert "near-tie" in r["reason"]


def test_wide_gap_is_incorrect_even_in_top_k():
    ref, ref_lp, cand, cand_lp = near_tie_pair(gap=MAX_GAP_NATS + 1.0)
    r = compare_outputs({"token_ids": ref, "logprobs": ref_lp}, {"token_ids": cand, "logprobs": cand_lp})
    assert r["verdict"] == "incorrect" and r["correct"] is False
    assert r["logprob_drift"]["ref_token_rank_in_cand"] == 2
    assert r["logprob_drift"]["gap_cand"] == pytest.approx(1.5)


def test_drift_with_candidate_logprobs_only_and_int_keys():
    ref, ref_lp, cand, cand_lp = near_tie_pair()
    as_int = [{int(k.split(":")[1]): v for k, v in d.items()} for d in cand_lp]
    r = compare_outputs({"token_ids": ref}, {"token_ids": cand, "logprobs": as_int})
    assert r["verdict"] == "drift", r["reason"]
    assert r["logprob_drift"]["ref_token_rank_in_cand"] == 2
    as_str = [{str(k): v for k, v in d.items()} for d in as_int]
    assert compare_outputs({"token_ids": ref}, {"token_ids": cand, "logprobs": as_str})["verdict"] == "drift"


def test_garbage_candidate_is_incorrect():
    """Corruption: diverges at token 0; the reference token is nowhere in the candidate's top-5."""
    ref = healthy()
    cand = healthy(seed=7)
    r = compare_outputs({"token_ids": ref, "logprobs": tops(ref)}, {"token_ids": cand, "logprobs": tops(cand, alt_offset=5)})
    assert r["verdict"] == "incorrect" and r["correct"] is False
    assert r["first_divergence"] == 0 and r["match_len"] == 0
    assert r["logprob_drift"]["ref_token_in_cand_top_k"] is False
    assert r["logprob_drift"]["gap_cand_at_least"] == pytest.approx(4.5)
    assert "not in the candidate's top 5" in r["reason"]
    assert r["degenerate"]["degenerate"] is False  # garbage need not loop to be caught


def test_single_token_repeat_candidate_is_incorrect_even_at_a_near_tie():
    ref = healthy()
    d = 20
    cand = ref[:d] + [5] * (64 - d)
    ref_lp = tops(ref, overrides={d: {f"token_id:{ref[d]}": -1.0, "token_id:5": -1.01}})
    cand_lp = tops(cand, overrides={d: {"token_id:5": -1.0, f"token_id:{ref[d]}": -1.01}})
    r = compare_outputs({"token_ids": ref, "logprobs": ref_lp}, {"token_ids": cand, "logprobs": cand_lp})
    assert r["verdict"] == "incorrect" and r["evidence"] == "degenerate"
    assert r["degenerate"]["degenerate"] is True and r["degenerate"]["kind"] == "repeat"
    assert r["degenerate_reference"]["degenerate"] is False


def test_degenerate_reference_makes_the_check_relative():
    ref = healthy()[:8] + [11, 12, 13] * 18 + [11, 12]
    cand = list(ref)
    cand[40] = 999
    r = compare_outputs({"token_ids": ref}, {"token_ids": cand})
    assert r["degenerate_reference"]["degenerate"] is True
    assert r["verdict"] == "drift" and r["evidence"] == "match_length"
    assert any("both degenerate" in w for w in r["warnings"])


@pytest.mark.parametrize("n_cand", [40, 63])
def test_shorter_candidate_is_incorrect(n_cand):
    ref = healthy()
    r = compare_outputs({"token_ids": ref}, {"token_ids": ref[:n_cand]})
    assert r["verdict"] == "incorrect" and r["evidence"] == "length"
    assert r["match_len"] == n_cand and r["length_cand"] == n_cand and r["length_ref"] == 64
    assert "shorter" in r["reason"]


def test_without_logprobs_match_length_rule():
    ref = healthy()
    early = ref[:3] + healthy(seed=3)[:61]
    late = ref[:30] + healthy(seed=3)[:34]
    r = compare_outputs({"token_ids": ref}, {"token_ids": early})
    assert r["verdict"] == "incorrect" and r["evidence"] == "match_length" and "weaker" in r["reason"]
    r = compare_outputs({"token_ids": ref}, {"token_ids": late})
    assert r["verdict"] == "drift" and r["evidence"] == "match_length" and "weaker" in r["reason"]


def test_candidate_not_greedy_is_incorrect():
    ref = healthy()
    cand = list(ref)
    cand[50] = 4242
    cand_lp = tops(cand, overrides={50: {"token_id:4242": -2.0, f"token_id:{ref[50]}": -0.5}})
    r = compare_outputs({"token_ids": ref, "logprobs": tops(ref)}, {"token_ids": cand, "logprobs": cand_lp})
    assert r["verdict"] == "incorrect" and r["evidence"] == "greedy"
    assert r["greedy_violations_cand"] == [50]


def test_decode_probe_format_with_token_text_keys():
    """runners.probes.decode returns [{"token", "logprob", "top_logprobs": {text: lp}}]."""
    ref = healthy()
    cand = ref[:10] + healthy(seed=4)[:54]
    texts = {t: f"w{t}" for t in set(ref) | set(cand)}

    def entries(ids, d, other):
        out = []
        for i, t in enumerate(ids):
            top = {texts[t]: -0.7, "zz": -3.0}
            if i == d:
                top[texts[other]] = -0.75
            out.append({"token": texts[t], "logprob": -0.7, "top_logprobs": top})
        return out

    r = compare_outputs({"token_ids": ref, "logprobs": entries(ref, 10, cand[10])},
                        {"token_ids": cand, "logprobs": entries(cand, 10, ref[10])})
    assert r["verdict"] == "drift", r["reason"]
    assert r["logprob_drift"]["gap_cand"] == pytest.approx(0.05)
    # the OpenAI completions object is accepted as well
    obj = {"tokens": [texts[t] for t in cand], "token_logprobs": [-0.7] * 64,
           "top_logprobs": [e["top_logprobs"] for e in entries(cand, 10, ref[10])]}
    assert compare_outputs({"token_ids": ref}, {"token_ids": cand, "logprobs": obj})["verdict"] == "drift"


def test_bad_input_raises():
    with pytest.raises(CorrectnessError):
        compare_outputs({"token_ids": "1 2 3"}, {"token_ids": [1, 2, 3]})
    with pytest.raises(CorrectnessError):
        compare_outputs({"token_ids": [1, 2]}, {"token_ids": [1, 2], "logprobs": [{"token_id:1": "x"}]})
    assert normalize_logprobs([1], None) is None


# ------------------------------------------------------------------------------ degenerate

def test_degenerate_healthy_and_short():
    assert degenerate_output(healthy())["degenerate"] is False
    assert degenerate_output([5, 5, 5])["degenerate"] is False  # too short to judge


def test_degenerate_single_token_repeat():
    r = degenerate_output(healthy()[:20] + [9] * 44)
    assert r == {**r, "degenerate": True, "kind": "repeat", "period": 1}


@pytest.mark.parametrize("period", [2, 3, 5, 8])
def test_degenerate_short_cycle(period):
    cycle = healthy(period, seed=period)
    r = degenerate_output(healthy(16) + cycle * (48 // period + 1))
    assert r["degenerate"] is True and r["kind"] == "cycle" and r["period"] == period


def test_cycle_longer_than_8_is_not_flagged_as_cycle():
    r = degenerate_output(healthy(12, seed=9) * 6)  # period 12, 12 distinct in 72
    assert r["kind"] != "cycle"


def test_degenerate_low_diversity():
    rng = random.Random(5)
    vocab = [3, 17, 29, 41, 58, 77]
    ids = [rng.choice(vocab) for _ in range(64)]
    r = degenerate_output(ids)
    assert r["degenerate"] is True and r["kind"] in ("low_diversity", "cycle", "repeat")
    assert r["distinct"] <= 6


# Measured with vLLM 0.32 (CPU, --enforce-eager --dtype float32) on the tiny model, the decode
# probe's default prompt, 64 greedy tokens: unpatched, and with corrupt_rmsnorm.patch.
TINY_REF = [13323, 9094, 13138, 956, 4880, 10630, 9128, 4133, 13261, 13837, 1233, 16048, 7664, 15961, 1426,
            12318, 545, 10407, 7595, 14713, 3440, 12715, 10838, 5066, 3343, 14592, 13386, 7569, 2901, 13805,
            6181, 8932, 10671, 12703, 9996, 10558, 15074, 1677, 6985, 8929, 8457, 14631, 5916, 7361, 11420,
            3811, 15305, 6690, 6722, 5237, 1684, 3514, 1455, 8500, 13178, 11935, 8192, 14551, 8636, 13603,
            9325, 8487, 7635, 11757]
TINY_CORRUPT = [10171, 7443, 14088, 12024, 2091, 4990, 14388, 8866, 6141, 11145, 14986, 5403, 15512, 12415,
                8095, 10592, 5225, 12499, 10729, 2348, 13788, 3814, 12525, 6466, 3461, 15003, 9850, 1567, 9323,
                9356, 4541, 10501, 586, 11501, 13318, 3835, 5953, 4268, 14185, 8819, 9288, 3319, 11557, 13414,
                13726, 7443, 13948, 6343, 456, 11477, 9559, 718, 4291, 12287, 3520, 14056, 4467, 3318, 3786,
                8097, 7388, 12835, 1209, 1485]


def test_real_tiny_model_outputs_are_not_degenerate():
    """The healthy reference must not be flagged (64 distinct in 64); the corruption is not a
    loop either (63 distinct): it is caught by the logprobs rule, not by degeneracy."""
    assert degenerate_output(TINY_REF)["degenerate"] is False
    assert degenerate_output(TINY_REF)["distinct"] == 64
    assert degenerate_output(TINY_CORRUPT)["degenerate"] is False
    r = compare_outputs({"token_ids": TINY_REF}, {"token_ids": TINY_CORRUPT})
    assert r["verdict"] == "incorrect" and r["first_divergence"] == 0 and r["evidence"] == "match_length"


def test_decode_probe_result_shape_is_accepted():
    """A runners.probes.decode result: output_token_ids + logprobs entries (logprobs: 1)."""
    ref = healthy()
    probe = {"output_token_ids": ref, "output_text": "x",
             "logprobs": [{"token": f"w{t}", "logprob": -0.5, "top_logprobs": {f"w{t}": -0.5}} for t in ref]}
    assert compare_outputs(probe, probe)["verdict"] == "identical"
    ids2 = healthy(seed=2)
    other = {"output_token_ids": ids2,
             "logprobs": [{"token": f"w{t}", "logprob": -0.5, "top_logprobs": {f"w{t}": -0.5}} for t in ids2]}
    r = compare_outputs(probe, other)
    assert r["verdict"] == "incorrect" and r["first_divergence"] == 0
