"""Responses go out gzip-compressed to a client that accepts it, plain to one that does not."""
import gzip
import json

import pytest

from benchsite.bench.lifecycle import results

pytestmark = pytest.mark.django_db


def test_a_page_is_compressed_only_when_the_client_accepts_gzip(client, history, ladder_benchmark):
    url = f"/b/{ladder_benchmark.slug}/"
    plain = client.get(url)
    packed = client.get(url, headers={"accept-encoding": "gzip, deflate, br"})
    assert "Content-Encoding" not in plain and b"<html" in plain.content
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert len(packed.content) < len(plain.content) / 3
    assert b"<html" in gzip.decompress(packed.content)


def test_the_chart_json_is_compressed_and_decodes_to_the_same_series(client, history, ladder_benchmark):
    url = f"/api/benchmarks/{ladder_benchmark.slug}/chart/?metric=decode_tok_s"
    plain = client.get(url).json()
    packed = client.get(url, headers={"accept-encoding": "gzip"})
    assert packed["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(packed.content)) == plain
    assert [len(v["points"]) for v in plain["variants"]] == [3, 2, 2]


def test_an_artifact_download_streams_uncompressed_with_its_length(client, history):
    run = history[(0, 1)]
    artifact = results.artifact_create(run=run, kind="server_log", name="server.log",
                                       content="\n".join(f"INFO line {i}" for i in range(2000)))
    response = client.get(f"/runs/{run.pk}/artifacts/{artifact.pk}/", headers={"accept-encoding": "gzip"})
    assert response.status_code == 200 and "Content-Encoding" not in response
    body = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(body) and body.startswith(b"INFO line 0\n")
