"""The Web UI's pages over HTTP without a browser: CSRF, refusals, the dashboard's counts."""

from __future__ import annotations

import re
import time
import uuid

import httpx
import pytest
from support.webui_stack import PASSWORD, Person, WebUiStack

from fuzzball_core.orchestrate import volumes
from fuzzball_core.orchestrate.service import PAGE
from fuzzball_core.service.identity import MAX_FAILED_LOGINS
from fuzzball_core.service.secrets import Family
from fuzzball_core.store.models import Workflow

pytestmark = pytest.mark.slow


def signed_in(ui: WebUiStack, person: Person) -> tuple[httpx.Client, str]:
    """A client signed in as ``person``, and its session's CSRF token."""
    client = httpx.Client(base_url=ui.url)
    form = client.get("/signin")
    guard = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert guard is not None
    answer = client.post(
        "/signin", data={"csrf": guard[1], "email": person.email, "password": PASSWORD}
    )
    assert answer.status_code == 303, answer.text
    page = client.get("/")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert token is not None
    return client, token[1]


def test_a_hold_without_the_csrf_token_is_refused(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.admin)
    node = ui.nodes[0]
    answer = client.post(f"/nodes/{node.id}/cordon", data={"reason": "forged"})
    assert answer.status_code == 403
    assert "CSRF" in answer.text
    assert ui.stack.get_node(ui.admin_principal(), node.id).holds == ()


def test_the_server_refuses_a_members_hold(ui: WebUiStack) -> None:
    client, csrf = signed_in(ui, ui.member)
    answer = client.post(f"/nodes/{ui.nodes[0].id}/cordon", data={"csrf": csrf})
    assert answer.status_code == 403
    assert "hold_nodes" in answer.text or "read_nodes" in answer.text
    assert ui.stack.get_node(ui.admin_principal(), ui.nodes[0].id).holds == ()


def test_the_sign_in_form_refuses_a_post_from_elsewhere(ui: WebUiStack) -> None:
    answer = httpx.post(f"{ui.url}/signin", data={"email": ui.admin.email, "password": PASSWORD})
    assert answer.status_code == 403
    assert "fuzzball_session" not in answer.cookies


def test_a_bad_sort_column_is_a_400_naming_it(ui: WebUiStack) -> None:
    client, _ = signed_in(ui, ui.admin)
    answer = client.get("/nodes?sort=bogus")
    assert answer.status_code == 400
    assert "sort: must be one of" in answer.text


def test_the_next_page_stays_on_this_site(ui: WebUiStack) -> None:
    client = httpx.Client(base_url=ui.url)
    guard = re.search(r'name="csrf" value="([^"]+)"', client.get("/signin").text)
    assert guard is not None
    answer = client.post(
        "/signin",
        data={
            "csrf": guard[1],
            "email": ui.member.email,
            "password": PASSWORD,
            "next": "//evil.example/",
        },
    )
    assert answer.headers["Location"] == "/"


def add_workflows(ui: WebUiStack, account_id: str, status: str, count: int) -> None:
    """``count`` workflow rows of ``status`` in ``account_id``, written to the store."""
    now = time.time()
    with ui.stack.service.sessions() as session, session.begin():
        for number in range(count):
            session.add(
                Workflow(
                    id=str(uuid.uuid4()), account_id=account_id, name=f"{status.lower()}-{number}",
                    status=status, raw_specification="", definition_v4="", created_at=now,
                    finished_at=now if status == "FAILED" else None,
                    error="exit code 1" if status == "FAILED" else "",
                )
            )  # fmt: skip


def test_the_dashboard_counts_every_running_and_pending_workflow(ui: WebUiStack) -> None:
    # more than a listing's page (PAGE), so a count that is a page's length would be short;
    # another organization's workflows are not the member's to count
    who = ui.stack.service.identity.login_principal(ui.member.user_id)
    add_workflows(ui, who.account_id, "PENDING", PAGE + 3)
    add_workflows(ui, who.account_id, "STARTED", 2)
    add_workflows(ui, ui.admin_principal().account_id, "STARTED", 4)
    add_workflows(ui, who.account_id, "FAILED", 1)
    client, _ = signed_in(ui, ui.member)
    page = client.get("/").text
    assert re.search(r'id="count-pending"><a [^>]*>(\d+)<', page)[1] == str(PAGE + 3)  # type: ignore[index]
    assert re.search(r'id="count-running"><a [^>]*>(\d+)<', page)[1] == "2"  # type: ignore[index]
    assert "failed-0" in page and "exit code 1" in page


