"""Signing in to the Web UI through its own form: an HTTP client, or a browser."""

from __future__ import annotations

import re
from typing import Any, Protocol

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from support.webui_stack import PASSWORD, Person, WebUiStack

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


class Served(Protocol):
    """Anything serving the UI at ``url`` (a :class:`WebUiStack`, the benchmark's server)."""

    url: str


def signed_in(ui: Served, person: Person) -> tuple[httpx.Client, str]:
    """A client signed in as ``person``, and its session's CSRF token."""
    client = httpx.Client(base_url=ui.url)
    guard = _CSRF.search(client.get("/signin").text)
    assert guard is not None
    answer = client.post(
        "/signin", data={"csrf": guard[1], "email": person.email, "password": PASSWORD}
    )
    assert answer.status_code == 303, answer.text
    token = _CSRF.search(client.get("/").text)
    assert token is not None
    return client, token[1]


def browser_sign_in(browser: Any, ui: WebUiStack, person: Person, page: str = "/") -> None:
    """Sign ``person`` in through the form in ``browser``, starting from ``page``."""
    browser.get(f"{ui.url}{page}")
    browser.find_element(By.ID, "email").send_keys(person.email)
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda driver: "/signin" not in driver.current_url)
    WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.ID, "main"))
    )
