"""Alembic environment: runs migrations on the engine the caller put in the config."""

from alembic import context

from fuzzball_core.store.models import Base

engine = context.config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    context.run_migrations()
