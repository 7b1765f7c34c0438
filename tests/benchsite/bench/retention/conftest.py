"""The artifact storages under test are the storage tests' own: a folder and a local S3 server."""
from ..storage.conftest import fs_storage, s3_server, s3_storage  # noqa: F401 - fixtures
