"""Federate serves the Web UI at ``/`` of its REST listener, showing its members: sign-in
with a Federate API token (it has no passwords), the Clusters page, and the workflows pages
through Federate's service. A real Federate (``support.federation_harness``) in front of one
real member, ``onprem``, and one configured member that is not running."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import console_errors
from support.federated_workflows import CPU
from support.federation_harness import GIB, Federation, start_federation, start_member

from fuzzball_core.webui.session import SESSION_COOKIE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    directory = Path(tmp_path_factory.mktemp("federate-ui"))
    onprem = start_member(
        directory,
        "onprem",
        [{"name": "gpu-1", "cores": 4, "memory": 16 * GIB, "devices": {"nvidia.com/gpu": 2}}],
    )
    # nothing listens on port 9: Federate lists this member as unreachable
    gone = {"name": "gone", "address": "http://127.0.0.1:9", "token": "unused"}
    running = start_federation(directory, [onprem], extra_clusters=[gone])
    try:
        yield running
    finally:
        running.close()
        onprem.close()


def sign_in_form(client: httpx.Client) -> str:
    """The sign-in form's CSRF guard (its cookie is now in ``client``)."""
    form = client.get("/signin")
    guard = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert guard is not None
    return guard[1]


def signed_in(federation: Federation, token: str | None = None) -> httpx.Client:
    """A client signed in with a Federate API token (the user's unless another is given)."""
    client = httpx.Client(base_url=federation.rest_url)
    pasted = token or federation.token
    answer = client.post("/signin", data={"csrf": sign_in_form(client), "token": pasted})
    assert answer.status_code == 303, answer.text
    return client


def test_the_sign_in_form_asks_for_an_api_token_and_says_there_are_no_passwords(
    federation: Federation,
) -> None:
    form = httpx.get(f"{federation.rest_url}/signin")
    assert form.status_code == 200
    assert 'name="token"' in form.text
    assert 'name="password"' not in form.text
    assert "has no passwords" in form.text
    assert "script-src 'self'" in form.headers["Content-Security-Policy"]


def test_an_api_token_signs_in_to_the_clusters_page(federation: Federation) -> None:
    client = signed_in(federation)
    home = client.get("/")
    assert home.status_code == 303
    assert home.headers["Location"] == "/clusters"
    page = client.get("/clusters")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert 'href="/clusters" aria-current="page"' in page.text


def test_the_session_cookie_holds_a_token_of_its_own_httponly_and_strict(
    federation: Federation,
) -> None:
    client = signed_in(federation)
    session_token = client.cookies[SESSION_COOKIE]
    assert session_token != federation.token  # signing out must not revoke the pasted one
    assert federation.service.authenticate(session_token).account_id == federation.who.account_id
    jar = next(c for c in client.cookies.jar if c.name == SESSION_COOKIE)
    assert jar.has_nonstandard_attr("HttpOnly")
    assert jar.get_nonstandard_attr("SameSite") == "Strict"


def test_the_clusters_page_lists_the_member_with_its_nodes_free_capacity_and_labels(
    federation: Federation,
) -> None:
    page = signed_in(federation).get("/clusters").text
    row = re.search(r'<tr id="cluster-onprem">(.*?)</tr>', page, re.S)
    assert row is not None
    cells = [re.sub(r"<[^>]+>", " ", cell).split() for cell in row[1].split("</td>")]
    assert cells[1] == ["READY"]
    assert cells[2:5] == [["1"], ["4"], ["16", "GiB"]]  # ready nodes, free cores, memory
    assert "nvidia.com/gpu:" in cells[5] and "2" in cells[5]
    assert "site=onprem" in row[1]


def test_a_member_that_does_not_answer_is_listed_unreachable_saying_why(
    federation: Federation,
) -> None:
    page = signed_in(federation).get("/clusters").text
    row = re.search(r'<tr id="cluster-gone">(.*?)</tr>', page, re.S)
    assert row is not None
    assert "UNREACHABLE" in row[1]
    assert re.search(r"UNREACHABLE<br><small>\S", row[1])  # the problem is shown, not blank


