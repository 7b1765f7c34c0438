"""The artifact storage under test: a folder, a real S3-compatible server on localhost (moto's
ThreadedMotoServer: MinIO cannot run here), and a real 1 MiB tmpfs that fills up (ENOSPC)."""
import socket
import subprocess
import uuid

import boto3
import pytest

from benchsite.storage_config import filesystem_artifacts_storage, s3_artifacts_storage

S3_KEYS = {"access_key": "testing-key", "secret_key": "testing-secret", "region": "us-east-1"}


def use_storage(settings, entry: dict) -> None:
    # Django's setting_changed handler forgets the cached storages, so storages["artifacts"] is new.
    settings.STORAGES = {**settings.STORAGES, "artifacts": entry}


@pytest.fixture
def fs_storage(settings, tmp_path):
    root = tmp_path / "artifacts"
    use_storage(settings, filesystem_artifacts_storage(root))
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3_storage(settings, s3_server):
    """A fresh bucket on the local S3 server; returns a boto3 client to look inside it."""
    bucket = f"artifacts-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id=S3_KEYS["access_key"],
                          aws_secret_access_key=S3_KEYS["secret_key"], region_name=S3_KEYS["region"])
    client.create_bucket(Bucket=bucket)
    use_storage(settings, s3_artifacts_storage(bucket=bucket, endpoint_url=s3_server, prefix="bench", **S3_KEYS))
    client.bucket = bucket
    return client


def s3_keys(client) -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=client.bucket).get("Contents", [])]


@pytest.fixture
def full_disk(settings, tmp_path):
    """A real 1 MiB tmpfs as the artifact storage: a larger write fails with ENOSPC from the
    kernel, through Django's FileSystemStorage. Mounting needs root (the suite runs as root in
    CI); when it cannot mount, the test fails and says why."""
    root = tmp_path / "tiny-disk"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(root)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a 1 MiB tmpfs for the ENOSPC test (needs root): {mounted.stderr.strip()}")
    use_storage(settings, filesystem_artifacts_storage(root))
    yield root
    subprocess.run(["umount", str(root)], check=True)


def files_under(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
