"""The contract between the web side (benchsite) and a GPU worker (runners): what a job is, what
it gives back, and the metrics it may report. Pure Python, no Django and no engine import, so
both sides import it; a GPU host runs an older or newer checkout than the web, so the wire
form stays plain JSON (`JobSpec.to_dict()` / `JobSpec.from_dict()`).

    spec = JobSpec.from_dict(message)   # validates; a patch whose sha256 lies is refused
    spec.engine.kind                    # "installed" | "git"
    METRICS[DECODE_TOK_S].direction     # "higher"
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Literal, TypedDict

# --------------------------------------------------------------------------- metrics

Direction = Literal["higher", "lower", "none"]


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    label: str


DECODE_TOK_S = "decode_tok_s"
TTFT_MS = "ttft_ms"
ITL_MS_P50, ITL_MS_P90, ITL_MS_P99 = "itl_ms_p50", "itl_ms_p90", "itl_ms_p99"
CORRECT = "correct"
ALLREDUCE_SHARE = "allreduce_share"
ALLREDUCE_CALLS_PER_STEP = "allreduce_calls_per_step"
ALLREDUCE_US_PER_CALL = "allreduce_us_per_call"
ALLREDUCE_SHARE_ANALYTIC = "allreduce_share_analytic"
CEILING_TOK_S = "ceiling_tok_s"
COMM_US_PER_CALL = "comm_us_per_call"
AB_ALLREDUCE_MS_DELTA = "ab_allreduce_ms_delta"
MEM_BANDWIDTH_GB_S = "mem_bandwidth_gb_s"
WEIGHT_BYTES_PER_GPU = "weight_bytes_per_gpu"
LAUNCH_GAP_MS = "launch_gap_ms"

# The one registry: every metric a job or the service's comparisons may store.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(DECODE_TOK_S, "tok/s", "higher", "decode throughput"),
        Metric(TTFT_MS, "ms", "lower", "time to first token"),
        Metric(ITL_MS_P50, "ms", "lower", "inter-token latency p50"),
        Metric(ITL_MS_P90, "ms", "lower", "inter-token latency p90"),
        Metric(ITL_MS_P99, "ms", "lower", "inter-token latency p99"),
        Metric(CORRECT, "", "higher", "output correct (1 = yes)"),
        Metric(ALLREDUCE_SHARE, "", "lower", "allreduce share of a decode step"),
        Metric(ALLREDUCE_CALLS_PER_STEP, "", "lower", "allreduce calls per decode step"),
        Metric(ALLREDUCE_US_PER_CALL, "us", "lower", "allreduce time per call"),
        Metric(ALLREDUCE_SHARE_ANALYTIC, "", "lower", "allreduce share (analytic, comm probe)"),
        Metric(CEILING_TOK_S, "tok/s", "higher", "decode tok/s if allreduce were free"),
        Metric(COMM_US_PER_CALL, "us", "lower", "allreduce latency (comm probe)"),
        Metric(AB_ALLREDUCE_MS_DELTA, "ms", "lower", "A/B allreduce ms per token vs neighbour"),
        # The memory-bandwidth floor of a decode step: weights each GPU reads per token over the
        # bandwidth a copy benchmark measured on the worker.
        Metric(MEM_BANDWIDTH_GB_S, "GB/s", "none", "device memory bandwidth (copy benchmark)"),
        Metric(WEIGHT_BYTES_PER_GPU, "B", "none", "weight bytes each GPU reads per token"),
        Metric(LAUNCH_GAP_MS, "ms", "lower", "launch gaps per decode step (device idle between kernels)"),
    )
}


def measurement(name: str, value, *, samples=(), ci=None, details=None) -> dict:
    """One measurement as the result carries it; unit and direction come from the registry."""
    m = METRICS[name]
    return {
        "metric": m.name,
        "value": value,
        "unit": m.unit,
        "direction": m.direction,
        "samples": list(samples),
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "details": details or {},
    }


# --------------------------------------------------------------------------- artifacts

GREEDY_ARTIFACT = "greedy.json"  # the correctness probe's output, judged by the service
BUILD_LOG_ARTIFACT = "build.log"
ARTIFACT_KINDS = ("server_log", "build_log", "profiler_trace", "probe_json")

# --------------------------------------------------------------------------- failures and builds

FAILURE_KINDS = ("build", "patch", "engine", "probe", "timeout", "worker")
BUILD_PATHS = ("installed", "overlay", "source")
MAX_PATCH_BYTES = 1024 * 1024

# --------------------------------------------------------------------------- validation


class SpecError(ValueError):
    """A job spec, repository URL or ref is not acceptable (the message says why)."""


_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_REF_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_HTTPS_RE = re.compile(r"^https://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~%+-]+)+/?$")
_SSH_RE = re.compile(r"^ssh://([A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~%+-]+)+/?$")
_SCP_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._~+-][A-Za-z0-9._~/+-]*$")
_FILE_RE = re.compile(r"^file:///[A-Za-z0-9._~/+-]+$")


def is_full_sha(text: str) -> bool:
    return bool(_SHA_RE.match(text or ""))


def check_ref(ref: str) -> str:
    """A branch, tag or commit as git's check-ref-format allows it, and never an option."""
    if not isinstance(ref, str) or not ref:
        raise SpecError("empty ref")
    if len(ref) > 250:
        raise SpecError("ref longer than 250 characters")
    problems = []
    if ref.startswith("-"):
        problems.append("starts with '-'")
    if _REF_BAD_CHARS.search(ref):
        problems.append("contains a space, control character or one of ~^:?*[\\")
    if ".." in ref or "@{" in ref or "//" in ref:
        problems.append("contains '..', '@{' or '//'")
    if ref == "@" or ref.startswith("/") or ref.endswith("/") or ref.endswith("."):
        problems.append("is '@', or starts with '/' or ends with '/' or '.'")
    if any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/")):
        problems.append("has a component starting with '.' or ending with '.lock'")
    if problems:
        raise SpecError(f"invalid ref {ref!r}: " + "; ".join(problems))
    return ref


