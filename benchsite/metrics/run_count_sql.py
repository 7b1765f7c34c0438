"""The database triggers that keep metrics_runcount equal to `SELECT benchmark_id, state, trigger,
COUNT(*) FROM bench_run GROUP BY 1, 2, 3`, for PostgreSQL and SQLite, and the recount that
fills it from scratch (the migration, `manage.py bench_metrics_recount`)."""

RECOUNT = [
    "DELETE FROM metrics_runcount",
    'INSERT INTO metrics_runcount (benchmark_id, state, "trigger", n) '
    'SELECT benchmark_id, state, "trigger", COUNT(*) FROM bench_run GROUP BY benchmark_id, state, "trigger"',
]

# PostgreSQL: statement triggers over the transition tables, so a statement that writes many runs
# (a COPY or bulk_create of a million, a bulk cancel) adds one aggregate per key instead of
# updating a key's row once per run (each such update leaves a row version that the next one has
# to step over until the transaction ends). Keys are written in order: two transactions lock
# the rows they share in the same order. A statement that moves no run between keys writes nothing.
_PG_ADD = """
    INSERT INTO metrics_runcount (benchmark_id, state, "trigger", n)
    SELECT benchmark_id, state, "trigger", SUM(d) FROM ({rows}) AS moved
    GROUP BY benchmark_id, state, "trigger" HAVING SUM(d) <> 0 ORDER BY benchmark_id, state, "trigger"
    ON CONFLICT (benchmark_id, state, "trigger") DO UPDATE SET n = metrics_runcount.n + EXCLUDED.n;"""
_NEW = 'SELECT benchmark_id, state, "trigger", 1 AS d FROM new_rows'
_OLD = 'SELECT benchmark_id, state, "trigger", -1 AS d FROM old_rows'
POSTGRES_CREATE = [
    f"""
CREATE OR REPLACE FUNCTION metrics_runcount_apply() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN{_PG_ADD.format(rows=_NEW)}
    ELSIF TG_OP = 'DELETE' THEN{_PG_ADD.format(rows=_OLD)}
    ELSE{_PG_ADD.format(rows=f"{_OLD} UNION ALL {_NEW}")}
    END IF;
    RETURN NULL;
END $$ LANGUAGE plpgsql
""",
    # one trigger per event: PostgreSQL gives transition tables only to single-event triggers
    "CREATE TRIGGER metrics_runcount_insert AFTER INSERT ON bench_run REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION metrics_runcount_apply()",
    "CREATE TRIGGER metrics_runcount_delete AFTER DELETE ON bench_run REFERENCING OLD TABLE AS old_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION metrics_runcount_apply()",
    "CREATE TRIGGER metrics_runcount_update AFTER UPDATE ON bench_run "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION metrics_runcount_apply()",
]
POSTGRES_DROP = [
    *(f"DROP TRIGGER IF EXISTS metrics_runcount_{op} ON bench_run" for op in ("insert", "delete", "update")),
    "DROP FUNCTION IF EXISTS metrics_runcount_apply()",
]


def _sqlite_add(row: str, delta: int) -> str:
    key = f'{row}.benchmark_id, {row}.state, {row}."trigger"'
    where = f'benchmark_id = {row}.benchmark_id AND state = {row}.state AND "trigger" = {row}."trigger"'
    return (f'INSERT OR IGNORE INTO metrics_runcount (benchmark_id, state, "trigger", n) VALUES ({key}, 0); '
            f"UPDATE metrics_runcount SET n = n + ({delta}) WHERE {where};")


# SQLite: row triggers (it has no statement triggers); one writer at a time, and no row versions to
# step over, so each row's two statements cost the same however many rows a statement writes.
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