def test_the_secrets_page_lists_names_never_values(ui: WebUiStack) -> None:
    who = ui.stack.service.identity.login_principal(ui.member.user_id)
    value = "hunter2-do-not-show"
    body = {"name": "db-password", "scope": "SECRET_SCOPE_USER", "value": {"value": value}}
    ui.secrets.create(who, Family.SECRETS, body)
    client, _ = signed_in(ui, ui.member)
    page = client.get("/secrets")
    assert page.status_code == 200
    assert "db-password" in page.text and "secret://user/db-password" in page.text
    assert value not in page.text
    assert "Cluster secrets" not in page.text  # a member may not read the cluster's


def member_volume(ui: WebUiStack, name: str, node_id: str | None, size: int) -> None:
    """A persistent volume of the member's, held on ``node_id``, measured at ``size``."""
    who = ui.stack.service.identity.login_principal(ui.member.user_id)
    with ui.stack.service.sessions() as session, session.begin():
        row = volumes.create(
            session, volumes.VolumeOwner.of(who), name=name, storage_class="persistent",
            scope="user", display_name="", description="", now=time.time(),
        )  # fmt: skip
        if node_id is not None:
            volumes.record_node(session, row.id, node_id, time.time())
        volumes.record_size(session, row.id, size, time.time())


def test_the_volumes_page_shows_each_volume_with_its_holding_node(ui: WebUiStack) -> None:
    member_volume(ui, "results", ui.nodes[1].id, 3 * 1048576)
    client, _ = signed_in(ui, ui.member)
    page = client.get("/volumes")
    assert page.status_code == 200
    row = re.search(
        r"<tr><th scope=\"row\"><code>volume://user/persistent/results</code>.*?</tr>", page.text
    )
    assert row is not None, page.text
    assert '<td class="node">node-b</td>' in row[0]
    assert "3.0 MiB" in row[0]


def test_the_volumes_page_shows_no_one_elses_volumes(ui: WebUiStack) -> None:
    member_volume(ui, "private-notes", None, 0)
    client, _ = signed_in(ui, ui.admin)
    page = client.get("/volumes")
    assert page.status_code == 200
    assert "private-notes" not in page.text


def test_a_node_page_shows_its_holds_and_event_log(ui: WebUiStack) -> None:
    node = ui.nodes[1]
    hold = ui.stack.add_hold(ui.admin_principal(), node.id, "cordon", "fan replacement")
    try:
        client, _ = signed_in(ui, ui.admin)
        page = client.get(f"/nodes/{node.id}").text
        holds = page[page.index('id="holds-heading"') : page.index('id="events-heading"')]
        for shown in ("cordon", "admin", "fan replacement", ui.admin.email, "<time datetime="):
            assert shown in holds, shown
        events = page[page.index('id="events-heading"') :]
        assert "fan replacement" in events  # the hold's event, beside the registration
    finally:
        ui.stack.release_hold(ui.admin_principal(), node.id, hold.id)


def test_the_nodes_list_filters_by_hold_state_and_sorts(ui: WebUiStack) -> None:
    held = ui.nodes[0]
    hold = ui.stack.add_hold(ui.admin_principal(), held.id, "evict", "draining")
    try:
        client, _ = signed_in(ui, ui.admin)
        evicting = client.get("/nodes?state=evicting").text
        assert f'id="node-{held.id}"' in evicting and f'id="node-{ui.nodes[1].id}"' not in evicting
        by_cores = client.get("/nodes?sort=cores&order=desc").text
        assert by_cores.index(f'id="node-{held.id}"') < by_cores.index(
            f'id="node-{ui.nodes[1].id}"'
        )
        by_cores = client.get("/nodes?sort=cores&order=asc").text
        assert by_cores.index(f'id="node-{held.id}"') > by_cores.index(
            f'id="node-{ui.nodes[1].id}"'
        )
    finally:
        ui.stack.release_hold(ui.admin_principal(), held.id, hold.id)


def test_an_expired_session_sends_htmx_to_sign_in_with_hx_redirect(ui: WebUiStack) -> None:
    answer = httpx.get(
        f"{ui.url}/nodes",
        cookies={"fuzzball_session": "revoked-or-expired"},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    assert answer.headers["HX-Redirect"] == "/signin?next=%2Fnodes&expired=1"


def test_the_sign_in_form_applies_the_lockout(ui: WebUiStack) -> None:
    identity = ui.stack.service.identity
    owner = identity.login_principal(ui.admin.user_id)
    user, _ = identity.add_member(owner, "locked@acme.test", password=PASSWORD)
    client = httpx.Client(base_url=ui.url)

    def attempt(password: str) -> httpx.Response:
        guard = re.search(r'name="csrf" value="([^"]+)"', client.get("/signin").text)
        assert guard is not None
        form = {"csrf": guard[1], "email": user.email, "password": password}
        return client.post("/signin", data=form)

    for _ in range(MAX_FAILED_LOGINS):
        assert attempt("wrong-password").status_code == 401
    refused = attempt(PASSWORD)  # the right password, during the lockout
    assert refused.status_code == 401
    assert "locked out" in refused.text
    assert "fuzzball_session" not in client.cookies
