"""The contract between the web side (benchsite) and a GPU worker (runners): what a job is, what
it gives back, and the metrics it may report. Pure Python, no Django and no engine import, so
both sides import it; a GPU host runs an older or newer checkout than the web, so the wire
form stays plain JSON and every message says which `schema` it follows.

    spec = JobSpec.from_dict(message)   # validates; a patch whose sha256 lies is refused
    spec.engine.kind                    # "installed" | "git"
    result = JobResult.from_dict(data)  # ContractError says what is wrong, field by field
    METRICS[DECODE_TOK_S].direction     # "higher"

The job spec's every shape is made here ("the job spec's shapes" below): the template a run is
kept with (spec_template, template_like), its key and settings digest (spec_key,
settings_digest: what counts as a setting is decided here), and the spec it is sent (spec_sent).

Versions: SCHEMA is what this checkout writes. A message without `schema` comes from a checkout
older than the field (the same shape, read as is); one from a newer schema is refused with the
reason, never half read. Adding an optional field keeps the schema; renaming or changing the
meaning of one raises it, with the step that turns an older message into today's
(upgrade_message). An older worker's task arguments are read by upgrade().
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
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

# Every metric a job or the service's comparisons may store. Each probe declares the metrics it
# makes (name, unit, direction, label) in its own module, and runners.probes.registry adds them
# here when the probe registers, on the GPU worker and on the web side; the names above are
# those the service itself refers to (pages, comparisons, judgements).
METRICS: dict[str, Metric] = {}


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
# The kinds of artifact a job leaves: the one list (storage, retention and the runner read it here).
SERVER_LOG, BUILD_LOG, PROFILER_TRACE, PROBE_JSON = "server_log", "build_log", "profiler_trace", "probe_json"
ARTIFACT_KIND_CHOICES = ((SERVER_LOG, "Server Log"), (BUILD_LOG, "Build Log"),
                         (PROFILER_TRACE, "Profiler Trace"), (PROBE_JSON, "Probe Json"))
TEXT_ARTIFACT_KINDS = (SERVER_LOG, BUILD_LOG, PROBE_JSON)
ARTIFACT_KINDS = tuple(value for value, _ in ARTIFACT_KIND_CHOICES)

# --------------------------------------------------------------------------- failures and builds

FAILURE_KIND_CHOICES = (("build", "Build"), ("patch", "Patch"), ("engine", "Engine"), ("probe", "Probe"),
                        ("timeout", "Timeout"), ("worker", "Worker"))
FAILURE_KINDS = tuple(value for value, _ in FAILURE_KIND_CHOICES)
BUILD_PATH_CHOICES = (("installed", "installed engine"), ("overlay", "Python overlay on the installed engine"),
                      ("source", "source build"))
BUILD_PATHS = tuple(value for value, _ in BUILD_PATH_CHOICES)
MAX_PATCH_BYTES = 1024 * 1024

# --------------------------------------------------------------------------- tasks

# The Celery tasks between the two sides: both take the names from here. A GPU host may run an
# older or newer checkout than the web side, so a name never changes.
EXECUTE_RUN = "bench.execute_run"          # web -> gpu.<pool>: run_id, spec, batch
CLAIM_RUN = "bench.claim_run"              # the rest: gpu -> web
RECORD_PROGRESS = "bench.record_progress"
RECORD_RESULT = "bench.record_result"
RECORD_FAILURE = "bench.record_failure"
RECORD_WORKER = "bench.record_worker"
RECORD_HOST_HEALTH = "regressions.record_host_health"

# The arguments of each message a worker sends, in the order it sends them: any worker may send
# the leading ones positionally and the rest by name; an older worker leaves out trailing ones.
TASK_PARAMETERS = {
    CLAIM_RUN: ("run_id", "task_id", "worker_host", "attempt"),
    RECORD_PROGRESS: ("run_id", "phase", "state", "task_id", "log_tail"),
    RECORD_RESULT: ("run_id", "result", "task_id"),
    RECORD_FAILURE: ("run_id", "error", "artifacts", "failure_kind", "build", "task_id"),
    RECORD_WORKER: ("worker", "pools"),
}
POOL_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"  # a GPU pool's name (queue gpu.<pool>)


def upgrade(task: str, args, kwargs) -> dict:
    """A worker's message for TASK, as any checkout sends it (positional or named arguments, the
    trailing ones left out by older workers), as today's fields by name; the one place where an
    older worker's form of the arguments is read (a result's own schema: upgrade_message; an
    older ladder file's: LadderFile.from_dict). Too many arguments or an unknown name is refused
    (ContractError)."""
    names = TASK_PARAMETERS[task]
    _require(isinstance(args, (list, tuple)) and isinstance(kwargs, Mapping),
             f"{task}: arguments are not a list and a map")
    _require(len(args) <= len(names), f"{task}: {len(args)} arguments, at most {len(names)}")
    named = dict(zip(names, args))
    for key, value in kwargs.items():
        _require(key in names, f"{task}: unknown argument {key!r}")
        _require(key not in named, f"{task}: argument {key!r} given twice")
        named[key] = value
    return named


# --------------------------------------------------------------------------- probes

# The probes a job may name: each probe adds its name here when it registers
# (runners/probes/registry.py: the built-in ones and BENCH_PROBE_MODULES') on the worker and on
# the web side.
PROBE_NAMES: set[str] = set()


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


# How a message of each schema (a job spec, a result) differs from the next schema's:
# _SCHEMA_STEPS[n] turns one of schema n into one of n + 1, or refuses it (ContractError naming
# the field it cannot carry over). Schema 0 is a message without `schema` (a checkout older than
# the field): the same shape as 1. The fields added since (a spec's workloads, packages and
# engine merge_base_with; a result's phases, notes, took_effect and host fingerprint; a
# measurement's point and sample_flags) are optional and read as before when absent, so they
# kept the schema; renaming a field or changing what one means raises SCHEMA and adds a step.
def _same_shape(message: dict) -> dict:
    return message


_SCHEMA_STEPS = {0: _same_shape}


def upgrade_message(data: Mapping, what: str) -> dict:
    """DATA (a job spec or a result) of any schema up to SCHEMA as today's shape, each step after
    its own schema applied; a newer schema, or a field no step can carry over, is refused."""
    message = dict(data)
    for version in range(check_schema(data, what), SCHEMA):
        message = _SCHEMA_STEPS[version](message)
    return {**message, "schema": SCHEMA}


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
        data = upgrade_message(data, "the job spec")
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


# --------------------------------------------------------------------------- the job spec's shapes
#
# One job spec, made here in each of its forms; the service reads its database into plain values
# and calls these (benchsite/bench/lifecycle/jobspec.py), the worker reads what it is sent:
#
#   template     what a run of a variant is sent, less what the run holds itself (RunOwn, null in
#                its place): spec_template, or template_like for another commit of a kept one.
#                Both validate the whole job (JobSpec), once: the service's edge.
#   kept spec    a template as the service stores it, one row per spec_key; settings_digest is
#                what in it can move a figure (runs of other settings are other series).
#   sent spec    a template filled with its run's own values: spec_sent, in today's shape, not
#                validated again (nothing in it is new since the template was).
#   JobSpec      the sent spec read by the worker (JobSpec.from_dict): the worker's edge.

RUN_ENGINE_FIELDS = ("ref", "commit", "merge_base_with")  # the engine values a template leaves to the run
# What a template holds that cannot move a figure: how many timed repeats (the precision, not the
# level), how long the engine may take to start, the run's id and the spec's format.
UNSETTLED_KEYS = ("run_id", "repeats", "startup_timeout_s", "schema")
ENGINE_SETTINGS = ("kind", "repo")  # of the engine source: not its ref or commit (the series' timeline)
# What spec_template reads of a benchmark and of a variant (JobSpec.for_variant's keys), and which
# of them are settings (a change to one starts new series).
BENCHMARK_FIELDS = (*BENCHMARK_KEYS, "engine_args", "engine_env")
VARIANT_FIELDS = ("flags", "env")
BENCHMARK_SETTINGS = tuple(key for key in BENCHMARK_FIELDS if key not in UNSETTLED_KEYS)
VARIANT_SETTINGS = VARIANT_FIELDS


@dataclass(frozen=True)
class RunOwn:
    """What a run holds itself, which its template leaves null: its id, the engine's ref (what its
    trigger asked for, else its commit), the full SHA given at the trigger, the merge base branch,
    and the patches uploaded with it (patch_entry dicts), which follow the template's."""
    run_id: int | None = None
    ref: str = ""
    commit: str = ""
    merge_base_with: str = ""
    patches: tuple = ()


