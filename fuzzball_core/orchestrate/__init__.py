"""Orchestrate: the control plane (store, engine, scheduler loop, node stream, service layer)."""
