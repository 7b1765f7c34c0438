"""The decode probe at concurrency N (runners.probes.streams.measure_point) against the fake vLLM
server serving concurrent streams, each on its own exact cadence; exact-length prompts."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners.analysis import stats
from runners.probes.client import CompletionClient
from runners.probes.prompts import cut_order, exact_prompt
from runners.probes.streams import MAX_CONCURRENCY, arrival_offsets, measure_point

ROOT = Path(__file__).resolve().parents[3]
MODEL = "fake-model"
POINT_KEYS = {"decode_tok_s", "slowest_stream_tok_s", "aggregate_tok_s", "streams", "ttft_ms", "ttft_ms_percentiles",
              "itl_ms", "concurrency", "prompt_tokens", "prompt_tokens_requested", "samples", "warnings",
              "decode_tok_s_ci", "repeats_made", "streams_clean"}


def stream_truth(record: dict) -> float:
    """A stream's rate from the server's recorded send times (the probe's definition)."""
    chunks = record["chunks"]
    return (sum(c["k"] for c in chunks) - chunks[0]["k"]) / (chunks[-1]["sent"] - chunks[0]["sent"])


def aggregate_truth(records: list[dict]) -> float:
    """All the round's tokens sent after its first token / (last send - first send)."""
    first = min((r["chunks"][0] for r in records), key=lambda c: c["sent"])
    end = max(r["chunks"][-1]["sent"] for r in records)
    return (sum(c["k"] for r in records for c in r["chunks"]) - first["k"]) / (end - first["sent"])


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def test_each_stream_and_the_aggregate_match_the_truth(token_server):
    """Three streams at once, tokens every 5, 7 and 11 ms: each stream's rate against the send
    times the server recorded for it, and each round's aggregate against the truth.

    Tolerance: on a quiet host each stream reads within 0.1-0.4% (benchmarks/probe_concurrency.py,
    and 0.01-0.03% median here); the median error must stay under 0.5%. On the shared 2-core host
    under the suite's load a descheduled client can move a single stream by a few % (as it moves a
    single-stream repeat, see test_decode's drift test; 7% seen once), so each clean stream is held to 10%, each
    repeat's aggregate (a window over the whole round) to 3% and their median to 1%."""
    sc = dict(cadences="5_7_11", ttft_ms=20, tag="three-cadences")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=96, repeats=3, warmup=1,
                           concurrency=3, prompt="hello there")
    assert POINT_KEYS <= set(result) and result["concurrency"] == 3
    by_id = {r["id"]: r for r in token_server.log(**sc)}  # the server's record of each stream
    assert len(by_id) == 4 * 3 and len(result["streams"]) == 9
    errors, aggregate_errors = [], []
    for i in range(3):
        entries = [s for s in result["streams"] if s["repeat"] == i]
        records = [by_id[s["response_id"]] for s in entries]
        assert sorted(r["cadence_ms"] for r in records) == [5, 7, 11]
        for entry, record in zip(entries, records):
            assert entry["n_tokens"] == 96
            if not entry["flags"]["flag"]:
                errors.append(rel(entry["decode_tok_s"], stream_truth(record)))
        aggregate_errors.append(rel(result["aggregate_tok_s_per_repeat"][i], aggregate_truth(records)))
    print(f"\nper-stream errors: median {stats.median(errors):.4%}, worst {max(errors):.4%}")
    assert len(errors) >= 6 and stats.median(errors) < 0.005 and max(errors) < 0.10
    assert stats.median(aggregate_errors) < 0.01 and max(aggregate_errors) < 0.03
    clean = [s["decode_tok_s"] for s in result["streams"] if not s["flags"]["flag"]]
    assert result["decode_tok_s"] == stats.median(clean)
    assert result["slowest_stream_tok_s"] == min(clean)
    assert result["slowest_stream_tok_s"] == pytest.approx(1000 / 11, rel=0.03)
    # 3 x 96 tokens, but the window closes with the slowest stream: 95 gaps of 11 ms after the first token
    assert result["aggregate_tok_s"] == pytest.approx((3 * 96 - 1) / (95 * 0.011), rel=0.03)
    assert set(result["ttft_ms_percentiles"]) == {"p50", "p90", "p99"}
    assert set(result["itl_ms"]) >= {"p50", "p90", "p99"}


