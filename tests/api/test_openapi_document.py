"""The gateway serves an OpenAPI document of its routes, generated from the route table and
the proto messages, so it cannot drift from what is served."""

from __future__ import annotations

import inspect
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import schemathesis
from aiohttp import web
from support.isolation_stack import IsolationStack
from support.live_api import Stack, gateway_operations

from fuzzball_core.api import rest
from fuzzball_core.api.openapi import (
    BINARY,
    TEXT,
    Body,
    MediaOperation,
    Query,
    documented,
    openapi_document,
)
from fuzzball_core.api.rest import build_rest_app
from fuzzball_core.api.v1 import client_pb2 as pb
from fuzzball_core.orchestrate.server import rest_app
from fuzzball_core.webui import nodes
from fuzzball_core.webui.app import is_ui_path, webui_routes
from fuzzball_core.webui.session import CSRF_FIELD

DOCUMENT = "/v3/openapi.json"


def fetch(stack: Stack, path: str, token: str | None = "own") -> httpx.Response:
    bearer = stack.token if token == "own" else token
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    return httpx.get(f"{stack.servers.rest_url}{path}", headers=headers, timeout=10)


@pytest.fixture
def document(stack) -> dict:
    response = fetch(stack, DOCUMENT)
    assert response.status_code == 200
    return response.json()


def served_routes() -> set[tuple[str, str]]:
    # the routes the test stacks serve (live_api): the gateway's and the identity routes
    return {
        (method.lower(), path)
        for method, path in (label.split(" ", 1) for label in gateway_operations())
    }


def test_the_document_is_served_to_an_authenticated_caller(document):
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Fuzzball"


def test_the_document_needs_a_token_like_every_other_route(stack):
    assert fetch(stack, DOCUMENT, token=None).status_code == 401


def test_the_document_lists_exactly_the_served_routes(document):
    listed = {(method, path) for path, methods in document["paths"].items() for method in methods}
    assert listed == served_routes()


def undescribed_operations(document: dict[str, Any]) -> list[str]:
    """``method path`` of each operation of ``document`` marked as not described."""
    return [
        f"{method} {path}"
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if operation["summary"] == "(not described)"
    ]


def test_every_route_but_the_document_itself_is_described(document):
    assert undescribed_operations(document) == [f"get {DOCUMENT}"]


async def _never_served(request: web.Request) -> web.StreamResponse:  # pragma: no cover
    raise AssertionError


def test_every_route_orchestrate_serves_but_the_document_itself_is_described(tmp_path):
    # Orchestrate as it serves: the gateway and every route the process adds to it
    stack = IsolationStack(tmp_path)
    try:
        app = rest_app(stack.orchestrate.orchestrate)
        document = openapi_document(app, title="t", version="v")
    finally:
        stack.close()
    assert undescribed_operations(document) == [f"get {DOCUMENT}"]


def test_a_route_added_without_a_description_is_still_listed():
    app = build_rest_app(object())  # type: ignore[arg-type]

    async def extra(request):  # pragma: no cover - never served here
        raise AssertionError

    app.router.add_get("/v3/extra/{thing}", extra)
    operation = openapi_document(app, title="t", version="v")["paths"]["/v3/extra/{thing}"]["get"]
    assert operation["summary"] == "(not described)"
    assert operation["parameters"][0]["name"] == "thing"


def test_a_request_body_is_its_message_in_json_names(document):
    body = document["paths"]["/v3/workflows"]["post"]["requestBody"]["content"]
    name = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    schema = document["components"]["schemas"][name]
    expected = {field.json_name for field in pb.StartWorkflowRequest.DESCRIPTOR.fields}
    assert set(schema["properties"]) == expected
    assert schema["additionalProperties"] is False


def test_a_field_the_path_gives_is_left_out_of_the_body(document):
    body = document["paths"]["/v3/nodes/{id}/holds"]["post"]["requestBody"]["content"]
    name = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert set(document["components"]["schemas"][name]["properties"]) == {"effect", "reason"}


def test_every_query_parameter_a_handler_reads_is_documented(document):
    source = inspect.getsource(rest)
    read = set(re.findall(r'_query_(?:int|bool)\(request, "([^"]+)"\)', source))
    read |= set(re.findall(r'request\.query\.get\("([^"]+)"', source))
    documented = {
        parameter["name"]
        for methods in document["paths"].values()
        for operation in methods.values()
        for parameter in operation["parameters"]
        if parameter["in"] == "query"
    }
    assert read and read <= documented


