"""``fuzzball admin organization|member|service-account|audit``, against the real service
through the live REST server, as a cluster administrator and as an organization's owner."""

from __future__ import annotations

import json

import pytest
import yaml
from support.tenants import PASSWORD, Tenants, make_tenants

from fuzzball_core.errors import InvalidArgument, PermissionDenied, Unauthenticated


@pytest.fixture
def tenants(fuzzball) -> Tenants:
    return make_tenants(fuzzball.service.service)


def as_token(fuzzball, token: str, home: str):
    """The CLI with its own config home, its context holding ``token``."""
    cli = type(fuzzball)(
        fuzzball.config_home.parent / home, fuzzball.service, fuzzball.rest_url, token
    )
    result = cli("context", "create", "lab", "--address", fuzzball.rest_url, "--token", token)
    assert result.exit_code == 0, result.output
    return cli


@pytest.fixture
def operator(fuzzball, tenants):
    return as_token(fuzzball, tenants.admin_token, "operator-home")


@pytest.fixture
def owner(fuzzball, tenants):
    return as_token(fuzzball, tenants.acme_owner.token, "owner-home")


def signs_in(fuzzball, email: str, password: str) -> bool:
    try:
        fuzzball.service.service.identity.check_password(email, password)
    except Unauthenticated:
        return False
    return True


def generated_password(output: str) -> str:
    line = next(li for li in output.splitlines() if li.startswith("Generated password"))
    return line.rpartition(": ")[2]


def test_an_operator_creates_an_organization_and_its_owner_signs_in(operator):
    result = operator("admin", "organization", "create", "initech", "--owner-email", "b@i.test")
    assert result.exit_code == 0, result.output
    assert "Organization initech" in result.output
    assert signs_in(operator, "b@i.test", generated_password(result.output))


def test_an_organizations_owner_password_can_be_given(operator):
    result = operator(
        "admin", "organization", "create", "initech",
        "--owner-email", "b@i.test", "--owner-password", PASSWORD,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Generated password" not in result.output
    assert signs_in(operator, "b@i.test", PASSWORD)


def test_a_weak_owner_password_is_refused_naming_the_rules(operator):
    result = operator(
        "admin", "organization", "create", "initech",
        "--owner-email", "b@i.test", "--owner-password", "short",
    )  # fmt: skip
    assert isinstance(result.exception, InvalidArgument)
    assert "12 characters" in str(result.exception)


def test_organizations_are_listed_as_json(operator):
    result = operator("admin", "organization", "list", "-o", "json")
    assert [o["name"] for o in json.loads(result.output)] == ["acme", "globex"]


def test_an_owner_adds_a_member_with_a_generated_password(owner):
    result = owner("admin", "member", "add", "new@acme.test")
    assert result.exit_code == 0, result.output
    assert signs_in(owner, "new@acme.test", generated_password(result.output))


def test_an_owner_lists_their_members_in_a_table(owner):
    result = owner("admin", "member", "list")
    assert result.exit_code == 0, result.output
    rows = [[cell.strip() for cell in line.split("|")] for line in result.output.splitlines()]
    assert rows[0][:3] == ["ID", "EMAIL", "ROLE"]
    assert [row[1] for row in rows[1:]] == [
        "dev@acme.test",
        "owner@acme.test",
    ]


def test_an_operator_adds_a_member_to_an_organization_named_by_name(operator):
    result = operator(
        "admin", "member", "add", "ops@globex.test", "--organization", "globex",
        "--password", PASSWORD, "--role", "owner",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    listed = operator("admin", "member", "list", "--organization", "globex", "-o", "yaml")
    roles = {u["email"]: u["relationship"] for u in yaml.safe_load(listed.output)}
    assert roles["ops@globex.test"] == "ORGANIZATION_OWNER"


def test_an_owner_may_not_name_another_organization(owner):
    result = owner("admin", "member", "list", "--organization", "globex")
    assert isinstance(result.exception, PermissionDenied)
    assert "administer_cluster" in str(result.exception)


def test_an_owner_removes_a_member_by_email(owner, tenants):
    result = owner("admin", "member", "remove", "dev@acme.test")
    assert result.exit_code == 0, result.output
    assert "dev@acme.test" not in owner("admin", "member", "list").output


def test_an_owner_resets_a_members_password(owner):
    result = owner("admin", "member", "reset-password", "dev@acme.test")
    assert result.exit_code == 0, result.output
    assert not signs_in(owner, "dev@acme.test", PASSWORD)
    assert signs_in(owner, "dev@acme.test", generated_password(result.output))


def test_an_operator_creates_a_monitoring_service_account_and_gets_its_token(operator):
    result = operator("admin", "service-account", "create", "alerts", "--kind", "monitoring")
    assert result.exit_code == 0, result.output
    who = operator.service.authenticate(result.output.strip())
    assert (who.name, who.kind) == ("alerts", "monitoring")
    listed = operator("admin", "service-account", "list")
    assert "alerts" in listed.output and "monitoring" in listed.output


def test_the_audit_log_is_listed_filtered_and_paged(operator, owner):
    owner("admin", "member", "add", "a1@acme.test")
    owner("admin", "member", "add", "a2@acme.test")
    first = operator(
        "admin", "audit", "list", "--action", "member_added", "--limit", "2", "-o", "json"
    )
    page = json.loads(first.output)
    assert [e["target"] for e in page["entries"]] == ["user a2@acme.test", "user a1@acme.test"]
    rest = operator(
        "admin", "audit", "list", "--action", "member_added", "--page-token", page["pageToken"]
    )
    assert "user dev@acme.test" in rest.output
    assert "user a1@acme.test" not in rest.output


def test_the_audit_log_table_says_how_to_read_the_next_page(operator, owner):
    owner("admin", "member", "add", "a1@acme.test")
    result = operator("admin", "audit", "list", "--limit", "1")
    assert result.exit_code == 0, result.output
    assert "More: --page-token" in result.output


@pytest.mark.parametrize("given", ["name", "id"])
def test_the_audit_log_is_filtered_by_an_organization_named_or_by_id(
    operator, owner, tenants, given
):
    owner("admin", "member", "add", "a1@acme.test")
    organization = tenants.acme.name if given == "name" else tenants.acme.id
    result = operator(
        "admin",
        "audit",
        "list",
        "--action",
        "member_added",
        "--organization",
        organization,
        "-o",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert "user a1@acme.test" in [e["target"] for e in json.loads(result.output)["entries"]]


def test_the_audit_log_of_an_unknown_organization_is_refused_naming_it(operator):
    result = operator("admin", "audit", "list", "--organization", "nosuch")
    assert result.exit_code == 2
    assert "--organization: no organization 'nosuch'" in result.output


def test_an_owner_may_not_read_the_audit_log(owner):
    result = owner("admin", "audit", "list")
    assert isinstance(result.exception, PermissionDenied)
    assert "administer_cluster" in str(result.exception)
