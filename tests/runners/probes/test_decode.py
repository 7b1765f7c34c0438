"""The decode probe against a fake vLLM server whose token send times are known exactly."""
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.analysis import stats
from runners.probes.decode import MAX_EXTRA_REPEATS, ProbeError, measure_decode

ROOT = Path(__file__).resolve().parents[3]
MODEL = "fake-model"


def truth_from_log(record: dict) -> dict:
    """Decode rate and per-token ITL samples from the server's recorded send times, with the
    probe's definitions (a chunk of k tokens after a gap g: k samples of g / k), plus the
    engine-side generation rate from the per-token generation times."""
    chunks = record["chunks"]
    n = sum(c["k"] for c in chunks)
    window = chunks[-1]["sent"] - chunks[0]["sent"]
    itl = []
    for prev, cur in zip(chunks, chunks[1:]):
        g = cur["sent"] - prev["sent"]
        itl += [g / cur["k"]] * cur["k"]
    gen = record["gen"]
    return {"tok_s": (n - chunks[0]["k"]) / window, "itl": itl, "n": n, "chunks": len(chunks),
            "gen_tok_s": (len(gen) - 1) / (gen[-1] - gen[0]), "recv": record["recv"],
            "first_sent": chunks[0]["sent"]}


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


CASES = [  # cadence_ms, tokens per chunk, first token alone (vLLM's behaviour), max_tokens
    (5, 1, 0, 128),
    (17, 1, 0, 48),
    (5, 3, 0, 128),
    (17, 3, 0, 48),
    (5, 3, 1, 128),
]


@pytest.mark.parametrize("cadence_ms,k,first_alone,max_tokens", CASES)
def test_rate_and_itl_match_the_recorded_truth(token_server, cadence_ms, k, first_alone, max_tokens):
    """The probe's figures (median tok/s over 5 repeats, pooled ITL p50) within 1 % of the truth
    computed from the server's recorded send times, measured once.

    Tolerance: errors seen on the shared 2-core host are 0.01-0.13 % for the medians and at
    most 0.7 % for a single repeat. A descheduled client (tens of ms) spoils one repeat; the
    median of 5 and the pooled p50 (hundreds of samples) absorb it, so 1 % is a counting or
    timing bug, not noise."""
    tok_s_err, itl_err = measure_against_truth(token_server, cadence_ms, k, first_alone, max_tokens)
    assert tok_s_err < 0.01
    assert itl_err < 0.01


def measure_against_truth(token_server, cadence_ms, k, first_alone, max_tokens):
    sc = dict(cadence_ms=cadence_ms, k=k, first_alone=first_alone, ttft_ms=30,
              tag=f"acc{cadence_ms}-{k}-{first_alone}")
    repeats = 5
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hello", max_tokens=max_tokens,
                            repeats=repeats, warmup=1)
    log = token_server.log(**sc)
    assert len(log) == 1 + result["repeats_made"]  # the warmup request, then the measured ones
    pairs = list(zip(result["samples"], [truth_from_log(r) for r in log[1:]]))
    for sample, truth in pairs:
        assert sample["n_tokens"] == truth["n"] == max_tokens
        assert sample["chunks"] == truth["chunks"]
        assert sample["first_chunk_tokens"] == (1 if first_alone else k)
    # A client descheduled for the whole stream (seen once in CI at load 4: 128 chunks read 35 us
    # apart) reads one burst; the probe flags that repeat and leaves it out, and says so.
    clean = [(s, t) for s, t in pairs if not s["flag"]]
    assert len(clean) >= 3
    if len(clean) == len(pairs):
        # the shared test host's speed moves under the suite's load: that warning is the host's
        assert [w for w in result["warnings"] if "host's CPU" not in w] == [] and result["suspect"] is False
    else:
        assert all(w.startswith(("repeat ", "statistics use ")) or "extra repeat" in w for w in result["warnings"])
    errors, ttft_excess = [], []
    for sample, truth in clean:
        assert sample["suspect"] is None
        errors.append(rel(sample["decode_tok_s"], truth["tok_s"]))
        # causality: sent before the server received it, arrived after the server wrote it
        true_ttft_ms = (truth["first_sent"] - truth["recv"]) * 1e3
        assert sample["ttft_ms"] >= true_ttft_ms
        ttft_excess.append(sample["ttft_ms"] - true_ttft_ms)
    assert stats.median(ttft_excess) < 20
    assert result["repeat_outputs_identical"] is True
    true_tok_s = stats.median([t["tok_s"] for _, t in clean])
    tok_s_err = rel(result["decode_tok_s"], true_tok_s)
    true_p50 = stats.percentile([x for _, t in clean for x in t["itl"]], 50) * 1e3
    itl_err = rel(result["itl_ms"]["p50"], true_p50)
    print(f"\ncadence {cadence_ms} ms, {k} tok/chunk, first_alone={first_alone}, {max_tokens} tokens x {repeats} "
          f": tok/s {result['decode_tok_s']:.3f} (truth {true_tok_s:.3f}, err {tok_s_err:.4%}; "
          f"per repeat worst {max(errors):.4%}); ITL p50 {result['itl_ms']['p50']:.4f} ms (truth {true_p50:.4f}, "
          f"err {itl_err:.4%}); TTFT excess median {stats.median(ttft_excess):.3f} ms")
    return tok_s_err, itl_err


