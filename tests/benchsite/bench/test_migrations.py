"""Each app's migrations form one line: every migration of an app follows all its others that
come before it. Going back on SQLite rebuilds a table from the state Django computes from the
whole plan: with two parallel migrations of one app, the one unapplied last is rebuilt with the
other's columns (NOT NULL, without their defaults), and migrating back to an older migration
leaves a schema that no longer accepts a row (tests/benchsite/test_data_migrations.py, its storage step)."""
from django.db.migrations.loader import MigrationLoader

APPS = ("bench", "regressions", "hooks")


def test_each_apps_migrations_form_one_line():
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    for app in APPS:
        [leaf] = graph.leaf_nodes(app)
        line = [node for node in graph.forwards_plan(leaf) if node[0] == app]
        parallel = [(earlier[1], later[1]) for earlier, later in zip(line, line[1:])
                    if earlier not in graph.forwards_plan(later)]
        assert parallel == [], f"{app}: migrations not one after the other"
