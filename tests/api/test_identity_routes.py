"""Organizations, members, groups and the cluster's users over the live REST gateway (/v3),
with two organizations: field names as the swagger's definitions, permissions by role, and
every by-ID route of one organization answering 404 to the other exactly as for an id that
does not exist."""

from __future__ import annotations

import uuid

import httpx
import pytest
import schemathesis
from support.live_api import Stack
from support.tenants import PASSWORD, Person, Tenants, make_tenants, person

from fuzzball_core.errors import Unauthenticated
from fuzzball_core.service import identity as identity_module
from fuzzball_core.service.identity import EMAIL_UNAVAILABLE, MAX_FAILED_LOGINS
from fuzzball_core.service.passwords import policy_violations

INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED = 3, 5, 6, 7
FAILED_PRECONDITION, UNAUTHENTICATED = 9, 16


@pytest.fixture
def tenants(stack: Stack) -> Tenants:
    return make_tenants(stack.service.service)


def call(stack: Stack, method: str, path: str, token: str, **kwargs) -> httpx.Response:
    return httpx.request(
        method,
        f"{stack.servers.rest_url}/v3{path}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        **kwargs,
    )


def refused(response: httpx.Response, http: int, code: int) -> str:
    """The message of a google.rpc.Status answer with ``http`` and ``code``."""
    assert response.status_code == http, response.text
    body = response.json()
    assert set(body) == {"code", "message", "details"}
    assert body["code"] == code
    return body["message"]


def add_member(stack: Stack, token: str, email: str, **fields) -> httpx.Response:
    return call(stack, "POST", "/organization/members", token, json={"email": email, **fields})


def signs_in(stack: Stack, email: str, password: str) -> bool:
    try:
        stack.service.service.identity.check_password(email, password)
    except Unauthenticated:
        return False
    return True


def new_group(stack: Stack, token: str, name: str = "lab") -> dict:
    response = call(stack, "POST", "/accounts", token, json={"name": name})
    assert response.status_code == 200, response.text
    return response.json()


# -- the organization -------------------------------------------------------------------------


def test_a_member_reads_their_organization_in_the_swaggers_fields(stack, tenants):
    response = call(stack, "GET", "/organization", tenants.acme_member.token)
    assert response.status_code == 200
    organization = response.json()
    assert set(organization) == {"id", "name", "createTime"}
    assert (organization["id"], organization["name"]) == (tenants.acme.id, "acme")
    assert organization["createTime"].endswith("Z")


def test_an_owner_renames_the_organization(stack, tenants):
    response = call(
        stack, "PATCH", "/organization", tenants.acme_owner.token, json={"name": "Acme"}
    )
    assert response.status_code == 200
    assert response.json()["name"] == "Acme"
    assert "updateTime" in response.json()


def test_a_member_may_not_rename_the_organization(stack, tenants):
    response = call(stack, "PATCH", "/organization", tenants.acme_member.token, json={"name": "x"})
    assert "manage_organization" in refused(response, 403, PERMISSION_DENIED)


def test_another_organization_named_by_an_owner_is_not_found(stack, tenants):
    response = call(
        stack, "GET", f"/organization?organizationId={tenants.globex.id}", tenants.acme_owner.token
    )
    refused(response, 404, NOT_FOUND)


def test_a_cluster_administrator_reads_any_organization_by_id(stack, tenants):
    response = call(
        stack, "GET", f"/organization?organizationId={tenants.globex.id}", tenants.admin_token
    )
    assert response.json()["name"] == "globex"


def test_a_service_account_naming_no_organization_is_told_to_name_one(stack, tenants):
    message = refused(
        call(stack, "GET", "/organization", tenants.admin_token), 400, FAILED_PRECONDITION
    )
    assert "organizationId" in message


# -- members ------------------------------------------------------------------------------------


