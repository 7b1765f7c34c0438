"""Peak memory of storing and downloading a large profiler trace (artifacts at scale).

A synthetic trace (random bytes, 300 MB by default) goes through the same code as a run:
upload = `benchsite.bench.storage.artifacts.store_path` (what the GPU worker does with a trace file:
streamed into the artifact storage, capped, hashed as it goes); download = the run page's
download response (`StreamingHttpResponse(iter_chunks(open_stream(file)))`, as the view builds
it), read to the end. Each step runs in a fresh Python process, for the filesystem storage and
for S3 against a local S3 server (moto's, in its own process); the figure is the process's peak
RSS above its RSS just before the step (after Django and boto3 are loaded). For contrast, the
old path (the file read whole, as text went through the broker) in one more process.

    .venv/bin/python benchmarks/artifacts_memory.py [--mb 300] [--json]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, resource, sys, time
import django
django.setup()
import boto3  # noqa: F401 - loaded before the baseline, as in a running worker
from django.http import StreamingHttpResponse
from benchsite.bench.storage import artifacts

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

step, arg = sys.argv[1], sys.argv[2]
# Warm up as a running worker would be: the storage client made and used once (botocore loads its
# service model then), so the figure is what the large file itself costs.
warm = artifacts.store_content(b"warm-up", run_id=0, kind="probe_json", name="warm.json")
artifacts.read_bytes(warm["file"], max_bytes=16)
artifacts.delete(warm["file"])
before, t0 = peak_mb(), time.perf_counter()
if step == "upload":
    ref = artifacts.store_path(arg, run_id=0, kind="profiler_trace", name="rank0.pt.trace.json.gz")
    out = {"file": ref["file"], "size": ref["size"], "sha256": ref["sha256"]}
elif step == "download":
    response = StreamingHttpResponse(artifacts.iter_chunks(artifacts.open_stream(arg)))
    size = sum(len(chunk) for chunk in response.streaming_content)
    out = {"size": size}
else:  # the old path: the whole file in memory as text
    with open(arg, "rb") as f:
        text = f.read().decode("latin-1")
    out = {"size": len(text)}
seconds = time.perf_counter() - t0
print(json.dumps({**out, "seconds": seconds, "baseline_mb": before, "peak_mb": peak_mb()}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(step: str, arg: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, step, arg], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{step} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _make_trace(path: Path, mb: int) -> None:
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(os.urandom(1024 * 1024))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=300, help="size of the synthetic trace in MiB")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="artifacts-memory-") as tmp:
        trace = Path(tmp) / "trace.json.gz"
        _make_trace(trace, args.mb)
        base_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite.settings", "BENCH_VAR_DIR": str(Path(tmp) / "var")}
        port = _free_port()
        server = subprocess.Popen([sys.executable, "-c", "import sys; from moto.server import main; main(sys.argv[1:])",
                                   "-H", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            endpoint = f"http://127.0.0.1:{port}"
            keys = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret"}
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            import boto3

            boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
                         aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket="bench")
            backends = {
                "filesystem": {**base_env, "BENCH_ARTIFACTS_BACKEND": "filesystem",
                               "BENCH_ARTIFACTS_DIR": str(Path(tmp) / "store")},
                "s3": {**base_env, **keys, "BENCH_ARTIFACTS_BACKEND": "s3", "BENCH_ARTIFACTS_S3_BUCKET": "bench",
                       "BENCH_ARTIFACTS_S3_ENDPOINT_URL": endpoint, "BENCH_ARTIFACTS_S3_REGION": "us-east-1"},
            }
            for name, env in backends.items():
                up = _child("upload", str(trace), env)
                down = _child("download", up["file"], env)
                assert up["size"] == down["size"] == args.mb * 1024 * 1024, (up, down)
                rows += [{"backend": name, "step": "upload", **up}, {"backend": name, "step": "download", **down}]
            rows.append({"backend": "(old path)", "step": "whole file in memory",
                         **_child("whole", str(trace), backends["filesystem"])})
        finally:
            server.terminate()
            server.wait(timeout=10)

    for row in rows:
        row["extra_mb"] = round(row["peak_mb"] - row["baseline_mb"], 1)
        row["mb_s"] = round(args.mb / row["seconds"], 1)
    if args.json:
        print(json.dumps({"trace_mb": args.mb, "rows": rows}, indent=1))
        return 0
    print(f"synthetic trace: {args.mb} MiB; peak RSS of each step's process above its RSS before the step")
    print(f"{'backend':<12} {'step':<22} {'peak RSS MB':>11} {'above base':>10} {'s':>6} {'MiB/s':>7}")
    for row in rows:
        print(f"{row['backend']:<12} {row['step']:<22} {row['peak_mb']:>11.1f} {row['extra_mb']:>10.1f} "
              f"{row['seconds']:>6.2f} {row['mb_s']:>7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