def patch_entry(name: str, content: str, sha256: str, origin: str) -> dict:
    """One patch of a spec as JobSpec.to_dict writes it; ORIGIN: "benchmark", "variant" or "run"."""
    return {"name": name, "content": content, "sha256": sha256, "origin": origin}


def job_engine(source: Mapping | None, run: RunOwn) -> dict:
    """The engine source RUN is sent, from SOURCE ({"kind", "repo", "default_ref"}; None: the
    installed engine): the repository at the run's ref, else the default ref, else its commit;
    with a merge base, the worker resolves that of the ref and the branch."""
    if source is None or source.get("kind") != "git":
        return {"kind": "installed"}
    commit = run.commit if is_full_sha(run.commit) else ""
    if run.merge_base_with:
        return {"kind": "git", "repo": source.get("repo", ""), "ref": run.ref, "merge_base_with": run.merge_base_with}
    return {"kind": "git", "repo": source.get("repo", ""), "ref": run.ref or source.get("default_ref") or commit,
            "commit": commit}


def _engine_kept(engine: dict, run: RunOwn) -> dict:
    """ENGINE with null where it is RUN's own ref, commit or merge base."""
    if engine.get("kind") == "git":
        own = {"ref": run.ref, "commit": run.commit if is_full_sha(run.commit) else "",
               "merge_base_with": run.merge_base_with}
        for key in RUN_ENGINE_FIELDS:
            if own[key] and engine.get(key) == own[key]:
                engine[key] = None
    return engine