def test_an_owner_adds_a_member_with_a_password(stack, tenants):
    response = add_member(stack, tenants.acme_owner.token, "new@acme.test", password=PASSWORD)
    assert response.status_code == 200, response.text
    user = response.json()
    assert user["email"] == "new@acme.test"
    assert user["relationship"] == "ORGANIZATION_MEMBER"
    assert "password" not in str(user).lower()
    listed = call(stack, "GET", "/organization/members", tenants.acme_member.token).json()
    assert "new@acme.test" in [u["email"] for u in listed["users"]]
    assert signs_in(stack, "new@acme.test", PASSWORD)


def test_add_organization_member_requires_a_password(stack, tenants):
    message = refused(add_member(stack, tenants.acme_owner.token, "x@acme.test"), 400, 3)
    assert message.startswith("password:")


def test_the_v2_route_generates_a_password_meeting_the_policy_and_shows_it_once(stack, tenants):
    response = call(
        stack, "POST", "/v2/organization/members", tenants.acme_owner.token,
        json={"email": "gen@acme.test"},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    generated = response.json()["generatedPassword"]
    assert policy_violations(generated, email="gen@acme.test") == []
    assert response.json()["user"]["email"] == "gen@acme.test"
    assert signs_in(stack, "gen@acme.test", generated)


def test_a_weak_password_is_refused_naming_every_rule_it_breaks(stack, tenants):
    message = refused(
        add_member(stack, tenants.acme_owner.token, "weak@acme.test", password="fuzzball"),
        400,
        INVALID_ARGUMENT,
    )
    for rule in ("12 characters", "upper case", "digit", "special", '"fuzzball"'):
        assert rule in message
    assert "fuzzball" not in message.replace('"fuzzball"', "")  # the password is not echoed


def test_a_member_may_not_add_members(stack, tenants):
    response = add_member(stack, tenants.acme_member.token, "y@acme.test", password=PASSWORD)
    refused(response, 403, PERMISSION_DENIED)


def test_an_email_of_a_member_already_is_refused_as_existing(stack, tenants):
    response = add_member(stack, tenants.acme_owner.token, "dev@acme.test", password=PASSWORD)
    assert "already a member" in refused(response, 409, ALREADY_EXISTS)


def test_an_email_of_another_organization_is_refused_without_saying_it_exists(stack, tenants):
    response = add_member(stack, tenants.acme_owner.token, "owner@globex.test", password=PASSWORD)
    message = refused(response, 400, FAILED_PRECONDITION)
    assert message == EMAIL_UNAVAILABLE.format(email="owner@globex.test")


def test_an_email_added_meanwhile_in_another_case_is_409_not_a_second_user(
    stack, tenants, monkeypatch
):
    # the race of parallel adds, made deterministic: the other request's Ann@ is committed
    # right after this one found ann@ free, before its insert; the store compares in any case
    check = identity_module._email_free
    raced: list[bool] = []

    def checked_then_raced(*args, **kwargs) -> None:
        check(*args, **kwargs)
        if not raced:
            raced.append(True)
            other = add_member(stack, tenants.acme_owner.token, "Ann@acme.test", password=PASSWORD)
            assert other.status_code == 200, other.text

    monkeypatch.setattr(identity_module, "_email_free", checked_then_raced)
    response = add_member(stack, tenants.acme_owner.token, "ann@acme.test", password=PASSWORD)
    assert "already a member" in refused(response, 409, ALREADY_EXISTS)


def test_an_unknown_body_field_is_refused_by_name(stack, tenants):
    response = add_member(
        stack, tenants.acme_owner.token, "z@acme.test", password=PASSWORD, nickname="zed"
    )
    assert "'nickname'" in refused(response, 400, INVALID_ARGUMENT)


def test_only_a_cluster_administrator_makes_cluster_administrators(stack, tenants):
    response = add_member(
        stack, tenants.acme_owner.token, "root@acme.test", password=PASSWORD, clusterAdmin=True
    )
    assert "administer_cluster" in refused(response, 403, PERMISSION_DENIED)


def test_an_owner_makes_a_member_an_owner(stack, tenants):
    response = call(
        stack, "PUT",
        f"/organization/members/{tenants.acme_member.id}"
        "?relationship=ORGANIZATION_OWNER&updateRelationship=true",
        tenants.acme_owner.token,
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json()["relationship"] == "ORGANIZATION_OWNER"


def test_an_owner_makes_a_member_an_owner_with_the_fields_in_a_json_body(stack, tenants):
    response = call(
        stack, "PUT", f"/organization/members/{tenants.acme_member.id}", tenants.acme_owner.token,
        json={"relationship": "ORGANIZATION_OWNER", "updateRelationship": True},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.json()["relationship"] == "ORGANIZATION_OWNER"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"role": "ORGANIZATION_OWNER"}, "unknown field 'role'"),
        ({"updateRelationship": "yes"}, "updateRelationship: expected true or false"),
        ({"relationship": "ORGANIZATION_OWNER"}, "updateRelationship: set it to true"),
    ],
)
def test_a_member_change_body_that_cannot_be_honoured_is_400_naming_the_field(
    stack, tenants, body, words
):
    response = call(
        stack, "PUT", f"/organization/members/{tenants.acme_member.id}", tenants.acme_owner.token,
        json=body,
    )  # fmt: skip
    assert words in refused(response, 400, INVALID_ARGUMENT)


