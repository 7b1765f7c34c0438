"""Proof that each setting of a variant took effect, from the engine's own start-up log.

A ladder step that sets NCCL_PROTO=LL but runs Simple, or asks for CUDA graphs that are never
captured, tells a confident wrong story. vLLM and NCCL say what they actually did at start-up
(the server log the job saves anyway), so reading that log costs the timed decode nothing:

    report = took_effect(log_text, engine_args=[...], engine_env={...}, tensor_parallel_size=2)
    report["checks"]     # one per setting: asked, effective, verdict, evidence (the log lines)
    report["effective"]  # the configuration as the engine reports it
    report["flagged"]    # a setting the variant asked for was NOT applied

Verdicts: `applied` (the engine's words show it), `not applied` (they contradict it),
`superseded` (applied, but the decode step's allreduces run in the FlashInfer fusion instead),
`no effect here` (the setting cannot act on this run: NCCL on a CPU or TP=1 engine, custom
allreduce without tensor parallelism), `unverified` (the log says neither; e.g. NCCL's
per-collective lines need NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV; an environment
variable of vLLM's, such as VLLM_USE_FUSED_MOE_GROUPED_TOPK, which no log line confirms).

Lines read (vLLM 0.24 on H200, 0.32 on CPU; NCCL 2.2x):
- `Initializing a V1 LLM engine ... enforce_eager=..., compilation_config={'mode':
  <CompilationMode.X: n>, ..., 'cudagraph_mode': <CUDAGraphMode.Y: ...>, 'pass_config': {...}}`
  (the engine's effective configuration, after the platform adjusted it);
- eager: `Enforce eager set, disabling torch.compile`; compiled: `Dynamo bytecode transform
  time`, `Compiling a graph for`, `torch.compile took`, `Directly load AOT compilation`, and on
  CPU `Warming up model for the compilation`; CUDA graphs: `Capturing CUDA graphs (MODE)`,
  `Graph capturing finished`;
- `Using ['CUSTOM', 'PYNCCL'] all-reduce backends (in dispatch order) for group 'tp:0'`;
- NCCL: `NCCL INFO NCCL_PROTO set by environment to Simple`, `AllReduce: 8192 Bytes -> Algo
  RING proto SIMPLE channel{Lo..Hi}={0..1}`;
- fusions: the API server's `Enabled custom fusions: allreduce_rms` is an announcement only;
  a worker's `AllReduce fusion pass is disabled` / `skipping allreduce fusion pass`, or
  `Inductor compilation was disabled` (eager), means it was NOT applied; a worker's
  `Initialized FlashInfer Allreduce norm fusion workspace with backend=trtllm` means it was
  (seen on 2 x H200 once flashinfer.comm imports: 65 `flashinfer_trtllm_fused_allreduce_norm`
  calls per decode step, every allreduce of the step).
"""
from __future__ import annotations

import json
import re
from collections import Counter

from runners.flags import has_flag

APPLIED, NOT_APPLIED, NO_EFFECT, UNVERIFIED = "applied", "not applied", "no effect here", "unverified"
# Applied, but something else does the work it governs: with the allreduce + RMSNorm fusion
# running, FlashInfer's fused kernel reduces every layer, whatever NCCL_PROTO or custom allreduce say.
SUPERSEDED = "superseded"
EVIDENCE_LINES = 3  # log lines kept per check
LINE_CHARS = 300

_CONFIG = re.compile(r"Initializing a V1 LLM engine .* with config:")
_MODE = re.compile(r"'mode': <CompilationMode\.(\w+)")
_CUDAGRAPH_MODE = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)")
_EAGER_CONFIG = re.compile(r"\benforce_eager=(True|False)")
_PASS_CONFIG = re.compile(r"'pass_config': \{([^}]*)\}")
_EAGER = re.compile(r"Enforce eager set, disabling torch\.compile")
_COMPILED = re.compile(r"Dynamo bytecode transform time|Compiling a graph for|torch\.compile took|"
                       r"Directly load AOT compilation|Directly load the compiled graph|"
                       r"Warming up model for the compilation|Starting torch\.compile")
