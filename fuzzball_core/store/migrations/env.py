"""Alembic environment: runs migrations on the engine the caller put in the config.

On SQLite, foreign keys are off while the migrations run, as SQLite's own procedure for
changing a table's shape has it: batch mode copies a table and drops the old one, and with
foreign keys on that drop would first delete every row referencing the table (the tokens,
memberships and workflows of ``accounts``). The setting cannot change inside a transaction,
so it is set before the migrations' transaction begins; the references are checked before
it commits (when a migration ran).
"""

from alembic import context

from fuzzball_core.store.models import Base

engine = context.config.attributes["engine"]


def _set_sqlite_foreign_keys(connection, on: bool) -> None:
    connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")
    connection.commit()


with engine.connect() as connection:
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        _set_sqlite_foreign_keys(connection, on=False)
    try:
        with connection.begin():
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                render_as_batch=sqlite,
            )
            migration = context.get_context()
            before = migration.get_current_heads()
            context.run_migrations()
            # checked only when a migration ran: the check reads every table, which a start
            # of an up-to-date database (every start) need not pay
            if sqlite and migration.get_current_heads() != before:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                if broken:
                    raise RuntimeError(
                        f"the migrations left {len(broken)} rows referencing rows that do not"
                        f" exist (first: {tuple(broken[0])}); nothing was changed"
                    )
    finally:
        if sqlite:
            _set_sqlite_foreign_keys(connection, on=True)