def test_a_member_change_field_in_both_query_and_body_is_400_naming_it(stack, tenants):
    response = call(
        stack, "PUT",
        f"/organization/members/{tenants.acme_member.id}?clusterAdmin=false",
        tenants.acme_owner.token, json={"clusterAdmin": True},
    )  # fmt: skip
    assert refused(response, 400, INVALID_ARGUMENT).startswith("clusterAdmin: given in both")


def test_the_last_owner_stays_an_owner(stack, tenants):
    response = call(
        stack, "PUT",
        f"/organization/members/{tenants.acme_owner.id}"
        "?relationship=ORGANIZATION_MEMBER&updateRelationship=true",
        tenants.acme_owner.token,
    )  # fmt: skip
    assert "last owner" in refused(response, 400, FAILED_PRECONDITION)


def test_a_removed_member_can_no_longer_use_their_token(stack, tenants):
    removed = call(
        stack, "DELETE", f"/organization/members/{tenants.acme_member.id}", tenants.acme_owner.token
    )
    assert removed.status_code == 200
    refused(call(stack, "GET", "/organization", tenants.acme_member.token), 401, UNAUTHENTICATED)
    listed = call(stack, "GET", "/organization/members", tenants.acme_owner.token).json()
    assert tenants.acme_member.email not in [u["email"] for u in listed["users"]]


def test_a_removed_member_can_be_added_again(stack, tenants):
    owner = tenants.acme_owner.token
    call(stack, "DELETE", f"/organization/members/{tenants.acme_member.id}", owner)
    again = add_member(stack, owner, tenants.acme_member.email, password=PASSWORD)
    assert again.status_code == 200, again.text
    assert again.json()["id"] != tenants.acme_member.id


def test_an_email_longer_than_an_account_name_is_refused(stack, tenants):
    email = "x" * 191 + "@acme.test"  # 201 characters
    response = add_member(stack, tenants.acme_owner.token, email, password=PASSWORD)
    assert refused(response, 400, INVALID_ARGUMENT).startswith("email:")


def test_an_owner_resets_a_members_password_to_a_generated_one(stack, tenants):
    response = call(
        stack, "POST", f"/organization/members/{tenants.acme_member.id}/password",
        tenants.acme_owner.token, json={},
    )  # fmt: skip
    generated = response.json()["generatedPassword"]
    assert not signs_in(stack, tenants.acme_member.email, PASSWORD)
    assert signs_in(stack, tenants.acme_member.email, generated)


def test_an_owner_may_not_reset_a_cluster_administrators_password(stack, tenants):
    identity = stack.service.service.identity
    administrator = stack.service.authenticate(tenants.admin_token)
    identity.update_member(administrator, tenants.acme_owner.id, cluster_admin=True)
    identity.update_member(administrator, tenants.acme_member.id, role="ORGANIZATION_OWNER")
    response = call(
        stack, "POST", f"/organization/members/{tenants.acme_owner.id}/password",
        tenants.acme_member.token, json={"newPassword": "Taken-Over-Lantern-9"},
    )  # fmt: skip
    message = refused(response, 403, PERMISSION_DENIED)
    assert "owner@acme.test is a cluster administrator" in message
    assert "administer_cluster" in message
    assert signs_in(stack, tenants.acme_owner.email, PASSWORD)