def spec_template(benchmark: Mapping, variant: Mapping, *, source: Mapping | None, run: RunOwn,
                  repeats: int | None = None, patches=()) -> dict:
    """What RUN, a run of VARIANT, is sent, less what it holds itself: JobSpec.for_variant's job
    with the engine of SOURCE (job_engine) and PATCHES (the benchmark's and the variant's), then
    RUN's own ref, commit, merge base and patches left out. The whole job, RUN's patches with it,
    is validated here: SpecError when it is not one a worker would run."""
    job = JobSpec.for_variant(benchmark, variant, repeats=repeats or None, engine=job_engine(source, run),
                              patches=[*patches, *run.patches])
    template = job.to_dict()
    template["patches"] = template["patches"][:len(template["patches"]) - len(run.patches)]
    template["engine"] = _engine_kept(template["engine"], run)
    return template


def template_like(kept: Mapping, *, default_ref: str, run: RunOwn, repeats: int | None = None) -> dict:
    """KEPT (another run's template) for RUN, a run of another commit: its settings (all that
    settings_digest reads) as they were, the engine's ref, commit and merge base RUN's (DEFAULT_REF:
    the benchmark's now), its repeats REPEATS (None: the kept ones). Validated as spec_template's."""
    template = copy.deepcopy(dict(kept))
    engine = template.get("engine") or {}
    if engine.get("kind") == "git":
        source = {"kind": "git", "repo": engine["repo"], "default_ref": default_ref}
        template["engine"] = _engine_kept(job_engine(source, run), run)
    if repeats is not None:
        template["repeats"] = repeats
    JobSpec.from_dict(spec_sent(template, run))
    return template


def spec_sent(template: Mapping, run: RunOwn) -> dict:
    """The spec RUN is sent: its TEMPLATE with the run's own values put back, in today's shape
    (spec_shape). Not validated: the template was, when it was made, and the worker validates
    what it receives."""
    spec = copy.deepcopy(dict(template))
    spec["run_id"] = run.run_id
    engine = spec.get("engine") or {}
    for key in RUN_ENGINE_FIELDS:
        if key in engine and engine[key] is None:
            engine[key] = getattr(run, key)
    spec["engine"] = engine
    spec["patches"] = [*(spec.get("patches") or []), *run.patches]
    return spec_shape(spec)


def _in_order(cls, values: Mapping) -> dict:
    """VALUES as the dataclass CLS's fields, in their order: a missing one its default (None without one)."""
    def default(f):
        return f.default_factory() if f.default_factory is not MISSING else None if f.default is MISSING else f.default
    return {f.name: values[f.name] if f.name in values else default(f) for f in fields(cls)}


def spec_shape(spec: Mapping) -> dict:
    """SPEC, a valid spec of this or an older checkout, as JobSpec.to_dict writes it, without
    validating it again: its fields in order (none else), the engine source's and each patch's
    fields all there (a template kept by template_like lacks the ones its engine does not use),
    the default workload point when it lists none, and today's schema."""
    shaped = _in_order(JobSpec, spec)
    shaped["engine"] = _in_order(EngineSourceSpec, shaped["engine"] or {})
    shaped["patches"] = [_in_order(PatchSpec, patch) for patch in shaped["patches"] or []]
    if not shaped["workloads"] and isinstance(shaped["max_tokens"], int):
        shaped["workloads"] = [WorkloadPoint(max_tokens=int(shaped["max_tokens"])).to_dict()]
    shaped["schema"] = SCHEMA
    return shaped


