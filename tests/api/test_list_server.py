"""The workflow and node lists handed to a list server (Orchestrate's list worker process):
an account's API token is handed over for the server to authenticate, any other caller is
authenticated first; the gateway answers with the server's status and text; when the
server cannot answer, the gateway authenticates the caller and serves the list itself."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from aiohttp import web

from fuzzball_core.api.http_errors import RestRunner
from fuzzball_core.api.rest import build_rest_app, serve_lists_from
from fuzzball_core.service.forwarded_identity import HEADER as FORWARDED_IDENTITY
from fuzzball_core.service.views import Principal


@dataclass
class FakeListServer:
    """Answers every list with ``answer`` (None: cannot answer), recording what it was asked."""

    answer: tuple[int, bytes] | None
    asked: list[tuple[str, str]] = field(default_factory=list)

    async def call(self, route: str, caller: Principal | str) -> tuple[int, bytes] | None:
        self.asked.append((route, caller if isinstance(caller, str) else caller.name))
        return self.answer


@dataclass
class Served:
    url: str
    lists: FakeListServer


@pytest.fixture
def serve(stack) -> Iterator:
    runners: list[web.AppRunner] = []

    def served(answer: tuple[int, bytes] | None) -> Served:
        app = build_rest_app(stack.service.service)
        lists = FakeListServer(answer)
        serve_lists_from(app, lists)
        runner = RestRunner(app)

        async def start() -> str:
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            host, port = runner.addresses[0][:2]
            return f"http://{host}:{port}"

        url = stack.loop.run(start())
        runners.append(runner)
        return Served(url, lists)

    yield served
    for runner in runners:
        stack.loop.run(runner.cleanup())


def get(url: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, timeout=30)


def test_a_node_list_is_the_list_servers_answer_for_the_callers_api_token(stack, serve):
    served = serve((200, b'{"nodes": [], "mark": 1}'))
    reply = get(f"{served.url}/v3/nodes", stack.token)
    assert (reply.status_code, reply.json(), served.lists.asked) == (
        200,
        {"nodes": [], "mark": 1},
        [("nodes", stack.token)],
    )


def test_a_list_for_a_federates_forwarded_caller_is_authenticated_before_it_is_handed_over(
    stack, serve
):
    served = serve((200, b'{"nodes": []}'))
    headers = {"Authorization": f"Bearer {stack.token}", FORWARDED_IDENTITY: "not-signed"}
    reply = httpx.get(f"{served.url}/v3/nodes", headers=headers, timeout=30)
    assert (reply.status_code, served.lists.asked) == (401, [])


def test_a_list_for_a_jwt_is_authenticated_before_it_is_handed_over(stack, serve):
    served = serve((200, b'{"nodes": []}'))
    reply = get(f"{served.url}/v3/nodes", "not.a.jwt")
    assert (reply.status_code, served.lists.asked) == (401, [])


def test_a_revoked_token_is_refused_when_the_list_server_cannot_answer(stack, serve):
    served = serve(None)
    stack.service.service.revoke_token(stack.token)
    reply = get(f"{served.url}/v3/nodes", stack.token)
    assert (reply.status_code, served.lists.asked) == (401, [("nodes", stack.token)])


def test_a_list_servers_refusal_is_the_gateways_reply(stack, serve):
    served = serve((403, b'{"code": 7, "message": "no", "details": []}'))
    reply = get(f"{served.url}/v3/workflows", stack.token)
    assert (reply.status_code, reply.json()["code"]) == (403, 7)


def test_a_list_server_that_cannot_answer_leaves_the_list_to_the_gateway(stack, serve):
    workflow_id = stack.start()
    served = serve(None)
    reply = get(f"{served.url}/v3/workflows", stack.token)
    assert [w["id"] for w in reply.json()["workflows"]] == [workflow_id]
    assert served.lists.asked == [("workflows", stack.token)]


def test_a_list_without_a_token_never_reaches_the_list_server(stack, serve):
    served = serve((200, b'{"nodes": []}'))
    reply = get(f"{served.url}/v3/nodes", None)
    assert (reply.status_code, served.lists.asked) == (401, [])
