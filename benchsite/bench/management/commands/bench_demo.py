"""`manage.py bench_demo`: web + workers on the embedded defaults, a demo benchmark, one run.

This is what `make run` starts. A child that dies is restarted, as a process supervisor would
(benchsite/bench/worker/supervisor.py); Ctrl-C stops everything it started.
"""
import sys
import time

import httpx
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.lifecycle import trigger
from benchsite.bench.definitions.demo import DEMO_USER, demo_benchmark_ensure, demo_gpu_history_ensure, demo_user_ensure
from benchsite.bench.models import Run
from benchsite.bench.worker.supervisor import CrashLoop, StopSignals, Supervisor
from runners import contract


class Command(BaseCommand):
    help = "Start web + workers, create the demo benchmark and trigger one run of its ladder."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-trigger", action="store_true", help="start the service without triggering a run")
        parser.add_argument("--exit-when-done", action="store_true", help="stop once the triggered runs are final")

    def handle(self, *args, port, no_trigger, exit_when_done, **options):
        if not (settings.BENCH_TINY_MODEL_DIR / "config.json").exists():
            raise CommandError(f"no model at {settings.BENCH_TINY_MODEL_DIR}: run `python -m runners tiny-model` first")
        benchmark = demo_benchmark_ensure()
        demo_gpu_history_ensure()
        demo_user_ensure()
        log_dir = settings.VAR_DIR / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        celery = [sys.executable, "-m", "celery", "-A", "benchsite", "worker", "-c", "1", "-l", "INFO", "--without-gossip"]
        commands = {
            "web": [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
            "worker-web": [*celery, "-Q", settings.BENCH_WEB_QUEUE, "-n", "web@%h", "-B",
                           "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
            "worker-gpu": [*celery, "-Q", benchmark.queue, "-n", "gpu@%h"],
        }
        supervisor = Supervisor(commands, log_dir, settings.BASE_DIR, say=self.stdout.write)
        StopSignals().install()  # Ctrl-C or `kill`, once or twice: the children are stopped, all of them
        try:
            supervisor.start_all()
            url = f"http://127.0.0.1:{port}"
            self._wait_for_web(url, supervisor.procs["web"], log_dir)
            runs = [] if no_trigger else trigger.runs_trigger(benchmark=benchmark, trigger=Run.Trigger.CLI)
            self.stdout.write(self.style.SUCCESS(
                f"\nDashboard: {url}/b/{benchmark.slug}/   (log in as {DEMO_USER[0]} / {DEMO_USER[1]})\n"
                f"Logs: {log_dir}   Ctrl-C stops web and workers.\n"
            ))
            self._follow(runs, supervisor, exit_when_done)
        except KeyboardInterrupt:
            self.stdout.write("Stopping web and workers...")
        except CrashLoop as exc:
            raise CommandError(str(exc)) from None
        finally:
            supervisor.stop_all()

    def _wait_for_web(self, url, proc, log_dir, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise CommandError(f"the web server exited; see {log_dir / 'web.log'}")
            try:
                httpx.get(url + "/", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.5)
        raise CommandError(f"the web server did not answer within {timeout_s} s")

    def _follow(self, runs, supervisor, exit_when_done):
        """Print each state change of the triggered runs; restart a child that died (a killed
        GPU worker's run is failed by the reaper, its orphaned engine stopped at its restart)."""
        seen = {}
        while True:
            supervisor.check()
            pending = 0
            for run in Run.objects.filter(id__in=[r.id for r in runs]).select_related("variant"):
                decode = run.measurements.filter(metric=contract.DECODE_TOK_S).first()
                line = f"run {run.id} [{run.variant.name}] {run.state} {run.phase}"
                if decode:
                    line += f"  decode {decode.value:.1f} tok/s"
                if run.error:
                    line += f"\n  error: {run.error.splitlines()[0]}"
                if seen.get(run.id) != line:
                    self.stdout.write(line)
                    seen[run.id] = line
                pending += not run.is_final
            if exit_when_done and runs and not pending:
                return
            time.sleep(2)