def canonical_json(spec: Mapping) -> str:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256_of(value) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def spec_key(template: Mapping) -> str:
    """What a kept template is found by: the sha256 of its canonical JSON."""
    return _sha256_of(template)


def settings_digest(template: Mapping) -> str:
    """The sha256 of what in TEMPLATE (a kept spec) can move a figure: the model, prompt, tokens,
    warm-up, tensor parallelism, engine arguments and environment, workloads (they size the
    engine), probes (they add engine arguments), packages, the patches' content (their sha256) and
    the engine's ENGINE_SETTINGS; not its ref or commit (which code runs is the series' timeline)
    nor UNSETTLED_KEYS. Runs of a benchmark whose settings differ are not one series."""
    settings = {key: value for key, value in template.items() if key not in UNSETTLED_KEYS}
    engine = settings.get("engine") or {}
    settings["engine"] = {key: engine.get(key) for key in ENGINE_SETTINGS}
    settings["patches"] = [patch.get("sha256") for patch in settings.get("patches") or []]
    return _sha256_of(settings)


# --------------------------------------------------------------------------- the result

# Limits of what one message may carry (a broker message stays small; files travel by reference).
MAX_MEASUREMENTS = 200
MAX_ARTIFACTS = 50
MAX_SAMPLES = 10_000
MAX_INLINE_CHARS = 65_536  # inline content a broker message may carry (small probe JSON)


def _drop_none(data: dict) -> dict:
    return {key: value for key, value in data.items() if value is not None}


def aligned_flags(samples, flags) -> list | None:
    """FLAGS when they line up with SAMPLES, one per repeat ('' for a clean one); None when they
    do not (an older worker sent none): then no repeat is flagged."""
    return flags if isinstance(flags, list) and len(flags) == len(samples or []) else None


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
        return [str(f or "")[:40] for f in aligned_flags(self.samples, self.sample_flags) or []]


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

    @property
    def fingerprint(self) -> str:
        """host_fingerprint of its fields; "" for an older report without them (its host name stands)."""
        return host_fingerprint(self.to_dict()) if self.has_fingerprint else ""


def host_fingerprint(info: Mapping) -> str:
    """The readable fingerprint of a host's fields: runs with equal fingerprints are comparable machines."""
    if not info.get("gpu_count"):
        gpus = "no GPU"
    else:
        gpus = f"{info['gpu_count']}x {info.get('gpu_model') or 'unknown GPU'}"
        gpus += f", driver {info['driver']}" if info.get("driver") else ", driver unknown"
    return f"{gpus}, {info.get('cpu_model') or 'unknown CPU'}"


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