def test_a_held_back_stream_is_flagged_and_the_others_are_clean(token_server):
    """Slot 1 of every round is held to the end and released at once (burst_end): that stream
    is flagged `burst`, kept out of every statistic and named in `warnings`; the others measure."""
    sc = dict(cadences="4_4_4", burst_slot=1, tag="one-held")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=48, repeats=2, warmup=1,
                           concurrency=3, prompt="hi")
    by_id = {r["id"]: r for r in token_server.log(**sc)}
    for i in range(2):
        held = [s["flags"]["flag"] for s in result["streams"] if s["repeat"] == i and by_id[s["response_id"]]["slot"] == 1]
        assert held == ["burst"]
    # the others are clean (a client descheduled for a whole stream under CI load reads one burst too)
    assert result["streams_clean"] >= 3 and result["repeats_clean"] == 0
    burst = [s for s in result["streams"] if s["flags"]["flag"]]
    assert all(s["decode_tok_s"] is None or s["decode_tok_s"] > 1000 for s in burst)  # absurd, so excluded
    assert result["decode_tok_s"] == pytest.approx(250, rel=0.05)
    assert result["slowest_stream_tok_s"] < 260
    assert sum(w.startswith("repeat ") and "stream" in w and "burst" in w for w in result["warnings"]) >= 2
    assert any("no repeat had all its streams clean" in w for w in result["warnings"])
    assert [s["flag"] for s in result["samples"]] == [s["flags"]["flag"] for s in result["streams"]]


def test_timed_streams_ask_for_no_logprobs_and_count_tokens_exactly(token_server):
    sc = dict(cadences="3_5", k=3, first_alone=1, tag="multi-exact")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=20, repeats=2, warmup=0,
                           concurrency=2, prompt="hi")
    log = token_server.log(**sc)
    assert len(log) == 4
    for record in log:
        assert record["request"]["logprobs"] is None and record["request"]["return_token_ids"] is True
    assert all(s["n_tokens"] == 20 for s in result["samples"]) and result["token_count_sources"] == ["token_ids", "usage"]
    assert result["repeat_outputs_identical"] is True


def test_concurrency_one_is_the_single_stream_probe_with_the_point_keys(token_server):
    sc = dict(cadence_ms=4, tag="point-one")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=24, repeats=2, warmup=0,
                           prompt="hi")
    assert POINT_KEYS <= set(result) and result["concurrency"] == 1
    assert [s["repeat"] for s in result["streams"]] == list(range(result["repeats_made"]))
    clean = [s for s in result["samples"] if not s["flag"]]
    assert result["slowest_stream_tok_s"] == min(s["decode_tok_s"] for s in clean)
    assert result["aggregate_tok_s"] == stats.median([s["whole_stream_tok_s"] for s in clean])


# ------------------------------------------------------------------ prompts of an exact length


def test_prompt_of_an_exact_token_length(token_server):
    """The fake /tokenize counts words plus a BOS: 50 tokens means 49 words of the repeated seed,
    the same text on every build, and the completions' usage counts 50."""
    sc = dict(cadences="3_3", tag="prompt-50")
    with CompletionClient(token_server.url(**sc), timeout_s=10) as api:
        built = [exact_prompt(api, MODEL, 50, 16, seed="one two three four five") for _ in range(2)]
    assert built[0] == built[1] and len(built[0]["prompt"].split()) == 49 and built[0]["cut"] == 49
    assert built[0]["prompt"].startswith("one two three four five one")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=16, repeats=1, warmup=1,
                           concurrency=2, prompt_tokens=50)
    assert result["prompt_tokens"] == result["prompt_tokens_requested"] == 50
    assert [s["prompt_tokens"] for s in result["streams"]] == [50, 50]
    assert not [w for w in result["warnings"] if "prompt tokens" in w]
    # one prompt, but no stream may reuse another's cached prefix: a salt of its own each, which
    # only its prime (sent just before it, one token) shares
    log = token_server.log(**sc)
    salts = [r["request"]["cache_salt"] for r in log]
    assert len(log) == 8 and len(set(salts)) == 4 and all(len(salt) == 32 for salt in salts)
    for salt in set(salts):
        prime, timed = [r for r in log if r["request"]["cache_salt"] == salt]
        assert len(prime["gen"]) == 1 and len(timed["gen"]) == 16 and prime["recv"] < timed["recv"]
    assert result["fresh_prefix"] is True and result["prefill"] == "primed"
    single = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=16, repeats=1, warmup=1,
                           prompt_tokens=50)
    assert single["fresh_prefix"] is True and single["concurrency"] == 1 and single["prefill"] == "inline"
    plain = measure_point(base_url=token_server.url(cadences="3_3", tag="no-salt"), model=MODEL, max_tokens=16,
                          repeats=1, warmup=0, concurrency=2)
    assert plain["fresh_prefix"] is False
    assert [r["request"]["cache_salt"] for r in token_server.log(cadences="3_3", tag="no-salt")] == [None, None]


# ------------------------------------------------------------------ where the prefills run


