"""The contract between the web side (benchsite) and a GPU worker (runners): what a job is, what
it gives back, and the metrics it may report. Pure Python, no Django and no engine import, so
both sides import it; a GPU host runs an older or newer checkout than the web, so the wire
form stays plain JSON and every message says which `schema` it follows.

    spec = JobSpec.from_dict(message)   # validates; a patch whose sha256 lies is refused
    spec.engine.kind                    # "installed" | "git"
    result = JobResult.from_dict(data)  # ContractError says what is wrong, field by field
    METRICS[DECODE_TOK_S].direction     # "higher"

Versions: SCHEMA is what this checkout writes. A message without `schema` comes from a checkout
older than the field (the same shape, read as is); one from a newer schema is refused with the
reason, never half read. Adding an optional field keeps the schema; renaming or changing the
meaning of one raises it.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Literal

SCHEMA = 1

# --------------------------------------------------------------------------- metrics

Direction = Literal["higher", "lower", "none"]
# (value, label) pairs: the web side's model choices are built from these tuples.
DIRECTION_CHOICES = (("higher", "higher is better"), ("lower", "lower is better"), ("none", "informational"))
DIRECTIONS = tuple(value for value, _ in DIRECTION_CHOICES)


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    label: str


DECODE_TOK_S = "decode_tok_s"
SLOWEST_STREAM_TOK_S, AGGREGATE_TOK_S = "slowest_stream_tok_s", "aggregate_tok_s"
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
KV_BYTES_PER_TOKEN = "kv_bytes_per_token"
LAUNCH_GAP_MS = "launch_gap_ms"

# The one registry: every metric a job or the service's comparisons may store.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(DECODE_TOK_S, "tok/s", "higher", "decode throughput"),
        # At concurrency N: the lowest clean stream, and all streams' tokens over the repeat's span.
        Metric(SLOWEST_STREAM_TOK_S, "tok/s", "higher", "slowest stream's decode throughput"),
        Metric(AGGREGATE_TOK_S, "tok/s", "higher", "aggregate decode throughput (all streams)"),
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
        # ... plus, at a workload point, every stream's KV cache: bytes per token of context.
        Metric(KV_BYTES_PER_TOKEN, "B", "none", "KV-cache bytes each GPU reads per token of context"),
        Metric(LAUNCH_GAP_MS, "ms", "lower", "launch gaps per decode step (device idle between kernels)"),
    )
}


def declare_metric(metric: Metric) -> Metric:
    """Add a probe's metric to METRICS (a probe module does this on both sides when it is
    loaded); declaring one name twice with different properties is refused."""
    if metric.direction not in DIRECTIONS:
        raise ContractError(f"metric {metric.name!r}: direction {metric.direction!r} is not one of {DIRECTIONS}")
    known = METRICS.get(metric.name)
    if known is not None and known != metric:
        raise ContractError(f"metric {metric.name!r} is already declared as {known}")
    METRICS[metric.name] = metric
    return metric


def judged_metric_names() -> list[str]:
    """The metrics a speed verdict judges: every metric with a direction but 'correct'."""
    return [name for name, m in METRICS.items() if m.direction != "none" and name != CORRECT]


def check_relative(value, what: str) -> float:
    """A relative threshold lies strictly between 0 and 1 (0.005 = 0.5%); ContractError names WHAT."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value < 1:
        raise ContractError(f"{what} must be a relative change above 0 and below 1 (0.005 = 0.5%), not {value!r}")
    return float(value)


def check_judged_metric(name, what: str) -> str:
    """NAME is a metric the service judges; ContractError names WHAT and lists them."""
    if not isinstance(name, str) or name not in judged_metric_names():
        raise ContractError(f"{what} {name!r} names no judged metric; one of: {', '.join(sorted(judged_metric_names()))}")
    return name


def check_thresholds(thresholds) -> dict[str, float]:
    """A benchmark's `thresholds:` map, metric -> relative change (0.01 = 1%)."""
    if not isinstance(thresholds, Mapping):
        raise ContractError(f"thresholds must be a mapping of metric -> relative change, not {type(thresholds).__name__}")
    return {check_judged_metric(k, "thresholds: key"): check_relative(v, f"thresholds: {k}") for k, v in thresholds.items()}