def test_a_member_changes_their_own_password(stack, tenants):
    new = "Another-Good-Pass-7"
    response = call(
        stack, "POST", "/profile/password", tenants.acme_member.token,
        json={"currentPassword": PASSWORD, "newPassword": new},
    )  # fmt: skip
    assert response.status_code == 200, response.text
    assert signs_in(stack, tenants.acme_member.email, new)
    assert not signs_in(stack, tenants.acme_member.email, PASSWORD)


def test_changing_ones_password_needs_the_current_one_and_says_that_one_is_wrong(stack, tenants):
    response = call(
        stack, "POST", "/profile/password", tenants.acme_member.token,
        json={"currentPassword": "Not-The-Current-1", "newPassword": "Another-Good-Pass-7"},
    )  # fmt: skip
    message = refused(response, 400, INVALID_ARGUMENT)
    assert message == "currentPassword: not your current password"
    assert signs_in(stack, tenants.acme_member.email, PASSWORD)


def test_a_locked_out_user_changing_their_password_is_403_not_401(stack, tenants):
    wrong = {"currentPassword": "Not-The-Current-1", "newPassword": "Another-Good-Pass-7"}
    for _ in range(MAX_FAILED_LOGINS):
        call(stack, "POST", "/profile/password", tenants.acme_member.token, json=wrong)

    response = call(stack, "POST", "/profile/password", tenants.acme_member.token, json=wrong)

    assert refused(response, 403, PERMISSION_DENIED).startswith("currentPassword: ")
    assert "locked out" in response.json()["message"]


# -- groups (accounts) --------------------------------------------------------------------------


def test_a_member_creates_a_group_and_lists_it_with_their_personal_account(stack, tenants):
    group = new_group(stack, tenants.acme_member.token)
    assert set(group) == {"id", "name", "createTime"}
    listed = call(stack, "GET", "/accounts", tenants.acme_member.token).json()["accounts"]
    assert {a["id"] for a in listed} == {group["id"], tenants.acme_member.account_id}


def test_an_owner_sees_members_personal_accounts_when_asking_for_them(stack, tenants):
    path = "/accounts?showUserAccounts=true"
    listed = call(stack, "GET", path, tenants.acme_owner.token).json()["accounts"]
    assert {a["name"] for a in listed} == {"owner@acme.test", "dev@acme.test"}
    refused(call(stack, "GET", path, tenants.acme_member.token), 403, PERMISSION_DENIED)


def test_a_group_member_exchanges_their_sign_in_for_the_groups_token(stack, tenants):
    group = new_group(stack, tenants.acme_owner.token)
    added = call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_owner.token,
        json={"userId": tenants.acme_member.id, "relationship": "GROUP_MEMBER"},
    )  # fmt: skip
    assert added.json()["relationship"] == "GROUP_MEMBER"
    response = call(stack, "GET", f"/accounts/{group['id']}/token", tenants.acme_member.token)
    token = response.json()["token"]
    who = stack.service.service.authenticate(token)
    assert (who.account_id, who.user_id) == (group["id"], tenants.acme_member.id)


def test_a_non_member_gets_no_token_for_a_group(stack, tenants):
    group = new_group(stack, tenants.acme_owner.token)
    response = call(stack, "GET", f"/accounts/{group['id']}/token", tenants.acme_member.token)
    refused(response, 404, NOT_FOUND)


def test_a_group_member_may_not_rename_the_group(stack, tenants):
    group = new_group(stack, tenants.acme_member.token)
    stranger = third_member(stack, tenants)
    call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_member.token,
        json={"userId": stranger.id},
    )  # fmt: skip
    response = call(
        stack, "PATCH", f"/accounts/{group['id']}", stranger.token, json={"name": "mine"}
    )
    refused(response, 403, PERMISSION_DENIED)