def test_primed_streams_decode_at_their_pace_while_inline_ones_share_their_steps_with_prefills(token_server):
    """Four streams of a 40-token prompt, a token every 5 ms, each uncached prefill 40 ms and one at a
    time, every other stream's token taking twice as long while one runs (chunked prefill). Inline,
    the streams that start first decode through the others' prefills: the median stream reads about
    8% slow and the first about 17%. Primed, every timed stream finds its prompt in the prefix cache
    and decodes at its own pace, the TTFT is the primes' (the cold prefill of four prompts at once),
    and the server's figures cover the timed streams alone."""
    common = dict(model=MODEL, max_tokens=48, repeats=2, warmup=0, concurrency=4, prompt_tokens=40)
    sc = dict(cadences="5_5_5_5", prefill_ms=1.0, prefill_slow=1.0, metrics=1)
    inline = measure_point(base_url=token_server.url(**sc, tag="inline"), prefill="inline", **common)
    primed = measure_point(base_url=token_server.url(**sc, tag="primed"), **common)
    assert (inline["prefill"], primed["prefill"]) == ("inline", "primed")
    # about 8% slow on a quiet host; under load the prefills overlap fewer steps (3% seen)
    assert inline["decode_tok_s"] < 196 and inline["slowest_stream_tok_s"] < 175
    assert primed["decode_tok_s"] == pytest.approx(200, rel=0.01)
    assert primed["slowest_stream_tok_s"] == pytest.approx(200, rel=0.03)
    # The server's pace caps the aggregate; a loaded host can only stretch the window (6% seen in CI).
    # The inline streams' window holds the prefills and reads about a third lower.
    paced = (4 * 48 - 1) / (47 * 0.005)
    assert 0.85 * paced < primed["aggregate_tok_s"] < 1.02 * paced
    assert inline["aggregate_tok_s"] < 0.8 * paced
    ttfts = sorted(s["ttft_ms"] for s in primed["streams"] if s["repeat"] == 0)
    assert ttfts[0] > 55 and ttfts[-1] > 170  # 40 ms of prefill each, queued, then the 20 ms ttft
    assert primed["ttft_ms_percentiles"]["p90"] > 140
    assert stats.median([s["cached_ttft_ms"] for s in primed["streams"]]) < 45
    # the timed windows hold the 8 timed streams of 40 prompt tokens, all but the last token found
    assert primed["prefix_cache"] == {"queries": 2 * 4 * 40, "hits": 2 * 4 * 39}
    assert primed["server_metrics"]["requests"] == 8 and primed["server_metrics"]["decode_tok_s"] > 0
    assert not [w for w in primed["warnings"] if "server counted" in w or "prefix cache" in w]


def test_primed_streams_without_a_prefix_cache_are_said_to_include_their_prefills(token_server):
    sc = dict(cadences="5_5", prefill_ms=0.5, prefix_cache=0, metrics=1, tag="no-prefix-cache")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=16, repeats=1, warmup=0,
                           concurrency=2, prompt_tokens=20, prefill="primed")
    assert result["prefix_cache"] == {"queries": 0, "hits": 0}
    assert any("the prefix cache served 0 of the 0 prompt tokens the timed streams looked up" in w
               for w in result["warnings"])


@pytest.mark.parametrize("kwargs", [dict(concurrency=1, prompt_tokens=20), dict(concurrency=2),
                                    dict(concurrency=2, prompt_tokens=20, request_rate=5.0)])
def test_prefill_primed_needs_several_closed_loop_streams_with_a_prompt(kwargs):
    with pytest.raises(ValueError, match="prefill 'primed' needs prompt_tokens"):
        measure_point(base_url="http://127.0.0.1:9", model=MODEL, max_tokens=8, repeats=1, prefill="primed", **kwargs)
    with pytest.raises(ValueError, match="prefill must be one of auto, primed, inline"):
        measure_point(base_url="http://127.0.0.1:9", model=MODEL, max_tokens=8, repeats=1, prefill="early")


def test_a_prompt_longer_than_the_context_fails_before_any_timed_request(token_server):
    sc = dict(max_model_len=64, tag="too-long")
    from runners.probes.client import ProbeError

    with pytest.raises(ProbeError) as info:
        measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=16, repeats=1, concurrency=2,
                      prompt_tokens=60)
    assert "does not fit the model's context of 64 tokens" in info.value.message
    assert token_server.log(**sc) == []


def test_cuts_are_tried_next_to_the_first_in_a_fixed_order():
    assert cut_order(10) == [10, 9, 11, 8, 12, 7, 13, 6, 14]
    assert cut_order(2) == [2, 1, 3, 4, 5, 6]


