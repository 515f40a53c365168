"""The Web UI in headless Chromium: signing in, the session cookie, the security policy,
node holds from the nodes page, and what a member without node permissions sees.

Screenshots of the dashboard and the nodes page are written to docs/screenshots/ (the
README shows them), so they follow the pages as they change.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait
from support.browser import console_errors
from support.webui_stack import PASSWORD, PROXY_URL, Person, WebUiStack

from fuzzball_core.store.models import ServiceEndpoint, Workflow

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def sign_in(browser: Any, ui: WebUiStack, person: Person, page: str = "/") -> None:
    """Sign ``person`` in through the form, starting from ``page``."""
    browser.get(f"{ui.url}{page}")
    browser.find_element(By.ID, "email").send_keys(person.email)
    browser.find_element(By.ID, "password").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.ID, "main"))
    )
    WebDriverWait(browser, 10).until(lambda driver: "/signin" not in driver.current_url)


def hold_state_of(browser: Any, node_id: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f"#node-{node_id} .hold-state").text


def wait_for_hold_state(browser: Any, node_id: str, state: str) -> None:
    """Wait until the reloaded nodes page shows ``node_id`` in ``state``."""
    WebDriverWait(
        browser, 10, ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)
    ).until(lambda driver: hold_state_of(driver, node_id) == state)


def test_signing_in_opens_the_page_asked_for(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    browser.get(f"{ui.url}/nodes")
    assert "/signin" in browser.current_url  # not signed in yet
    sign_in(browser, ui, ui.admin, page="/nodes")
    assert browser.current_url == f"{ui.url}/nodes"
    assert browser.find_element(By.TAG_NAME, "h1").text == "Nodes"
    assert ui.admin.email in browser.find_element(By.CSS_SELECTOR, ".who").text


def test_a_wrong_password_is_refused_on_the_form(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    browser.get(f"{ui.url}/signin")
    browser.find_element(By.ID, "email").send_keys(ui.member.email)
    browser.find_element(By.ID, "password").send_keys("not-the-password")
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    error = WebDriverWait(browser, 10).until(
        expected_conditions.presence_of_element_located((By.ID, "signin-error"))
    )
    assert "invalid" in error.text.lower() or "password" in error.text.lower()
    assert browser.get_cookie("fuzzball_session") is None


def test_the_session_cookie_is_not_readable_from_script(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.member)
    cookie = browser.get_cookie("fuzzball_session")
    assert cookie is not None and cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
    assert "fuzzball_session" not in browser.execute_script("return document.cookie")


def test_pages_log_no_console_errors(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.admin)
    for page in ("/", "/nodes", f"/nodes/{ui.nodes[0].id}", "/nodes?sort=cores&order=desc"):
        browser.get(f"{ui.url}{page}")
        # the script ran (dates localized, htmx loaded): the CSP let this origin's files in
        assert browser.execute_script("return typeof htmx") == "object"
        assert console_errors(browser) == [], page


def test_pages_carry_the_content_security_policy(ui: WebUiStack) -> None:
    for page in ("/signin", "/static/fuzzball.js"):
        headers = httpx.get(f"{ui.url}{page}").headers
        policy = headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-inline" not in policy
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_cordon_and_uncordon_change_the_hold_column(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    node = ui.nodes[0]
    sign_in(browser, ui, ui.admin, page="/nodes")
    assert hold_state_of(browser, node.id) == "ready"
    browser.find_element(By.ID, f"reason-{node.id}").send_keys("disk check")
    browser.find_element(By.CSS_SELECTOR, f"button[aria-label='Cordon {node.name}']").click()
    wait_for_hold_state(browser, node.id, "cordoned")
    holds = browser.find_element(By.CSS_SELECTOR, f"#node-{node.id} .holds").text
    assert holds == "cordon (admin)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "nodes.png"))
    browser.find_element(By.CSS_SELECTOR, f"button[aria-label='Uncordon {node.name}']").click()
    wait_for_hold_state(browser, node.id, "ready")
    assert console_errors(browser) == []


def test_the_dashboard_counts_nodes_by_hold_state(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    held = ui.nodes[1]
    hold = ui.stack.add_hold(ui.admin_principal(), held.id, "cordon", "screenshot")
    try:
        sign_in(browser, ui, ui.admin)
        assert browser.find_element(By.ID, "nodes-ready").text == "1"
        assert browser.find_element(By.ID, "nodes-cordoned").text == "1"
        assert browser.find_element(By.ID, "nodes-offline").text == "0"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(SCREENSHOTS / "dashboard.png"))
    finally:
        ui.stack.release_hold(ui.admin_principal(), held.id, hold.id)


def test_a_member_sees_no_node_actions(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.member)
    assert "does not show the cluster's nodes" in browser.find_element(By.ID, "main").text
    assert browser.find_elements(By.CSS_SELECTOR, "button[aria-label^='Cordon']") == []
    browser.get(f"{ui.url}/nodes")
    assert browser.find_elements(By.CSS_SELECTOR, "button[aria-label^='Cordon']") == []
    assert "read_nodes" in browser.find_element(By.CSS_SELECTOR, "[role=alert]").text


def test_an_expired_session_returns_to_sign_in_saying_so(
    fresh_browser: Any, ui: WebUiStack
) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.member)
    ui.stack.service.accounts.revoke(browser.get_cookie("fuzzball_session")["value"])
    browser.get(f"{ui.url}/")
    assert "/signin" in browser.current_url
    assert "session has expired" in browser.find_element(By.CSS_SELECTOR, "[role=status]").text


def test_signing_out_revokes_the_session(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.member)
    token = browser.get_cookie("fuzzball_session")["value"]
    browser.find_element(By.CSS_SELECTOR, ".signout button").click()
    WebDriverWait(browser, 10).until(lambda driver: "signed_out" in driver.current_url)
    answer = httpx.get(f"{ui.url}/v3/workflows", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401


def serve_endpoints(ui: WebUiStack, account_id: str, names: list[str]) -> str:
    """A running workflow of ``account_id`` serving endpoints ``names``; its id."""
    now, workflow_id = time.time(), str(uuid.uuid4())
    with ui.stack.service.sessions() as session, session.begin():
        session.add(
            Workflow(
                id=workflow_id, account_id=account_id, name="serving", status="STARTED",
                raw_specification="", definition_v4="", created_at=now, started_at=now,
            )
        )  # fmt: skip
        for name in names:
            session.add(
                ServiceEndpoint(
                    id=str(uuid.uuid4()), name=name, account_id=account_id, kind="path",
                    workflow_id=workflow_id, service=name, port=8080, created_at=now,
                    updated_at=now,
                )
            )  # fmt: skip
    return workflow_id


def test_connect_becomes_a_menu_for_several_endpoints(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    account = ui.admin_principal().account_id
    single = serve_endpoints(ui, account, ["notebook"])
    several = serve_endpoints(ui, account, ["api", "dashboard"])
    sign_in(browser, ui, ui.admin, page="/endpoints")
    link = browser.find_element(By.CSS_SELECTOR, f"#endpoints-{single} .connect a")
    assert link.text == "Connect" and link.get_attribute("href").startswith(PROXY_URL)
    menu = browser.find_element(By.CSS_SELECTOR, f"#endpoints-{several} details.menu")
    entries = menu.find_elements(By.CSS_SELECTOR, "li a")
    assert not any(entry.is_displayed() for entry in entries)  # closed until asked
    menu.find_element(By.TAG_NAME, "summary").click()
    assert [entry.text for entry in entries] == ["api", "dashboard"]
    assert all(entry.is_displayed() for entry in entries)
    assert console_errors(browser) == []


def test_the_dashboard_counts_refresh_in_place(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    node = ui.nodes[1]
    sign_in(browser, ui, ui.admin)
    assert browser.find_element(By.ID, "nodes-evicting").text == "0"
    browser.execute_script("document.body.dataset.marker = 'same page'")
    hold = ui.stack.add_hold(ui.admin_principal(), node.id, "evict", "refresh")
    try:
        WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda driver: driver.find_element(By.ID, "nodes-evicting").text == "1"
        )
        # no reload: the marker set on this page's body is still there
        assert browser.execute_script("return document.body.dataset.marker") == "same page"
        assert console_errors(browser) == []
    finally:
        ui.stack.release_hold(ui.admin_principal(), node.id, hold.id)


def test_signing_in_works_from_the_keyboard_alone(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    browser.get(f"{ui.url}/signin")
    focused = browser.switch_to.active_element
    assert focused.get_attribute("id") == "email"  # the form starts focused
    focused.send_keys(ui.member.email, Keys.TAB)
    browser.switch_to.active_element.send_keys(PASSWORD, Keys.ENTER)
    WebDriverWait(browser, 10).until(lambda driver: "/signin" not in driver.current_url)
    assert browser.find_element(By.TAG_NAME, "h1").text == "Dashboard"
    # the first Tab reaches the skip link, which takes focus past the navigation
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    skip = browser.switch_to.active_element
    assert skip.text == "Skip to content"
    skip.send_keys(Keys.ENTER)
    assert browser.switch_to.active_element.get_attribute("id") == "main"


def test_the_nodes_page_fits_a_laptop_screen(fresh_browser: Any, ui: WebUiStack) -> None:
    browser = fresh_browser
    sign_in(browser, ui, ui.admin, page="/nodes")
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0  # no sideways scrolling at 1366 pixels wide