# How a figure was taken, when not the way it always was: `details["method"]` of a measurement
# (e.g. "primed": a point's streams prefilled before the timed window). A series holds one method:
# the service leaves figures of another out of it, so a probe that changes how it measures
# starts new series rather than steps blamed on a commit.
METHOD_KEY = "method"


def method_of(details) -> str:
    """The method a measurement's DETAILS name ("" for the original one)."""
    return (details.get(METHOD_KEY) or "") if isinstance(details, dict) else ""


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
ARTIFACT_KIND_CHOICES = (("server_log", "Server Log"), ("build_log", "Build Log"),
                         ("profiler_trace", "Profiler Trace"), ("probe_json", "Probe Json"))
ARTIFACT_KINDS = tuple(value for value, _ in ARTIFACT_KIND_CHOICES)

# --------------------------------------------------------------------------- failures and builds

FAILURE_KIND_CHOICES = (("build", "Build"), ("patch", "Patch"), ("engine", "Engine"), ("probe", "Probe"),
                        ("timeout", "Timeout"), ("worker", "Worker"))
FAILURE_KINDS = tuple(value for value, _ in FAILURE_KIND_CHOICES)
BUILD_PATH_CHOICES = (("installed", "installed engine"), ("overlay", "Python overlay on the installed engine"),
                      ("source", "source build"))
BUILD_PATHS = tuple(value for value, _ in BUILD_PATH_CHOICES)
MAX_PATCH_BYTES = 1024 * 1024

# --------------------------------------------------------------------------- probes

# The probes a job may name (runners/probes/registry.py runs them); a probe module loaded through
# BENCH_PROBE_MODULES adds its name here (declare_probe) on the worker and on the web side.
BUILTIN_PROBES = ("decode", "correctness", "allreduce", "comm", "share", "membw", "weights")
PROBE_NAMES: set[str] = set(BUILTIN_PROBES)


def declare_probe(name: str) -> str:
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", name):
        raise ContractError(f"probe name {name!r}: use lower-case letters, digits and '_' (at most 40)")
    PROBE_NAMES.add(name)
    return name


