"""Substrate: the node agent (``fuzzball-substrate``) that runs Orchestrate's jobs here."""
