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
reference token at rank ~1000, 9 nats behind (tests/runners/probes/test_correctness.py). MAX_RANK = 5 matches the
`logprobs: 5` the probe requests (vLLM's default cap is 20). NO_LOGPROBS_MIN_MATCH = 8:
corruption almost always diverges at the first token or within a few (the whole distribution
moved), drift after dozens on real models (docs/reference-figures.md: eager vs graph "after a few dozen
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
from dataclasses import dataclass, field
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

@dataclass
class _Pair:
    """What compare_outputs knows about the two outputs before it judges them."""
    ref_ids: list[int]
    cand_ids: list[int]
    ref_lp: list | None
    cand_lp: list | None
    match_len: int
    first_div: int | None
    deg_cand: dict
    deg_ref: dict
    thresholds: dict
    warnings: list[str] = field(default_factory=list)
    drift: dict = field(default_factory=dict)
    cand_ev: dict | None = None
    ref_ev: dict | None = None

    @property
    def n(self) -> int:
        return min(len(self.ref_ids), len(self.cand_ids))


def _pair(reference: dict, candidate: dict, thresholds: dict) -> _Pair:
    if not isinstance(reference, dict) or not isinstance(candidate, dict):
        raise CorrectnessError("reference and candidate must be dicts with 'token_ids'")
    ref_ids = _check_ids(_ids_of(reference), "reference.token_ids")
    cand_ids = _check_ids(_ids_of(candidate), "candidate.token_ids")
    n = min(len(ref_ids), len(cand_ids))
    match_len = next((i for i in range(n) if ref_ids[i] != cand_ids[i]), n)
    return _Pair(ref_ids=ref_ids, cand_ids=cand_ids,
                 ref_lp=normalize_logprobs(ref_ids, reference.get("logprobs")),
                 cand_lp=normalize_logprobs(cand_ids, candidate.get("logprobs")),
                 match_len=match_len, first_div=None if ref_ids == cand_ids else match_len,
                 deg_cand=degenerate_output(cand_ids), deg_ref=degenerate_output(ref_ids), thresholds=thresholds)


def _prefix_drift(p: _Pair) -> None:
    """Logprob drift over the matched prefix (same context, same chosen token)."""
    diffs = []
    if p.ref_lp and p.cand_lp:
        for i in range(min(p.match_len, len(p.ref_lp), len(p.cand_lp))):
            a, b = p.ref_lp[i], p.cand_lp[i]
            if a and b and a["chosen_lp"] is not None and b["chosen_lp"] is not None \
                    and math.isfinite(a["chosen_lp"]) and math.isfinite(b["chosen_lp"]):
                diffs.append(abs(a["chosen_lp"] - b["chosen_lp"]))
    p.drift = {
        "prefix_positions": len(diffs),
        "prefix_mean_abs_diff": (sum(diffs) / len(diffs)) if diffs else None,
        "prefix_max_abs_diff": max(diffs) if diffs else None,
        "ref_logprobs": p.ref_lp is not None,
        "cand_logprobs": p.cand_lp is not None,
    }
    if diffs and p.drift["prefix_mean_abs_diff"] > PREFIX_WARN_NATS:
        p.warnings.append(f"chosen-token logprobs differ by {p.drift['prefix_mean_abs_diff']:.3f} nats on average "
                          f"over the {len(diffs)} matching tokens (> {PREFIX_WARN_NATS}): the distribution "
                          "moved even where the greedy tokens agree")


def _divergence_evidence(p: _Pair) -> None:
    """Where each side's token stands in the other's distribution at the first divergence."""
    if p.first_div is None or p.first_div >= p.n:
        return
    d = p.first_div
    rpos = p.ref_lp[d] if p.ref_lp and d < len(p.ref_lp) else None
    cpos = p.cand_lp[d] if p.cand_lp and d < len(p.cand_lp) else None
    p.cand_ev = _side_evidence(cpos, ("id", p.ref_ids[d]), rpos["chosen_text"] if rpos else None)
    p.ref_ev = _side_evidence(rpos, ("id", p.cand_ids[d]), cpos["chosen_text"] if cpos else None)
    if p.cand_ev:
        ev = p.cand_ev
        p.drift.update({"ref_token_logprob_in_cand": ev["logprob"], "ref_token_rank_in_cand": ev["rank"],
                        "ref_token_in_cand_top_k": ev["in_top_k"], "cand_top_k": ev["top_k"],
                        "gap_cand": ev["gap"], "gap_cand_at_least": ev.get("gap_at_least"),
                        "cand_chosen_logprob": ev["chosen_logprob"]})
    if p.ref_ev:
        ev = p.ref_ev
        p.drift.update({"cand_token_logprob_in_ref": ev["logprob"], "cand_token_rank_in_ref": ev["rank"],
                        "cand_token_in_ref_top_k": ev["in_top_k"], "ref_top_k": ev["top_k"],
                        "gap_ref": ev["gap"], "gap_ref_at_least": ev.get("gap_at_least"),
                        "ref_chosen_logprob": ev["chosen_logprob"]})


def _result(p: _Pair, viol_cand: list[int], verdict: str, evidence: str, reason: str) -> dict:
    div = None
    if p.first_div is not None:
        lo = max(0, p.first_div - 3)
        div = {"position": p.first_div, "ref_tokens": p.ref_ids[lo:p.first_div + 4],
               "cand_tokens": p.cand_ids[lo:p.first_div + 4], "from": lo}
    return _jsonable({
        "verdict": verdict,
        "correct": verdict != "incorrect",
        "evidence": evidence,
        "match_len": p.match_len,
        "first_divergence": p.first_div,
        "length_ref": len(p.ref_ids),
        "length_cand": len(p.cand_ids),
        "logprob_drift": p.drift,
        "degenerate": p.deg_cand,
        "degenerate_reference": p.deg_ref,
        "greedy_violations_cand": viol_cand[:20],
        "reason": reason,
        "warnings": p.warnings,
        "divergence": div,
        "thresholds": p.thresholds,
    })


def compare_outputs(reference: dict, candidate: dict, *, max_gap_nats: float = MAX_GAP_NATS,
                    max_rank: int = MAX_RANK, min_match_without_logprobs: int = NO_LOGPROBS_MIN_MATCH) -> dict:
    """Judge CANDIDATE's greedy output against REFERENCE's (see the module doc for the rules).

    Returns a JSON-able dict: verdict, correct, evidence ("ids" | "logprobs" | "match_length"
    | "length" | "degenerate" | "greedy"), match_len, first_divergence, length_ref,
    length_cand, logprob_drift, degenerate (candidate), degenerate_reference, reason,
    warnings, divergence (tokens around it), thresholds.
    """
    p = _pair(reference, candidate, {"max_gap_nats": max_gap_nats, "max_rank": max_rank,
                                     "min_match_without_logprobs": min_match_without_logprobs})
    _prefix_drift(p)
    _divergence_evidence(p)
    viol_cand = _greedy_violations(p.cand_lp)
    verdict = _judge(p, viol_cand, _greedy_violations(p.ref_lp))
    return _result(p, viol_cand, *verdict)


def _judge(p: _Pair, viol_cand: list[int], viol_ref: list[int]) -> tuple[str, str, str]:
    """(verdict, evidence, reason) by the module doc's rules, in order."""
    n_ref, n_cand, n, match_len = len(p.ref_ids), len(p.cand_ids), p.n, p.match_len
    if p.first_div is None:
        return "identical", "ids", f"all {n_ref} greedy token ids are identical"
    if n_ref != n_cand:
        what = "shorter" if n_cand < n_ref else "longer"
        return ("incorrect", "length",
                f"candidate produced {n_cand} tokens, reference {n_ref}: {what} output"
                + (f" (the first {n} agree)" if match_len == n else f", diverging at token {match_len}"))
    if p.deg_cand["degenerate"] and not p.deg_ref["degenerate"]:
        return ("incorrect", "degenerate",
                f"candidate output is degenerate ({p.deg_cand['kind']}: {p.deg_cand['detail']}) and the "
                f"reference's is not; first divergence at token {p.first_div}")
    if viol_cand and not viol_ref:
        return ("incorrect", "greedy",
                f"candidate did not pick its own most likely token at {len(viol_cand)} position(s) "
                f"(first {viol_cand[0]}) under greedy decoding: a sampling bug")
    if p.deg_cand["degenerate"] and p.deg_ref["degenerate"]:
        p.warnings.append("reference and candidate are both degenerate: degeneracy does not decide the verdict")
    sides = [(name, ev) for name, ev in (("candidate", p.cand_ev), ("reference", p.ref_ev)) if ev is not None]
    if sides:
        return _judge_by_logprobs(p, sides)
    # no logprobs at the divergence: the weaker rule on the match length
    d, least = p.first_div, p.thresholds["min_match_without_logprobs"]
    if match_len >= least:
        return ("drift", "match_length",
                f"diverges at token {d} of {n} after {match_len} matching tokens; no logprobs to check "
                f"the divergence, so judged by match length (>= {least}): a weaker verdict")
    return ("incorrect", "match_length",
            f"diverges at token {d} of {n}, within the first {least} tokens; no "
            "logprobs to check the divergence, so judged by match length: a weaker verdict")


def _judge_by_logprobs(p: _Pair, sides: list[tuple[str, dict]]) -> tuple[str, str, str]:
    """Drift when the other side's token is a near-tie in every distribution seen, else incorrect."""
    d, n = p.first_div, p.n
    max_rank, max_gap_nats = p.thresholds["max_rank"], p.thresholds["max_gap_nats"]
    failing = [(name, ev) for name, ev in sides
               if not (ev["in_top_k"] and ev["rank"] is not None and ev["rank"] <= max_rank
                       and ev["gap"] <= max_gap_nats)]
    rt, ct = p.ref_ids[d], p.cand_ids[d]
    if not failing:
        desc = "; ".join(f"in the {name}'s distribution the other token is rank {ev['rank']}, "
                         f"{ev['gap']:.3f} nats behind" for name, ev in sides)
        return ("drift", "logprobs",
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
    return ("incorrect", "logprobs",
            f"diverges at token {d} of {n} where {where}: not a near-tie "
            f"(limits: rank <= {max_rank}, gap <= {max_gap_nats} nats), so not numerical drift")


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