def check_repo_url(url: str, *, allow_file: bool = False) -> str:
    """https://host/path, ssh://[user@]host/path or user@host:path; file:///path only when
    ALLOW_FILE (a worker setting, used by tests). Nothing that git could read as an option."""
    if not isinstance(url, str) or not url or len(url) > 500:
        raise SpecError("repository URL is empty or longer than 500 characters")
    if url.startswith("-") or any(part in ("..",) for part in url.split("/")):
        raise SpecError(f"repository URL {url!r} refused (leading '-' or a '..' component)")
    if url.startswith("file://"):
        if not allow_file:
            raise SpecError(f"file:// repository URLs are not allowed on this worker: {url!r}")
        if not _FILE_RE.match(url):
            raise SpecError(f"invalid file:// repository URL {url!r}")
        return url
    if _HTTPS_RE.match(url) or _SSH_RE.match(url) or _SCP_RE.match(url):
        return url
    raise SpecError(f"invalid repository URL {url!r}: use https://host/owner/repo(.git) or ssh (git@host:owner/repo.git)")


def patch_sha256(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the job spec


@dataclass(frozen=True)
class PatchSpec:
    name: str
    content: str
    sha256: str = ""
    origin: str = ""  # "benchmark" | "variant" | "run": where the web side took it from

    def __post_init__(self):
        if not isinstance(self.content, str):
            raise SpecError(f"patch {self.name!r}: content must be text")
        size = len(self.content.encode("utf-8"))
        if size > MAX_PATCH_BYTES:
            raise SpecError(f"patch {self.name!r} is {size} bytes; the limit is {MAX_PATCH_BYTES} (1 MiB)")
        actual = patch_sha256(self.content)
        if self.sha256 and self.sha256 != actual:
            raise SpecError(f"patch {self.name!r}: sha256 {self.sha256[:12]} does not match its content ({actual[:12]})")
        object.__setattr__(self, "sha256", actual)


@dataclass(frozen=True)
class EngineSourceSpec:
    kind: Literal["installed", "git"] = "installed"
    repo: str = ""
    ref: str = ""      # what was asked for: branch, tag or commit
    commit: str = ""   # a full SHA when the web side already knows it (a push)

    def __post_init__(self):
        if self.kind not in ("installed", "git"):
            raise SpecError(f"engine source kind {self.kind!r} is not 'installed' or 'git'")
        if self.kind == "git":
            if not self.repo:
                raise SpecError("a git engine source needs a repository URL")
            if not (self.ref or self.commit):
                raise SpecError("a git engine source needs a ref or a commit")
        if self.ref:
            check_ref(self.ref)
        if self.commit and not is_full_sha(self.commit):
            raise SpecError(f"commit {self.commit!r} is not a full 40-character SHA")


@dataclass(frozen=True)
class JobSpec:
    model: str
    prompt: str
    max_tokens: int
    repeats: int
    run_id: int | None = None
    tensor_parallel_size: int = 1
    warmup: int = 1
    engine_args: list[str] = field(default_factory=list)
    engine_env: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 600
    probes: list[str] | None = None  # default: every probe that applies
    engine: EngineSourceSpec = field(default_factory=EngineSourceSpec)
    patches: list[PatchSpec] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict) -> "JobSpec":
        if not isinstance(data, dict):
            raise SpecError("a job spec is a JSON object")
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["engine"] = EngineSourceSpec(**(data.get("engine") or {}))
        values["patches"] = [PatchSpec(**p) for p in data.get("patches") or []]
        for required in ("model", "prompt", "max_tokens", "repeats"):
            if required not in values:
                raise SpecError(f"job spec lacks {required!r}")
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- the result


class BuildInfo(TypedDict, total=False):
    path: str            # one of BUILD_PATHS
    repo: str
    ref: str
    commit: str          # the full SHA that ran ("" for the installed engine without a recorded commit)
    base_commit: str
    engine_version: str
    duration_s: float
    cache_key: str
    cache_hit: bool
    patches: list[str]   # sha256 of each patch applied, in order


class JobResult(TypedDict, total=False):
    run_id: int | None
    engine: dict          # {"startup_s", "version"}
    build: BuildInfo
    measurements: list[dict]
    artifacts: list[dict]  # {"kind": one of ARTIFACT_KINDS, "name", and "content" or "path"} (runners/artifacts.py)
