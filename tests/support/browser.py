"""Debian's headless Chromium driven by Selenium, for the Web UI tests.

``chromium`` and ``chromium-driver`` come from Debian (scripts/install.sh); nothing is
downloaded (the driver's path is given, so Selenium Manager is not asked). The browser's
console is recorded, so tests can say no page logged an error.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: a laptop's screen
WINDOW = "1366,900"


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            return f"{path} is not installed (apt-get install chromium chromium-driver)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium WebDriver, quit afterwards."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={WINDOW}",
        "--lang=en-GB",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingOptions", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: Any) -> list[str]:
    """What the pages loaded so far logged to the console as errors (CSP refusals among
    them), since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