def check_probe_names(names) -> list[str] | None:
    """A job's probe list: None (every probe that applies) or known names (SpecError otherwise)."""
    if names is None:
        return None
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise SpecError(f"probes must be a list of probe names, not {names!r}")
    unknown = sorted(set(names) - PROBE_NAMES)
    if unknown:
        raise SpecError(f"unknown probe{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                        f"the known probes are {', '.join(sorted(PROBE_NAMES))}")
    return list(names)

# --------------------------------------------------------------------------- validation


class ContractError(ValueError):
    """A message does not follow the contract (the text says which field and why)."""


class SpecError(ContractError):
    """A job spec, repository URL or ref is not acceptable (the message says why)."""


def check_schema(data: Mapping, what: str) -> int:
    """The schema a message follows: 0 for a checkout older than the field (same shape)."""
    version = data.get("schema", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ContractError(f"{what}: schema {version!r} is not a version number")
    if version > SCHEMA:
        raise ContractError(f"{what} follows schema {version}, newer than this checkout's {SCHEMA}: "
                            "update this side (the web before its GPU workers)")
    return version


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise ContractError(reason)


def _string(value, name: str, limit: int) -> str:
    _require(isinstance(value, str), f"{name} is {type(value).__name__}, not a string")
    _require(len(value) <= limit, f"{name} has {len(value)} characters (limit {limit})")
    return value


def _number(value, name: str) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    _require(ok, f"{name} is {value!r}, not a finite number")
    return value


def _optional_number(value, name: str):
    return None if value is None else _number(value, name)


def _whole(value, name: str, low: int, high: int) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    _require(ok, f"{name} {value!r} is not a whole number from {low} to {high}")
    return value


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


ENGINE_SOURCE_KIND_CHOICES = (("installed", "Installed environment"), ("git", "Git repository + commit"))
ENGINE_SOURCE_KINDS = tuple(value for value, _ in ENGINE_SOURCE_KIND_CHOICES)


@dataclass(frozen=True)
class EngineSourceSpec:
    kind: Literal["installed", "git"] = "installed"
    repo: str = ""
    ref: str = ""      # what was asked for: branch, tag or commit
    commit: str = ""   # a full SHA when the web side already knows it (a push)
    merge_base_with: str = ""  # a branch: measure the merge base of ref (a PR's head) and it

    def __post_init__(self):
        if self.kind not in ENGINE_SOURCE_KINDS:
            raise SpecError(f"engine source kind {self.kind!r} is not 'installed' or 'git'")
        if self.kind == "git":
            if not self.repo:
                raise SpecError("a git engine source needs a repository URL")
            if not (self.ref or self.commit):
                raise SpecError("a git engine source needs a ref or a commit")
        if self.ref:
            check_ref(self.ref)
        if self.merge_base_with:
            check_ref(self.merge_base_with)
            if self.kind != "git":
                raise SpecError("a merge base needs a git engine source")
        if self.commit and not is_full_sha(self.commit):
            raise SpecError(f"commit {self.commit!r} is not a full 40-character SHA")


# --------------------------------------------------------------------------- workload points

MAX_CONCURRENCY = 1024
WORKLOAD_KEYS = ("concurrency", "prompt_tokens", "max_tokens", "request_rate")


@dataclass(frozen=True)
class WorkloadPoint:
    """One load a benchmark measures: CONCURRENCY streams of PROMPT_TOKENS in and MAX_TOKENS out,
    closed-loop, or open-loop Poisson arrivals at REQUEST_RATE requests per second.

    Its id is `c{concurrency}-p{prompt_tokens}-m{max_tokens}` (`-r{rate:g}` with a rate). A point
    without prompt_tokens sends the benchmark's prompt text, whose token count the web side cannot
    know (it has no tokenizer): its id says `p0`. So the single point every benchmark had before
    workloads is `c1-p0-m{max_tokens}` on both sides and in the data migration."""
    max_tokens: int
    concurrency: int = 1
    prompt_tokens: int | None = None
    request_rate: float | None = None

    def __post_init__(self):
        _point_whole(self.concurrency, "concurrency", 1, MAX_CONCURRENCY)
        _point_whole(self.max_tokens, "max_tokens", 1, 1 << 20)
        if self.prompt_tokens is not None:
            _point_whole(self.prompt_tokens, "prompt_tokens", 1, 1 << 22)
        rate = self.request_rate
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                                 or not math.isfinite(rate) or rate <= 0):
            raise SpecError(f"request_rate {rate!r} is not a number of requests per second above 0")

    @property
    def id(self) -> str:
        rate = f"-r{self.request_rate:g}" if self.request_rate is not None else ""
        return f"c{self.concurrency}-p{self.prompt_tokens or 0}-m{self.max_tokens}{rate}"

    @property
    def tokens_per_request(self) -> int:
        return (self.prompt_tokens or 0) + self.max_tokens

    @classmethod
    def from_dict(cls, data, where: str = "workload point") -> "WorkloadPoint":
        """A point as YAML or JSON writes it; SpecError names WHERE and what is wrong."""
        if isinstance(data, WorkloadPoint):
            return data
        if not isinstance(data, Mapping):
            raise SpecError(f"{where}: {data!r} is not a mapping of {', '.join(WORKLOAD_KEYS)}")
        unknown = sorted(set(data) - set(WORKLOAD_KEYS))
        if unknown:
            raise SpecError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                            f"(the keys are {', '.join(WORKLOAD_KEYS)})")
        if "max_tokens" not in data:
            raise SpecError(f"{where}: max_tokens is missing")
        try:
            return cls(**data)
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None

    def to_dict(self) -> dict:
        return {key: getattr(self, key) for key in WORKLOAD_KEYS if getattr(self, key) is not None}


def _point_whole(value, name: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpecError(f"{name} {value!r} is not a whole number from {low} to {high}")


def workload_points(workloads, max_tokens: int) -> list[WorkloadPoint]:
    """A benchmark's points ([] or None: the single point c1-p0-m{max_tokens}); ids are unique."""
    if workloads is None or workloads == []:
        return [WorkloadPoint(max_tokens=int(max_tokens))]
    if not isinstance(workloads, (list, tuple)):
        raise SpecError(f"workloads must be a list of points, not {workloads!r}")
    points = [WorkloadPoint.from_dict(w, f"workload point {i + 1}") for i, w in enumerate(workloads)]
    ids = [p.id for p in points]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise SpecError(f"workload point{'s' if len(repeated) > 1 else ''} {', '.join(repeated)} listed twice")
    return points


def default_point_id(max_tokens: int) -> str:
    """The id of the one point a benchmark without workloads measures (and every older run did)."""
    return WorkloadPoint(max_tokens=int(max_tokens)).id


# What a benchmark gives each of its jobs (the rest comes from the variant and the run).
BENCHMARK_KEYS = ("model", "tensor_parallel_size", "prompt", "max_tokens", "repeats", "warmup", "startup_timeout_s",
                  "probes", "workloads", "packages")
MAX_PACKAGES = 20
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?"
                          r"(\s*(===|==|~=|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+(\s*,\s*(===|==|~=|!=|<=|>=|<|>)\s*"
                          r"[A-Za-z0-9.*+!_-]+)*)?$")


