import pytest


@pytest.fixture(scope="session")
def overlay_cache(tmp_path_factory):
    """One overlay cache for the overlay and correctness tests: each patch set of the installed
    vLLM is laid out once per session (cached_overlay reuses a finished overlay)."""
    return tmp_path_factory.mktemp("overlays")