def _finite_or_none(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


@dataclass(frozen=True)
class EngineInfo:
    """The engine a job started: seconds until it answered, and the version it reported."""
    startup_s: float | None = None
    version: str | None = None

    @classmethod
    def from_dict(cls, engine) -> "EngineInfo":
        """Lenient, as the web side always was: a field of the wrong type is read as unset."""
        engine = engine if isinstance(engine, dict) else {}
        version = engine.get("version")
        return cls(startup_s=_finite_or_none(engine.get("startup_s")),
                   version=version[:100] if isinstance(version, str) else None)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PhaseTime:
    """How long one phase of the job took (runners.job's phase names: "starting engine", "probing decode"...)."""
    phase: str
    duration_s: float | None = None  # None: not a number in the message (it counts in no total)

    @classmethod
    def from_dict(cls, entry: dict) -> "PhaseTime":
        return cls(phase=_text(entry.get("phase"), 100), duration_s=_finite_or_none(entry.get("duration_s")))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SettingCheck:
    """Whether one setting took effect, judged from the engine's start-up log (runners.analysis.evidence)."""
    setting: str
    asked: str = ""
    effective: str = ""
    verdict: str = ""                      # applied, not applied, superseded, no effect, unverified
    evidence: list = field(default_factory=list)  # the log lines that say so
    source: str = "variant"                # "variant": asked for; "default": the engine's own, information only
    why: str = ""
    flag: bool = False                     # asked for and without effect: the run's figure is not its effect

    @classmethod
    def from_dict(cls, check: dict) -> "SettingCheck":
        texts = {key: _text(check.get(key), 2000) for key in ("setting", "asked", "effective", "verdict", "why")}
        evidence = check.get("evidence")
        return cls(**texts, evidence=[e for e in evidence if isinstance(e, str)] if isinstance(evidence, list) else [],
                   source=_text(check.get("source"), 20) or "variant", flag=check.get("flag") is True)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TookEffect:
    """The took-effect report of a job (runners.analysis.evidence.took_effect): the configuration
    the engine reported, one check per setting, the settings flagged, and a summary."""
    effective: dict = field(default_factory=dict)
    checks: list[SettingCheck] = field(default_factory=list)
    flagged: bool = False
    flagged_settings: list[str] = field(default_factory=list)
    summary: str = ""

    @classmethod
    def from_dict(cls, report) -> "TookEffect | None":
        """None when there is no report (no engine log); lenient about its fields, as the web side always was."""
        if not isinstance(report, dict) or not report:
            return None
        checks, flagged = report.get("checks"), report.get("flagged_settings")
        checks = [SettingCheck.from_dict(c) for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []
        return cls(effective=report.get("effective") if isinstance(report.get("effective"), dict) else {},
                   checks=checks, flagged=report.get("flagged") is True,
                   flagged_settings=[f for f in flagged if isinstance(f, str)] if isinstance(flagged, list) else [],
                   summary=_text(report.get("summary"), 2000))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class JobResult:
    """What a job gives back. The GPU worker adds `host` and turns artifact paths into stored
    references before the result crosses the broker (`to_dict()`); the web side reads it back
    with `from_dict(data, broker=True)`."""
    run_id: int | None = None
    engine: EngineInfo = field(default_factory=EngineInfo)
    build: BuildInfo | None = None
    took_effect: TookEffect | None = None  # None: no engine log to read it from
    measurements: list[Measurement] = field(default_factory=list)
    artifacts: list[ArtifactRef] = field(default_factory=list)
    host: HostInfo | None = None
    phases: list[PhaseTime] = field(default_factory=list)  # in the order they ran
    notes: list[str] = field(default_factory=list)    # what the probes said beside their figures
    schema: int = SCHEMA

    @classmethod
    def from_dict(cls, data, *, broker: bool = False) -> "JobResult":
        _require(isinstance(data, dict), "the result is not an object")
        data = upgrade_message(data, "the result")
        measurements = data.get("measurements", [])
        _require(isinstance(measurements, list) and len(measurements) <= MAX_MEASUREMENTS,
                 f"measurements must be a list of at most {MAX_MEASUREMENTS}")
        run_id = data.get("run_id")
        return cls(
            run_id=run_id if isinstance(run_id, int) and not isinstance(run_id, bool) else None,
            engine=EngineInfo.from_dict(data.get("engine")),
            measurements=[Measurement.from_dict(m, i) for i, m in enumerate(measurements)],
            artifacts=artifacts_from_list(data.get("artifacts", []), broker=broker),
            build=BuildInfo.from_dict(data.get("build") or {}) or None,
            host=HostInfo.from_dict(data["host"]) if data.get("host") else None,
            took_effect=TookEffect.from_dict(data.get("took_effect")),
            phases=[PhaseTime.from_dict(p) for p in data.get("phases") or [] if isinstance(p, dict)],
            notes=[n for n in data.get("notes") or [] if isinstance(n, str)],
        )

    def to_dict(self) -> dict:
        out = {"schema": self.schema, "run_id": self.run_id, "engine": self.engine.to_dict(),
               "build": self.build.to_dict() if self.build is not None else {},
               "took_effect": self.took_effect.to_dict() if self.took_effect is not None else {},
               "measurements": [m.to_dict() for m in self.measurements],
               "artifacts": [a.to_dict() for a in self.artifacts], "phases": [p.to_dict() for p in self.phases],
               "notes": self.notes}
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
        host = data.get("host", {})
        return cls(benchmark=benchmark, variants=data.get("variants", []), host=host,
                   runs=[_ladder_run(entry, host) for entry in data.get("runs", [])])

    def to_dict(self) -> dict:
        return {"format": self.format, "benchmark": self.benchmark, "variants": self.variants, "host": self.host,
                "runs": self.runs}


def _ladder_run(entry: dict, host: dict) -> dict:
    """A run of a ladder file as today's: an older file's results carry no host of their own, so
    the file's host is theirs when it has the fingerprint fields."""
    result = entry.get("result")
    if not isinstance(result, dict) or result.get("host") or not any(key in host for key in HOST_FINGERPRINT_FIELDS):
        return entry
    return {**entry, "result": {**result, "host": host}}
