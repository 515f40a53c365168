"""The Web UI tests' stack (one per module: the browser tests share it) and browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import chromium, chromium_missing
from support.webui_stack import WebUiStack, running_webui_stack


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebUiStack]:
    with running_webui_stack(Path(tmp_path_factory.mktemp("webui"))) as stack:
        yield stack


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = chromium_missing()
    if missing is not None:  # install.sh installs it; say so loudly rather than pass
        pytest.fail(missing)
    with chromium() as driver:
        yield driver


@pytest.fixture
def fresh_browser(browser: Any) -> Any:
    """The module's browser with no cookies and an empty console log."""
    browser.delete_all_cookies()
    browser.get_log("browser")
    return browser
