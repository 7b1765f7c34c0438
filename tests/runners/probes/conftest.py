"""The fake vLLM token server (token_server.py), started once per module in its own process."""
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

SERVER = Path(__file__).with_name("token_server.py")


class TokenServer:
    def __init__(self, port: int):
        self.root = f"http://127.0.0.1:{port}"

    def url(self, **scenario) -> str:
        """Base URL of a scenario, e.g. url(cadence_ms=5, k=3, tag="x")."""
        return f"{self.root}/s/{self.scenario(**scenario)}"

    @staticmethod
    def scenario(**scenario) -> str:
        return ",".join(f"{k}={v}" for k, v in scenario.items())

    def log(self, **scenario) -> list[dict]:
        r = httpx.get(f"{self.root}/_log", params={"scenario": self.scenario(**scenario)}, trust_env=False)
        r.raise_for_status()
        return r.json()


@pytest.fixture(scope="module")
def token_server():
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("PORT "), f"token server did not start: {line!r}"
        yield TokenServer(int(line.split()[1]))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
