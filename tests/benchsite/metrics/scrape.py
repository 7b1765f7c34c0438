"""Reading /metrics the way Prometheus does: prometheus_client's own text parser."""
from prometheus_client.parser import text_string_to_metric_families

TOKEN = "s3cret-metrics-token"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: dict, name: str, **labels) -> float:
    return found[(name, tuple(sorted(labels.items())))]


def scrape(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    return samples(response.content.decode())
