"""Fixtures of the endpoint tests: a local registry, one cluster serving the endpoint proxy
(shared by the module's tests; each starts its own workflows), the aiohttp service image,
and callers: an admin and users of two organizations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import LocalRegistry, have_prerequisites
from support.endpoint_stack import EndpointCluster, People, Person
from support.python_image import push_python_image

missing = have_prerequisites()
if missing is not None:
    pytest.skip(missing, allow_module_level=True)

SERVICE_SCRIPT = (
    Path(__file__).resolve().parents[1] / "fixtures" / "endpoints" / "aiohttp_service.py"
)


@pytest.fixture(scope="session")
def local_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    registry = LocalRegistry(tmp_path_factory.mktemp("endpoint-registry"))
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def aiohttp_image(local_registry: LocalRegistry) -> str:
    """``docker://`` URI of the image running tests/fixtures/endpoints/aiohttp_service.py."""
    return push_python_image(local_registry.url, SERVICE_SCRIPT, "library/endpoint-service")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, local_registry: LocalRegistry
) -> Iterator[EndpointCluster]:
    running = EndpointCluster(tmp_path_factory.mktemp("endpoint-cluster"), local_registry.url)
    yield running
    running.close()


def _person(stack: EndpointCluster, user_id: str) -> Person:
    """The user working in their personal account, with an API token for it."""
    service = stack.service()

    def sign_in() -> Person:
        login = service.identity.login_principal(user_id)
        token = service.identity.account_token(login, login.account_id)
        return Person(service.authenticate(token), token)

    return stack.orchestrate.call(sign_in)


@pytest.fixture(scope="module")
def people(stack: EndpointCluster) -> People:
    """Users with their personal accounts, made through the identity service."""
    identity = stack.service().identity
    _, alice, _ = stack.orchestrate.call(
        lambda: identity.create_organization("org-a", owner_email="alice@a.test")
    )
    _, carol, _ = stack.orchestrate.call(
        lambda: identity.create_organization("org-b", owner_email="carol@b.test")
    )
    owner = _person(stack, alice.id)
    bob, _ = stack.orchestrate.call(lambda: identity.add_member(owner.principal, "bob@a.test"))
    return People(owner, _person(stack, bob.id), _person(stack, carol.id))