def third_member(stack: Stack, tenants: Tenants) -> Person:
    """Another member of acme, added by its owner."""
    identity = stack.service.service.identity
    owner = identity.login_principal(tenants.acme_owner.id)
    user, _ = identity.add_member(owner, "third@acme.test", password=PASSWORD)
    return person(identity, user, PASSWORD)


def test_a_group_owner_renames_and_deletes_the_group(stack, tenants):
    group = new_group(stack, tenants.acme_member.token)
    path = f"/accounts/{group['id']}"
    renamed = call(stack, "PATCH", path, tenants.acme_member.token, json={"name": "lab-2"})
    assert renamed.json()["name"] == "lab-2"
    assert call(stack, "DELETE", path, tenants.acme_member.token).status_code == 200
    refused(call(stack, "GET", path, tenants.acme_member.token), 404, NOT_FOUND)


def test_group_members_are_listed_with_their_relationship(stack, tenants):
    group = new_group(stack, tenants.acme_member.token)
    call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_member.token,
        json={"userId": tenants.acme_owner.id, "relationship": "ACCOUNT_MEMBER"},
    )  # fmt: skip
    listed = call(stack, "GET", f"/accounts/{group['id']}/members", tenants.acme_member.token)
    relationships = {u["email"]: u["relationship"] for u in listed.json()["users"]}
    assert relationships == {
        tenants.acme_member.email: "GROUP_OWNER",
        tenants.acme_owner.email: "GROUP_MEMBER",  # the deprecated spelling, read as its equal
    }


@pytest.mark.parametrize(
    ("relationship", "expected"),
    [("ACCOUNT_MEMBER", "GROUP_MEMBER"), ("ACCOUNT_OWNER", "GROUP_OWNER")],
)
def test_a_deprecated_relationship_filter_lists_as_its_group_equal(
    stack, tenants, relationship, expected
):
    group = new_group(stack, tenants.acme_member.token)
    call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_member.token,
        json={"userId": tenants.acme_owner.id},
    )  # fmt: skip
    path = f"/accounts/{group['id']}/members?relationship={relationship}"
    listed = call(stack, "GET", path, tenants.acme_member.token).json()["users"]
    assert [u["relationship"] for u in listed] == [expected]


def test_a_removed_group_member_loses_the_groups_token(stack, tenants):
    group = new_group(stack, tenants.acme_owner.token)
    call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_owner.token,
        json={"userId": tenants.acme_member.id},
    )  # fmt: skip
    token = call(stack, "GET", f"/accounts/{group['id']}/token", tenants.acme_member.token).json()
    removed = call(
        stack, "DELETE", f"/accounts/{group['id']}/members/{tenants.acme_member.id}",
        tenants.acme_owner.token,
    )  # fmt: skip
    assert removed.status_code == 200
    refused(call(stack, "GET", "/organization", token["token"]), 401, UNAUTHENTICATED)


def test_another_organization_creates_and_renames_groups_named_as_this_ones(stack, tenants):
    new_group(stack, tenants.acme_owner.token, "groupA")
    assert new_group(stack, tenants.globex_owner.token, "groupA")["name"] == "groupA"
    assert new_group(stack, tenants.globex_owner.token, tenants.acme_member.email)
    other = new_group(stack, tenants.globex_owner.token, "other")
    renamed = call(
        stack, "PATCH", f"/accounts/{other['id']}", tenants.globex_owner.token,
        json={"name": tenants.acme_owner.email},
    )  # fmt: skip
    assert renamed.status_code == 200, renamed.text


def test_a_group_created_meanwhile_by_another_request_is_409_not_500(stack, tenants, monkeypatch):
    # the race of parallel POSTs, made deterministic: the other request's group is
    # committed right after this one found the name free, before its insert
    check = identity_module._account_name_free
    raced: list[bool] = []

    def checked_then_raced(*args, **kwargs) -> None:
        check(*args, **kwargs)
        if not raced:
            raced.append(True)
            assert new_group(stack, tenants.acme_member.token, "rg5")

    monkeypatch.setattr(identity_module, "_account_name_free", checked_then_raced)
    response = call(stack, "POST", "/accounts", tenants.acme_owner.token, json={"name": "rg5"})
    assert "'rg5' already exists" in refused(response, 409, ALREADY_EXISTS)


