"""Orchestrate's client-facing API: protos and gRPC servicers, the REST gateway (/v3)."""
