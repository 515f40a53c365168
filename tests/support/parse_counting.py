"""Counting the documents the workflow parser loads, for tests of what is parsed again."""

from __future__ import annotations

from typing import Any

import pytest

from fuzzball_core.spec import parsing


def counting_loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The documents the parser loads from now on (for this test), as it loads them."""
    loaded: list[Any] = []
    load = parsing.load_document

    def counted(data: Any) -> Any:
        loaded.append(data)
        return load(data)

    monkeypatch.setattr(parsing, "load_document", counted)
    return loaded