def test_open_loop_streams_arrive_on_their_poisson_schedule_and_still_measure(token_server):
    """request_rate 10: each round's 4 streams reach the server at the seeded Poisson offsets
    (mean gap 100 ms), the same schedule every time, and each stream still reads its cadence."""
    sc = dict(cadences="4_4_4_4", tag="open-loop")
    result = measure_point(base_url=token_server.url(**sc), model=MODEL, max_tokens=24, repeats=2, warmup=0,
                           concurrency=4, request_rate=10)
    assert result["request_rate"] == 10 and POINT_KEYS <= set(result)
    assert result["arrivals_s"] == [arrival_offsets(4, 10, 0), arrival_offsets(4, 10, 1)]
    assert arrival_offsets(4, 10, 0) != arrival_offsets(4, 10, 1) and arrival_offsets(4, 10, 0)[0] == 0.0
    by_id = {r["id"]: r for r in token_server.log(**sc)}
    for repeat, offsets in enumerate(result["arrivals_s"]):
        recv = sorted(by_id[s["response_id"]]["recv"] for s in result["streams"] if s["repeat"] == repeat)
        seen = [t - recv[0] for t in recv]
        assert all(abs(a - b) < 0.04 for a, b in zip(seen, offsets)), (seen, offsets)  # threads wake late under load
    clean = [s["decode_tok_s"] for s in result["streams"] if not s["flags"]["flag"]]
    assert len(clean) >= 6 and stats.median(clean) == pytest.approx(250, rel=0.05)


@pytest.mark.parametrize("rate", [0, -2.0, 20_000.0])
def test_a_bad_request_rate_is_refused_before_any_request(rate):
    with pytest.raises(ValueError, match="request_rate must be a number of requests a second above 0"):
        measure_point(base_url="http://127.0.0.1:9", model=MODEL, max_tokens=8, repeats=1, concurrency=2,
                      request_rate=rate)


# ----------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("concurrency", [0, -1, MAX_CONCURRENCY + 1])
def test_bad_concurrency_is_refused_before_any_request(concurrency):
    with pytest.raises(ValueError, match="concurrency must be an integer from 1 to 1024"):
        measure_point(base_url="http://127.0.0.1:9", model=MODEL, max_tokens=8, repeats=1, concurrency=concurrency)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners", "probe", "decode", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_at_concurrency_prints_the_point_keys(token_server):
    url = token_server.url(cadences="3_4", tag="cli-point")
    proc = _cli("--base-url", url, "--model", MODEL, "--max-tokens", "16", "--repeats", "2", "--concurrency", "2",
                "--prompt-tokens", "12", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert POINT_KEYS <= set(result)
    assert result["concurrency"] == 2 and result["prompt_tokens"] == 12 and len(result["streams"]) == 4
    assert {"repeat", "decode_tok_s", "ttft_ms", "flags"} <= set(result["streams"][0])


def test_cli_refuses_primed_prefill_for_one_stream_with_exit_2(token_server):
    sc = dict(tag="cli-primed-one")
    proc = _cli("--base-url", token_server.url(**sc), "--model", MODEL, "--max-tokens", "8", "--repeats", "1",
                "--prompt-tokens", "12", "--prefill", "primed", "--json")
    assert proc.returncode == 2 and proc.stdout == "" and "prefill 'primed' needs" in proc.stderr
    assert token_server.log(**sc) == []


@pytest.mark.parametrize("value", ["0", "1025"])
def test_cli_refuses_bad_concurrency_with_exit_2_before_any_request(token_server, value):
    sc = dict(tag=f"cli-bad-{value}")
    proc = _cli("--base-url", token_server.url(**sc), "--model", MODEL, "--max-tokens", "8", "--repeats", "1",
                "--concurrency", value, "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "concurrency must be an integer from 1 to 1024" in proc.stderr
    assert token_server.log(**sc) == []


# ----------------------------------------------------------------------------------- real engine


@pytest.mark.engine
def test_real_engine_at_concurrency_two_with_a_160_token_prompt(shared_engine):
    """vLLM's own /tokenize builds the prompt; both streams carry exactly max_tokens tokens; each
    timed stream finds its primed prompt in vLLM's prefix cache (the CPU engine's KV blocks are 128
    tokens: one full block of the 160 is cached, the rest recomputed)."""
    result = measure_point(base_url=shared_engine.base_url, model="bench-model", max_tokens=12, repeats=1, warmup=0,
                           concurrency=2, prompt_tokens=160, timeout_s=120)
    assert POINT_KEYS <= set(result) and result["concurrency"] == 2 and result["prefill"] == "primed"
    assert result["prompt_tokens"] == 160 and [s["prompt_tokens"] for s in result["streams"]] == [160, 160]
    assert [s["n_tokens"] for s in result["streams"]] == [12, 12]
    assert result["decode_tok_s"] > 0 and result["ttft_ms"] > 0
    assert result["prefix_cache"] == {"queries": 2 * 160, "hits": 2 * 128}
