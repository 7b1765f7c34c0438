"""Probes as plug-ins: what a probe is (the Probe protocol) and which ones a job runs.

A probe has a name (what a job spec's `probes` lists), a stage, the metrics it declares, the
engine arguments it needs, and `run(ctx) -> ProbeOutput`. runners.job runs the stages in order:

    before   the GPUs are free, no engine yet (comm latency, memory bandwidth)
    engine   against the running engine (decode, correctness, the allreduce profile)
    after    the engine is stopped; reads what the earlier probes left in ctx.outputs

Each probe is a plug-in: one module holding its class, the metrics it declares (name, unit,
direction, label), its measurement builders, and `register(probe)` at import. The built-in ones
are the modules of BUILTIN_MODULES (their order is the order the stages run them in); more come
from modules named in the setting BENCH_PROBE_MODULES (comma-separated import paths). Both are
loaded once when a process starts (load_probe_modules: the web side's and the GPU worker's
Django start, `python -m runners execute | ladder`); a module that cannot be imported stops that
start with its name. `register(probe)` adds the probe's name to the contract's PROBE_NAMES and
its metrics to METRICS, so the web side labels and judges them; a metric another probe already
declares is refused. docs/writing-a-probe.md walks through one.

    class Health(ProbeBase):
        name, stage, phase = "health", "engine", "probing health"
        metrics = (Metric("health_ms", "ms", "lower", "health check latency"),)

        def run(self, ctx):
            ...
            return ProbeOutput(measurements=[Measurement.of("health_ms", ms)])

    register(Health())
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from runners import contract
from runners.contract import ArtifactRef, JobSpec, Measurement, Metric

Stage = Literal["before", "engine", "after"]
STAGES: tuple[Stage, ...] = ("before", "engine", "after")
# The built-in probes, one module each, in the order each stage runs them and lists their
# measurements and artifacts. A new built-in probe is one module and one line here.
BUILTIN_MODULES = (
    "runners.probes.decode_probe",       # decode
    "runners.probes.correctness_probe",  # correctness
    "runners.probes.allreduce_probe",    # allreduce, comm, share
    "runners.probes.membw_probe",        # membw
    "runners.probes.weights_probe",      # weights
)


@dataclass
class ProbeOutput:
    measurements: list[Measurement] = field(default_factory=list)
    artifacts: list[ArtifactRef] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: Any = None  # the probe's own document, for the probes of later stages (ctx.outputs)


@dataclass
class ProbeContext:
    """What a probe may use: the spec, the work directory, the engine's arguments and
    environment, the model's config.json (None for a model that is not a local directory), the
    running engine (engine stage only) and the outputs of the probes that ran before it."""
    spec: JobSpec
    work_dir: Path
    engine_args: list[str]
    engine_env: dict[str, str]
    model_config: dict | None = None
    timeout_s: float = 120.0
    runner_config: Any = None  # runners.config.RunnerConfig: the entry point's settings
    engine: Any = None
    served_model: str = ""
    outputs: dict[str, ProbeOutput] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return self.engine.base_url

    def raw(self, name: str):
        output = self.outputs.get(name)
        return output.raw if output is not None else None


@runtime_checkable
class Probe(Protocol):
    name: str
    stage: Stage
    phase: str                  # what the run page shows while it runs ("" for none)
    metrics: tuple[Metric, ...]
    always: bool                # runs whatever the spec's list says
    selected_with: tuple[str, ...]  # also runs when one of these is listed

    def applies(self, spec: JobSpec) -> bool: ...

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]: ...

    def run(self, ctx: ProbeContext) -> ProbeOutput: ...


class ProbeBase:
    """Defaults for a probe: runs when listed (or when the spec lists none), needs no engine
    arguments, declares no metric."""
    name = ""
    stage: Stage = "engine"
    phase = ""
    metrics: tuple[Metric, ...] = ()
    always = False
    selected_with: tuple[str, ...] = ()

    def applies(self, spec: JobSpec) -> bool:
        return True

    def engine_args(self, spec: JobSpec, work_dir: Path) -> list[str]:
        return []

    def run(self, ctx: ProbeContext) -> ProbeOutput:
        raise NotImplementedError


class ProbeRegistryError(ValueError):
    """A probe or a probe module cannot be registered (the message says why)."""


_REGISTRY: dict[str, Probe] = {}


def register(probe: Probe) -> Probe:
    """Add PROBE (registering one name again replaces it: a module imported twice). A probe that
    declares a metric another probe declares is refused, and nothing of it is registered."""
    if not isinstance(probe, Probe):
        raise ProbeRegistryError(f"{probe!r} is not a probe (name, stage, phase, metrics, applies, engine_args, run)")
    if probe.stage not in STAGES:
        raise ProbeRegistryError(f"probe {probe.name!r}: stage {probe.stage!r} is not one of {STAGES}")
    owners = {m.name: other.name for other in _REGISTRY.values() if other.name != probe.name for m in other.metrics}
    taken = {m.name: owners[m.name] for m in probe.metrics if m.name in owners}
    if taken:
        raise ProbeRegistryError(f"probe {probe.name!r} declares "
                                 + ", ".join(f"metric {m!r}, which probe {owner!r} already declares"
                                             for m, owner in taken.items()))
    try:
        contract.declare_probe(probe.name)
        for metric in probe.metrics:
            contract.declare_metric(metric)
    except contract.ContractError as exc:
        raise ProbeRegistryError(str(exc)) from None
    _REGISTRY[probe.name] = probe
    return probe


def unregister(name: str) -> None:
    """Remove a plug-in probe and its metrics (tests clean up after themselves)."""
    probe = _REGISTRY.pop(name, None)
    contract.PROBE_NAMES.discard(name)
    for metric in getattr(probe, "metrics", ()):
        contract.METRICS.pop(metric.name, None)


def module_names(setting) -> list[str]:
    """BENCH_PROBE_MODULES as a list: a comma-separated string, or a list already."""
    items = setting.split(",") if isinstance(setting, str) else list(setting or ())
    return [name.strip() for name in items if name and name.strip()]


def load_probe_modules(setting=()) -> list[str]:
    """Import the built-in probes and the modules SETTING names; returns the modules imported.
    A module that fails to import (missing, or raising while it registers) is a ProbeRegistryError
    that names it: the process starting stops there, before any job."""
    names = [*BUILTIN_MODULES, *module_names(setting)]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - whatever it raised, the start stops with the module's name
            raise ProbeRegistryError(f"probe module {name!r} (BENCH_PROBE_MODULES) cannot be imported: "
                                     f"{type(exc).__name__}: {exc}") from exc
    return names


def _order(probe: Probe) -> int:
    module = type(probe).__module__
    return BUILTIN_MODULES.index(module) if module in BUILTIN_MODULES else len(BUILTIN_MODULES)


def all_probes() -> list[Probe]:
    """Every registered probe: the built-in ones first, in BUILTIN_MODULES' order, then the
    plug-ins in the order they were registered."""
    load_probe_modules()
    return sorted(_REGISTRY.values(), key=_order)


def is_selected(probe: Probe, spec: JobSpec) -> bool:
    listed = spec.probes
    chosen = (probe.always or listed is None or probe.name in listed
              or bool(set(probe.selected_with) & set(listed)))
    return chosen and probe.applies(spec)


def selected_probes(spec: JobSpec) -> list[Probe]:
    """The probes SPEC runs: those it lists (all when it lists none) that apply to it."""
    return [probe for probe in all_probes() if is_selected(probe, spec)]
