"""Shared fixtures for the workflow specification tests.

The reference workflow examples live in the ``shared`` folder next to the repository root
(``../shared/reference/workflow-examples``): CI has it, a bare clone does not. Without it the
tests that read the examples are skipped, each with the reason, and the rest run. A test reads
the examples when its body names ``EXAMPLE_FILES``, ``V1_EXAMPLE_FILES`` or ``EXAMPLES_DIR``,
or when it is parametrized over one of those lists.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from types import CodeType

import pytest
from support.example_files import EXAMPLE_FILES, MISSING_REASON, V1_EXAMPLE_FILES

from fuzzball_core.errors import InvalidArgument
from fuzzball_core.spec import ParsedWorkflow, field_violations, parse_workflow

CORPUS_NAMES = frozenset({"EXAMPLE_FILES", "V1_EXAMPLE_FILES", "EXAMPLES_DIR"})


def _names(code: CodeType) -> set[str]:
    """The global names ``code`` and the functions nested in it load."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _names(constant)
    return names


def _reads_examples(item: pytest.Item) -> bool:
    function = getattr(item, "function", None)
    if function is None:
        return False
    if CORPUS_NAMES & _names(function.__code__):
        return True
    return any(
        len(mark.args) > 1 and (mark.args[1] is EXAMPLE_FILES or mark.args[1] is V1_EXAMPLE_FILES)
        for mark in item.iter_markers("parametrize")
    )


def pytest_report_header() -> str | None:
    """Say once, at the top of the run, why the example tests will be skipped."""
    return f"skipping the workflow-example tests: {MISSING_REASON}" if MISSING_REASON else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the tests that read the examples, naming the missing folder, when it is absent."""
    if MISSING_REASON is None:
        return
    for item in items:
        if _reads_examples(item):
            # first, ahead of pytest's own "got empty parameter set" skip, so ours is reported
            item.add_marker(pytest.mark.skip(reason=MISSING_REASON), append=False)


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