def test_a_user_of_another_organization_cannot_join_a_group(stack, tenants):
    group = new_group(stack, tenants.acme_owner.token)
    response = call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_owner.token,
        json={"userId": tenants.globex_owner.id},
    )  # fmt: skip
    refused(response, 404, NOT_FOUND)


# -- isolation: every by-ID route ---------------------------------------------------------------

#: Every identity route taking an id, with the body it sends: each must answer another
#: organization's id exactly as an id that does not exist. A new by-ID route belongs here.
BY_ID_ROUTES = [
    ("GET", "/accounts/{group}", None),
    ("PATCH", "/accounts/{group}", {"name": "taken"}),
    ("DELETE", "/accounts/{group}", None),
    ("GET", "/accounts/{group}/members", None),
    ("POST", "/accounts/{group}/members", {"userId": "{member}"}),
    ("PUT", "/accounts/{group}/members", {"userId": "{member}", "relationship": "GROUP_OWNER"}),
    ("DELETE", "/accounts/{group}/members/{member}", None),
    ("GET", "/accounts/{group}/token", None),
    ("GET", "/accounts/{personal}", None),
    ("GET", "/accounts/{personal}/token", None),
    (
        "PUT",
        "/organization/members/{member}?relationship=ORGANIZATION_OWNER&updateRelationship=true",
        None,
    ),
    ("DELETE", "/organization/members/{member}", None),
    ("POST", "/organization/members/{member}/password", {"newPassword": "Taken-Over-Pass-1"}),
]


def _fill(text: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        text = text.replace("{" + name + "}", value)
    return text


@pytest.mark.parametrize(("method", "route", "body"), BY_ID_ROUTES)
def test_another_organizations_ids_are_not_found_as_if_absent(stack, tenants, method, route, body):
    group = new_group(stack, tenants.acme_owner.token)
    call(
        stack, "POST", f"/accounts/{group['id']}/members", tenants.acme_owner.token,
        json={"userId": tenants.acme_member.id},
    )  # fmt: skip
    real = {
        "group": group["id"],
        "member": tenants.acme_member.id,
        "personal": tenants.acme_member.account_id,
    }
    absent = {name: str(uuid.uuid4()) for name in real}
    answers = []
    for ids in (real, absent):
        sent = {k: _fill(v, ids) for k, v in body.items()} if body else None
        response = call(stack, method, _fill(route, ids), tenants.globex_owner.token, json=sent)
        message = refused(response, 404, NOT_FOUND)
        for name in ids:
            message = message.replace(ids[name], "<id>")
        answers.append(message)
    assert answers[0] == answers[1]
    # and nothing changed in acme
    assert call(stack, "GET", f"/accounts/{group['id']}", tenants.acme_owner.token).json() == group
    assert signs_in(stack, tenants.acme_member.email, PASSWORD)


# -- the cluster's users and administration -----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/admin/users"),
        ("GET", "/admin/organizations"),
        ("GET", "/admin/service-accounts"),
        ("GET", "/admin/audit"),
    ],
)
def test_an_organization_owner_is_no_cluster_administrator(stack, tenants, method, path):
    response = call(stack, method, path, tenants.acme_owner.token)
    assert "administer_cluster" in refused(response, 403, PERMISSION_DENIED)


def test_a_refusal_for_want_of_a_permission_is_audited(stack, tenants):
    call(stack, "GET", "/admin/users", tenants.acme_owner.token)
    page = call(stack, "GET", "/admin/audit?action=permission_denied", tenants.admin_token)
    entry = page.json()["entries"][0]
    assert (entry["actor"], entry["target"], entry["outcome"]) == (
        "owner@acme.test",
        "GET /v3/admin/users",
        "denied",
    )
    assert "administer_cluster" in entry["detail"]["reason"]


