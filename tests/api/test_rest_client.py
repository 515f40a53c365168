"""The REST client the CLI uses: base discovery, bearer token, errors back as typed errors."""

from __future__ import annotations

import re
import socket

import httpx
import pytest
from support.live_api import HELLO

from fuzzball_core import FUZZBALL_API_RELEASE
from fuzzball_core.client import FuzzballClient, address_url, discover_base_url, path_segment
from fuzzball_core.errors import InvalidArgument, NotFound, Unauthenticated, Unavailable


@pytest.mark.parametrize(
    ("address", "url"),
    [
        ("api.example.org:443", "https://api.example.org:443"),
        ("api.example.org", "https://api.example.org"),
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("localhost:8080", "http://localhost:8080"),
        ("http://host:1/", "http://host:1"),
    ],
)
def test_an_address_becomes_a_url(address, url):
    assert address_url(address) == url


def test_an_empty_address_is_invalid():
    with pytest.raises(InvalidArgument, match="address"):
        address_url("  ")


def test_discovery_skips_versions_that_do_not_answer(stack):
    assert discover_base_url(stack.servers.rest_url, stack.token) == f"{stack.servers.rest_url}/v3"


def test_discovery_needs_no_token(stack):
    # clients probe /vN/version before they log in
    assert discover_base_url(stack.servers.rest_url, None) == f"{stack.servers.rest_url}/v3"


def test_a_refused_token_is_unauthenticated_at_the_first_call(stack):
    with (
        FuzzballClient.connect(stack.servers.rest_url, "wrong") as api,
        pytest.raises(Unauthenticated),
    ):
        api.list_workflows()


def test_an_unreachable_server_is_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(Unavailable, match=f"127.0.0.1:{port}"):
        discover_base_url(f"127.0.0.1:{port}", "t", timeout=2)


def test_server_errors_come_back_typed(stack):
    with FuzzballClient.connect(stack.servers.rest_url, stack.token) as api:
        with pytest.raises(NotFound, match="nope"):
            api.get_workflow("nope")
        with pytest.raises(InvalidArgument, match=r"jobs\.hello"):
            api.start_workflow(HELLO.replace("cores: 1", "cores: x"))


def test_a_workflow_round_trips_through_the_client(stack):
    with FuzzballClient.connect(stack.servers.rest_url, stack.token) as api:
        assert api.version() == FUZZBALL_API_RELEASE
        workflow_id = api.start_workflow(HELLO, name="hi")
        assert [w.id for w in api.list_workflows()] == [workflow_id]
        assert api.get_workflow(workflow_id).raw_specification == HELLO
        assert api.validate_workflow(HELLO) == []


def _requested_paths() -> tuple[FuzzballClient, list[str]]:
    """A client whose every request is answered ``{}`` and its raw path noted."""
    paths: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        return httpx.Response(200, json={})

    client = FuzzballClient("http://api.test/v3", "t", transport=httpx.MockTransport(answer))
    return client, paths


def test_an_id_with_a_slash_stays_one_path_segment():
    client, paths = _requested_paths()
    with client:
        client.stop_workflow("../nodes/n1")
        client.call_json("DELETE", f"/secrets/{path_segment('a/b?c#d', 'secret')}")
    assert paths == ["/v3/workflows/..%2Fnodes%2Fn1:stop", "/v3/secrets/a%2Fb%3Fc%23d"]


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_an_id_a_url_would_resolve_away_is_refused_before_any_request(value):
    client, paths = _requested_paths()
    with client, pytest.raises(InvalidArgument, match=r"workflow .* is not valid"):
        client.get_workflow(value)
    assert paths == []


def test_a_path_built_with_a_dot_segment_is_refused_before_any_request():
    client, paths = _requested_paths()
    with client, pytest.raises(InvalidArgument, match=re.escape("'.' or '..' segment")):
        client.call_json("DELETE", "/secrets/../organization/members/u1")
    assert paths == []


@pytest.mark.parametrize("address", ["not a url", "ftp://host", "host:notaport"])
def test_an_address_that_is_no_host_port_or_http_url_is_invalid_naming_it(address):
    with pytest.raises(InvalidArgument, match=re.escape(f"address: {address!r}")):
        address_url(address)
