"""docs/configuration.md, generated from the typed settings (benchsite/config/) and the runners'
VARIABLES (runners/config.py): `python -m benchsite.config.reference > docs/configuration.md`.
tests/test_env_documented.py fails when the page differs from what this prints."""
import types
import typing
from pathlib import Path

from pydantic.fields import FieldInfo

from runners.config import VARIABLES

from .database import DB_RETRIES, DB_RETRY_BASE_S
from .fields import Group
from .load import GROUPS

PAGE = "docs/configuration.md"
COMMAND = f"python -m benchsite.config.reference > {PAGE}"

INTRO = """\
# Configuration

<!-- Generated from benchsite/config/ and runners/config.py: edit those, then run
`{command}`. tests/test_env_documented.py fails when this page is stale. -->

Every setting is an environment variable, read once when a process starts. There are {total}
({bench} named `BENCH_*`; the others are Django's, Celery's, the database's URL and
prometheus_client's own): {web} read by the web side in {groups} groups (the pages, the web-queue
Celery workers, and the Django side of the GPU workers), and {runners} by the runners on GPU hosts,
{shared} of which the web side reads too.

## How values are read

- Booleans take `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off` in any case; an empty value is
  false (`FOO=` switches a flag off). The same words on the web side and on GPU hosts
  (runners/envvars.py).
- Numbers must parse: an empty number is an error, not its default. Lists are comma-separated.
- A bad value stops the process at start (any `manage.py` command, gunicorn, a Celery worker), never
  at a request, and the message names the variable; every bad variable is listed at once:

  ```console
  $ BENCH_HEARTBEAT_INTERVAL_S=0 DJANGO_DEBUG=maybe python manage.py check
  django.core.exceptions.ImproperlyConfigured: bad configuration (docs/configuration.md):
    DJANGO_DEBUG='maybe' is not a boolean (use 1/0, true/false, yes/no, on/off)
    BENCH_HEARTBEAT_INTERVAL_S=0 must be at least 1
  ```

## Where they are declared

The web side's settings are pydantic-settings models, one a subsystem (benchsite/config/: `web.py`,
`database.py`, ...); `benchsite/settings.py` reads them all (`config.load()`) and fills the Django
setting names that the code reads (`settings.BENCH_HEARTBEAT_INTERVAL_S`), plus each integration's
retry policy (`settings.BENCH_ALERT_RETRY`, `BENCH_STATUS_RETRY`, `BENCH_DB_RETRY`: a `RetryPolicy`
of retries, a first wait and a cap, benchsite/config/retry.py). The runners read theirs in
`RunnerConfig.from_env()` (runners/config.py), plain Python for GPU hosts without Django;
`BENCH_WORK_DIR`, `BENCH_ALLOW_FILE_REPOS` and `BENCH_PROBE_MODULES` are theirs, and the web side
reads them through runners/config.py's readers, so each variable has one reader.

Why pydantic-settings rather than django-environ: one declaration holds a variable's name, type,
bounds, default and description, and this page is generated from it, so the reference cannot drift
from the code. A model checks a whole group at once (all its bad variables in one message) and
holds the rules between its variables (the heartbeat's timeout against its interval, S3's bucket)
beside them. django-environ casts one value at a time, with no bounds, no grouping and nothing to
generate a reference from. pydantic-settings is already installed with vLLM, so the web side adds
no package; it costs about 0.1 s of import at each process start. The runners stay free of it.
"""


def render() -> str:
    names = [f.validation_alias for group in GROUPS.values() for f in group.model_fields.values()]
    names += [variable.name for variable in VARIABLES]
    parts = [INTRO.format(command=COMMAND, total=len(names), bench=sum(n.startswith("BENCH_") for n in names),
                          web=len(names) - len(VARIABLES), groups=len(GROUPS), runners=len(VARIABLES),
                          shared=sum(variable.web for variable in VARIABLES))]
    parts += [_group_section(group) for group in GROUPS.values()]
    parts.append(_runners_section())
    return "\n".join(parts)


def _group_section(group: type[Group]) -> str:
    lines = [f"## {group.title}", "", group.about, ""]
    policy = _policy_line(group)
    if policy:
        lines += [policy, ""]
    lines += ["| variable | value | default | why it exists |", "|---|---|---|---|"]
    for field in group.model_fields.values():
        lines.append(f"| `{field.validation_alias}` | {_kind(field)} | {_default(field)} | {field.description} |")
    return "\n".join(lines) + "\n"


def _policy_line(group: type[Group]) -> str:
    """A group with a retry policy states it, from its defaults."""
    if not isinstance(getattr(group, "retry", None), property):
        return ""
    fields = group.model_fields
    if "max_retries" in fields:
        base_s = fields["retry_base_ms"].default / 1000
        return (f"Retry policy: {fields['max_retries'].default} retries, {base_s:g} s then doubling "
                f"(`{fields['max_retries'].validation_alias}`, `{fields['retry_base_ms'].validation_alias}`).")
    cap = fields["retry_backoff_max_s"]
    return (f"Retry policy: {DB_RETRIES} retries, {DB_RETRY_BASE_S} s then doubling, at most {cap.default} s "
            f"(`{cap.validation_alias}`).")


def _runners_section() -> str:
    lines = ["## GPU hosts (the runners)", "",
             "Read by `RunnerConfig.from_env()` (runners/config.py) on each GPU worker, `python -m runners execute` "
             "and the offline ladder. The GPU worker also needs the broker's URL and the artifact storage's "
             "settings above. *web*: the web side reads it too.", "",
             "| variable | default | why it exists |", "|---|---|---|"]
    for variable in VARIABLES:
        web = " *web*" if variable.web else ""
        lines.append(f"| `{variable.name}`{web} | {variable.default} | {variable.why} |")
    return "\n".join(lines) + "\n"


def _kind(field: FieldInfo) -> str:
    kind = _base_type(field.annotation)
    bounds = "".join(f" ≥ {m.ge}" if hasattr(m, "ge") else f" > {m.gt}" if hasattr(m, "gt") else ""
                     for m in field.metadata)
    if kind is bool:
        return "boolean"
    if kind in (int, float):
        return ("integer" if kind is int else "number") + bounds
    if typing.get_origin(kind) is typing.Literal:
        return " or ".join(f"`{choice}`" for choice in typing.get_args(kind))
    if typing.get_origin(kind) is list:
        return "networks" if typing.get_args(kind)[0] is not str else "list"
    return "path" if kind is Path else "text"


def _base_type(annotation):
    """The type under `X | None` and `Annotated[X, ...]`."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _default(field: FieldInfo) -> str:
    shown = (field.json_schema_extra or {}).get("shown")
    if shown is not None:
        return shown
    value = field.default
    if isinstance(value, bool):
        return "1" if value else "0"
    if value in ("", [], None):
        return "–"
    if isinstance(value, list):
        return "`" + ",".join(value) + "`"
    return f"`{value}`" if isinstance(value, str) else str(value)


if __name__ == "__main__":
    print(render(), end="")
