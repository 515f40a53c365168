"""Orchestrate's state: SQLAlchemy 2 models, Alembic migrations, the database connection."""