@pytest.mark.parametrize("drift", [0.4, -0.3])
def test_drifting_pace_reads_the_whole_stream_rate(token_server, drift):
    """The token server's gap grows by 40% (or shrinks by 30%) along 128 tokens: the median of the
    probe's clean repeats reads the whole stream's rate (the server's send times) within 1%, the
    bound of the accuracy tests above. On the loaded CI host a client descheduled at an edge of a
    repeat moves that repeat by up to a few % (0.7% seen untrimmed; a real hold at an edge is
    trimmed and times the rest of the drifting stream); on a quiet host the probe reads these
    streams within 0.02% (benchmarks/probe_fidelity.py), and the pure-function tests above hold
    the exact claim."""
    sc = dict(cadence_ms=5, drift=drift, ttft_ms=30, tag=f"drift{drift}")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hello", max_tokens=128,
                            repeats=5, warmup=1)
    truths = [truth_from_log(r) for r in token_server.log(**sc)[1:]]
    clean = [(s, t) for s, t in zip(result["samples"], truths) if not s["flag"]]
    assert len(clean) >= 3
    for sample, truth in clean:
        assert rel(sample["decode_tok_s"], truth["tok_s"]) < 0.05, (sample, truth["tok_s"])
    assert rel(stats.median([s["decode_tok_s"] for s, _ in clean]), stats.median([t["tok_s"] for _, t in clean])) < 0.01



def test_result_shape_tokens_and_server_cross_check(token_server):
    sc = dict(cadence_ms=10, k=1, metrics=1, tag="shape")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hello", max_tokens=40,
                            repeats=3, warmup=1)
    json.dumps(result)  # JSON-able
    for key in ("decode_tok_s", "decode_tok_s_ci", "ttft_ms", "itl_ms", "samples", "output_token_ids",
                "output_digest", "output_text", "repeat_outputs_identical", "warnings",
                "server_itl_ms_mean", "client_itl_ms_mean", "server_agreement"):
        assert key in result, key
    assert set(result["itl_ms"]) >= {"p50", "p90", "p99"}
    low, high = result["decode_tok_s_ci"]
    assert low <= result["decode_tok_s"] <= high
    assert len(result["samples"]) == 3
    assert set(result["samples"][0]) >= {"decode_tok_s", "ttft_ms", "n_tokens", "chunks"}
    ids = result["output_token_ids"]
    assert len(ids) == 40
    assert result["output_digest"] == hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
    assert "logprobs" not in result
    assert result["output_text"].startswith(" w")
    assert result["token_count_sources"] == ["token_ids", "usage"]
    # the server's own histograms (the other model's series are ignored): same mean ITL
    assert result["server_metrics_available"] is True
    assert result["server_metrics"]["requests"] == 3
    assert result["server_metrics"]["itl_count"] == 3 * 39
    # engine-side step times vs client arrivals: close (loose: this host may be heavily loaded)
    assert result["server_itl_ms_mean"] == pytest.approx(10, rel=0.05)
    assert result["server_agreement"] < 0.1
    # server decode tok/s is pooled over repeats (sum of tokens / sum of decode time): compare pooled
    assert rel(result["server_metrics"]["decode_tok_s"], 1e3 / result["client_itl_ms_mean"]) < 0.1


