"""Secrets over the REST gateway, as the swagger's SecretService shapes them: created,
listed, read, changed and deleted per scope, with values never read back, another
organization's secrets 404, and a workflow's own token reading but never writing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.secret_stack import SecretStack, secret_stack

from fuzzball_core.service.audit import AuditQuery
from fuzzball_core.service.secrets import Secrets
from fuzzball_core.vocabulary import AuditAction

VALUE = "s3cr3t-value-that-must-never-be-read-back"


@pytest.fixture
def secrets(tmp_path) -> Iterator[SecretStack]:
    with secret_stack(tmp_path) as stack:
        yield stack


def _create(client, path: str = "/v3/secrets", **body) -> str:
    reply = client.put(path, json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["id"]


def test_a_user_secret_is_created_listed_and_read_without_its_value(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
        listed = api.get("/v3/secrets").json()
        read = api.get(f"/v3/secrets/{secret_id}").json()
    assert [s["id"] for s in listed["secrets"]] == [secret_id]
    assert read["name"] == "db"
    assert read["scope"] == "SECRET_SCOPE_USER"
    assert read["type"] == "SECRET_TYPE_VALUE"
    assert read["reference"] == "secret://user/db"
    assert VALUE not in str(listed) and VALUE not in str(read)


def test_reads_show_only_the_public_parts_of_structured_secrets(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        s3 = _create(
            api,
            name="bucket",
            scope="SECRET_SCOPE_GROUP",
            s3={"accessKeyId": "AKIA", "secretAccessKey": VALUE, "region": "eu-1"},
        )
        image = _create(
            api,
            name="registry",
            scope="SECRET_SCOPE_USER",
            image={"username": "robot", "password": VALUE, "trustedDomains": ["r.example"]},
        )
        s3_read = api.get(f"/v3/secrets/{s3}").json()
        image_read = api.get(f"/v3/secrets/{image}").json()
    assert s3_read["s3"] == {"region": "eu-1"}
    assert image_read["image"] == {"username": "robot", "trustedDomains": ["r.example"]}
    assert VALUE not in str(s3_read) + str(image_read)
    assert "AKIA" not in str(s3_read)


def test_a_secret_is_updated_with_patch_and_deleted(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": "old"})
        patched = api.patch(f"/v3/secrets/{secret_id}", json={"value": {"value": "new"}})
        owner = Secrets.owner_of(secrets.service.identity.login_principal(alice.user_id))
        resolved = secrets.secrets.resolve(owner, "secret://user/db")
        deleted = api.delete(f"/v3/secrets/{secret_id}")
        after = api.get(f"/v3/secrets/{secret_id}")
    assert patched.json() == {"id": secret_id}
    assert resolved == "new"
    assert deleted.json() == {"id": secret_id}
    assert after.status_code == 404


def test_patch_of_another_type_is_refused_naming_it(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
        reply = api.patch(f"/v3/secrets/{secret_id}", json={"map": {"map": {"k": VALUE}}})
    assert reply.status_code == 400
    assert "SECRET_TYPE_VALUE" in reply.json()["message"]
    assert VALUE not in reply.text


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"s3": {}}, "s3.accessKeyId and s3.secretAccessKey required"),
        ({"http": {"username": "u"}}, "http.username and http.password or http.token required"),
        ({"image": {"password": VALUE}}, "image.username and image.password required"),
    ],
)
def test_a_credential_secret_without_its_credentials_is_refused_naming_them(secrets, body, named):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        reply = api.put("/v3/secrets", json={"name": "x", "scope": "SECRET_SCOPE_USER", **body})
    assert reply.status_code == 400
    assert named in reply.json()["message"]
    assert VALUE not in reply.text


def test_a_partial_update_of_an_s3_secret_is_refused_keeping_its_credentials(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    keys = {"accessKeyId": "AKIA1", "secretAccessKey": VALUE, "region": "us-east-1"}
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="bucket", scope="SECRET_SCOPE_USER", s3=keys)
        patched = api.patch(f"/v3/secrets/{secret_id}", json={"s3": {"region": "eu-west-1"}})
    owner = Secrets.owner_of(secrets.service.identity.login_principal(alice.user_id))
    assert patched.status_code == 400
    assert "replaces the secret's content whole" in patched.json()["message"]
    assert secrets.secrets.resolve(owner, "secret://user/bucket/secretAccessKey") == VALUE


def test_bad_bodies_are_400_naming_the_field_never_the_value(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    cases = [
        ({"name": "x", "scope": "SECRET_SCOPE_USER", "value": {"value": 5}}, "value.value"),
        ({"name": "x", "scope": "SECRET_SCOPE_USER", "value": {"valeu": VALUE}}, "value.valeu"),
        ({"name": "x", "scope": "SECRET_SCOPE_USER"}, "exactly one of"),
        ({"name": "a/b", "scope": "SECRET_SCOPE_USER", "value": {"value": VALUE}}, "name"),
        ({"name": "x", "scope": "SECRET_SCOPE_NOPE", "value": {"value": VALUE}}, "scope"),
        ({"name": "x", "value": {"value": VALUE}}, "scope: required"),
    ]
    with secrets.client(alice.token) as api:
        replies = [(api.put("/v3/secrets", json=body), expected) for body, expected in cases]
    for reply, expected in replies:
        assert reply.status_code == 400, reply.text
        assert expected in reply.json()["message"]
        assert VALUE not in reply.text


def test_a_second_secret_of_the_same_name_and_scope_is_409(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    body = {"name": "db", "scope": "SECRET_SCOPE_USER", "value": {"value": VALUE}}
    with secrets.client(alice.token) as api:
        _create(api, **body)
        reply = api.put("/v3/secrets", json=body)
    assert reply.status_code == 409


def test_another_organizations_secret_is_404_on_every_by_id_route(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    mallory = secrets.tenant("evil", "mallory@evil.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
        org_id = _create(api, "/v3/organization/secrets", name="shared", value={"value": VALUE})
    with secrets.client(mallory.token) as api:
        replies = [
            api.get(f"/v3/secrets/{secret_id}"),
            api.patch(f"/v3/secrets/{secret_id}", json={"value": {"value": "x"}}),
            api.delete(f"/v3/secrets/{secret_id}"),
            api.get(f"/v3/organization/secrets/{org_id}"),
            api.patch(f"/v3/organization/secrets/{org_id}", json={"value": {"value": "x"}}),
            api.delete(f"/v3/organization/secrets/{org_id}"),
        ]
        listed = (
            api.get("/v3/secrets").json()["secrets"]
            + (api.get("/v3/organization/secrets").json()["secrets"])
        )
    assert [r.status_code for r in replies] == [404] * 6
    assert listed == []


def test_another_member_does_not_see_a_users_secret(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    bob = secrets.member("acme", "bob@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
    with secrets.client(bob.token) as api:
        assert api.get(f"/v3/secrets/{secret_id}").status_code == 404


def test_organization_secrets_are_written_by_owners_and_read_by_members(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    bob = secrets.member("acme", "bob@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, "/v3/organization/secrets", name="shared", value={"value": "v"})
    with secrets.client(bob.token) as api:
        listed = api.get("/v3/organization/secrets").json()["secrets"]
        refused = api.put(
            "/v3/organization/secrets", json={"name": "mine", "value": {"value": "v"}}
        )
    assert [s["id"] for s in listed] == [secret_id]
    assert listed[0]["scope"] == "SECRET_SCOPE_ORGANIZATION"
    assert refused.status_code == 403
    assert "manage_organization" in refused.json()["message"]


def test_private_organization_secrets_are_listed_to_owners_only(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    bob = secrets.member("acme", "bob@acme.example")
    with secrets.client(alice.token) as api:
        _create(api, "/v3/organization/secrets", name="p", private=True, value={"value": "v"})
        owners_view = api.get("/v3/organization/secrets").json()["secrets"]
    with secrets.client(bob.token) as api:
        members_view = api.get("/v3/organization/secrets").json()["secrets"]
    assert [s["private"] for s in owners_view] == [True]
    assert members_view == []


def test_cluster_secrets_need_a_cluster_administrator(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    admin = secrets.member("acme", "root@acme.example", cluster_admin=True)
    body = {"name": "site-license", "value": {"value": VALUE}}
    with secrets.client(alice.token) as api:
        refused = api.put("/v3/admin/cluster/secrets", json=body)
        refused_list = api.get("/v3/admin/cluster/secrets")
    with secrets.client(admin.token) as api:
        secret_id = _create(api, "/v3/admin/cluster/secrets", **body)
        listed = api.get("/v3/admin/cluster/secrets").json()["secrets"]
    assert refused.status_code == 403 and refused_list.status_code == 403
    assert [(s["id"], s["scope"]) for s in listed] == [(secret_id, "SECRET_SCOPE_CLUSTER")]


@pytest.mark.parametrize(
    ("name", "words"), [(5, "name: expected a string"), ("", "name: required")]
)
def test_a_secret_name_that_is_no_name_says_what_is_wrong_with_it(secrets, name, words):
    alice = secrets.tenant("acme", "alice@acme.example")
    body = {"name": name, "scope": "SECRET_SCOPE_USER", "value": {"value": VALUE}}
    with secrets.client(alice.token) as api:
        reply = api.put("/v3/secrets", json=body)
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"] == words


def test_a_scope_sent_to_the_wrong_route_names_the_right_one(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    body = {"name": "x", "scope": "SECRET_SCOPE_ORGANIZATION", "value": {"value": "v"}}
    with secrets.client(alice.token) as api:
        reply = api.put("/v3/secrets", json=body)
    assert reply.status_code == 400
    assert "/v3/organization/secrets" in reply.json()["message"]


def test_the_deprecated_account_scope_is_the_group_scope(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="g", scope="SECRET_SCOPE_ACCOUNT", value={"value": "v"})
        read = api.get(f"/v3/secrets/{secret_id}").json()
    assert (read["scope"], read["reference"]) == ("SECRET_SCOPE_GROUP", "secret://group/g")


def test_a_workflow_token_may_read_secrets_but_not_write_them(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        secret_id = _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
    with secrets.client(secrets.workflow_token(alice)) as api:
        listed = api.get("/v3/secrets")
        created = api.put(
            "/v3/secrets", json={"name": "x", "scope": "SECRET_SCOPE_USER", "value": {"value": "v"}}
        )
        patched = api.patch(f"/v3/secrets/{secret_id}", json={"value": {"value": "x"}})
        deleted = api.delete(f"/v3/secrets/{secret_id}")
    assert [s["id"] for s in listed.json()["secrets"]] == [secret_id]
    assert [created.status_code, patched.status_code, deleted.status_code] == [403, 403, 403]


def test_lists_page_with_page_size_and_page_token(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        for name in ("a", "b", "c"):
            _create(api, name=name, scope="SECRET_SCOPE_USER", value={"value": "v"})
        first = api.get("/v3/secrets", params={"pageSize": 2}).json()
        second = api.get(
            "/v3/secrets", params={"pageSize": 2, "pageToken": first["pageToken"]}
        ).json()
    assert [s["name"] for s in first["secrets"]] == ["a", "b"]
    assert [s["name"] for s in second["secrets"]] == ["c"]
    assert second["pageToken"] == ""


def test_filter_and_order_by_are_refused_naming_them(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        reply = api.get("/v3/secrets", params={"filter": "name=x"})
    assert reply.status_code == 400 and "filter" in reply.json()["message"]


def test_values_are_encrypted_at_rest(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
    database = (secrets.data_dir / "orchestrate.db").read_bytes()
    wal = secrets.data_dir / "orchestrate.db-wal"
    stored = database + (wal.read_bytes() if wal.exists() else b"")
    assert VALUE.encode() not in stored
    assert (secrets.data_dir / "secret-keys").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("method", "path", "content", "params"),
    [
        ("PUT", "/v3/secrets", b"\xff\xfe not json", None),
        ("PUT", "/v3/secrets", b"[1, 2, 3]", None),
        ("PUT", "/v3/secrets", b'{"name": "x", "value": ' * 100 + b"1" + b"}" * 100, None),
        ("PUT", "/v3/secrets", b'{"name": "\\ud800", "value": {"value": "v"}}', None),
        ("PUT", "/v3/organization/secrets", b'{"name": "x", "map": {"map": {"k": 1}}}', None),
        ("PATCH", "/v3/secrets/nope", b'{"value": {"value": "v"}}', None),
        ("PATCH", "/v3/secrets/nope", b"null", None),
        ("GET", "/v3/secrets", None, {"pageSize": "9" * 5000}),
        ("GET", "/v3/secrets", None, {"pageToken": "-1"}),
        ("DELETE", "/v3/admin/cluster/secrets/nope", None, None),
    ],
)
def test_hostile_requests_are_answered_4xx_with_a_status_body(
    secrets, method, path, content, params
):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        reply = api.request(method, path, content=content, params=params)
    assert 400 <= reply.status_code < 500, reply.text
    assert set(reply.json()) >= {"code", "message"}


def test_the_openapi_document_describes_the_secret_routes(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        document = api.get("/v3/openapi.json").json()
    for path in ("/v3/secrets", "/v3/organization/secrets", "/v3/admin/cluster/secrets"):
        create = document["paths"][path]["put"]
        by_id = document["paths"][f"{path}/{{id}}"]
        assert "requestBody" in create, create
        assert set(by_id) == {"get", "patch", "delete"}
        assert "not described" not in str(document["paths"][path]).lower()


def test_a_secrets_audit_entry_names_the_address_the_request_came_from(secrets):
    alice = secrets.tenant("acme", "alice@acme.example")
    with secrets.client(alice.token) as api:
        _create(api, name="db", scope="SECRET_SCOPE_USER", value={"value": VALUE})
    (entry,) = secrets.service.audit.query(AuditQuery(action=AuditAction.SECRET_CREATED)).entries
    assert entry.source == "127.0.0.1"
