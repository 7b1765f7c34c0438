"""Migration operations for tables of millions of rows: an index built without blocking writes."""
from django.db import migrations


class AddIndexConcurrently(migrations.AddIndex):
    """AddIndex built with CREATE INDEX CONCURRENTLY on PostgreSQL: runs go on landing while a
    big table is indexed (a plain CREATE INDEX blocks every insert until it ends). Elsewhere
    (SQLite) a plain AddIndex. The migration must say `atomic = False`."""

    def _concurrently(self, schema_editor, state, method, app_label):
        model = state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            getattr(schema_editor, method)(model, self.index, concurrently=True)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        self._concurrently(schema_editor, to_state, "add_index", app_label)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        self._concurrently(schema_editor, from_state, "remove_index", app_label)