def test_each_repeat_carries_its_whole_stream_rate_engine_itl_and_host(token_server):
    """Per repeat: the whole stream's rate beside the window's, the engine's own mean ITL (the
    fake server's histograms over that request alone) and the host sample taken before it."""
    sc = dict(cadence_ms=4, k=1, metrics=1, tag="per-repeat")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=40, repeats=3,
                            warmup=1)
    for s, rec in zip(result["samples"], token_server.log(**sc)[1:]):
        gen = rec["gen"]
        engine_itl_ms = (gen[-1] - gen[0]) / (len(gen) - 1) * 1e3
        assert s["server_itl_ms"] == pytest.approx(engine_itl_ms, rel=1e-6)
        assert s["whole_stream_tok_s"] > 0 and s["host_loop_ms"] > 0
        if s["held_back"] is None:
            assert s["whole_stream_tok_s"] == s["decode_tok_s"]
    assert set(result["host"]) == {"loop_ms_min", "loop_ms_max", "steal_max", "unsteady"}



def test_usage_only_final_chunk_is_not_a_token(token_server):
    sc = dict(cadence_ms=3, k=1, tag="usage-only")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=10, repeats=1,
                            warmup=0)
    log = token_server.log(**sc)
    assert len(log) == result["repeats_made"] and all(record["usage_only_sent"] for record in log)
    sample = result["samples"][0]
    assert sample["n_tokens"] == 10
    assert sample["chunks"] == 10  # the usage-only chunk did not count as an arrival
    # 9 gaps between 10 token chunks, fewer only when a jittery start or end was left out
    clean = [s for s in result["samples"] if not s["flag"]]
    assert result["itl_ms"]["n"] == sum((s["held_back"] or {"window_tokens": 9})["window_tokens"] for s in clean)


def test_counts_with_usage_deltas_when_token_ids_are_absent(token_server):
    sc = dict(cadence_ms=1, k=3, tag="no-ids", mode="no_ids")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=10, repeats=1,
                            warmup=0)
    assert result["samples"][0]["n_tokens"] == 10
    assert result["token_count_sources"] == ["usage"]
    assert result["output_token_ids"] is None


def test_missing_metrics_does_not_fail(token_server):
    result = measure_decode(base_url=token_server.url(cadence_ms=1, tag="nometrics"), model=MODEL, prompt="hi",
                            max_tokens=8, repeats=1, warmup=0)
    assert result["server_metrics_available"] is False
    assert "404" in result["server_metrics_error"]
    assert "server_agreement" not in result


# ---------------------------------------------------------------------------------- bad input


def probe_error(url: str, **kw) -> ProbeError:
    args = dict(model=MODEL, prompt="hi", max_tokens=20, repeats=1, warmup=0, timeout_s=10)
    args.update(kw)
    with pytest.raises(ProbeError) as info:
        measure_decode(base_url=url, **args)
    return info.value


def test_server_that_never_answers_times_out(token_server):
    e = probe_error(token_server.url(mode="hang", tag="hang"), timeout_s=1)
    assert "timeout" in e.message


def test_nothing_listening():
    e = probe_error("http://127.0.0.1:9", timeout_s=2)
    assert "connect" in e.message


def test_http_error_includes_the_body(token_server):
    e = probe_error(token_server.url(mode="http500", tag="500"))
    assert "HTTP 500" in e.message and "EngineCore died" in e.message
    assert e.received["status"] == 500


def test_connection_dropped_mid_stream_says_how_many_tokens(token_server):
    e = probe_error(token_server.url(mode="close_early", close_after=5, cadence_ms=1, tag="drop"))
    assert "closed early" in e.message and "5 of 20 tokens" in e.message


