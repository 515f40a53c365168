"""One schema on the wire: the REST gateway answers with the gRPC API's messages in their JSON
mapping, and a process's own routes join the gateway with their own credentials."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import httpx
import pytest
from aiohttp import web
from support.live_api import Stack
from test_rest_gateway import assert_status_body, get

from fuzzball_core.api.rest import ExtraRoutes, build_rest_app
from fuzzball_core.api.rest_messages import to_json
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.api.v1 import client_pb2_grpc as pb_grpc
from fuzzball_core.errors import Unauthenticated
from fuzzball_core.orchestrate.object_cache_routes import object_cache_routes
from fuzzball_core.service.views import FAILED

NODE_TOKEN = "node-secret"


@pytest.fixture
def grpc_api(stack: Stack) -> Iterator[tuple[pb_grpc.WorkflowServiceStub, list]]:
    with grpc.insecure_channel(stack.servers.grpc_target) as channel:
        yield pb_grpc.WorkflowServiceStub(channel), [("authorization", f"Bearer {stack.token}")]


def test_a_workflow_over_rest_is_the_grpc_message_in_its_json_mapping(stack, grpc_api):
    workflows, metadata = grpc_api
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=3)
    message = workflows.GetWorkflow(pb.WorkflowIdRequest(id=workflow_id), metadata=metadata)
    assert get(stack, f"/workflows/{workflow_id}").json() == to_json(message)


def test_events_over_rest_are_the_grpc_messages_with_whole_numbers_kept(stack, grpc_api):
    workflows, metadata = grpc_api
    workflow_id = stack.start()
    stack.service.set_stage(workflow_id, "jobs.hello", FAILED, exit_code=3)
    request = pb.ListEventsRequest(workflow_id=workflow_id)
    messages = workflows.ListEvents(request, metadata=metadata)
    reply = get(stack, f"/workflows/{workflow_id}:events")
    assert reply.json() == to_json(messages)
    exited = next(e for e in reply.json()["events"] if e["kind"] == "container_exited")
    assert isinstance(exited["data"]["exit_code"], int)  # written 3, not 3.0


# -- routes a process adds -----------------------------------------------------------------


@pytest.fixture
def serve(stack: Stack) -> Iterator:
    """Serve an app on the stack's loop; returns its /v3 URL."""
    runners: list[web.AppRunner] = []

    def start(app: web.Application) -> str:
        async def run() -> str:
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            runners.append(runner)
            host, port = runner.addresses[0][:2]
            return f"http://{host}:{port}/v3"

        return stack.loop.run(run())

    yield start
    for runner in runners:
        stack.loop.run(runner.cleanup())


def _node_check(token: str) -> None:
    if token != NODE_TOKEN:
        raise Unauthenticated("the node token is not valid")


def _extra_routes() -> ExtraRoutes:
    """A route for accounts and one for nodes, as a process would add its own."""

    def add(app: web.Application, base: str, principal_of: Callable) -> None:
        async def whoami(request: web.Request) -> web.Response:
            return web.json_response({"account": principal_of(request).name})

        async def node_only(_request: web.Request) -> web.Response:
            return web.json_response({"node": True})

        app.router.add_get(f"{base}/whoami", whoami)
        app.router.add_get(f"{base}/node-things/x", node_only)

    return ExtraRoutes(add=add, node_paths=("/v3/node-things/",), check_node_token=_node_check)


def test_an_extra_route_answers_its_caller_as_any_api_route(stack, serve):
    base = serve(build_rest_app(stack.service.service, extra_routes=[_extra_routes()]))
    reply = httpx.get(f"{base}/whoami", headers={"Authorization": f"Bearer {stack.token}"})
    assert reply.json() == {"account": "alice"}


def test_an_extra_node_path_takes_the_node_token_and_refuses_an_accounts(stack, serve):
    base = serve(build_rest_app(stack.service.service, extra_routes=[_extra_routes()]))
    as_node = httpx.get(f"{base}/node-things/x", headers={"Authorization": f"Bearer {NODE_TOKEN}"})
    assert as_node.json() == {"node": True}
    as_account = httpx.get(
        f"{base}/node-things/x", headers={"Authorization": f"Bearer {stack.token}"}
    )
    assert_status_body(as_account, 401, 16)


def test_without_extra_routes_the_gateway_has_no_object_cache(stack):
    assert_status_body(get(stack, "/node-objects/blobs/abc", token=NODE_TOKEN), 404, 5)


def test_orchestrates_object_cache_routes_check_the_node_token(stack, serve):
    service = stack.service.service
    service.node_token = NODE_TOKEN
    base = serve(build_rest_app(service, extra_routes=[object_cache_routes(service)]))
    blob = f"{base}/node-objects/blobs/abc"
    refused = httpx.get(blob, headers={"Authorization": f"Bearer {stack.token}"})
    assert_status_body(refused, 401, 16)
    no_cache = httpx.get(blob, headers={"Authorization": f"Bearer {NODE_TOKEN}"})
    assert "holds no object cache" in assert_status_body(no_cache, 400, 9)["message"]
