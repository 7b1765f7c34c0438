"""The database triggers that keep metrics_runcount equal to `SELECT benchmark_id, state, trigger,
COUNT(*) FROM bench_run GROUP BY 1, 2, 3`, for PostgreSQL and SQLite, and the recount that
fills it from scratch (the migration, `manage.py bench_metrics_recount`)."""

RECOUNT = [
    "DELETE FROM metrics_runcount",
    'INSERT INTO metrics_runcount (benchmark_id, state, "trigger", n) '
    'SELECT benchmark_id, state, "trigger", COUNT(*) FROM bench_run GROUP BY benchmark_id, state, "trigger"',
]

# One row function. An update touches its two rows in key order, so two transactions that move
# runs in opposite directions lock them in the same order (no deadlock between them).
POSTGRES_CREATE = [
    """
CREATE OR REPLACE FUNCTION metrics_runcount_add(b bigint, s varchar, t varchar, d integer) RETURNS void AS $$
BEGIN
    INSERT INTO metrics_runcount (benchmark_id, state, "trigger", n) VALUES (b, s, t, d)
    ON CONFLICT (benchmark_id, state, "trigger") DO UPDATE SET n = metrics_runcount.n + d;
END $$ LANGUAGE plpgsql
""",
    """
CREATE OR REPLACE FUNCTION metrics_runcount_apply() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM metrics_runcount_add(NEW.benchmark_id, NEW.state, NEW."trigger", 1);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM metrics_runcount_add(OLD.benchmark_id, OLD.state, OLD."trigger", -1);
    ELSIF (OLD.benchmark_id, OLD.state, OLD."trigger") < (NEW.benchmark_id, NEW.state, NEW."trigger") THEN
        PERFORM metrics_runcount_add(OLD.benchmark_id, OLD.state, OLD."trigger", -1);
        PERFORM metrics_runcount_add(NEW.benchmark_id, NEW.state, NEW."trigger", 1);
    ELSE
        PERFORM metrics_runcount_add(NEW.benchmark_id, NEW.state, NEW."trigger", 1);
        PERFORM metrics_runcount_add(OLD.benchmark_id, OLD.state, OLD."trigger", -1);
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql
""",
    "CREATE TRIGGER metrics_runcount_insert_delete AFTER INSERT OR DELETE ON bench_run "
    "FOR EACH ROW EXECUTE FUNCTION metrics_runcount_apply()",
    'CREATE TRIGGER metrics_runcount_update AFTER UPDATE OF benchmark_id, state, "trigger" ON bench_run '
    "FOR EACH ROW WHEN ((OLD.benchmark_id, OLD.state, OLD.\"trigger\") IS DISTINCT FROM "
    '(NEW.benchmark_id, NEW.state, NEW."trigger")) EXECUTE FUNCTION metrics_runcount_apply()',
]
POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS metrics_runcount_update ON bench_run",
    "DROP TRIGGER IF EXISTS metrics_runcount_insert_delete ON bench_run",
    "DROP FUNCTION IF EXISTS metrics_runcount_apply()",
    "DROP FUNCTION IF EXISTS metrics_runcount_add(bigint, varchar, varchar, integer)",
]


def _sqlite_add(row: str, delta: int) -> str:
    key = f'{row}.benchmark_id, {row}.state, {row}."trigger"'
    where = f'benchmark_id = {row}.benchmark_id AND state = {row}.state AND "trigger" = {row}."trigger"'
    return (f'INSERT OR IGNORE INTO metrics_runcount (benchmark_id, state, "trigger", n) VALUES ({key}, 0); '
            f"UPDATE metrics_runcount SET n = n + ({delta}) WHERE {where};")


# SQLite has one writer at a time: no lock order to keep.
SQLITE_CREATE = [
    f"CREATE TRIGGER metrics_runcount_insert AFTER INSERT ON bench_run BEGIN {_sqlite_add('NEW', 1)} END",
    f"CREATE TRIGGER metrics_runcount_delete AFTER DELETE ON bench_run BEGIN {_sqlite_add('OLD', -1)} END",
    'CREATE TRIGGER metrics_runcount_update AFTER UPDATE OF benchmark_id, state, "trigger" ON bench_run '
    "WHEN OLD.benchmark_id IS NOT NEW.benchmark_id OR OLD.state IS NOT NEW.state "
    f'OR OLD."trigger" IS NOT NEW."trigger" BEGIN {_sqlite_add("OLD", -1)} {_sqlite_add("NEW", 1)} END',
]
SQLITE_DROP = [f"DROP TRIGGER IF EXISTS metrics_runcount_{op}" for op in ("insert", "delete", "update")]


def statements(vendor: str, *, create: bool) -> list[str]:
    if vendor == "postgresql":
        return POSTGRES_CREATE if create else POSTGRES_DROP
    if vendor == "sqlite":
        return SQLITE_CREATE if create else SQLITE_DROP
    raise NotImplementedError(f"run counts for metrics: no triggers written for the {vendor} database")