# "(PIECEWISE)", or with the batch kind the graphs serve: "(decode, FULL)", "(mixed prefill-decode, PIECEWISE)"
_CAPTURE = re.compile(r"Capturing CUDA graphs \((?:([^,()]+), )?(\w+)\)")
_CAPTURE_DONE = re.compile(r"Graph capturing finished")
_BACKENDS = re.compile(r"Using \[([^\]]*)\] all-reduce backends .*for group 'tp:0'")
_NCCL_ENV = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (\S+)")
_NCCL_TUNING = re.compile(r"AllReduce: (\d+) Bytes -> Algo (\w+) proto (\w+)")
_FUSIONS = re.compile(r"Enabled custom fusions: (.*)$")
_ALLREDUCE_FUSION_OFF = re.compile(r"AllReduce fusion pass is disabled|skipping allreduce fusion pass")
_INDUCTOR_OFF = re.compile(r"Inductor compilation was disabled")
_ALLREDUCE_FUSION_ON = re.compile(r"Initialized FlashInfer Allreduce norm fusion workspace(?: with backend=(\w+))?")
_CUDA = re.compile(r"Capturing CUDA graphs|cuda_communicator|gpu_model_runner|gpu_worker|GPU KV cache|NCCL INFO")
_CPU = re.compile(r"cpu_worker|cpu_model_runner|CPU KV cache")
# settings of NCCL that only describe its logging, not what it runs
_NCCL_LOGGING = ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")
_HEADER_LINES = 64  # the runner's header (command, environment) opens the engine's log


def took_effect(log: str, *, engine_args: list[str], engine_env: dict, tensor_parallel_size: int) -> dict:
    """The evidence report for one run (see the module doc)."""
    lines = log.splitlines()
    effective = effective_config(lines)
    ctx = {"lines": lines, "eff": effective, "args": list(engine_args), "tp": int(tensor_parallel_size)}
    checks = [execution_mode_check(ctx), *custom_allreduce_checks(ctx),
              *(nccl_check(ctx, k, str(v)) if k.startswith("NCCL_") else env_check(ctx, k, str(v))
                for k, v in sorted(engine_env.items()) if k not in _NCCL_LOGGING),
              *fusion_checks(ctx)]
    flagged = [c["setting"] for c in checks if c["flag"]]
    counts = Counter(c["verdict"] for c in checks)
    return {"effective": effective, "checks": checks, "flagged": bool(flagged), "flagged_settings": flagged,
            "summary": ", ".join(f"{n} {v}" for v, n in counts.items()) or "no settings to check"}


def effective_config(lines: list[str]) -> dict:
    """The configuration as the engine reports it."""
    config = next((ln for ln in lines if _CONFIG.search(ln)), "")
    protos, algos = Counter(), Counter()
    for ln in lines:
        if m := _NCCL_TUNING.search(ln):
            algos[m.group(2)] += 1
            protos[m.group(3)] += 1
    backends = next((m.group(1) for ln in lines if (m := _BACKENDS.search(ln))), None)
    eager = _search(_EAGER_CONFIG, config)
    return {
        "platform": "cuda" if _any(_CUDA, lines) else "cpu" if _any(_CPU, lines) else "unknown",
        "enforce_eager": None if eager is None else eager == "True",
        "compilation_mode": _search(_MODE, config),
        "cudagraph_mode": _search(_CUDAGRAPH_MODE, config),
        "fusion_passes_configured": _true_passes(_search(_PASS_CONFIG, config) or ""),
        "compiled": _any(_COMPILED, lines),
        "cuda_graphs_captured": sorted({f"{m.group(2)} {m.group(1)}" if m.group(1) else m.group(2)
                                        for ln in lines if (m := _CAPTURE.search(ln))}),
        "allreduce_backends": None if backends is None else [b.strip(" '\"") for b in backends.split(",") if b.strip()],
        "nccl_env": {m.group(1): m.group(2) for ln in lines if (m := _NCCL_ENV.search(ln))},
        "nccl_allreduce_protos": dict(protos),
        "nccl_allreduce_algos": dict(algos),
        "fusions_announced": sorted({f.strip() for ln in lines if (m := _FUSIONS.search(ln))
                                     for f in m.group(1).split(",") if f.strip()}),
        "allreduce_fused": _any(_ALLREDUCE_FUSION_ON, lines) and not _any(_ALLREDUCE_FUSION_OFF, lines),
    }


# ------------------------------------------------------------------------------ checks


def _check(setting: str, asked: str, effective: str, verdict: str, evidence: list[str], *,
           source: str = "variant", why: str = "") -> dict:
    return {"setting": setting, "asked": asked, "effective": effective, "verdict": verdict,
            "evidence": [ln.strip()[:LINE_CHARS] for ln in evidence[:EVIDENCE_LINES]], "source": source,
            "why": why, "flag": verdict in (NOT_APPLIED, SUPERSEDED) and source == "variant"}