def check_packages(packages) -> list[str]:
    """Extra packages an engine needs (e.g. vllm-gguf-plugin==0.0.5), each a project name with
    optional extras and version specifiers and nothing else: no URL, path, marker or pip option
    (they go to pip's argv on the worker). SpecError names the entry."""
    if packages is None:
        return []
    if not isinstance(packages, list):
        raise SpecError("packages must be a list of requirements, e.g. [\"vllm-gguf-plugin==0.0.5\"]")
    if len(packages) > MAX_PACKAGES:
        raise SpecError(f"packages: at most {MAX_PACKAGES}, got {len(packages)}")
    for i, req in enumerate(packages):
        if not (isinstance(req, str) and len(req) <= 200 and _REQUIREMENT.match(req.strip())):
            raise SpecError(f"packages[{i}]: {req!r} is not a requirement like name==1.2 (a project name, optional "
                            "[extras] and version specifiers; no URL, path, marker or option)")
    return [req.strip() for req in packages]


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
    # default: the single point c1-p0-m{max_tokens}; an older worker ignores the field and measures that
    workloads: list[WorkloadPoint] = field(default_factory=list)
    # installed by the worker from its wheelhouse into the engine's environment (runners/builder/packages.py)
    packages: list[str] = field(default_factory=list)
    schema: int = SCHEMA

    def __post_init__(self):
        object.__setattr__(self, "probes", check_probe_names(self.probes))
        object.__setattr__(self, "packages", check_packages(self.packages))
        object.__setattr__(self, "workloads", workload_points(self.workloads, self.max_tokens))

    @property
    def default_point(self) -> WorkloadPoint:
        """The first point: the one whose figures keep today's keys (decode_tok_s of the run)."""
        return self.workloads[0]

    @classmethod
    def from_dict(cls, data: dict) -> "JobSpec":
        if not isinstance(data, dict):
            raise SpecError("a job spec is a JSON object")
        check_schema(data, "the job spec")
        known = {f.name for f in fields(cls)} - {"schema"}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["engine"] = EngineSourceSpec(**(data.get("engine") or {}))
            values["patches"] = [PatchSpec(**p) for p in data.get("patches") or []]
        except TypeError as exc:  # an unknown or missing key of the engine source or a patch
            raise SpecError(f"job spec: {exc}") from None
        for required in ("model", "prompt", "max_tokens", "repeats"):
            if required not in values:
                raise SpecError(f"job spec lacks {required!r}")
        return cls(**values)

    def to_dict(self) -> dict:
        return {**asdict(self), "workloads": [p.to_dict() for p in self.workloads]}

    @classmethod
    def for_variant(cls, benchmark: Mapping, variant: Mapping, **job) -> "JobSpec":
        """The one way a job is built, by the service and by the offline ladder: the benchmark's
        settings (BENCHMARK_KEYS), its engine arguments and environment with the variant's
        `flags` and `env` on top, and what belongs to this job (run_id, repeats, engine,
        patches). Values of None in JOB are left out (the benchmark's, or the default, stand)."""
        spec = {key: benchmark[key] for key in BENCHMARK_KEYS if benchmark.get(key) is not None}
        spec["engine_args"] = [*(benchmark.get("engine_args") or []), *(variant.get("flags") or [])]
        spec["engine_env"] = {**(benchmark.get("engine_env") or {}), **(variant.get("env") or {})}
        spec.update({key: value for key, value in job.items() if value is not None})
        return cls.from_dict(spec)


# --------------------------------------------------------------------------- the result

# Limits of what one message may carry (a broker message stays small; files travel by reference).
MAX_MEASUREMENTS = 200
MAX_ARTIFACTS = 50
MAX_SAMPLES = 10_000
MAX_INLINE_CHARS = 65_536  # inline content a broker message may carry (small probe JSON)


def _drop_none(data: dict) -> dict:
    return {key: value for key, value in data.items() if value is not None}


