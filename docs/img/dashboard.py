"""Takes docs/img/dashboard.png, the README's screenshot of the home page.

    .venv/bin/python docs/img/dashboard.py [--out docs/img/dashboard.png]

The `make run` demo benchmark with a seeded history of pushes, each run judged by the service's
own rules (the last push slows `compiled` down: regressed), on a throwaway SQLite database, served
in this process and drawn by the headless Chromium that `make browser` installs. Every figure is
fixed, so a second run gives the same picture. The PNG is reduced to a 64-colour palette to stay small.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("BENCH_CHROMIUM", "/usr/lib/chromium/chromium")
CHROMEDRIVER = os.environ.get("BENCH_CHROMEDRIVER", "/usr/bin/chromedriver")
WIDTH, HEIGHT = 1100, 400  # the page's viewport, in CSS pixels
# The demo ladder's decode tok/s, one row per push (oldest first): eager, compiled.
DEMO_PUSHES = [(41.8, 118.2), (42.3, 119.0), (41.5, 117.6), (42.0, 121.4), (42.6, 120.8), (41.9, 119.5),
               (42.2, 120.1), (41.7, 118.9), (42.1, 104.3)]


def _setup(var_dir: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'db.sqlite3'}"
    os.environ["BENCH_VAR_DIR"] = str(var_dir)
    os.environ["BENCH_TINY_MODEL_DIR"] = "var/tiny-model"  # the page shows it: the same path every time
    os.environ["BENCH_CONFIRM_REGRESSIONS"] = "0"  # judged at once: no re-run to wait for
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchsite.settings")
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _seed() -> None:
    """The demo benchmark's pushes, each run judged as a worker's result would be."""
    from django.utils import timezone

    from benchsite.bench.definitions.demo import demo_benchmark_ensure
    from benchsite.bench.models import Measurement, Run
    from benchsite.regressions.judgement import run_judge_once
    from benchsite.regressions.outcomes import outcomes_refresh

    benchmark = demo_benchmark_ensure()
    variants = list(benchmark.variants.order_by("position"))
    start = timezone.now() - timedelta(days=len(DEMO_PUSHES))
    runs = []
    for index, figures in enumerate(DEMO_PUSHES):
        commit = f"{index + 0xa4519:05x}" * 8
        batch = uuid.uuid4()
        for variant, tok_s in zip(variants, figures):
            run = Run.objects.create(benchmark=benchmark, variant=variant, batch=batch, state=Run.State.SUCCEEDED,
                                     commit=commit, ref="main", branch="main", phase="done", worker_host="cpu-1")
            when = start + timedelta(days=index)
            Run.objects.filter(pk=run.pk).update(created_at=when, started_at=when, finished_at=when + timedelta(minutes=3))
            Measurement.objects.create(run=run, metric="decode_tok_s", value=tok_s, unit="tok/s", direction="higher",
                                       samples=[tok_s * f for f in (0.99, 1.0, 1.01)], ci_low=tok_s * 0.99,
                                       ci_high=tok_s * 1.01)
            Measurement.objects.create(run=run, metric="correct", value=1.0)
            run_judge_once(run_id=run.pk)
            runs.append(run.pk)
    outcomes_refresh(run_ids=runs)


def _screenshot(url: str, out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--force-color-profile=srgb"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        # the window's size includes the browser's frame: set the page's own instead
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        driver.get(url)
        WebDriverWait(driver, 20).until(lambda d: d.execute_script(
            "const c = [...document.querySelectorAll('canvas')];"
            "return c.length > 0 && c.every(x => x.dataset.rendered === '1');"))
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def _shrink(path: Path) -> None:
    """A 64-colour palette: the page is flat colours and text, a fifth of the bytes."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dashboard-shot-") as tmp:
        _setup(Path(tmp))
        _seed()
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.test.testcases import LiveServerThread

        server = LiveServerThread("127.0.0.1", StaticFilesHandler)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        try:
            _screenshot(f"http://127.0.0.1:{server.port}/", args.out)
        finally:
            server.terminate()
    _shrink(args.out)
    print(f"{args.out}: {args.out.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