def _superseded(check: dict, ctx: dict, what: str) -> dict:
    """An applied setting whose work the allreduce fusion took over (see SUPERSEDED)."""
    if check["verdict"] != APPLIED or not ctx["eff"].get("allreduce_fused"):
        return check
    return {**check, "verdict": SUPERSEDED, "flag": check["source"] == "variant",
            "evidence": check["evidence"] + [ln.strip()[:LINE_CHARS] for ln in _grep(_ALLREDUCE_FUSION_ON, ctx["lines"])[:1]],
            "why": f"the allreduce + RMSNorm fusion (FlashInfer) reduces every layer of the decode step; {what}"}


def execution_mode_check(ctx: dict) -> dict:
    """Eager or compiled (and, on a GPU, CUDA graphs captured) as asked."""
    lines, eff = ctx["lines"], ctx["eff"]
    asked = "eager" if has_flag(ctx["args"], "--enforce-eager") else "compiled"
    eager_lines = _grep(_EAGER, lines)
    compiled_lines = _grep(_COMPILED, lines)
    graphs = eff["cuda_graphs_captured"]
    if compiled_lines:
        effective = "compiled" + (f" + CUDA graphs ({', '.join(graphs)})" if graphs else "")
    elif eager_lines or eff["enforce_eager"] or eff["compilation_mode"] == "NONE":
        effective = "eager"
    else:
        return _check("execution mode", asked, "unknown", UNVERIFIED, [],
                      why="no compilation, capture or eager line in the log")
    evidence = eager_lines if effective == "eager" else compiled_lines + _grep(_CAPTURE_DONE, lines)
    if asked == "eager":
        return _check("execution mode", asked, effective, APPLIED if effective == "eager" else NOT_APPLIED, evidence)
    if effective == "eager":
        return _check("execution mode", asked, effective, NOT_APPLIED, evidence, why="the engine ran eager")
    if eff["platform"] == "cuda" and not graphs and eff["cudagraph_mode"] not in (None, "NONE"):
        return _check("execution mode", asked, effective, NOT_APPLIED, evidence,
                      why=f"cudagraph_mode {eff['cudagraph_mode']} but no CUDA graph was captured")
    return _check("execution mode", asked, effective, APPLIED, evidence)


def custom_allreduce_checks(ctx: dict) -> list[dict]:
    """vLLM's custom allreduce on (the default) or off (--disable-custom-all-reduce)."""
    eff, explicit = ctx["eff"], "--disable-custom-all-reduce" in ctx["args"]
    asked = "off" if explicit else "on"
    source = "variant" if explicit else "default"
    if eff["platform"] != "cuda" or ctx["tp"] < 2:
        if not explicit:
            return []
        return [_check("custom allreduce", asked, "n/a", NO_EFFECT, [], source=source,
                       why=f"{eff['platform']} engine, TP={ctx['tp']}: no custom allreduce to turn off")]
    backends = eff["allreduce_backends"]
    if backends is None:
        return [_check("custom allreduce", asked, "unknown", UNVERIFIED, [], source=source,
                       why="no 'all-reduce backends' line for group tp:0")]
    effective = "on" if "CUSTOM" in backends else "off"
    check = _check("custom allreduce", asked, effective, APPLIED if effective == asked else NOT_APPLIED,
                   _grep(_BACKENDS, ctx["lines"]), source=source)
    return [_superseded(check, ctx, "custom allreduce or not, the step runs the same kernels")]


def nccl_check(ctx: dict, key: str, value: str) -> dict:
    """An NCCL_* environment setting; NCCL_PROTO / NCCL_ALGO against the per-collective choices."""
    eff, lines = ctx["eff"], ctx["lines"]
    if eff["platform"] != "cuda" or ctx["tp"] < 2:
        return _check(key, value, "n/a", NO_EFFECT, [],
                      why=f"{eff['platform']} engine, TP={ctx['tp']}: no NCCL communicator runs the decode")
    env_lines = [ln for ln in _grep(_NCCL_ENV, lines) if f" {key} set by" in ln]
    used = {"NCCL_PROTO": eff["nccl_allreduce_protos"], "NCCL_ALGO": eff["nccl_allreduce_algos"]}.get(key)
    if used:
        tuning = _grep(_NCCL_TUNING, lines)
        effective = ", ".join(f"{k} x{n}" for k, n in sorted(used.items()))
        ok = all(_nccl_allows(value, choice) for choice in used)
        check = _check(key, value, effective, APPLIED if ok else NOT_APPLIED, env_lines[:1] + tuning)
        return _superseded(check, ctx, f"{key} governs only NCCL's own {sum(used.values())} collective(s)")
    if env_lines:
        why = "" if used is None else ("read by NCCL, but no per-collective AllReduce line: set NCCL_DEBUG=INFO "
                                       "NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV to see the protocol used")
        return _check(key, value, eff["nccl_env"].get(key, value), APPLIED if used is None else UNVERIFIED,
                      env_lines, why=why)
    return _check(key, value, "unknown", UNVERIFIED, [],
                  why="NCCL said nothing about it: set NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,ENV")


