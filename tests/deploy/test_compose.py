"""docker-compose.yml cannot be run here (no Docker engine): validate it against the Compose
specification's JSON schema (tests/data/compose-spec.json, from compose-spec/compose-spec,
Apache-2.0) and check that it wires our own services the way the settings expect."""
import json
import re
from pathlib import Path

import jsonschema
import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def _compose():
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _validator():
    schema = json.loads((ROOT / "tests/data/compose-spec.json").read_text())
    return jsonschema.Draft7Validator(schema)


def test_compose_file_is_valid_against_the_compose_spec():
    _validator().validate(_compose())


def test_the_schema_check_catches_a_mistake():
    broken = _compose()
    broken["services"]["worker-gpu"]["deploy"]["resources"]["reservations"]["gpus"] = "all"
    broken["services"]["web"]["ports"] = "8000:8000"
    assert len(list(_validator().iter_errors(broken))) >= 2


def test_services_and_their_wiring():
    services = _compose()["services"]
    assert set(services) == {"postgres", "redis", "minio", "web", "worker-web", "worker-gpu"}
    for name in ("web", "worker-web"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # The web worker serves the web queue and runs the reaper (beat).
    web_cmd = services["worker-web"]["command"]
    assert web_cmd[web_cmd.index("-Q") + 1] == settings.BENCH_WEB_QUEUE and "-B" in web_cmd


def test_artifacts_go_to_minio_from_both_sides():
    """The web side and the GPU worker share one S3 bucket: the worker uploads, the web reads;
    the web creates the bucket before serving."""
    services = _compose()["services"]
    minio = services["minio"]
    assert minio["command"][:2] == ["server", "/data"] and "miniodata:/data" in minio["volumes"]
    assert minio["healthcheck"]["test"][:2] == ["CMD", "mc"]
    envs = [services[name]["environment"] for name in ("web", "worker-web", "worker-gpu")]
    for env in envs:
        assert env["BENCH_ARTIFACTS_BACKEND"] == "s3"
        assert env["BENCH_ARTIFACTS_S3_ENDPOINT_URL"].endswith("http://minio:9000}")
        assert env["BENCH_ARTIFACTS_S3_SECRET_ACCESS_KEY"] == minio["environment"]["MINIO_ROOT_PASSWORD"]
        assert env["BENCH_ARTIFACTS_S3_ACCESS_KEY_ID"] == minio["environment"]["MINIO_ROOT_USER"]
    assert len({env["BENCH_ARTIFACTS_S3_BUCKET"] for env in envs}) == 1
    for name in ("web", "worker-web", "worker-gpu"):
        assert services[name]["depends_on"]["minio"]["condition"] == "service_healthy"
    web_cmd = services["web"]["command"][-1]
    assert web_cmd.index("bench_artifacts_check --create-bucket") < web_cmd.index("gunicorn")


def test_the_artifact_settings_in_compose_configure_s3():
    """The variables compose sets give django-storages' S3 backend with those values."""
    import subprocess
    import sys

    env = {k: v.replace("${MINIO_ROOT_PASSWORD:?set MINIO_ROOT_PASSWORD in .env}", "pw") for k, v in
           _compose()["services"]["worker-gpu"]["environment"].items() if k.startswith("BENCH_ARTIFACTS")}
    env = {k: re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", v) for k, v in env.items()}
    code = ("import django; django.setup(); from django.core.files.storage import storages; s = storages['artifacts'];"
            "print(type(s).__name__, s.bucket_name, s.endpoint_url, s.access_key)")
    out = subprocess.run([sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin", **env,
                         "DJANGO_SETTINGS_MODULE": "benchsite.settings", "BENCH_VAR_DIR": str(ROOT / "var")},
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["S3Storage", "bench-artifacts", "http://minio:9000", "bench"]


def test_gpu_worker_gets_the_gpus_and_only_the_broker():
    gpu = _compose()["services"]["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert "DATABASE_URL" not in gpu["environment"]  # a GPU host needs no database credentials
    assert gpu["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"
    queue = gpu["command"][gpu["command"].index("-Q") + 1]
    assert re.fullmatch(r"gpu\.\$\{BENCH_GPU_POOL:-[a-z0-9_-]+\}", queue)
    assert gpu["ipc"] == "host"


def test_images_build_from_files_that_exist():
    for name, service in _compose()["services"].items():
        if "build" not in service:
            continue
        dockerfile = ROOT / service["build"]["dockerfile"]
        assert dockerfile.exists(), name
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY "):
                for src in line.split()[1:-1]:
                    assert (ROOT / src).exists(), f"{dockerfile.name} copies missing {src}"
