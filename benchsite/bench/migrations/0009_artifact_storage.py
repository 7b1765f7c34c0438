"""Artifacts move from a text column to the artifact storage (settings.STORAGES["artifacts"]):
each row keeps the file's name, size and sha256, or the error that kept it from being stored."""
from django.db import migrations, models


def content_to_storage(apps, schema_editor):
    from benchsite.bench.storage.artifacts import ArtifactError, store_content

    Artifact = apps.get_model("bench", "Artifact")
    for artifact in Artifact.objects.exclude(content="").iterator(chunk_size=50):
        try:
            ref = store_content(artifact.content, run_id=artifact.run_id, kind=artifact.kind, name=artifact.name)
        except ArtifactError as exc:  # disk full: the row says so instead of stopping the migration
            artifact.error = str(exc)[:2000]
        else:
            artifact.file, artifact.size, artifact.sha256 = ref["file"], ref["size"], ref["sha256"]
        artifact.save(update_fields=["file", "size", "sha256", "error"])


def storage_to_content(apps, schema_editor):
    from benchsite.bench.storage.artifacts import read_bytes

    Artifact = apps.get_model("bench", "Artifact")
    for artifact in Artifact.objects.exclude(file="").iterator(chunk_size=50):
        artifact.content = read_bytes(artifact.file, max_bytes=2_000_000).decode("utf-8", errors="replace")
        artifact.save(update_fields=["content"])


class Migration(migrations.Migration):

    dependencies = [
        ("bench", "0008_run_host_fingerprint"),
    ]

    operations = [
        migrations.AddField(model_name="artifact", name="file", field=models.CharField(blank=True, max_length=500)),
        migrations.AddField(model_name="artifact", name="size",
                            field=models.BigIntegerField(default=0, help_text="bytes")),
        migrations.AddField(model_name="artifact", name="sha256", field=models.CharField(blank=True, max_length=64)),
        migrations.AddField(model_name="artifact", name="error", field=models.CharField(blank=True, max_length=2000)),
        migrations.AlterField(model_name="artifact", name="content", field=models.TextField(blank=True, default="")),
        migrations.RunPython(content_to_storage, storage_to_content),
        migrations.RemoveField(model_name="artifact", name="content"),
    ]