@dataclass(frozen=True)
class Measurement:
    """One figure of a job; unit and direction come from METRICS when a probe makes it."""
    metric: str
    value: float
    unit: str = ""
    direction: str = "none"
    samples: list = field(default_factory=list)
    ci_low: float | None = None
    ci_high: float | None = None
    details: dict = field(default_factory=dict)
    sample_flags: list | None = None  # parallel to samples: '' for a clean repeat, else why not
    point: str = ""  # the workload point's id; "": the job's first (an older worker's only) point

    @classmethod
    def of(cls, name: str, value, **options) -> "Measurement":
        """A measurement of a registered metric (contract.measurement's fields)."""
        flags = options.pop("sample_flags", None)
        return cls.from_dict({**measurement(name, value, **options), "sample_flags": flags})

    @classmethod
    def from_dict(cls, m, i: int = 0) -> "Measurement":
        _require(isinstance(m, dict), f"measurement {i} is not an object")
        _string(m.get("metric"), f"measurement {i} metric", 100)
        _number(m.get("value"), f"measurement {i} value")
        _string(m.get("unit", ""), f"measurement {i} unit", 20)
        _require(m.get("direction", "none") in DIRECTIONS,
                 f"measurement {i} direction {m.get('direction')!r} is not one of {list(DIRECTIONS)}")
        samples = m.get("samples", [])
        _require(isinstance(samples, list) and len(samples) <= MAX_SAMPLES, f"measurement {i} samples is not a list")
        for s in samples:
            _optional_number(s, f"measurement {i} sample")
        _optional_number(m.get("ci_low"), f"measurement {i} ci_low")
        _optional_number(m.get("ci_high"), f"measurement {i} ci_high")
        _require(isinstance(m.get("details", {}), dict), f"measurement {i} details is not an object")
        flags = m.get("sample_flags")
        _string(m.get("point", ""), f"measurement {i} point", 100)
        return cls(metric=m["metric"], value=m["value"], unit=m.get("unit", ""), direction=m.get("direction", "none"),
                   samples=list(samples), ci_low=m.get("ci_low"), ci_high=m.get("ci_high"),
                   details=dict(m.get("details", {})), sample_flags=flags if isinstance(flags, list) else None,
                   point=m.get("point", ""))

    def to_dict(self) -> dict:
        out = asdict(self)
        if self.sample_flags is None:
            del out["sample_flags"]
        if not self.point:  # the wire form of a single-point job stays as it was
            del out["point"]
        return out

    def clean_sample_flags(self) -> list[str]:
        """The probe's flag per repeat ('' clean, else why it stays out of every statistic); flags
        that do not line up with the samples are dropped (an older worker sends none)."""
        flags = self.sample_flags
        if not isinstance(flags, list) or len(flags) != len(self.samples):
            return []
        return [str(f or "")[:40] for f in flags]


@dataclass(frozen=True)
class ArtifactRef:
    """An artifact as a job names it: inline `content`, or a `path` on the worker; once the GPU
    worker stored it, a `file` in the artifact storage (size, sha256), or the `error` that kept
    it out (runners/outputs/artifacts.py, benchsite's artifact storage)."""
    kind: str
    name: str
    content: str | None = None
    path: str | None = None
    file: str | None = None
    size: int | None = None
    sha256: str | None = None
    error: str | None = None

    @classmethod
    def from_dict(cls, artifact, i: int = 0, *, broker: bool = False) -> "ArtifactRef":
        """BROKER: what crosses the broker holds references or small inline content only."""
        _require(isinstance(artifact, dict), f"artifact {i} is not an object")
        _string(artifact.get("kind"), f"artifact {i} kind", 20)
        _string(artifact.get("name"), f"artifact {i} name", 200)
        if "file" in artifact:  # a reference to what the worker stored; the web side checks it is this run's
            _string(artifact["file"], f"artifact {i} file", 500)
            _require(isinstance(artifact.get("size"), int) and not isinstance(artifact.get("size"), bool)
                     and artifact["size"] >= 0, f"artifact {i} size {artifact.get('size')!r} is not a byte count")
            _require(isinstance(artifact.get("sha256"), str) and bool(_SHA256_RE.match(artifact["sha256"])),
                     f"artifact {i} sha256 is not 64 hex digits")
        elif "error" in artifact:  # the worker could not store it (disk full...): the run says why
            _string(artifact["error"], f"artifact {i} error", 2000)
        elif broker or "path" not in artifact:  # inline: small probe JSON only; files never cross the broker
            _string(artifact.get("content"), f"artifact {i} content", MAX_INLINE_CHARS if broker else 1 << 40)
        else:
            _string(artifact["path"], f"artifact {i} path", 4096)
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in artifact.items() if key in known})

    def to_dict(self) -> dict:
        return _drop_none(asdict(self))


