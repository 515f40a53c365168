"""Basic and bearer-token authentication against real registries; secrets never in errors."""

from __future__ import annotations

import pytest
from support.registry_images import PRIVATE_PASSWORD, PRIVATE_USER
from support.registry_server import RegistryServer

from fuzzball_core.errors import Unauthenticated
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
    with pytest.raises(Unauthenticated) as error:
        BACKEND.resolve(f"docker://{private_registry.host}/private/app:1", credentials=WRONG)

    assert private_registry.host in str(error.value)
    assert WRONG["password"] not in str(error.value)
    assert "rejected the credentials" in str(error.value)


def test_private_image_without_credentials_asks_for_them(
    private_registry: RegistryServer,
) -> None:
    with pytest.raises(Unauthenticated, match=r"requires credentials .* image\.secret"):
        BACKEND.resolve(f"docker://{private_registry.host}/private/app:1")


def test_bearer_auth_with_good_credentials_resolves(token_registry: RegistryServer) -> None:
    resolved = BACKEND.resolve(f"docker://{token_registry.host}/private/app:1", credentials=GOOD)

    assert resolved.digest.startswith("sha256:")


def test_bearer_auth_with_wrong_password_names_the_registry_not_the_secret(
    token_registry: RegistryServer,
) -> None:
    with pytest.raises(Unauthenticated) as error:
        BACKEND.resolve(f"docker://{token_registry.host}/private/app:1", credentials=WRONG)

    assert token_registry.host in str(error.value)
    assert WRONG["password"] not in str(error.value)


def test_bearer_auth_with_a_forged_token_is_refused(token_registry: RegistryServer) -> None:
    with pytest.raises(Unauthenticated, match=token_registry.host):
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

    with pytest.raises(Unauthenticated, match=host):
        BACKEND.resolve(uri)
    with pytest.raises(Unauthenticated, match=host):
        BACKEND.resolve(uri, credentials=WRONG)
