"""The runs API and workload points: every run lists its measurements with their point, and
?point= makes decode_tok_s that point's (the default stays each run's first point's figure)."""
import pytest

from benchsite.bench.models import Measurement, Run

from .conftest import SHA_A, make_benchmark

pytestmark = pytest.mark.django_db
C16 = "c16-p8192-m256"


@pytest.fixture
def run():
    benchmark = make_benchmark("tiny-a")
    benchmark.workloads = [{"max_tokens": benchmark.max_tokens}, {"concurrency": 16, "prompt_tokens": 8192,
                                                                  "max_tokens": 256}]
    benchmark.save()
    run = Run.objects.create(benchmark=benchmark, variant=benchmark.variants.first(), state="SUCCEEDED",
                             batch="00000000-0000-0000-0000-000000000001", commit=SHA_A, ref="main")
    first = benchmark.default_point
    Measurement.all_points.create(run=run, metric="decode_tok_s", point=first, value=100.0, unit="tok/s")
    Measurement.all_points.create(run=run, metric="decode_tok_s", point=C16, first_point=False, value=1500.0,
                                  unit="tok/s", ci_low=1400.0, ci_high=1600.0)
    Measurement.all_points.create(run=run, metric="ttft_ms", point=C16, first_point=False, value=900.0, unit="ms")
    return run


def test_a_run_lists_its_measurements_per_point(client, run):
    [data] = client.get("/api/runs/").json()["runs"]
    first = run.benchmark.default_point
    assert (data["decode_tok_s"], data["point"]) == (100.0, first)
    assert data["measurements"] == [
        {"point": first, "metric": "decode_tok_s", "value": 100.0, "unit": "tok/s", "ci_low": None, "ci_high": None},
        {"point": C16, "metric": "decode_tok_s", "value": 1500.0, "unit": "tok/s", "ci_low": 1400.0, "ci_high": 1600.0},
        {"point": C16, "metric": "ttft_ms", "value": 900.0, "unit": "ms", "ci_low": None, "ci_high": None},
    ]


def test_point_filters_decode_tok_s_to_that_point(client, run):
    [data] = client.get("/api/runs/", {"point": C16}).json()["runs"]
    assert (data["decode_tok_s"], data["point"]) == (1500.0, C16)
    [other] = client.get("/api/runs/", {"point": "c2-p0-m8"}).json()["runs"]
    assert other["decode_tok_s"] is None
    bad = client.get("/api/runs/", {"point": "sixteen"})
    assert bad.status_code == 400 and "not a workload point id like c16-p8192-m256" in bad.json()["error"]


def test_openapi_documents_the_point(client, run):
    import jsonschema

    document = client.get("/api/openapi.json").json()
    operation = document["paths"]["/api/runs/"]["get"]
    assert "point" in {p["name"] for p in operation["parameters"]}
    assert {"point", "measurements"} <= set(document["components"]["schemas"]["Run"]["required"])
    schema = {**document["components"]["schemas"]["Runs"], "components": document["components"]}
    jsonschema.validate(client.get("/api/runs/", {"point": C16}).json(), schema)