def test_a_path_parameter_carries_the_pattern_the_router_matches():
    paths = openapi_document(web_ui_app(federate=False), title="t", version="v")["paths"]
    release = paths["/nodes/{node}/holds/{hold}/release"]["post"]["parameters"]
    schemas = {parameter["name"]: parameter["schema"] for parameter in release}
    assert schemas["hold"] == {"type": "string", "minLength": 1, "pattern": "^(?:[0-9]{1,18})$"}
    assert schemas["node"]["pattern"] == "^(?:[^/]+)$"


def test_a_path_parameter_without_a_pattern_of_its_own_is_one_segment(document):
    parameters = document["paths"]["/v3/nodes/{id}/holds/{holdId}"]["delete"]["parameters"]
    (hold,) = [parameter for parameter in parameters if parameter["name"] == "holdId"]
    assert hold["schema"]["pattern"] == "^(?:[^{}/]+)$"  # aiohttp's own


def test_an_int32_query_parameter_carries_its_range(document):
    parameters = document["paths"]["/v3/workflows/{id}:events"]["get"]["parameters"]
    after_seq = next(p for p in parameters if p["name"] == "afterSeq")
    assert after_seq["schema"]["maximum"] == 2**31 - 1


def test_replies_conform_to_the_document(stack):
    auth = {"Authorization": f"Bearer {stack.token}"}
    schema = schemathesis.openapi.from_url(f"{stack.servers.rest_url}{DOCUMENT}", headers=auth)
    workflow_id = stack.start()
    for path, template in [
        (f"/v3/workflows/{workflow_id}", "/v3/workflows/{id}"),
        (f"/v3/workflows/{workflow_id}:status", "/v3/workflows/{id}:status"),
        ("/v3/nodes/node-1", "/v3/nodes/{id}"),
        ("/v3/workflows/nope", "/v3/workflows/{id}"),  # the 404's Status
    ]:
        operation = schema[template]["GET"]
        reply = fetch(stack, path)
        assert operation.validate_response(reply) is not False, path


#: a form field read in the Web UI's handlers: ``form.get("NAME"``, ``read_form(request)).get(
#: "NAME"``, ``_form_text(form, "NAME")``
FORM_FIELD_READ = re.compile(r'(?:form\b[^\n]*?\.get\(|_form_text\(form, )"(\w+)"')


def web_ui_app(*, federate: bool) -> web.Application:
    """A gateway serving the Web UI (Orchestrate's pages, or Federate's); never served."""
    ui = types.SimpleNamespace(federate=federate)
    return build_rest_app(object(), extra_routes=[webui_routes(ui)])  # type: ignore[arg-type]


def web_ui_actions(app: web.Application) -> dict[str, dict[str, Any]]:
    """The Web UI's POST operations of ``app``'s document, by path."""
    document = openapi_document(app, title="t", version="v")
    return {path: methods["post"] for path, methods in document["paths"].items()
            if is_ui_path(path) and "post" in methods}  # fmt: skip


def names_read(
    function: Callable[..., Any], reading: re.Pattern[str], seen: frozenset[str] = frozenset()
) -> set[str]:
    """The names ``reading`` finds read in ``function``'s source, itself or through the
    helpers of its module it calls (and the ``from_query`` readers it uses)."""
    module = sys.modules[function.__module__]
    source = inspect.getsource(function)
    read = set(reading.findall(source))
    for name in set(re.findall(r"\b(_\w+)\(", source)) - seen:
        helper = getattr(module, name, None)
        if inspect.isfunction(helper):
            read |= names_read(helper, reading, seen | {name})
    for name in re.findall(r"\b(\w+)\.from_query\(", source):
        read |= names_read(getattr(module, name).from_query, reading, seen)
    return read


def form_fields_read(function: Callable[..., Any]) -> set[str]:
    """The form fields ``function`` reads."""
    return names_read(function, FORM_FIELD_READ)


@pytest.mark.parametrize("federate", [False, True], ids=["orchestrate", "federate"])
def test_every_web_ui_action_is_described(federate):
    actions = web_ui_actions(web_ui_app(federate=federate))
    assert "/editor/start" in actions
    undescribed = [
        path for path, action in actions.items() if action["summary"] == "(not described)"
    ]
    assert undescribed == []


