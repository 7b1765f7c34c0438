"""What a worker's result or failure leaves on the run: its artifacts (stored files, or why they
have none) and the build it made; files of an ignored message are discarded."""
import logging

from runners.contract import BUILD_PATHS, BuildInfo, is_full_sha

from ..models import Artifact, Build, Patch, Run
from ..storage import artifacts as artifact_store

log = logging.getLogger(__name__)


def _artifact_ref(run: Run, artifact: dict) -> dict:
    """A stored file's reference: checked when a worker wrote it, written here when inline."""
    if "file" in artifact:
        problem = artifact_store.ref_problem(artifact, run.id)
        return {"error": problem} if problem else artifact
    if "content" in artifact:  # an import, or an older worker's small probe JSON
        try:
            return artifact_store.store_content(artifact["content"], run_id=run.id, kind=artifact["kind"],
                                                name=artifact["name"])
        except artifact_store.ArtifactError as exc:
            return {"error": str(exc)}
    if artifact.get("path"):
        return {"error": f"artifact {artifact['name']} not stored: it stayed on the GPU host at {artifact['path']}"}
    return {"error": artifact.get("error") or f"artifact {artifact['name']} not stored"}


def artifacts_store(run: Run, artifacts: list[dict]) -> None:
    """One row per artifact: its stored file, or the reason it has none (the run's other results
    land either way)."""
    for artifact in artifacts:
        ref = _artifact_ref(run, artifact)
        if ref.get("error"):
            log.warning("run %s: %s", run.id, ref["error"])
        Artifact.objects.create(run=run, kind=artifact["kind"], name=artifact["name"][:200], file=ref.get("file", ""),
                                size=ref.get("size", 0), sha256=ref.get("sha256", ""), error=ref.get("error", "")[:2000])


def artifacts_discard(run_id: int, artifacts: list[dict] | None) -> None:
    """Files written for a result that is ignored (late, or of a stale execution) are deleted;
    never one a stored row points to (a redelivered or retried message of a recorded result)."""
    files = {a["file"] for a in artifacts or [] if isinstance(a.get("file"), str)
             and a["file"].startswith(artifact_store.run_prefix(run_id))}
    kept = set(Artifact.objects.filter(file__in=files).values_list("file", flat=True))
    for file in sorted(files - kept):
        artifact_store.delete(file)


def artifact_create(*, run: Run, kind: str, name: str, content: str | bytes) -> Artifact:
    """Store CONTENT in the artifact storage as an artifact of RUN (ArtifactError if it cannot)."""
    ref = artifact_store.store_content(content, run_id=run.id, kind=kind, name=name)
    return Artifact.objects.create(run=run, kind=kind, name=name[:200], file=ref["file"], size=ref["size"],
                                   sha256=ref["sha256"])


def build_record(run: Run, build: BuildInfo | None) -> None:
    """What the worker built (path, resolved commit, version, duration) as the run's Build; the
    resolved commit becomes the run's `commit` (its `ref` keeps what was asked for)."""
    if not build:
        return
    record = Build.objects.create(
        source=run.benchmark.engine_source,
        path=build.path if build.path in BUILD_PATHS else "",
        repo_url=build.repo or "",
        ref=build.ref or "",
        commit=build.commit or "",
        base_commit=build.base_commit or "",
        parent_commit=build.parent or "",
        first_parent_depth=build.first_parent_depth,
        cache_key=build.cache_key or "",
        cache_hit=build.cache_hit,
        engine_version=build.engine_version or "",
        duration_s=build.duration_s,
    )
    record.patches.set(Patch.objects.filter(sha256__in=build.patches or []))
    run.build = record
    if is_full_sha(record.commit):
        run.commit = record.commit
    if not run.branch and build.branch:  # what the web side knew (a push's branch) stays
        run.branch = build.branch
    run.save(update_fields=["build", "commit", "branch"])

