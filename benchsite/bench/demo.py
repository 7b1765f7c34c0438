"""The demo set-up `make run` shows: a tiny CPU benchmark with a two-step ladder (demo.yaml), and the
real 2 x H200 ladder measured with the runners (docs/measurements.md), imported once."""
import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from . import services
from .models import Benchmark

DEMO_SLUG = "tiny-llama-cpu"
DEMO_USER = ("demo", "demo")


DEMO_FILE = Path(__file__).with_name("demo.yaml")


def demo_benchmark_ensure() -> Benchmark:
    """The demo ladder from demo.yaml, applied like any benchmarks-as-code file (idempotent)."""
    from benchsite.hooks.apply import config_apply, config_load

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


def demo_gpu_history_ensure() -> Benchmark | None:
    data = json.loads(H200_LADDER.read_text())
    existing = Benchmark.objects.filter(slug=data["benchmark"]["slug"]).first()
    if existing:
        return existing
    runs = services.runs_import(data=data, gpu_pool="h200x2")
    return runs[0].benchmark
