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
    assert set(services) == {"postgres", "redis", "web", "worker-web", "worker-gpu"}
    for name in ("web", "worker-web"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
        assert env["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    # The web worker serves the web queue and runs the reaper (beat).
    web_cmd = services["worker-web"]["command"]
    assert web_cmd[web_cmd.index("-Q") + 1] == settings.BENCH_WEB_QUEUE and "-B" in web_cmd


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
