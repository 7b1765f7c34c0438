"""The demo set-up `make run` shows: a tiny CPU benchmark with a two-step ladder (demo.yaml), the
real 2 x H200 ladder measured with the runners (docs/measurements.md), and the latest service run
on 2 x H200 (an export of /api/runs/, docs/data/service-h200x2-runs.json), each imported once."""
import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from ..lifecycle import imports
from ..models import Benchmark

DEMO_SLUG = "tiny-llama-cpu"
DEMO_USER = ("demo", "demo")


DEMO_FILE = Path(__file__).with_name("demo.yaml")


def demo_benchmark_ensure() -> Benchmark:
    """The demo ladder from demo.yaml, applied like any benchmarks-as-code file (idempotent)."""
    from benchsite.bench.definitions.apply import config_apply, config_load

    data = config_load(DEMO_FILE.read_text())
    data["benchmarks"][0]["model"] = str(settings.BENCH_TINY_MODEL_DIR)  # where this machine keeps it
    config_apply(data=data)
    return Benchmark.objects.get(slug=DEMO_SLUG)


def demo_user_ensure():
    username, password = DEMO_USER
    user, created = get_user_model().objects.get_or_create(
        username=username, defaults={"is_staff": True, "is_superuser": True}
    )
    if created:
        user.set_password(password)
        user.save()
    return user


H200_LADDER = settings.BASE_DIR / "docs" / "data" / "ladder-h200x2.json"
# The latest service run on 2 x H200 (an export of /api/runs/) and the benchmark it ran.
H200_SERVICE_RUNS = settings.BASE_DIR / "docs" / "data" / "service-h200x2-runs.json"
H200_SERVICE_CONFIG = settings.BASE_DIR / "benchmarks" / "gpu" / "service-h200x2.yaml"
H200_SERVICE_NOTE = ("The allreduce + RMSNorm fusion (FlashInfer) reduced every layer in the graph steps: NCCL LL, "
                     "Simple and custom allreduce changed nothing, so those steps sit level (docs/measurements.md).")


def demo_gpu_history_ensure() -> Benchmark | None:
    """The 2 x H200 ladder measured with the runners, and beside it the service's own run."""
    data = json.loads(H200_LADDER.read_text())
    existing = Benchmark.objects.filter(slug=data["benchmark"]["slug"]).first()
    if existing is None:
        existing = imports.runs_import(data=data, gpu_pool="h200x2")[0].benchmark
    demo_gpu_service_ensure()
    return existing


def demo_gpu_service_ensure() -> Benchmark:
    """The service-h200x2 export under its own slug, once: its benchmark applied from the file
    the service ran, then its runs."""
    from benchsite.bench.definitions.apply import config_apply, config_load

    from ..lifecycle.runs_export import runs_export_import

    data = json.loads(H200_SERVICE_RUNS.read_text())
    existing = Benchmark.objects.filter(slug=data["runs"][0]["benchmark"]).first()
    if existing is not None:
        return existing
    with transaction.atomic():  # both or neither: a benchmark without its runs would never get them
        config_apply(data=config_load(H200_SERVICE_CONFIG.read_text()))
        return runs_export_import(data=data, note=H200_SERVICE_NOTE)[0].benchmark
