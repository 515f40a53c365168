"""Basic and bearer-token authentication against real registries; secrets never in errors,
and a registry's refusal never an Unauthenticated (a client would read it as its own token
refused): credentials it requires are a failed precondition, ones it rejects permission
denied."""

from __future__ import annotations

import time

import pytest
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER
from support.registry_server import RegistryServer
from support.token_server import TokenServer

from fuzzball_core.credentials_fingerprints import credentials_fingerprint
from fuzzball_core.errors import FailedPrecondition, PermissionDenied
from fuzzball_plugins.images.authorizations import AUTHORIZATIONS
from fuzzball_plugins.images.docker_backend import DockerBackend

GOOD = {"username": PRIVATE_USER, "password": PRIVATE_PASSWORD}
WRONG = {"username": PRIVATE_USER, "password": "not-the-password-1234"}
BACKEND = DockerBackend({"platform": "linux/amd64"})


def test_basic_auth_with_good_credentials_resolves(private_registry: RegistryServer) -> None:
    resolved = BACKEND.resolve(f"docker://{private_registry.host}/private/app:1", credentials=GOOD)

    assert resolved.digest.startswith("sha256:")


def test_basic_auth_with_wrong_password_names_the_registry_not_the_secret(
    private_registry: RegistryServer,
) -> None:
    with pytest.raises(PermissionDenied) as error:
        BACKEND.resolve(f"docker://{private_registry.host}/private/app:1", credentials=WRONG)

    assert private_registry.host in str(error.value)
    assert WRONG["password"] not in str(error.value)
    assert "rejected the credentials" in str(error.value)


def test_private_image_without_credentials_asks_for_them(
    private_registry: RegistryServer,
) -> None:
    with pytest.raises(FailedPrecondition, match=r"requires credentials .* image\.secret"):
        BACKEND.resolve(f"docker://{private_registry.host}/private/app:1")


def test_bearer_auth_with_good_credentials_resolves(token_registry: RegistryServer) -> None:
    resolved = BACKEND.resolve(f"docker://{token_registry.host}/private/app:1", credentials=GOOD)

    assert resolved.digest.startswith("sha256:")


def test_bearer_auth_with_wrong_password_names_the_registry_not_the_secret(
    token_registry: RegistryServer,
) -> None:
    with pytest.raises(PermissionDenied) as error:
        BACKEND.resolve(f"docker://{token_registry.host}/private/app:1", credentials=WRONG)

    assert token_registry.host in str(error.value)
    assert WRONG["password"] not in str(error.value)


def test_bearer_auth_with_a_forged_token_is_refused(token_registry: RegistryServer) -> None:
    with pytest.raises(PermissionDenied, match=token_registry.host):
        BACKEND.resolve(
            f"docker://{token_registry.host}/private/app:1",
            credentials={"token": "eyJhbGciOiJub25lIn0.e30.forged"},
        )


@pytest.mark.parametrize("server", ["private_registry", "token_registry"])
def test_a_private_image_pinned_before_is_refused_to_a_caller_without_credentials(
    server: str, request: pytest.FixtureRequest
) -> None:
    """The manifest kept from a pin with credentials is reached only through a HEAD the
    registry answered for this caller."""
    host = request.getfixturevalue(server).host
    uri = f"docker://{host}/private/app:1"
    pinned = BACKEND.resolve(uri, credentials=GOOD)
    assert BACKEND.resolve(uri, credentials=GOOD).digest == pinned.digest  # from its HEAD

    with pytest.raises(FailedPrecondition, match=host):
        BACKEND.resolve(uri)
    with pytest.raises(PermissionDenied, match=host):
        BACKEND.resolve(uri, credentials=WRONG)


def test_a_second_pin_reuses_the_token_the_first_was_issued(
    token_registry: RegistryServer, token_service: TokenServer
) -> None:
    uri = f"docker://{token_registry.host}/private/app:1"
    BACKEND.resolve(uri, credentials=GOOD)  # an earlier test's token may serve it
    issued = token_service.issued

    BACKEND.resolve(uri, credentials=GOOD)
    BACKEND.resolve(uri, credentials=GOOD)

    assert token_service.issued == issued


def test_a_second_pin_with_basic_credentials_is_not_refused_first(
    private_registry: RegistryServer,
) -> None:
    uri = f"docker://{private_registry.host}/private/app:1"
    BACKEND.resolve(uri, credentials=GOOD)
    before = len(private_registry.settled_access_log())

    BACKEND.resolve(uri, credentials=GOOD)

    asked = private_registry.settled_access_log()[before:]
    assert [(r.method, r.status) for r in asked] == [("HEAD", 200)]


def test_an_expired_token_is_asked_for_again(
    token_registry: RegistryServer, token_service: TokenServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"docker://{token_registry.host}/private/app:1"
    BACKEND.resolve(uri, credentials=GOOD)
    issued = token_service.issued
    later = time.monotonic() + 300  # the test service's tokens live 300 s

    monkeypatch.setattr(AUTHORIZATIONS, "_clock", lambda: later)
    BACKEND.resolve(uri, credentials=GOOD)

    assert token_service.issued == issued + 1


def test_a_kept_token_the_registry_refuses_is_asked_for_again(
    token_registry: RegistryServer, token_service: TokenServer
) -> None:
    uri = f"docker://{token_registry.host}/private/app:1"
    with BACKEND.client(BACKEND.parse(uri), GOOD) as client:
        key = (client.endpoints[0], client.repository, credentials_fingerprint(GOOD))
    AUTHORIZATIONS.keep(key, "Bearer forged", 60)
    issued = token_service.issued

    assert BACKEND.resolve(uri, credentials=GOOD).digest.startswith("sha256:")

    assert token_service.issued == issued + 1
    assert AUTHORIZATIONS.get(key) not in (None, "Bearer forged")