def test_a_web_ui_form_declares_exactly_the_fields_its_handler_reads():
    app = web_ui_app(federate=False)
    actions = web_ui_actions(app)
    compared = 0
    for route in app.router.routes():
        if route.method != "POST" or not is_ui_path(route.resource.canonical):
            continue
        content = actions[route.resource.canonical].get("requestBody", {}).get("content", {})
        form = content.get("application/x-www-form-urlencoded")
        if form is None:  # the editor's calls: a JSON body
            continue
        declared = set(form["schema"]["properties"]) - {CSRF_FIELD}
        assert declared == form_fields_read(inspect.unwrap(route.handler)), route
        compared += 1
    assert compared == 9


def test_a_web_ui_form_is_urlencoded_with_its_bounds_and_answers_a_redirect_or_a_page():
    cordon = web_ui_actions(web_ui_app(federate=False))["/nodes/{node}/cordon"]
    form = cordon["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    assert form["properties"]["reason"]["maxLength"] == nodes.MAX_REASON
    assert set(cordon["responses"]) == {"303", "4XX"}
    assert "text/html" in cordon["responses"]["4XX"]["content"]


def test_a_route_of_other_media_types_declares_its_bodies_and_query():
    operation = MediaOperation(
        "store bytes",
        Body("text/plain", "the receipt"),
        request=Body("application/octet-stream", "the bytes", BINARY),
        query=(Query("target", "string", "where", choices=("a", "b"), required=True),),
    )
    app = build_rest_app(object())  # type: ignore[arg-type]
    app.router.add_put("/v3/extra", documented(operation)(_never_served))
    entry = openapi_document(app, title="t", version="v")["paths"]["/v3/extra"]["put"]
    assert entry["requestBody"]["content"] == {"application/octet-stream": {"schema": BINARY}}
    assert entry["responses"]["200"]["content"] == {"text/plain": {"schema": TEXT}}
    assert "application/json" in entry["responses"]["default"]["content"]  # a Status
    (target,) = entry["parameters"]
    assert target["required"] is True
    assert target["schema"] == {"type": "string", "enum": ["a", "b"]}


def test_a_signed_in_page_declares_its_error_page_and_the_sign_in_redirect():
    app = web_ui_app(federate=False)
    entry = openapi_document(app, title="t", version="v")["paths"]["/nodes"]["get"]
    assert entry["responses"]["200"]["content"].keys() == {"text/html"}
    assert entry["responses"]["default"]["content"].keys() == {"text/html"}
    assert "Location" in entry["responses"]["303"]["headers"]


def test_a_static_folder_is_described_as_its_files():
    paths = openapi_document(web_ui_app(federate=False), title="t", version="v")["paths"]
    assert "/static" not in paths
    files = paths["/static/{filename}"]["get"]
    assert files["parameters"][0]["name"] == "filename"
    assert files["responses"]["200"]["content"]["*/*"]["schema"] == BINARY


@pytest.mark.parametrize("federate", [False, True], ids=["orchestrate", "federate"])
def test_every_web_ui_page_is_described(federate):
    document = openapi_document(web_ui_app(federate=federate), title="t", version="v")
    pages = {
        path: methods["get"]
        for path, methods in document["paths"].items()
        if is_ui_path(path) and "get" in methods
    }
    assert "/workflows/{workflow}/log" in pages or federate
    undescribed = [path for path, page in pages.items() if page["summary"] == "(not described)"]
    # Federate's / only leads to its Clusters page
    assert undescribed == (["/"] if federate else [])


#: a query parameter read in the Web UI's pages: ``query.get("NAME"``, ``_query_choice(request,
#: "NAME"``, ``_int_query(request, "NAME"``
QUERY_READ = re.compile(r'(?:query\.get\(|_query_choice\(request, |_int_query\(request, )"(\w+)"')


def query_read(function: Callable[..., Any]) -> set[str]:
    """The query parameters ``function`` reads."""
    return names_read(function, QUERY_READ)


def test_a_web_ui_page_declares_every_query_parameter_its_handler_reads():
    app = web_ui_app(federate=False)
    paths = openapi_document(app, title="t", version="v")["paths"]
    compared = 0
    for route in app.router.routes():
        path = route.resource.canonical
        if route.method != "GET" or not is_ui_path(path) or path.startswith("/static"):
            continue
        declared = {p["name"] for p in paths[path]["get"]["parameters"] if p["in"] == "query"}
        read = query_read(inspect.unwrap(route.handler))
        assert read <= declared, path
        compared += len(read)
    assert compared == 13
