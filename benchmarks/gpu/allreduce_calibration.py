"""Compare the comm probe's per-call figures with the synthetic step's A/B marginal cost.

    python3 benchmarks/gpu/allreduce_calibration.py DIR

DIR holds what benchmarks/gpu/allreduce_calibration.sh wrote: ab.json (the A/B truth, the
step's norm as separate torch ops), ab-fused.json (the same step with one fused norm kernel),
il-model.json (interleaved probe at the model's depth with the fused norm, what the service
runs), il-model-ops.json (the same with the torch-ops norm, like for like with ab.json), il8.json and
il2.json (8- and 2-layer proxies), sweep.json (allreduces alone
in a graph, the old analytic input), il-llama8b.json (interleaved, Llama-8B shape). Prints a
table and writes DIR/calibration.json. Error = (figure - A/B) / A/B.
"""
import json
import sys
from pathlib import Path

TARGET = 0.10
# Real vLLM 0.24.0 on 2 x H200, TP=2, Llama-8B shape, 65 calls per token (docs/methods/allreduce-calibration.md):
# NCCL_PROTO=Simple against LL, A/B between ladder steps.
VLLM_SIMPLE_MINUS_LL_US = 18.0
# The same ladder: NCCL LL (custom allreduce off) against vLLM's custom allreduce, per call.
VLLM_LL_MINUS_CUSTOM_US = 4.3


def load(d: Path, name: str):
    p = d / name
    return json.loads(p.read_text()) if p.exists() else None


def per_proto(doc, *, mode=None, key="us"):
    if not doc:
        return {}
    return {r["proto"]: r[key] for r in doc.get("results", []) if mode is None or r.get("mode") == mode}


def like_for_like(truth: dict, fused_truth: dict, columns: dict) -> dict:
    """Each proxy against the A/B step with the same norm: ops proxy vs ab.json, fused proxy vs
    ab-fused.json. Prints one target line each; returns {name: {proto: error}, worst}."""
    out = {}
    for name, pred, ref in (("ops norm", columns["interleaved, depth, ops norm"], truth),
                            ("fused norm", columns["interleaved, model's depth"], fused_truth)):
        errs = {p: (pred[p] - t) / t for p, t in ref.items() if p in pred and t}
        if not errs:
            continue
        worst = max(abs(e) for e in errs.values())
        out[name] = {"errors": errs, "worst": worst, "met": len(errs) == len(ref) and worst <= TARGET}
        print(f"like for like, {name}: " + ", ".join(f"{p} {e:+.1%}" for p, e in errs.items())
              + f": {'MET' if out[name]['met'] else 'NOT MET'} (worst {worst:.1%})")
    return out


def main(d: Path) -> int:
    ab = load(d, "ab.json")
    if not ab:
        print("no ab.json: the A/B step did not run")
        return 1
    truth = {r["proto"]: r["marginal_us"] for r in ab["results"]}
    fused_truth = {r["proto"]: r["marginal_us"] for r in (load(d, "ab-fused.json") or {}).get("results", [])}
    columns = {"interleaved, model's depth": per_proto(load(d, "il-model.json")),
               "interleaved, depth, ops norm": per_proto(load(d, "il-model-ops.json")),
               "A/B, fused norm": fused_truth,
               "interleaved, 8-layer proxy": per_proto(load(d, "il8.json")),
               "interleaved, 2-layer proxy": per_proto(load(d, "il2.json")),
               "alone in a graph (sweep)": per_proto(load(d, "sweep.json"), mode="graph")}
    rows = []
    print(f"\n12 KiB bf16 allreduce, us per call; A/B = synthetic {ab['layers']}-layer TP={ab['world']} step "
          f"({ab['calls_per_step']} allreduces, {ab['weights_gb_per_gpu']} GB weights per GPU)")
    print(f"{'proto':8} {'step with/without ms':>21} {'A/B':>7} " + " ".join(f"{c:>30}" for c in columns))
    for r in ab["results"]:
        p, t = r["proto"], r["marginal_us"]
        row = {"proto": p, "ab_us": t, "step_ms_with": r["step_us_with"] / 1000,
               "step_ms_without": r["step_us_without"] / 1000}
        cells = []
        for c, figs in columns.items():
            v = figs.get(p)
            err = None if v is None or not t else (v - t) / t
            row[c] = {"us": v, "error": err}
            cells.append(f"{'-':>30}" if v is None else f"{v:>20.2f} ({err:+6.1%})")
        rows.append(row)
        print(f"{p:8} {row['step_ms_with']:>10.3f}/{row['step_ms_without']:<10.3f} {t:>7.2f} " + " ".join(cells))
    main_col = "interleaved, model's depth"
    errs = [abs(r[main_col]["error"]) for r in rows if r[main_col]["error"] is not None]
    within = bool(errs) and len(errs) == len(rows) and max(errs) <= TARGET
    print(f"target: {main_col} within {TARGET:.0%} of A/B for every protocol: {'MET' if within else 'NOT MET'}"
          + (f" (worst {max(errs):.1%})" if errs else ""))
    like = like_for_like(truth, fused_truth, columns)
    llama = per_proto(load(d, "il-llama8b.json"))
    vllm = None
    if "LL" in llama and "Simple" in llama:
        pred = llama["Simple"] - llama["LL"]
        vllm = {"predicted_simple_minus_ll_us": round(pred, 2), "vllm_ab_us": VLLM_SIMPLE_MINUS_LL_US,
                "error": (pred - VLLM_SIMPLE_MINUS_LL_US) / VLLM_SIMPLE_MINUS_LL_US, "per_proto_us": llama}
        print(f"Llama-8B shape (interleaved): " + ", ".join(f"{k} {v:.2f}" for k, v in llama.items())
              + f" us/call; Simple - LL = {pred:.2f} us against real vLLM's A/B {VLLM_SIMPLE_MINUS_LL_US} us "
              f"({vllm['error']:+.1%})")
        if "custom" in llama:
            pred = llama["LL"] - llama["custom"]
            vllm["predicted_ll_minus_custom_us"] = round(pred, 2)
            vllm["ll_minus_custom_error"] = (pred - VLLM_LL_MINUS_CUSTOM_US) / VLLM_LL_MINUS_CUSTOM_US
            print(f"LL - custom allreduce = {pred:.2f} us against real vLLM's A/B {VLLM_LL_MINUS_CUSTOM_US} us "
                  f"({vllm['ll_minus_custom_error']:+.1%})")
    (d / "calibration.json").write_text(json.dumps({"rows": rows, "target": TARGET, "target_met": within,
                                                    "like_for_like": like, "vllm_llama8b": vllm}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
