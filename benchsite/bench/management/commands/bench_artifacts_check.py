"""Check that this host can write, read and delete in the artifact storage (web and GPU hosts
alike: they must share it), creating the S3 bucket first with --create-bucket."""
import io

from django.core.management.base import BaseCommand, CommandError

from benchsite.bench.storage import artifacts


class Command(BaseCommand):
    help = "Write, read back and delete a small file in the artifact storage (STORAGES['artifacts'])."

    def add_arguments(self, parser):
        parser.add_argument("--create-bucket", action="store_true",
                            help="S3: create the bucket when it does not exist (docker-compose's MinIO starts empty)")

    def handle(self, *args, create_bucket=False, **options):
        store = artifacts.storage()
        where = artifacts.describe_storage()
        if create_bucket:
            created = artifacts.ensure_bucket()
            if created:
                self.stdout.write(f"created bucket {where}")
        probe = b"decode-bench artifact storage check\n"
        try:
            ref = artifacts.store_stream(io.BytesIO(probe), run_id=0, kind="probe_json", name="storage-check.txt")
            back = artifacts.read_bytes(ref["file"], max_bytes=len(probe) + 1)
            store.delete(ref["file"])
        except Exception as exc:  # noqa: BLE001 - every cause is reported the same way
            raise CommandError(f"artifact storage {where} is not usable: {exc}") from exc
        if back != probe:
            raise CommandError(f"artifact storage {where} returned other bytes than were written")
        self.stdout.write(f"artifact storage {where}: write, read and delete ok")
