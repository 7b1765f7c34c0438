"""The sections of a benchmarks file and who applies each. bench applies `benchmarks:`; the apps
that own watches and subscriptions register theirs at start (`register`, from their
AppConfig.ready), as they listen to bench's signals: bench imports neither. A section a file uses
whose handler is not registered stops the apply rather than skipping it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..models import Benchmark
from .entries import Outcome

SECTIONS = ("benchmarks", "watches", "subscriptions")  # the file's top-level keys, applied in this order
REGISTERED_SECTIONS = SECTIONS[1:]


@dataclass(frozen=True)
class Section:
    apply: Callable[[list, Outcome], None]  # the section's entries, in the file's order
    # A benchmark about to be saved with its new engine source: raises ApplyError when the section's
    # records that use it would no longer fit.
    check_benchmark: Callable[[Benchmark, str], None] | None = None


class SectionMissing(RuntimeError):
    """A section of the file has no handler registered: nothing is applied."""


_registered: dict[str, Section] = {}


def register(name: str, section: Section) -> None:
    """Give the section NAME (one of REGISTERED_SECTIONS) its handler."""
    if name not in REGISTERED_SECTIONS:
        raise ValueError(f"unknown section {name!r}: expected one of {', '.join(REGISTERED_SECTIONS)}")
    _registered[name] = section


def section(name: str) -> Section:
    try:
        return _registered[name]
    except KeyError:
        raise SectionMissing(f"no handler is registered for `{name}:` (its app is not installed)") from None


def benchmark_checks() -> list[Callable[[Benchmark, str], None]]:
    return [s.check_benchmark for s in _registered.values() if s.check_benchmark is not None]
