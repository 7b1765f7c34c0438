"""The server cross-check (runners.probes.server_check): the client's mean ITL against the engine's."""
import pytest

from runners.probes.server_check import compare_with_server


def test_client_server_agreement_known_answers():
    """Relative difference of the mean ITLs, warned about above 25 %: 11 ms vs 10 ms is 10 %,
    13 ms vs 10 ms is 30 % and makes the result suspect."""
    result, warnings = {"client_itl_ms_mean": 11.0, "suspect": False}, []
    compare_with_server(result, {"itl_ms_mean": 10.0}, warnings)
    assert result["server_agreement"] == pytest.approx(0.10) and warnings == [] and result["suspect"] is False
    result, warnings = {"client_itl_ms_mean": 13.0, "suspect": False}, []
    compare_with_server(result, {"itl_ms_mean": 10.0}, warnings)
    assert result["server_agreement"] == pytest.approx(0.30) and result["suspect"] is True
    assert warnings == ["client mean ITL 13.000 ms and server mean ITL 10.000 ms differ by 30%"]
