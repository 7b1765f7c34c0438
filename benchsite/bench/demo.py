"""The demo set-up `make run` shows: a tiny CPU benchmark with a two-step ladder, and the
real 2 x H200 ladder measured with the runners (docs/measurements.md), imported once."""
import json

from django.conf import settings
from django.contrib.auth import get_user_model

from . import services
from .models import Benchmark

DEMO_SLUG = "tiny-llama-cpu"
DEMO_USER = ("demo", "demo")


def demo_benchmark_ensure() -> Benchmark:
    benchmark, created = Benchmark.objects.get_or_create(
        slug=DEMO_SLUG,
        defaults={
            "name": "Tiny Llama on the CPU engine",
            "description": "4-layer random-weight Llama generated locally, served by vLLM's CPU build.",
            "model": str(settings.BENCH_TINY_MODEL_DIR),
            "gpu_pool": "cpu",
            "max_tokens": 128,
            "repeats": 5,
            "warmup": 1,
            "engine_args": ["--dtype", "float32", "--max-model-len", "1024", "--max-num-seqs", "4"],
            "startup_timeout_s": 600,
            "time_limit_s": 1800,
        },
    )
    if created:
        services.variant_create(benchmark=benchmark, name="eager", flags=["--enforce-eager"], is_reference=True)
        services.variant_create(benchmark=benchmark, name="compiled")
    return benchmark


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