def test_a_bad_token_is_refused_without_a_session(federation: Federation) -> None:
    client = httpx.Client(base_url=federation.rest_url)
    answer = client.post("/signin", data={"csrf": sign_in_form(client), "token": "not-a-token"})
    assert answer.status_code == 401
    assert "not valid" in answer.text
    assert SESSION_COOKIE not in answer.cookies
    assert client.get("/clusters").status_code == 303  # still sent to sign in


def test_an_empty_token_is_a_400_asking_for_one(federation: Federation) -> None:
    client = httpx.Client(base_url=federation.rest_url)
    answer = client.post("/signin", data={"csrf": sign_in_form(client), "token": " "})
    assert answer.status_code == 400
    assert "Paste an API token" in answer.text


def test_a_sign_in_posted_from_elsewhere_is_refused(federation: Federation) -> None:
    answer = httpx.post(f"{federation.rest_url}/signin", data={"token": federation.token})
    assert answer.status_code == 403
    assert SESSION_COOKIE not in answer.cookies


def test_federate_shows_no_orchestrate_only_pages(federation: Federation) -> None:
    client = signed_in(federation)
    page = client.get("/clusters").text
    assert 'href="/workflows"' in page
    assert 'href="/nodes"' not in page and 'href="/secrets"' not in page
    assert client.get("/nodes").status_code == 404


def test_signing_out_ends_the_session_but_not_the_pasted_token(federation: Federation) -> None:
    client = signed_in(federation)
    session_token = client.cookies[SESSION_COOKIE]
    csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/clusters").text)
    assert csrf is not None
    assert client.post("/signout", data={"csrf": csrf[1]}).status_code == 303
    again = httpx.get(f"{federation.rest_url}/clusters", cookies={SESSION_COOKIE: session_token})
    assert again.status_code == 303 and "expired=1" in again.headers["Location"]
    assert federation.service.authenticate(federation.token).name == "alice"


def test_a_federated_workflow_shows_in_the_list_and_its_detail_page(
    federation: Federation,
) -> None:
    workflow_id = federation.client().start_workflow(CPU, name="federated-ui")
    client = signed_in(federation)
    listing = client.get("/workflows")
    assert listing.status_code == 200
    assert f'href="/workflows/{workflow_id}"' in listing.text
    detail = client.get(f"/workflows/{workflow_id}")
    assert detail.status_code == 200, detail.text
    assert "federated-ui" in detail.text


def test_a_workflow_started_from_the_editor_is_sent_to_the_member(
    federation: Federation,
) -> None:
    client = signed_in(federation)
    editor = client.get("/editor")
    assert editor.status_code == 200
    csrf = re.search(r'name="csrf" value="([^"]+)"', editor.text)
    assert csrf is not None
    answer = client.post(
        "/editor/start", data={"csrf": csrf[1], "name": "from-editor", "specification": CPU}
    )
    assert answer.status_code == 303, answer.text
    workflow_id = answer.headers["Location"].removeprefix("/workflows/")
    assert federation.service.cluster_of(federation.who, workflow_id) == "onprem"


def test_another_accounts_workflow_is_absent_from_its_pages(federation: Federation) -> None:
    workflow_id = federation.client().start_workflow(CPU, name="alice-only")
    _, bob = federation.service.create_account("bob-ui")
    client = signed_in(federation, bob)
    assert client.get(f"/workflows/{workflow_id}").status_code == 404
    assert workflow_id not in client.get("/workflows").text


def test_signing_in_with_a_token_in_chromium_shows_the_members(
    fresh_browser: Any, federation: Federation
) -> None:
    browser = fresh_browser
    browser.get(f"{federation.rest_url}/")
    assert "/signin" in browser.current_url
    browser.find_element(By.ID, "token").send_keys(federation.token)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.ID, "cluster-onprem"))
    )
    assert browser.current_url == f"{federation.rest_url}/clusters"
    assert SESSION_COOKIE not in browser.execute_script("return document.cookie")
    assert console_errors(browser) == []