_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
HOST_FINGERPRINT_FIELDS = ("gpu_model", "gpu_count", "driver", "cpu_model")  # the host name is not part of it


@dataclass(frozen=True)
class HostInfo:
    """The machine a job ran on (runners.hostinfo.host_info): its fingerprint fields, its name,
    and what else the worker reports (platform, python, torch...) in `extra`."""
    hostname: str = ""
    gpu_model: str = ""
    gpu_count: int = 0
    driver: str = ""
    cpu_model: str = ""
    extra: dict = field(default_factory=dict)
    has_fingerprint: bool = True  # False: an older report without the fingerprint fields

    @classmethod
    def from_dict(cls, host) -> "HostInfo":
        _require(isinstance(host, dict), "host is not an object")
        for key in ("hostname", "gpu_model", "driver", "cpu_model"):
            _string(host.get(key, ""), f"host {key}", 200)
        _whole(host.get("gpu_count", 0), "host gpu_count", 0, 1024)
        named = {"hostname", *HOST_FINGERPRINT_FIELDS}
        return cls(**{key: host[key] for key in named if key in host},
                   extra={k: v for k, v in host.items() if k not in named},
                   has_fingerprint=any(key in host for key in HOST_FINGERPRINT_FIELDS))

    def to_dict(self) -> dict:
        out = {**self.extra, "hostname": self.hostname}
        if self.has_fingerprint:
            out.update({key: getattr(self, key) for key in HOST_FINGERPRINT_FIELDS})
        return out


