"""Federate's routing policies (``fuzzball.routers`` drivers)."""
