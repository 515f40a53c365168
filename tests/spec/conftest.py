"""Shared fixtures for the workflow specification tests.

The reference workflow examples live in the ``shared`` folder next to the repository root
(``../shared/reference/workflow-examples``), in CI as on a developer's machine.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest
from example_files import EXAMPLE_FILES, EXAMPLES_DIR, V1_EXAMPLE_FILES  # noqa: F401

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec import ParsedWorkflow, field_violations, parse_workflow


def pytest_configure(config: pytest.Config) -> None:
    if not EXAMPLE_FILES:
        raise pytest.UsageError(f"workflow examples not found in {EXAMPLES_DIR}")


@pytest.fixture
def parse() -> Callable[[str], ParsedWorkflow]:
    """Parse dedented YAML text as a workflow file."""

    def _parse(text: str) -> ParsedWorkflow:
        return parse_workflow(textwrap.dedent(text))

    return _parse


@pytest.fixture
def violations() -> Callable[[str], list[tuple[str, str]]]:
    """Parse dedented YAML text that must be invalid; return its (path, message) errors."""

    def _violations(text: str) -> list[tuple[str, str]]:
        with pytest.raises(InvalidArgument) as caught:
            parse_workflow(textwrap.dedent(text))
        return field_violations(caught.value)

    return _violations


@pytest.fixture
def paths(violations: Callable[[str], list[tuple[str, str]]]) -> Callable[[str], list[str]]:
    """Just the field paths of an invalid workflow's errors."""

    def _paths(text: str) -> list[str]:
        return [path for path, _ in violations(text)]

    return _paths