def env_check(ctx: dict, key: str, value: str) -> dict:
    """Any other environment variable the variant sets (VLLM_USE_FUSED_MOE_GROUPED_TOPK=0, ...):
    vLLM logs no line that says it acted on one, so the most the log shows is that the engine
    was started with it (the runner's `# engine env:` header)."""
    header = [ln for ln in ctx["lines"][:_HEADER_LINES] if ln.startswith(f"# engine env: {key}=")]
    why = ("in the engine's environment; no engine log line says whether it acted on it" if header
           else "not in the engine's environment header, and no engine log line names it")
    return _check(key, value, "set" if header else "unknown", UNVERIFIED, header, why=why)


def _nccl_allows(setting: str, choice: str) -> bool:
    """NCCL_PROTO / NCCL_ALGO syntax: a comma list of allowed values, or ^list of excluded ones."""
    names = {s.strip().upper() for s in setting.lstrip("^").split(",") if s.strip()}
    return (choice.upper() not in names) if setting.startswith("^") else (choice.upper() in names)


def fusion_checks(ctx: dict) -> list[dict]:
    """Each fusion pass asked for (--compilation-config pass_config) or announced by the engine:
    an announcement alone is no proof; a worker's 'disabled' line, or inductor off, disproves it."""
    lines, eff = ctx["lines"], ctx["eff"]
    asked = _asked_fusions(ctx["args"])
    inductor_off = _grep(_INDUCTOR_OFF, lines)
    checks = []
    for name in sorted(set(asked) | set(eff["fusions_announced"])):
        source = "variant" if name in asked else "default"
        contrary = (_grep(_ALLREDUCE_FUSION_OFF, lines) if name == "allreduce_rms" else []) + inductor_off
        announced = [ln for ln in _grep(_FUSIONS, lines) if re.search(rf"\b{re.escape(name)}\b", ln)]
        if contrary:
            checks.append(_check(f"fusion {name}", "on", "off", NOT_APPLIED, contrary + announced[:1], source=source,
                                 why="announced, but the compiler skipped it" if announced else ""))
        elif name == "allreduce_rms" and eff["allreduce_fused"]:
            checks.append(_check(f"fusion {name}", "on", "on", APPLIED,
                                 _grep(_ALLREDUCE_FUSION_ON, lines) + announced[:1], source=source))
        elif ctx["tp"] < 2 and name == "allreduce_rms":
            checks.append(_check(f"fusion {name}", "on", "n/a", NO_EFFECT, announced, source=source,
                                 why="no allreduce at TP=1"))
        else:
            checks.append(_check(f"fusion {name}", "on", "announced" if announced else "unknown", UNVERIFIED,
                                 announced, source=source,
                                 why="only announced: vLLM logs no line when a pass runs (VLLM_LOGGING_LEVEL=DEBUG "
                                     "shows skipped passes)"))
    return checks


def _asked_fusions(args: list[str]) -> list[str]:
    """fuse_* keys set true in --compilation-config / -cc JSON (as `fuse_x` -> `x`)."""
    out = []
    for i, arg in enumerate(args):
        text = None
        if arg in ("--compilation-config", "-cc", "-O") and i + 1 < len(args):
            text = args[i + 1]
        elif arg.startswith(("--compilation-config=", "-cc=")):
            text = arg.split("=", 1)[1]
        try:
            config = json.loads(text) if text else None
        except ValueError:
            continue
        if isinstance(config, dict) and isinstance(config.get("pass_config"), dict):
            out += [k[len("fuse_"):] for k, v in config["pass_config"].items() if k.startswith("fuse_") and v is True]
    return out


def _true_passes(text: str) -> list[str]:
    return sorted(m.group(1)[len("fuse_"):] for m in re.finditer(r"'(fuse_\w+)': True", text))


def _grep(pattern: re.Pattern, lines: list[str]) -> list[str]:
    return [ln for ln in lines if pattern.search(ln)]


def _any(pattern: re.Pattern, lines: list[str]) -> bool:
    return any(pattern.search(ln) for ln in lines)


def _search(pattern: re.Pattern, text: str) -> str | None:
    m = pattern.search(text)
    return m.group(1) if m else None