def test_a_cluster_administrator_lists_every_organizations_users(stack, tenants):
    users = call(stack, "GET", "/admin/users", tenants.admin_token).json()["users"]
    assert {u["username"] for u in users} == {
        "owner@acme.test",
        "dev@acme.test",
        "owner@globex.test",
    }
    assert set(users[0]) <= {"id", "username", "createTime", "updateTime", "lastLoginTime"}


def test_a_cluster_administrator_creates_changes_and_deletes_a_user(stack, tenants):
    created = call(
        stack, "POST", f"/admin/users?organizationId={tenants.globex.id}", tenants.admin_token,
        json={"username": "ops@globex.test", "password": PASSWORD},
    )  # fmt: skip
    user_id = created.json()["id"]
    path = f"/admin/users/{user_id}"
    assert call(stack, "GET", path, tenants.admin_token).json()["username"] == "ops@globex.test"
    changed = call(stack, "PATCH", path, tenants.admin_token, json={"username": "sre@globex.test"})
    assert changed.json()["username"] == "sre@globex.test"
    assert signs_in(stack, "sre@globex.test", PASSWORD)
    assert call(stack, "DELETE", path, tenants.admin_token).json() == {"id": user_id}
    refused(call(stack, "GET", path, tenants.admin_token), 404, NOT_FOUND)


def test_an_administrators_user_change_with_a_weak_password_changes_nothing(stack, tenants):
    path = f"/admin/users/{tenants.acme_member.id}"
    response = call(
        stack, "PATCH", path, tenants.admin_token,
        json={"username": "renamed@acme.test", "password": "weak"},
    )  # fmt: skip
    refused(response, 400, INVALID_ARGUMENT)
    assert call(stack, "GET", path, tenants.admin_token).json()["username"] == "dev@acme.test"
    assert signs_in(stack, "dev@acme.test", PASSWORD)


def test_a_cluster_administrator_creates_an_organization_with_a_generated_owner_password(
    stack, tenants
):
    response = call(
        stack, "POST", "/admin/organizations", tenants.admin_token,
        json={"name": "initech", "ownerEmail": "boss@initech.test"},
    )  # fmt: skip
    created = response.json()
    assert created["organization"]["name"] == "initech"
    assert created["owner"]["relationship"] == "ORGANIZATION_OWNER"
    assert signs_in(stack, "boss@initech.test", created["generatedPassword"])
    listed = call(stack, "GET", "/admin/organizations", tenants.admin_token).json()
    assert [o["name"] for o in listed["organizations"]] == ["acme", "globex", "initech"]


def test_a_cluster_administrator_creates_a_monitoring_service_account(stack, tenants):
    response = call(
        stack, "POST", "/admin/service-accounts", tenants.admin_token,
        json={"name": "alerts", "kind": "monitoring"},
    )  # fmt: skip
    created = response.json()
    who = stack.service.service.authenticate(created["token"])
    assert (who.name, who.kind, who.organization_id) == ("alerts", "monitoring", None)
    listed = call(stack, "GET", "/admin/service-accounts", tenants.admin_token).json()
    assert {(a["name"], a["kind"]) for a in listed["accounts"]} >= {
        ("alerts", "monitoring"),
        ("cluster-admin", "admin"),
    }


def test_a_service_account_of_kind_user_is_refused(stack, tenants):
    response = call(
        stack, "POST", "/admin/service-accounts", tenants.admin_token,
        json={"name": "people", "kind": "user"},
    )  # fmt: skip
    assert "kind" in refused(response, 400, INVALID_ARGUMENT)


# -- lists --------------------------------------------------------------------------------------


def test_lists_page_with_page_size_and_page_token(stack, tenants):
    first = call(stack, "GET", "/admin/users?pageSize=2", tenants.admin_token).json()
    assert len(first["users"]) == 2
    rest = call(
        stack, "GET", f"/admin/users?pageSize=2&pageToken={first['pageToken']}",
        tenants.admin_token,
    ).json()  # fmt: skip
    assert len(rest["users"]) == 1 and "pageToken" not in rest


