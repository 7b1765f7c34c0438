"""Correctness probe: is a candidate's greedy output still right, compared with a reference?

A speedup that produces garbage is a failure, not a win. But greedy output is not bitwise
stable across legitimate changes either: eager vs CUDA graphs, another GEMM kernel, another
allreduce protocol reorder floating-point sums, and where the two most likely tokens are
nearly tied (common with random weights, and in bf16) the argmax flips, after which the two
texts go their own ways. The probe must tell that *numerical drift* from *corruption*.

    result = compare_outputs(reference, candidate)
    result["verdict"]   # "identical" | "drift" | "incorrect"
    result["correct"]   # verdict != "incorrect"

Each side is a dict with `token_ids: list[int]` (greedy output, same prompt, same count; a
decode probe result's `output_token_ids` is accepted too) and optionally `logprobs`, one entry per output token, in any of these shapes:
- `{token_id: logprob}` (top-k; keys int, "123" or vLLM's "token_id:123"), the chosen
  token's own logprob taken from the dict;
- the decode probe's entries `{"token": str, "logprob": float, "top_logprobs": {key: lp}}`
  (runners.probes.decode; keys are token texts unless the request used
  `return_tokens_as_token_ids`, then "token_id:N");
- or the OpenAI completions object `{"tokens": [...], "token_logprobs": [...],
  "top_logprobs": [...]}` as returned by `/v1/completions`.
Token-text keys are compared by text (the chosen token's text comes from `token`); id keys
by id. `greedy_completion()` below asks vLLM for id keys, which is what the probe uses.

Rules, in order:
1. `identical`: the token id lists are equal.
2. `incorrect`: the lengths differ (a fixed-length `ignore_eos` request that came back short
   or long did not do what was asked; the shorter one being a prefix is reported).
3. `incorrect`: the candidate is degenerate and the reference is not (`degenerate_output`:
   a token repeated, a short cycle, or very few distinct tokens). Relative on purpose: a
   model whose healthy greedy output loops must not fail every candidate.
4. `incorrect`: the candidate did not pick its own most likely token somewhere
   (chosen-token logprob below its top-k maximum by > GREEDY_TOL) while the reference always
   did: a sampler bug, not numerics.
5. At the first divergence d (contexts are equal up to d, so the distributions there are
   comparable), with logprobs: `drift` when the divergence is a near-tie, i.e. on each side
   whose logprobs we have, the other side's token is within that side's top MAX_RANK (5) and
   behind its chosen token by at most MAX_GAP_NATS (0.5); else `incorrect`.
6. Without logprobs at d on either side (weaker: reported as `evidence: "match_length"`):
   `drift` when at least NO_LOGPROBS_MIN_MATCH (8) tokens matched first, else `incorrect`.

Why these numbers. MAX_GAP_NATS = 0.5 is a probability ratio of e^0.5 = 1.65 between the two
tokens. Numerical noise is far smaller: float32 reorderings change logits by ~1e-5, bf16
ones by a few 0.01 up to ~0.3 nats through a deep model; measured on the tiny float32 model,
top-1 vs top-2 gaps over 128 greedy steps are 0.002-0.1 nats at the closest ten positions
and 0.65 nats at the median, so flips by noise happen exactly at those near-ties. A real
corruption changes the distribution: on the tiny model, doubling one RMSNorm output puts the
reference token at rank ~1000, 9 nats behind (tests/correctness). MAX_RANK = 5 matches the
`logprobs: 5` the probe requests (vLLM's default cap is 20). NO_LOGPROBS_MIN_MATCH = 8:
corruption almost always diverges at the first token or within a few (the whole distribution
moved), drift after dozens on real models (DESIGN.md: eager vs graph "after a few dozen
tokens"); 8 keeps bf16 near-ties early in the output from being called garbage while
catching immediate divergence; the verdict says it is the weaker one.

The result also reports, over the matched prefix, the mean absolute difference of the
chosen-token logprobs (PREFIX_WARN_NATS = 0.1 raises a warning: equal ids with moved
probabilities, e.g. a logits scale bug that keeps the argmax, is worth a look).

No Django here. `greedy_completion()` talks to the engine through runners.probes.client.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

import httpx

from runners.probes.client import CompletionClient, ProbeError, clip

MAX_GAP_NATS = 0.5
MAX_RANK = 5
NO_LOGPROBS_MIN_MATCH = 8
GREEDY_TOL = 1e-3
PREFIX_WARN_NATS = 0.1
TOP_LOGPROBS = 5

# degenerate_output thresholds (see its docstring)
DEGEN_MIN_LEN = 8
DEGEN_MAX_PERIOD = 8
DEGEN_PERIODIC_FRACTION = 0.9
DEGEN_MIN_DISTINCT_RATIO = 0.2
DEGEN_DISTINCT_MIN_LEN = 24

_TOKEN_ID_RE = re.compile(r"^token_id:(-?\d+)$")


class CorrectnessError(ValueError):
    """The inputs cannot be compared (malformed token ids or logprobs)."""


# --------------------------------------------------------------------------- degenerate

def degenerate_output(token_ids: list[int]) -> dict:
    """Is this greedy output degenerate? Returns {degenerate, kind, detail, ...stats}.

    kind (the first that applies):
    - "repeat": the tail (last half, at least DEGEN_MIN_LEN tokens) is one token repeated
      in >= 90% of positions;
    - "cycle": the tail repeats with a period p in 2..8 (ids[i] == ids[i-p] for >= 90% of it,
      and the tail spans at least 3 periods);
    - "low_diversity": fewer than 20% distinct tokens in the whole output (only from 24
      tokens on: short outputs legitimately reuse tokens).
    Outputs shorter than DEGEN_MIN_LEN are never called degenerate (too short to tell).
    """
    ids = _check_ids(token_ids, "token_ids")
    n = len(ids)
    distinct = len(set(ids))
    stats: dict[str, Any] = {"length": n, "distinct": distinct,
                             "distinct_ratio": (distinct / n) if n else None}
    if n < DEGEN_MIN_LEN:
        return {"degenerate": False, "kind": None,
                "detail": f"{n} tokens: too short to judge", **stats}
    tail_len = max(DEGEN_MIN_LEN, n // 2)
    tail = ids[n - tail_len:]
    stats["tail_length"] = tail_len
    tok, count = Counter(tail).most_common(1)[0]
    if count >= DEGEN_PERIODIC_FRACTION * tail_len:
        return {"degenerate": True, "kind": "repeat",
                "detail": f"token {tok} is {count} of the last {tail_len} tokens", "period": 1, **stats}
    for p in range(2, DEGEN_MAX_PERIOD + 1):
        if tail_len < 3 * p:
            break
        start = n - tail_len
        checks = [ids[i] == ids[i - p] for i in range(max(start, p), n)]
        if checks and sum(checks) >= DEGEN_PERIODIC_FRACTION * len(checks):
            cycle = ids[n - p:]
            return {"degenerate": True, "kind": "cycle",
                    "detail": f"the last {tail_len} tokens repeat with period {p} (cycle {cycle})",
                    "period": p, **stats}
    if n >= DEGEN_DISTINCT_MIN_LEN and distinct < DEGEN_MIN_DISTINCT_RATIO * n:
        return {"degenerate": True, "kind": "low_diversity",
                "detail": f"only {distinct} distinct tokens in {n} ({distinct / n:.0%})", **stats}
    return {"degenerate": False, "kind": None,
            "detail": f"{distinct} distinct tokens in {n}, no short cycle", **stats}


# --------------------------------------------------------------------------- logprobs

def _check_ids(ids, what: str) -> list[int]:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise CorrectnessError(f"{what} must be a list of integers, got {type(ids).__name__}")
    out = []
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, int):
            raise CorrectnessError(f"{what}[{i}] is not an integer: {t!r}")
        out.append(t)
    return out


def _key(k, id_keys: bool):
    """A top-logprobs key as a comparable value: ("id", int) or ("text", str)."""
    if isinstance(k, bool):
        raise CorrectnessError(f"bad logprobs key {k!r}")
    if isinstance(k, int):
        return ("id", k)
    if not isinstance(k, str):
        raise CorrectnessError(f"bad logprobs key {k!r}")
    m = _TOKEN_ID_RE.match(k)
    if m:
        return ("id", int(m.group(1)))
    if id_keys and re.fullmatch(r"-?\d+", k):
        return ("id", int(k))
    return ("text", k)


def _lp(v, where: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise CorrectnessError(f"{where}: logprob is not a number: {v!r}")
    v = float(v)
    if math.isnan(v):
        return None
    return v  # -inf is allowed (a token with zero probability)


def normalize_logprobs(token_ids: list[int], logprobs) -> list[dict] | None:
    """Per position {"chosen": key, "chosen_text": key|None, "chosen_lp": float|None,
    "top": {key: lp}} where key is ("id", n) or ("text", s). None when no logprobs."""
    if logprobs is None:
        return None
    if isinstance(logprobs, dict) and "top_logprobs" in logprobs and "tokens" in logprobs:  # OpenAI object
        toks = logprobs.get("tokens") or []
        tlps = logprobs.get("token_logprobs") or []
        tops = logprobs.get("top_logprobs") or []
        logprobs = [{"token": t, "logprob": tlps[i] if i < len(tlps) else None,
                     "top_logprobs": tops[i] if i < len(tops) else None} for i, t in enumerate(toks)]
    if isinstance(logprobs, (str, bytes)) or not isinstance(logprobs, (list, tuple)):
        raise CorrectnessError(f"logprobs must be a list (one entry per token), got {type(logprobs).__name__}")
    if not logprobs:
        return None
    out = []
    for i, entry in enumerate(logprobs):
        chosen_id = ("id", token_ids[i]) if i < len(token_ids) else None
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, dict):
            raise CorrectnessError(f"logprobs[{i}] must be a dict, got {type(entry).__name__}")
        if "top_logprobs" in entry or "token" in entry:  # decode-probe / OpenAI per-token entry
            top_raw = entry.get("top_logprobs") or {}
            if not isinstance(top_raw, dict):
                raise CorrectnessError(f"logprobs[{i}].top_logprobs must be a dict")
            top = {_key(k, False): _lp(v, f"logprobs[{i}]") for k, v in top_raw.items()}
            tok = entry.get("token")
            chosen_text = _key(tok, False) if isinstance(tok, str) else None
            chosen_lp = _lp(entry.get("logprob"), f"logprobs[{i}]")
        else:  # {token_id: logprob}
            top = {_key(k, True): _lp(v, f"logprobs[{i}]") for k, v in entry.items()}
            chosen_text = None
            chosen_lp = None
        top = {k: v for k, v in top.items() if v is not None}
        if chosen_lp is None:
            for key in (chosen_id, chosen_text):
                if key is not None and key in top:
                    chosen_lp = top[key]
                    break
        out.append({"chosen": chosen_id, "chosen_text": chosen_text, "chosen_lp": chosen_lp, "top": top})
    return out


def _lookup(pos: dict, id_key, text_key) -> tuple[float | None, bool]:
    """(logprob of a token in POS's top-k, whether the key space allowed a lookup)."""
    top = pos["top"]
    has_ids = any(k[0] == "id" for k in top)
    has_text = any(k[0] == "text" for k in top)
    if has_ids and id_key is not None:
        return top.get(id_key), True
    if has_text and text_key is not None:
        return top.get(text_key), True
    return None, False


def _rank(pos: dict, lp: float | None) -> int | None:
    if lp is None:
        return None
    return 1 + sum(1 for v in pos["top"].values() if v > lp)


def _side_evidence(pos: dict | None, other_id_key, other_text_key) -> dict | None:
    """At a divergence: where does the OTHER side's token stand in THIS side's distribution?"""
    if pos is None or not pos["top"]:
        return None
    other_lp, comparable = _lookup(pos, other_id_key, other_text_key)
    if not comparable:
        return None
    chosen_lp = pos["chosen_lp"]
    if chosen_lp is None:
        chosen_lp = max(pos["top"].values())
    k = len(pos["top"])
    if other_lp is None:
        floor = min(pos["top"].values())
        return {"in_top_k": False, "top_k": k, "rank": None, "logprob": None,
                "gap": None, "gap_at_least": chosen_lp - floor, "chosen_logprob": chosen_lp}
    return {"in_top_k": True, "top_k": k, "rank": _rank(pos, other_lp), "logprob": other_lp,
            "gap": chosen_lp - other_lp, "chosen_logprob": chosen_lp}


def _greedy_violations(norm: list | None) -> list[int]:
    if not norm:
        return []
    bad = []
    for i, pos in enumerate(norm):
        if pos is None or not pos["top"] or pos["chosen_lp"] is None:
            continue
        if max(pos["top"].values()) - pos["chosen_lp"] > GREEDY_TOL:
            bad.append(i)
    return bad


# --------------------------------------------------------------------------- compare

def compare_outputs(reference: dict, candidate: dict, *, max_gap_nats: float = MAX_GAP_NATS,
                    max_rank: int = MAX_RANK, min_match_without_logprobs: int = NO_LOGPROBS_MIN_MATCH) -> dict:
    """Judge CANDIDATE's greedy output against REFERENCE's (see the module doc for the rules).

    Returns a JSON-able dict: verdict, correct, evidence ("ids" | "logprobs" | "match_length"
    | "length" | "degenerate" | "greedy"), match_len, first_divergence, length_ref,
    length_cand, logprob_drift, degenerate (candidate), degenerate_reference, reason,
    warnings, divergence (tokens around it), thresholds.
    """
    if not isinstance(reference, dict) or not isinstance(candidate, dict):
        raise CorrectnessError("reference and candidate must be dicts with 'token_ids'")
    ref_ids = _check_ids(_ids_of(reference), "reference.token_ids")
    cand_ids = _check_ids(_ids_of(candidate), "candidate.token_ids")
    ref_lp = normalize_logprobs(ref_ids, reference.get("logprobs"))
    cand_lp = normalize_logprobs(cand_ids, candidate.get("logprobs"))
    n_ref, n_cand = len(ref_ids), len(cand_ids)
    n = min(n_ref, n_cand)
    match_len = next((i for i in range(n) if ref_ids[i] != cand_ids[i]), n)
    identical = ref_ids == cand_ids
    first_div = None if identical else match_len

    deg_cand = degenerate_output(cand_ids)
    deg_ref = degenerate_output(ref_ids)
    warnings: list[str] = []

    # logprob drift over the matched prefix (same context, same chosen token)
    diffs = []
    if ref_lp and cand_lp:
        for i in range(min(match_len, len(ref_lp), len(cand_lp))):
            a, b = ref_lp[i], cand_lp[i]
            if a and b and a["chosen_lp"] is not None and b["chosen_lp"] is not None \
                    and math.isfinite(a["chosen_lp"]) and math.isfinite(b["chosen_lp"]):
                diffs.append(abs(a["chosen_lp"] - b["chosen_lp"]))
    drift: dict[str, Any] = {
        "prefix_positions": len(diffs),
        "prefix_mean_abs_diff": (sum(diffs) / len(diffs)) if diffs else None,
        "prefix_max_abs_diff": max(diffs) if diffs else None,
        "ref_logprobs": ref_lp is not None,
        "cand_logprobs": cand_lp is not None,
    }
    if diffs and drift["prefix_mean_abs_diff"] > PREFIX_WARN_NATS:
        warnings.append(f"chosen-token logprobs differ by {drift['prefix_mean_abs_diff']:.3f} nats on average "
                        f"over the {len(diffs)} matching tokens (> {PREFIX_WARN_NATS}): the distribution "
                        "moved even where the greedy tokens agree")

    # evidence at the divergence
    cand_ev = ref_ev = None
    if first_div is not None and first_div < n:
        d = first_div
        rpos = ref_lp[d] if ref_lp and d < len(ref_lp) else None
        cpos = cand_lp[d] if cand_lp and d < len(cand_lp) else None
        cand_ev = _side_evidence(cpos, ("id", ref_ids[d]), rpos["chosen_text"] if rpos else None)
        ref_ev = _side_evidence(rpos, ("id", cand_ids[d]), cpos["chosen_text"] if cpos else None)
        if cand_ev:
            drift.update({"ref_token_logprob_in_cand": cand_ev["logprob"], "ref_token_rank_in_cand": cand_ev["rank"],
                          "ref_token_in_cand_top_k": cand_ev["in_top_k"], "cand_top_k": cand_ev["top_k"],
                          "gap_cand": cand_ev["gap"], "gap_cand_at_least": cand_ev.get("gap_at_least"),
                          "cand_chosen_logprob": cand_ev["chosen_logprob"]})
        if ref_ev:
            drift.update({"cand_token_logprob_in_ref": ref_ev["logprob"], "cand_token_rank_in_ref": ref_ev["rank"],
                          "cand_token_in_ref_top_k": ref_ev["in_top_k"], "ref_top_k": ref_ev["top_k"],
                          "gap_ref": ref_ev["gap"], "gap_ref_at_least": ref_ev.get("gap_at_least"),
                          "ref_chosen_logprob": ref_ev["chosen_logprob"]})

    viol_cand = _greedy_violations(cand_lp)
    viol_ref = _greedy_violations(ref_lp)

    def result(verdict: str, evidence: str, reason: str) -> dict:
        div = None
        if first_div is not None:
            lo = max(0, first_div - 3)
            div = {"position": first_div, "ref_tokens": ref_ids[lo:first_div + 4],
                   "cand_tokens": cand_ids[lo:first_div + 4], "from": lo}
        return _jsonable({
            "verdict": verdict,
            "correct": verdict != "incorrect",
            "evidence": evidence,
            "match_len": match_len,
            "first_divergence": first_div,
            "length_ref": n_ref,
            "length_cand": n_cand,
            "logprob_drift": drift,
            "degenerate": deg_cand,
            "degenerate_reference": deg_ref,
            "greedy_violations_cand": viol_cand[:20],
            "reason": reason,
            "warnings": warnings,
            "divergence": div,
            "thresholds": {"max_gap_nats": max_gap_nats, "max_rank": max_rank,
                           "min_match_without_logprobs": min_match_without_logprobs},
        })

    if identical:
        return result("identical", "ids", f"all {n_ref} greedy token ids are identical")
    if n_ref != n_cand:
        prefix = match_len == n
        what = "shorter" if n_cand < n_ref else "longer"
        return result("incorrect", "length",
                      f"candidate produced {n_cand} tokens, reference {n_ref}: {what} output"
                      + (f" (the first {n} agree)" if prefix else f", diverging at token {match_len}"))
    if deg_cand["degenerate"] and not deg_ref["degenerate"]:
        return result("incorrect", "degenerate",
                      f"candidate output is degenerate ({deg_cand['kind']}: {deg_cand['detail']}) and the "
                      f"reference's is not; first divergence at token {first_div}")
    if viol_cand and not viol_ref:
        return result("incorrect", "greedy",
                      f"candidate did not pick its own most likely token at {len(viol_cand)} position(s) "
                      f"(first {viol_cand[0]}) under greedy decoding: a sampling bug")
    if deg_cand["degenerate"] and deg_ref["degenerate"]:
        warnings.append("reference and candidate are both degenerate: degeneracy does not decide the verdict")

    d = first_div
    sides = [(name, ev, gap_key) for name, ev, gap_key in (("candidate", cand_ev, "ref"), ("reference", ref_ev, "cand"))
             if ev is not None]
    if sides:
        failing = []
        for name, ev, _ in sides:
            ok = ev["in_top_k"] and ev["rank"] is not None and ev["rank"] <= max_rank and ev["gap"] <= max_gap_nats
            if not ok:
                failing.append((name, ev))
        rt, ct = ref_ids[d], cand_ids[d]
        if not failing:
            desc = "; ".join(f"in the {name}'s distribution the other token is rank {ev['rank']}, "
                             f"{ev['gap']:.3f} nats behind" for name, ev, _ in sides)
            return result("drift", "logprobs",
                          f"numerical drift: diverges at token {d} of {n} (reference {rt}, candidate {ct}) at a "
                          f"near-tie ({desc}; limits: rank <= {max_rank}, gap <= {max_gap_nats} nats)")
        name, ev = failing[0]
        other = "reference" if name == "candidate" else "candidate"
        if not ev["in_top_k"]:
            where = (f"the {other}'s token {rt if other == 'reference' else ct} is not in the {name}'s top "
                     f"{ev['top_k']} (at least {ev['gap_at_least']:.2f} nats behind its choice)")
        else:
            where = (f"the {other}'s token {rt if other == 'reference' else ct} is rank {ev['rank']} in the "
                     f"{name}'s distribution, {ev['gap']:.2f} nats behind its choice")
        return result("incorrect", "logprobs",
                      f"diverges at token {d} of {n} where {where}: not a near-tie "
                      f"(limits: rank <= {max_rank}, gap <= {max_gap_nats} nats), so not numerical drift")
    # no logprobs at the divergence: the weaker rule on the match length
    if match_len >= min_match_without_logprobs:
        return result("drift", "match_length",
                      f"diverges at token {d} of {n} after {match_len} matching tokens; no logprobs to check "
                      f"the divergence, so judged by match length (>= {min_match_without_logprobs}): a weaker verdict")
    return result("incorrect", "match_length",
                  f"diverges at token {d} of {n}, within the first {min_match_without_logprobs} tokens; no "
                  "logprobs to check the divergence, so judged by match length: a weaker verdict")


# --------------------------------------------------------------------------- engine I/O

def greedy_completion(*, base_url: str, model: str, prompt: str, max_tokens: int,
                      top_logprobs: int = TOP_LOGPROBS, timeout_s: float = 300,
                      client: httpx.Client | None = None) -> dict:
    """One greedy, non-streamed `/v1/completions` request with `ignore_eos`, asking for the
    top-k logprobs keyed by token id. Returns {token_ids, logprobs: [{"token_id:N": lp}],
    chosen_logprobs, text, finish_reason}, the input compare_outputs expects."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "n": 1, "logprobs": top_logprobs,
            "return_tokens_as_token_ids": True, "return_token_ids": True}
    try:
        with CompletionClient(base_url, timeout_s=timeout_s, client=client) as api:
            answer = api.complete(body)
    except ProbeError as e:
        raise CorrectnessError(f"/v1/completions: {e.message}") from None
    try:
        choice = answer["choices"][0]
        if not isinstance(choice, dict):
            raise TypeError
    except (KeyError, IndexError, TypeError):
        raise CorrectnessError(f"unexpected /v1/completions answer: {clip(json.dumps(answer), 1000)}") from None
    lp = choice.get("logprobs") or {}
    toks = lp.get("tokens") or []
    ids = choice.get("token_ids")
    if ids is None:  # older vLLM: ids from "token_id:N" strings
        ids = []
        for t in toks:
            m = _TOKEN_ID_RE.match(t or "")
            if not m:
                raise CorrectnessError(f"cannot read a token id from {t!r}")
            ids.append(int(m.group(1)))
    return {"token_ids": list(ids), "logprobs": lp.get("top_logprobs"),
            "chosen_logprobs": lp.get("token_logprobs"), "text": choice.get("text", ""),
            "finish_reason": choice.get("finish_reason")}


def _ids_of(side: dict):
    """`token_ids`, or the decode probe result's `output_token_ids`."""
    if "token_ids" in side:
        return side["token_ids"]
    return side.get("output_token_ids")


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x