def _text(value, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class BuildInfo:
    """What the worker built (runners/builder): unset fields are None and stay off the wire."""
    path: str | None = None            # one of BUILD_PATHS ("" when the build failed before choosing)
    repo: str | None = None
    ref: str | None = None
    commit: str | None = None          # the full SHA that ran ("" for the installed engine without a recorded one)
    base_commit: str | None = None
    engine_version: str | None = None
    duration_s: float | None = None
    cache_key: str | None = None
    cache_hit: bool | None = None
    patches: list | None = None        # sha256 of each patch applied, in order
    branch: str | None = None          # the ref asked for, when it is a branch of the repository
    parent: str | None = None          # the commit's first parent ("" for a root commit)
    first_parent_depth: int | None = None  # commits on its first-parent history, itself included

    @classmethod
    def from_dict(cls, build) -> "BuildInfo | None":
        """Lenient, as the web side always was: a value of the wrong type is read as unset."""
        if build is None:
            return None
        _require(isinstance(build, dict), "build is not an object")
        limits = {"path": 10, "repo": 500, "ref": 250, "commit": 64, "base_commit": 64, "engine_version": 100,
                  "cache_key": 64, "branch": 250, "parent": 64}
        values = {key: _text(build[key], limit) for key, limit in limits.items() if key in build}
        duration = build.get("duration_s")
        values["duration_s"] = duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
        values["cache_hit"] = build.get("cache_hit") if isinstance(build.get("cache_hit"), bool) else None
        values["first_parent_depth"] = _count(build.get("first_parent_depth"))
        patches = build.get("patches")
        values["patches"] = [p for p in patches if isinstance(p, str)] if isinstance(patches, list) else None
        return cls(**values)

    def to_dict(self) -> dict:
        return _drop_none(asdict(self))

    def __bool__(self) -> bool:
        return bool(self.to_dict())


@dataclass
class JobResult:
    """What a job gives back. The GPU worker adds `host` and turns artifact paths into stored
    references before the result crosses the broker (`to_dict()`); the web side reads it back
    with `from_dict(data, broker=True)`."""
    run_id: int | None = None
    engine: dict = field(default_factory=dict)  # {"startup_s", "version"}
    build: BuildInfo | None = None
    took_effect: dict = field(default_factory=dict)  # runners.analysis.evidence.took_effect
    measurements: list[Measurement] = field(default_factory=list)
    artifacts: list[ArtifactRef] = field(default_factory=list)
    host: HostInfo | None = None
    phases: list[dict] = field(default_factory=list)  # [{"phase", "duration_s"}] in the order they ran
    notes: list[str] = field(default_factory=list)    # what the probes said beside their figures
    schema: int = SCHEMA

    @classmethod
    def from_dict(cls, data, *, broker: bool = False) -> "JobResult":
        _require(isinstance(data, dict), "the result is not an object")
        check_schema(data, "the result")
        measurements = data.get("measurements", [])
        _require(isinstance(measurements, list) and len(measurements) <= MAX_MEASUREMENTS,
                 f"measurements must be a list of at most {MAX_MEASUREMENTS}")
        run_id = data.get("run_id")
        return cls(
            run_id=run_id if isinstance(run_id, int) and not isinstance(run_id, bool) else None,
            engine=data.get("engine") if isinstance(data.get("engine"), dict) else {},
            measurements=[Measurement.from_dict(m, i) for i, m in enumerate(measurements)],
            artifacts=artifacts_from_list(data.get("artifacts", []), broker=broker),
            build=BuildInfo.from_dict(data.get("build") or {}) or None,
            host=HostInfo.from_dict(data["host"]) if data.get("host") else None,
            took_effect=data.get("took_effect") if isinstance(data.get("took_effect"), dict) else {},
            phases=[p for p in data.get("phases") or [] if isinstance(p, dict)],
            notes=[n for n in data.get("notes") or [] if isinstance(n, str)],
        )

    def to_dict(self) -> dict:
        out = {"schema": self.schema, "run_id": self.run_id, "engine": self.engine,
               "build": self.build.to_dict() if self.build is not None else {}, "took_effect": self.took_effect,
               "measurements": [m.to_dict() for m in self.measurements],
               "artifacts": [a.to_dict() for a in self.artifacts], "phases": self.phases, "notes": self.notes}
        if self.host is not None:
            out["host"] = self.host.to_dict()
        return out

    def measurement(self, metric: str, point: str = "") -> Measurement | None:
        """METRIC's measurement; of POINT (an id) when given, else the first of any point."""
        return next((m for m in self.measurements if m.metric == metric and (not point or m.point == point)), None)


def artifacts_from_list(artifacts, *, broker: bool = False) -> list[ArtifactRef]:
    _require(isinstance(artifacts, list) and len(artifacts) <= MAX_ARTIFACTS,
             f"artifacts must be a list of at most {MAX_ARTIFACTS}")
    return [ArtifactRef.from_dict(a, i, broker=broker) for i, a in enumerate(artifacts)]


# --------------------------------------------------------------------------- the offline ladder file

LADDER_FORMAT = "decode-bench-ladder/1"


@dataclass
class LadderFile:
    """A benchmark's whole ladder, run offline (`python -m runners ladder`) and imported by the
    service (`manage.py bench_import`): the benchmark, its variants, the host, one entry per run
    ({"variant", "state", "started_at", "finished_at", and "result" or "error"/"artifacts"})."""
    benchmark: dict
    variants: list[dict] = field(default_factory=list)
    host: dict = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)
    format: str = LADDER_FORMAT

    @classmethod
    def from_dict(cls, data) -> "LadderFile":
        _require(isinstance(data, dict), "a ladder file is a JSON object")
        if data.get("format") != LADDER_FORMAT:
            raise ContractError(f"not a ladder result file (format {data.get('format')!r}, expected {LADDER_FORMAT!r})")
        benchmark = data.get("benchmark")
        _require(isinstance(benchmark, dict), "the ladder file's benchmark is not an object")
        try:
            check_probe_names(benchmark.get("probes"))
        except SpecError as exc:
            raise ContractError(f"the ladder file's benchmark: {exc}") from None
        for key in ("variants", "runs"):
            _require(isinstance(data.get(key, []), list) and all(isinstance(v, dict) for v in data.get(key, [])),
                     f"the ladder file's {key} is not a list of objects")
        _require(isinstance(data.get("host", {}), dict), "the ladder file's host is not an object")
        return cls(benchmark=benchmark, variants=data.get("variants", []), host=data.get("host", {}),
                   runs=data.get("runs", []))

    def to_dict(self) -> dict:
        return {"format": self.format, "benchmark": self.benchmark, "variants": self.variants, "host": self.host,
                "runs": self.runs}
