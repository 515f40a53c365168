"""Alembic environment of Federate's history: the caller's engine, Federate's metadata, and
Federate's own version table (so the database may be Orchestrate's too)."""

from alembic import context

from fuzzball_federation.models import VERSION_TABLE, FederateBase

engine = context.config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=FederateBase.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    context.run_migrations()
