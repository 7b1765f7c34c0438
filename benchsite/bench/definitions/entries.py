"""What applying an entry of a benchmarks file needs, whichever app applies it: the error that
names the entry, the list of changes, and a model's check and diff."""
from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import models


class ApplyError(ValueError):
    """The file cannot be applied; the message names the entry and the problem."""


@dataclass
class Outcome:
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def mapping(spec, where: str) -> dict:
    if not isinstance(spec, dict):
        raise ApplyError(f"{where}: expected a mapping, got {type(spec).__name__}")
    return spec


def clean(obj: models.Model, where: str, **options) -> None:
    try:
        obj.full_clean(**options)
    except ValidationError as exc:
        problems = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in exc.message_dict.items())
        raise ApplyError(f"{where}: {problems}") from None


def snapshot(obj: models.Model, names) -> dict:
    return {name: getattr(obj, name) for name in names}


def diff(before: dict, obj: models.Model) -> list[str]:
    return [f"{name}: {old!r} -> {getattr(obj, name)!r}" for name, old in before.items() if getattr(obj, name) != old]
