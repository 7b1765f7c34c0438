"""Why a build failed, as a kind the service stores in a field (never a string match)."""
from __future__ import annotations


class BuildFailure(RuntimeError):
    """The engine could not be built. `kind` is "build" or "patch" (contract.FAILURE_KINDS);
    `log` is the build log so far (it becomes the run's build_log artifact); `commit` the full
    SHA the ref resolved to, when the build got that far."""

    def __init__(self, message: str, *, kind: str = "build", log: str = "", commit: str = ""):
        super().__init__(message)
        self.kind = kind
        self.log = log
        self.commit = commit