def test_stream_ending_without_done_says_how_many_tokens(token_server):
    e = probe_error(token_server.url(mode="no_done", close_after=7, cadence_ms=1, tag="nodone"))
    assert "[DONE]" in e.message and "7 of 20 tokens" in e.message


def test_malformed_sse_json(token_server):
    e = probe_error(token_server.url(mode="bad_json", close_after=3, cadence_ms=1, tag="badjson"))
    assert "malformed SSE JSON" in e.message and "tru" in e.received


def test_error_event_in_the_stream(token_server):
    e = probe_error(token_server.url(mode="error_event", close_after=3, cadence_ms=1, tag="errevent"))
    assert "error in the stream" in e.message and "fake mid-stream failure" in e.message


def test_disagreeing_token_counts(token_server):
    e = probe_error(token_server.url(mode="mismatch", cadence_ms=1, tag="mismatch"))
    assert "disagree" in e.message


def test_zero_tokens(token_server):
    e = probe_error(token_server.url(mode="zero", tag="zero"))
    assert "zero tokens" in e.message


def test_everything_in_one_read_at_the_end_is_an_error(token_server):
    e = probe_error(token_server.url(mode="all_at_end", cadence_ms=2, tag="allatend"), repeats=2)
    assert "at once" in e.message


def test_burst_at_the_end_is_flagged(token_server):
    """Every request held to the end: 2 repeats, then the 5 extra ones allowed, all flagged."""
    sc = dict(mode="burst_end", cadence_ms=5, metrics=1, tag="burst")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=30, repeats=2,
                            warmup=0)
    assert MAX_EXTRA_REPEATS == 5
    assert len(token_server.log(**sc)) == result["repeats_made"] == 7 and result["repeats_clean"] == 0
    assert result["suspect"] is True
    assert any("burst" in w for w in result["warnings"])
    assert "no clean repeat in 7: the figures come from flagged repeats" in result["warnings"]
    assert [s["flag"] for s in result["samples"]] == ["burst"] * 7
    # the server's own ITL tells the real story
    assert result["server_agreement"] > 0.5
    assert any("differ" in w for w in result["warnings"])


def test_a_stream_written_after_a_starved_decode_is_flagged_by_the_server_cross_check(token_server):
    """Tokens generated every 20 ms but held back and written 2 ms apart (an API server starved
    during the decode): no burst to see, a clean-looking 10 x too fast stream. The engine's own
    ITL says 20 ms, so every sample is flagged and the service never uses the figure."""
    from runners.probes.decode_probe import decode_measurements

    sc = dict(mode="burst_end", burst_gap_ms=2, cadence_ms=20, metrics=1, tag="starved")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=20, repeats=2,
                            warmup=0)
    assert result["decode_tok_s"] > 200  # what the client saw: about 500 tok/s; the engine made 50
    assert result["server_itl_ms_mean"] == pytest.approx(20, rel=0.1) and result["server_agreement"] > 0.5
    # a client descheduled while the 2 ms writes arrive reads them at once: that repeat is a
    # `burst` (seen under CI load, with extra repeats made); no repeat is ever clean
    flags = [s["flag"] for s in result["samples"]]
    assert set(flags) <= {"server_disagrees", "burst"} and "server_disagrees" in flags, flags
    assert result["repeats_clean"] == 0 and result["suspect"] is True
    assert any("server_disagrees" in w for w in result["warnings"])
    assert decode_measurements(result)[0]["sample_flags"] == flags


# ---------------------------------------------------------------------------------- CLI


