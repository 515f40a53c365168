"""Federate's Alembic history (its own version table: see ``fuzzball_federation.models``)."""
