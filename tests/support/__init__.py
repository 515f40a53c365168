"""Helpers the tests (and the benchmarks) share: live API stacks, test clusters with real
agents, registries and images built in the test, network namespaces, chaos rounds.

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so tests import these as
``support.NAME``; nothing here is a test itself.
"""