def test_cli_prints_one_json_object(token_server):
    url = token_server.url(cadence_ms=2, tag="cli")
    proc = subprocess.run([sys.executable, "-m", "runners", "probe", "decode", "--base-url", url, "--model", MODEL,
                           "--max-tokens", "12", "--repeats", "2", "--warmup", "1", "--prompt", "hi", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["samples"][0]["n_tokens"] == 12
    assert set(result["itl_ms"]) >= {"p50", "p90", "p99"}
    assert result["decode_tok_s"] > 0 and result["ttft_ms"] > 0


def test_cli_exits_2_on_probe_error(token_server):
    url = token_server.url(mode="http500", tag="cli500")
    proc = subprocess.run([sys.executable, "-m", "runners", "probe", "decode", "--base-url", url, "--model", MODEL,
                           "--max-tokens", "12", "--repeats", "1", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "HTTP 500" in proc.stderr


# ------------------------------------------------------------------ what the timed request asks


def test_timed_requests_ask_for_no_logprobs(token_server):
    """The timed request is a user's: token ids and usage, no logprobs (they cost ~2% on a GPU)."""
    sc = dict(cadence_ms=3, tag="no-logprobs")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=12, repeats=2,
                            warmup=1)
    log = token_server.log(**sc)
    assert len(log) == 1 + result["repeats_made"] >= 3
    for record in log:
        assert record["request"] == {"logprobs": None, "return_token_ids": True, "cache_salt": None,
                                     "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    assert result["token_count_sources"] == ["token_ids", "usage"]
    assert all(s["n_tokens"] == 12 for s in result["samples"])


def test_held_back_start_without_tcp_nodelay(token_server):
    """A server that leaves Nagle on, first token 5 ms after the headers, 2 ms per token: the
    first chunks wait for the client's delayed ACK and arrive in one burst (before the fix the
    probe reported +17%). Each repeat is either within 10% of the engine's real rate (the
    generation times the server recorded) or flagged, and the median within 5%. Loose bounds
    for the shared 2-core host: 0.1-0.3% on a quiet one (medians, benchmarks/probe_fidelity.py
    holds that claim), but at load average 7-8 (the suite's own engines beside it) the client
    reads chunks in bunches: single repeats moved by up to 6%, a median by 3.4% once in CI. 5%
    still fails the bug this guards against (+17%, and +9.5% with a 20 ms first token)."""
    sc = dict(cadence_ms=2, ttft_ms=5, nodelay=0, first_alone=1, tag="held-back")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=128, repeats=5,
                            warmup=1)
    log = token_server.log(**sc)[1:]
    assert len(log) == result["repeats_made"]
    truths = [(len(r["gen"]) - 1) / (r["gen"][-1] - r["gen"][0]) for r in log]
    assert any(s["held_back"] for s in result["samples"])  # the fixture does hold the start back
    # Per repeat, an unflagged one was seen 14% off under the suite's own load:
    # the claim held here is the median's; most repeats must still be right or flagged.
    good = [bool(s["flag"]) or rel(s["decode_tok_s"], t) < 0.10 for s, t in zip(result["samples"], truths)]
    assert sum(good) > len(good) / 2, good
    assert rel(result["decode_tok_s"], stats.median(truths)) < 0.05
    if all(s["ttft_flag"] for s in result["samples"]):  # the TTFT is late by the hold: said so
        assert any("TTFT includes the hold" in w for w in result["warnings"])


def test_too_few_clean_repeats_brings_extra_ones(token_server):
    """The first 2 requests of the scenario are held to the end (flagged `burst`), the others are
    clean: 3 repeats asked, so 2 extra requests give the 3 clean ones; statistics use those only."""
    sc = dict(cadence_ms=10, bursts=2, tag="extra")
    result = measure_decode(base_url=token_server.url(**sc), model=MODEL, prompt="hi", max_tokens=20, repeats=3,
                            warmup=0)
    assert len(token_server.log(**sc)) == result["repeats_made"] == 5
    assert [s["flag"] for s in result["samples"]] == ["burst", "burst", "", "", ""]
    assert result["repeats_clean"] == 3 and result["suspect"] is False
    clean = [s["decode_tok_s"] for s in result["samples"][2:]]
    assert result["decode_tok_s"] == stats.median(clean)
    # TTFT: clean repeats whose own first chunk was not held back (a loaded client can see that too)
    ttfts = [s["ttft_ms"] for s in result["samples"][2:] if not s["ttft_flag"]]
    assert result["ttft_ms"] == stats.median(ttfts or [s["ttft_ms"] for s in result["samples"][2:]])
    assert "2 extra repeat(s) made to get clean ones (limit 5)" in result["warnings"]
