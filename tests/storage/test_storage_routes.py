"""The storage routes through Orchestrate's REST gateway: administrators manage drivers and
classes (each field used, warned about or refused by name); members manage their volumes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.isolation_stack import IsolationStack


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[IsolationStack]:
    served = IsolationStack(tmp_path_factory.mktemp("storage-routes"))
    try:
        yield served
    finally:
        served.close()


def admin(stack: IsolationStack, method: str, path: str, body=None):
    return stack.call(stack.tenants.admin_token, method, path, body)


def owner(stack: IsolationStack, method: str, path: str, body=None):
    return stack.call(stack.tenants.acme_owner.token, method, path, body)


def test_a_hostpath_class_is_created_with_warnings_for_fields_without_effect(stack) -> None:
    reply = admin(
        stack,
        "POST",
        "/admin/storage-classes",
        {
            "class": {
                "name": "shared-scratch",
                "driver": "hostpath",
                "parameters": {"root": "/srv/fuzzball"},
                "access": {"type": "FILESYSTEM", "mode": "MULTI_NODE_MULTI_WRITER"},
                "capacity": {"size": "10", "unit": "GIB"},
                "mount": {"options": ["noatime"]},
            }
        },
    )
    assert reply.status_code == 200, reply.text
    warnings = reply.json()["warnings"]
    assert any(w.startswith("class.capacity:") for w in warnings)
    assert any(w.startswith("class.mount.options:") for w in warnings)
    listed = admin(stack, "GET", "/admin/storage-classes").json()["classes"]
    assert "shared-scratch" in [c["name"] for c in listed]


@pytest.mark.parametrize(
    ("definition", "field"),
    [
        ({"name": "b", "driver": "local", "access": {"type": "BLOCK"}}, "class.access.type"),
        (
            {"name": "m", "driver": "local", "access": {"mode": "MULTI_NODE_MULTI_WRITER"}},
            "class.access.mode",
        ),
        ({"name": "h", "driver": "hostpath"}, "class.parameters.root"),
        ({"name": "s", "driver": "local", "capabilities": ["SELINUX"]}, "class.capabilities"),
        ({"name": "u", "driver": "local", "colour": "blue"}, "class.colour"),
        (
            {"name": "e", "driver": "ephemeral", "properties": {"persistent": True}},
            "class.properties.persistent",
        ),
        ({"name": "Bad Name", "driver": "local"}, "class.name"),
        ({"name": "driverless"}, "class.driver: required"),
        ({"name": "k", "driver": "local", "secrets": {"colour": "x"}}, "class.secrets.colour"),
        (
            {"name": "a", "driver": "local", "affinities": [{"colour": "x"}]},
            "class.affinities[0].colour",
        ),
        (
            {"name": "t", "driver": "local", "affinities": [{"type": "NEARBY"}]},
            "class.affinities[0].type",
        ),
        ({"name": "o", "driver": "local", "mount": {"user": "nobody"}}, "class.mount.user"),
        (
            {"name": "f", "driver": "local", "volumes": {"maxByAccount": 2.5}},
            "class.volumes.maxByAccount",
        ),
        (
            {"name": "g", "driver": "local", "volumes": {"maxByAccount": str(1 << 63)}},
            "class.volumes.maxByAccount",
        ),
    ],
)
def test_a_class_field_that_cannot_be_honoured_is_refused_naming_it(
    stack, definition, field
) -> None:
    reply = admin(stack, "POST", "/admin/storage-classes", {"class": definition})
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith(field), reply.text


def test_a_volume_limit_that_overflows_to_infinity_is_refused_naming_it(stack) -> None:
    # JSON's 1e400 reads as an infinite float, which no integer holds
    reply = httpx.post(
        f"{stack.rest_url}/admin/storage-classes",
        headers={"Authorization": f"Bearer {stack.tenants.admin_token}"},
        content=b'{"class": {"name": "inf", "driver": "local", '
        b'"volumes": {"maxByAccount": 1e400}}}',
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("class.volumes.maxByAccount: must be a whole number")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/admin/storage-classes", {"class": {"name": "c", "driver": "local"}}),
        ("/admin/drivers", {"driver": {"name": "local"}}),
    ],
)
def test_a_cluster_id_is_refused_where_the_swagger_does_not_define_it(stack, path, body) -> None:
    reply = admin(stack, "POST", path, {**body, "clusterId": "c"})
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("clusterId: unknown field")


def test_a_class_naming_an_unknown_driver_is_not_found(stack) -> None:
    reply = admin(
        stack, "POST", "/admin/storage-classes", {"class": {"name": "x", "driver": "csi"}}
    )
    assert reply.status_code == 404, reply.text
    assert "storage driver 'csi'" in reply.json()["message"]


def test_a_driver_image_is_accepted_for_an_installed_plugin_with_a_warning(stack) -> None:
    # a site driver registered under a second name: the builtin plugin of that name must exist
    reply = admin(
        stack,
        "PUT",
        f"/admin/drivers/{stack.owned.storage_driver}",
        {"driver": {"name": "local", "image": {"uri": "docker://site/driver:1"}}},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["warnings"][0].startswith("driver.image: has no effect")


def test_a_driver_no_plugin_implements_is_refused_naming_it(stack) -> None:
    reply = admin(
        stack,
        "POST",
        "/admin/drivers",
        {"driver": {"name": "lustre-csi", "image": {"uri": "docker://site/csi:1"}}},
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("driver.name: no storage driver plugin")


def test_members_may_not_manage_storage_classes(stack) -> None:
    reply = owner(stack, "POST", "/admin/storage-classes", {"class": {"name": "mine"}})
    assert reply.status_code == 403, reply.text


def test_members_list_the_storage_classes(stack) -> None:
    reply = owner(stack, "GET", "/storage-classes")
    assert {"ephemeral", "persistent"} <= {c["name"] for c in reply.json()["classes"]}


def quota_class(name: str, gib: int) -> dict:
    """A persistent ``local`` class holding each volume to ``gib`` GiB."""
    return {
        "class": {
            "name": name,
            "driver": "local",
            "properties": {"persistent": True},
            "capacity": {"size": str(gib), "unit": "GIB"},
        }
    }


def capacity_warnings(reply) -> list[str]:
    assert reply.status_code == 200, reply.text
    return [w for w in reply.json().get("warnings", []) if w.startswith("class.capacity")]


@pytest.fixture
def quota_class_in_use(stack) -> Iterator[str]:
    """A 10 GiB quota class of which a volume exists; its id."""
    name = f"quota-{len(admin(stack, 'GET', '/admin/storage-classes').json()['classes'])}"
    class_id = admin(stack, "POST", "/admin/storage-classes", quota_class(name, 10)).json()["id"]
    volume = {"volume": {"name": f"{name}-data", "storageClassName": name}}
    created = owner(stack, "POST", "/volumes", volume)
    assert created.status_code == 200, created.text
    yield name
    owner(stack, "DELETE", f"/volumes/{created.json()['id']}")
    admin(stack, "DELETE", f"/admin/storage-classes/{class_id}")


@pytest.mark.parametrize(
    ("gib", "said"),
    [
        (5, "lowered from {old} to {new} bytes while volumes of {name!r} exist: they keep "
         "their size (ext4 is not shrunk); only new volumes get the new capacity"),
        (20, "raised from {old} to {new} bytes while volumes of {name!r} exist: each grows "
         "when a job next takes it while no other job on its node uses it"),
    ],
    ids=["lowered", "raised"],
)  # fmt: skip
def test_a_capacity_changed_under_existing_volumes_says_what_it_does_to_them(
    stack, quota_class_in_use, gib, said
) -> None:
    name = quota_class_in_use
    reply = admin(stack, "PUT", f"/admin/storage-classes/{name}", quota_class(name, gib))
    assert capacity_warnings(reply) == [
        "class.capacity: " + said.format(old=10 << 30, new=gib << 30, name=name)
    ]


def test_a_capacity_changed_with_no_volume_of_the_class_warns_nothing(stack) -> None:
    created = admin(stack, "POST", "/admin/storage-classes", quota_class("quota-unused", 10))
    assert capacity_warnings(created) == []
    reply = admin(
        stack, "PUT", "/admin/storage-classes/quota-unused", quota_class("quota-unused", 5)
    )
    assert capacity_warnings(reply) == []


def test_a_volume_is_created_listed_described_and_deleted(stack) -> None:
    created = owner(
        stack, "POST", "/volumes", {"volume": {"name": "inputs", "description": "raw data"}}
    )
    assert created.status_code == 200, created.text
    volume_id = created.json()["id"]
    described = owner(stack, "GET", f"/volumes/{volume_id}").json()
    assert described["reference"] == "volume://user/persistent/inputs"
    assert described["status"] == "VOLUME_STATUS_ENABLED"
    assert described["description"] == "raw data"
    listed = owner(stack, "GET", "/volumes").json()["volumes"]
    assert volume_id in [v["id"] for v in listed]
    # never used by a job: no node holds its data, so it is deleted at once
    assert owner(stack, "DELETE", f"/volumes/{volume_id}").json() == {
        "id": volume_id,
        "retained": False,
        "status": "VOLUME_STATUS_DELETED",
    }
    assert owner(stack, "GET", f"/volumes/{volume_id}").status_code == 404


def test_a_second_volume_of_the_same_name_is_refused(stack) -> None:
    body = {"volume": {"name": "twice"}}
    assert owner(stack, "POST", "/volumes", body).status_code == 200
    reply = owner(stack, "POST", "/volumes", body)
    assert reply.status_code == 409, reply.text


def test_a_volume_of_a_per_workflow_class_is_refused_naming_the_class(stack) -> None:
    reply = owner(
        stack, "POST", "/volumes", {"volume": {"name": "x", "storageClassName": "ephemeral"}}
    )
    assert reply.status_code == 400, reply.text
    assert "storage class 'ephemeral' is not persistent" in reply.json()["message"]


def test_a_disabled_volume_says_so(stack) -> None:
    volume_id = owner(stack, "POST", "/volumes", {"volume": {"name": "paused"}}).json()["id"]
    reply = owner(
        stack, "PATCH", f"/volumes/{volume_id}:set-status", {"status": "VOLUME_STATUS_DISABLED"}
    )
    assert reply.json() == {"id": volume_id, "status": "VOLUME_STATUS_DISABLED"}


def test_a_volume_status_body_with_another_field_is_refused_and_changes_nothing(stack) -> None:
    volume_id = owner(stack, "POST", "/volumes", {"volume": {"name": "steady"}}).json()["id"]
    reply = owner(
        stack,
        "PATCH",
        f"/volumes/{volume_id}:set-status",
        {"status": "VOLUME_STATUS_DISABLED", "colour": "red"},
    )
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("colour: unknown field")
    assert owner(stack, "GET", f"/volumes/{volume_id}").json()["status"] == "VOLUME_STATUS_ENABLED"


def test_a_volume_name_with_a_trailing_slash_is_refused(stack) -> None:
    reply = owner(stack, "POST", "/volumes", {"volume": {"name": "slashed/"}})
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("volume.name: 'slashed/'")


def test_another_organizations_volumes_are_not_listed(stack) -> None:
    stranger = stack.call(stack.tenants.globex_owner.token, "GET", "/volumes").json()
    assert stranger["volumes"] == []


def test_volumes_are_listed_a_page_at_a_time_in_one_order(stack) -> None:
    for name in ("paged-1", "paged-2", "paged-3"):
        owner(stack, "POST", "/volumes", {"volume": {"name": name}})
    whole = owner(stack, "GET", "/volumes").json()
    pages, token = [], None
    while token != "":
        query = "?pageSize=2" + (f"&pageToken={token}" if token else "")
        answer = owner(stack, "GET", f"/volumes{query}").json()
        pages.append([v["id"] for v in answer["volumes"]])
        token = answer["pageToken"]

    assert whole["pageToken"] == ""
    assert all(len(page) <= 2 for page in pages) and len(pages) > 1
    assert [i for page in pages for i in page] == [v["id"] for v in whole["volumes"]]


@pytest.mark.parametrize("path", ["/volumes", "/storage-classes"])
def test_a_members_list_pages_by_page_size(stack, path) -> None:
    answer = owner(stack, "GET", f"{path}?pageSize=1").json()
    assert len(next(iter(v for k, v in answer.items() if k != "pageToken"))) == 1
    assert answer["pageToken"] == "1"


@pytest.mark.parametrize(
    "path", ["/volumes", "/storage-classes", "/admin/storage-classes", "/admin/drivers"]
)
@pytest.mark.parametrize("parameter", ["filter", "orderBy", "colour"])
def test_a_list_parameter_not_implemented_is_refused_naming_it(stack, path, parameter) -> None:
    reply = admin(stack, "GET", f"{path}?{parameter}=name")
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith(f"{parameter}: not supported; ")


def test_a_page_token_of_no_page_is_refused_naming_it(stack) -> None:
    reply = admin(stack, "GET", "/admin/drivers?pageToken=x1")
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith("pageToken: ")


@pytest.mark.parametrize(
    ("volume", "words"),
    [
        ({"name": "ctl", "displayName": "a\u0000b\u001b[31m"}, "volume.displayName: character 2"),
        ({"name": "esc", "description": "red\u001b[31m"}, "volume.description: character 4"),
        ({"name": "long", "displayName": "x" * 256}, "volume.displayName: 256 characters"),
        ({"name": "huge", "description": "x" * 100_000}, "volume.description: 100000 characters"),
    ],
)
def test_an_unprintable_or_overlong_volume_text_is_refused_naming_the_field(
    stack, volume, words
) -> None:
    reply = owner(stack, "POST", "/volumes", {"volume": volume})
    assert reply.status_code == 400, reply.text
    assert reply.json()["message"].startswith(words)


def test_a_volume_renamed_to_an_unprintable_display_name_keeps_its_own(stack) -> None:
    volume_id = owner(stack, "POST", "/volumes", {"volume": {"name": "kept"}}).json()["id"]
    reply = owner(stack, "PUT", f"/volumes/{volume_id}", {"volume": {"displayName": "a\u0007"}})
    assert reply.status_code == 400, reply.text
    assert "(U+0007) is not printable" in reply.json()["message"]
    assert owner(stack, "GET", f"/volumes/{volume_id}").json()["displayName"] == ""


def test_volume_fields_without_effect_are_accepted_with_a_warning_naming_each(stack) -> None:
    created = owner(
        stack, "POST", "/volumes", {"volume": {"name": "warned", "version": "v7"}, "clusterId": "c"}
    )
    assert created.status_code == 200, created.text
    assert [w.split(":")[0] for w in created.json()["warnings"]] == ["clusterId", "volume.version"]
    volume_id = created.json()["id"]
    changed = owner(stack, "PUT", f"/volumes/{volume_id}", {"volume": {"version": "v8"}})
    assert changed.json()["warnings"] == [
        "volume.version: has no effect here: volumes have one version"
    ]


@pytest.mark.parametrize("body", [b'{"colour": "red"}', b"[]"])
def test_a_class_status_body_that_is_not_empty_is_refused_and_changes_nothing(stack, body) -> None:
    reply = httpx.patch(
        f"{stack.rest_url}/admin/storage-classes/persistent:disable",
        headers={"Authorization": f"Bearer {stack.tenants.admin_token}"},
        content=body,
    )
    assert reply.status_code == 400, reply.text
    persistent = admin(stack, "GET", "/admin/storage-classes/persistent").json()
    assert persistent["status"] == "STORAGE_CLASS_STATUS_READY"


def test_disabling_enabling_or_deleting_a_class_answers_its_id(stack) -> None:
    created = admin(
        stack,
        "POST",
        "/admin/storage-classes",
        {"class": {"name": "toggled", "driver": "local", "properties": {"persistent": True}}},
    )
    class_id = created.json()["id"]
    for method, path in (
        ("PATCH", f"/admin/storage-classes/{class_id}:disable"),
        ("PATCH", f"/admin/storage-classes/{class_id}:enable"),
        ("DELETE", f"/admin/storage-classes/{class_id}"),
    ):
        assert admin(stack, method, path).json() == {"id": class_id}, path


def test_uninstalling_a_driver_answers_its_id(tmp_path) -> None:
    fresh = IsolationStack(tmp_path)  # its hostpath driver serves no class yet
    try:
        driver_id = admin(fresh, "GET", "/admin/drivers/hostpath").json()["id"]
        uninstalled = admin(fresh, "DELETE", f"/admin/drivers/{driver_id}")
        assert uninstalled.json() == {"id": driver_id}, uninstalled.text
    finally:
        fresh.close()


def test_the_openapi_document_describes_every_storage_route(stack) -> None:
    paths = admin(stack, "GET", "/openapi.json").json()["paths"]
    storage = {
        f"{method.upper()} {path}": operation["summary"]
        for path, methods in paths.items()
        if path.startswith(("/v3/admin/drivers", "/v3/admin/storage-classes"))
        or path.startswith(("/v3/storage-classes", "/v3/volumes"))
        for method, operation in methods.items()
    }
    assert len(storage) == 22, storage
    assert [label for label, summary in storage.items() if summary == "(not described)"] == []