def test_an_order_a_list_does_not_offer_is_refused(stack, tenants):
    response = call(stack, "GET", "/organization/members?orderBy=email", tenants.acme_owner.token)
    assert refused(response, 400, INVALID_ARGUMENT).startswith("orderBy:")


def test_the_audit_log_pages_newest_first_and_filters_by_action(stack, tenants):
    add_member(stack, tenants.acme_owner.token, "a1@acme.test", password=PASSWORD)
    add_member(stack, tenants.acme_owner.token, "a2@acme.test", password=PASSWORD)
    page = call(
        stack, "GET", "/admin/audit?action=member_added&pageSize=2", tenants.admin_token
    ).json()
    assert [e["target"] for e in page["entries"]] == ["user a2@acme.test", "user a1@acme.test"]
    assert page["entries"][0]["actor"] == "owner@acme.test"
    older = call(
        stack, "GET", f"/admin/audit?action=member_added&pageToken={page['pageToken']}",
        tenants.admin_token,
    ).json()  # fmt: skip
    assert [e["target"] for e in older["entries"]] == ["user dev@acme.test"]


def test_the_audit_log_is_read_from_a_time_on(stack, tenants):
    add_member(stack, tenants.acme_owner.token, "a1@acme.test", password=PASSWORD)
    entries = call(stack, "GET", "/admin/audit", tenants.admin_token).json()["entries"]
    newest = entries[0]["time"]
    since = call(stack, "GET", f"/admin/audit?since={newest}", tenants.admin_token).json()
    assert [e["seq"] for e in since["entries"]] == [entries[0]["seq"]]
    later = call(stack, "GET", "/admin/audit?since=2999-01-01T00:00:00Z", tenants.admin_token)
    assert later.json()["entries"] == []


def test_an_audit_log_parameter_it_does_not_take_is_refused_naming_it(stack, tenants):
    response = call(stack, "GET", "/admin/audit?filter=((", tenants.admin_token)
    message = refused(response, 400, INVALID_ARGUMENT)
    assert message.startswith("filter: not supported; the audit log is filtered by action")


def test_a_time_the_audit_log_cannot_read_is_refused(stack, tenants):
    response = call(stack, "GET", "/admin/audit?since=yesterday", tenants.admin_token)
    assert refused(response, 400, INVALID_ARGUMENT).startswith("since:")


def test_the_audit_log_never_holds_a_password(stack, tenants):
    add_member(stack, tenants.acme_owner.token, "a1@acme.test", password=PASSWORD)
    entries = call(stack, "GET", "/admin/audit?pageSize=500", tenants.admin_token).text
    assert PASSWORD not in entries


# -- the OpenAPI document -----------------------------------------------------------------------


def test_identity_replies_conform_to_the_served_document(stack, tenants):
    auth = {"Authorization": f"Bearer {tenants.admin_token}"}
    document = f"{stack.servers.rest_url}/v3/openapi.json"
    schema = schemathesis.openapi.from_url(document, headers=auth)
    group = new_group(stack, tenants.acme_owner.token)
    owner, admin = tenants.acme_owner.token, tenants.admin_token
    for method, path, template, token in [
        ("GET", "/organization", "/v3/organization", owner),
        ("GET", "/organization/members", "/v3/organization/members", owner),
        ("GET", "/accounts", "/v3/accounts", owner),
        ("GET", f"/accounts/{group['id']}/members", "/v3/accounts/{id}/members", owner),
        ("GET", f"/accounts/{group['id']}/token", "/v3/accounts/{id}/token", owner),
        ("GET", "/admin/users", "/v3/admin/users", admin),
        ("GET", "/admin/organizations", "/v3/admin/organizations", admin),
        ("GET", "/admin/service-accounts", "/v3/admin/service-accounts", admin),
        ("GET", "/admin/audit", "/v3/admin/audit", admin),
        ("GET", f"/accounts/{uuid.uuid4()}", "/v3/accounts/{id}", owner),  # the 404's Status
    ]:
        reply = call(stack, method, path, token)
        assert schema[template][method].validate_response(reply) is not False, path
