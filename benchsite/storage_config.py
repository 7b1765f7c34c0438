"""The artifact storage's STORAGES entries (settings.py builds one from environment variables;
the tests build the same against a local S3 server)."""
from pathlib import Path

S3_PART_BYTES = 8 * 1024 * 1024


def filesystem_artifacts_storage(location: Path | str) -> dict:
    return {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}}


def s3_artifacts_storage(*, bucket: str, endpoint_url: str = "", region: str = "", access_key: str = "",
                         secret_key: str = "", prefix: str = "") -> dict:
    """django-storages' S3Storage for any S3-compatible store (MinIO: path-style addressing).
    Uploads stream in 8 MiB parts, two at a time: a non-seekable stream (what the worker
    sends, hashed as it goes) is buffered part by part, at most 3 parts in memory (boto3's
    default, 10, costs 80 MB more: benchmarks/artifacts_memory.py)."""
    from boto3.s3.transfer import TransferConfig

    transfer = TransferConfig(multipart_threshold=S3_PART_BYTES, multipart_chunksize=S3_PART_BYTES, max_concurrency=2)
    transfer.max_in_memory_upload_chunks = 3  # s3transfer's setting; boto3's constructor does not take it
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {
        "bucket_name": bucket,
        "endpoint_url": endpoint_url or None,
        "region_name": region or None,
        "access_key": access_key or None,  # None: boto3's own chain (AWS_* variables, an instance role)
        "secret_key": secret_key or None,
        "location": prefix,
        "addressing_style": "path" if endpoint_url else None,
        "default_acl": None,
        "querystring_auth": True,
        "file_overwrite": False,
        "transfer_config": transfer,
    }}
