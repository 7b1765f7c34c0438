"""The JSON API's plumbing on Django REST framework (benchsite/rest/): JSON as JsonResponse writes
it, and an answer that lets go of its data once rendered."""
import gc

import pytest
from django.http import JsonResponse

from benchsite.rest.answers import JsonRenderer

pytestmark = pytest.mark.django_db


def test_the_renderer_writes_what_jsonresponse_wrote():
    data = {"runs": [{"title": "Fuse \u2014 \u2713 \U0001f680", "value": float("nan"), "big": 1e300, "none": None,
                      "line": "a\u2028b", "nested": {"list": [1, 2.5, True]}}]}
    assert JsonRenderer().render(data) == JsonResponse(data).content
    assert JsonRenderer().render(None) == b""


def test_an_answer_lets_go_of_its_data_and_view_once_rendered(client):
    """DRF keeps the data and the view in reference cycles: left to the collector, a hundred runs'
    dicts outlive each request and make its full passes come every few requests."""
    response = client.get("/api/runs/", {"limit": "1"})
    assert response.status_code == 200 and response.json() == {"runs": []}
    assert response.data is None and response.renderer_context is None
    def views() -> set[int]:  # the document's generator keeps views of its own
        return {id(o) for o in gc.get_objects() if type(o).__name__ == "RunsView"}

    gc.collect()
    before = views()
    gc.disable()
    try:
        client.get("/api/runs/", {"limit": "0"})  # an error answer too
        client.get("/api/runs/")
        assert views() <= before
    finally:
        gc.enable()
