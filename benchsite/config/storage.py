"""Artifact storage: server and build logs, profiler traces, probe JSON (benchsite/bench/storage/)."""
from pathlib import Path
from typing import Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from .fields import Group, env


class Storage(Group):
    title = "Artifact storage"
    about = ("A storage of its own: a folder shared by the web and a GPU worker on one host, or any S3-compatible "
             "object store (MinIO in docker-compose.yml). GPU workers write with the same storage: give them the "
             "same settings.")

    backend: Literal["filesystem", "s3"] = env("BENCH_ARTIFACTS_BACKEND", "filesystem", "where artifacts are kept")
    folder: Path | None = env("BENCH_ARTIFACTS_DIR", None, "the filesystem storage's folder",
                           shown="`<BENCH_VAR_DIR>/artifacts`")
    max_bytes: int = env("BENCH_ARTIFACT_MAX_BYTES", 2 * 1024**3, "one artifact larger than this is refused (not "
                         "stored, the run says why); streamed, so a disk or bucket bound, not memory", ge=1)
    s3_bucket: str = env("BENCH_ARTIFACTS_S3_BUCKET", "", "the bucket", shown="– (required with `s3`)")
    s3_endpoint_url: str = env("BENCH_ARTIFACTS_S3_ENDPOINT_URL", "", "an S3-compatible server, e.g. "
                               "`http://minio:9000` (path-style addressing)", shown="– (AWS)")
    s3_region: str = env("BENCH_ARTIFACTS_S3_REGION", "", "the bucket's region")
    s3_access_key_id: str = env("BENCH_ARTIFACTS_S3_ACCESS_KEY_ID", "", "the key's id",
                                shown="– (boto3's own chain: `AWS_*` variables, an instance role)")
    s3_secret_access_key: str = env("BENCH_ARTIFACTS_S3_SECRET_ACCESS_KEY", "", "the key's secret",
                                    shown="– (boto3's own chain)", repr=False)
    s3_prefix: str = env("BENCH_ARTIFACTS_S3_PREFIX", "", "a key prefix inside the bucket")

    @model_validator(mode="after")
    def _s3_has_a_bucket(self) -> "Storage":
        if self.backend == "s3" and not self.s3_bucket:
            raise PydanticCustomError("env_rule", "BENCH_ARTIFACTS_S3_BUCKET must be set when BENCH_ARTIFACTS_BACKEND=s3")
        return self
