"""An HTTP client signed in to the Web UI through its own form (no browser)."""

from __future__ import annotations

import re

import httpx

from support.webui_stack import PASSWORD, Person, WebUiStack

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def signed_in(ui: WebUiStack, person: Person) -> tuple[httpx.Client, str]:
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
