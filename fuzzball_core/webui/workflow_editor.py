"""The workflow editor: a YAML text area the server validates as the visitor types.

``static/editor.js`` sends the text (debounced) to ``/editor/check``, which answers the
service's own validation (``validate_workflow``: the same checks a submission gets, plugin
validators included, mounts of undeclared volumes among them) with each problem placed at
its line. v1 files (uploaded, pasted, or opened from a workflow submitted as v1) are
converted to v4 by the server (``/editor/upgrade``, ``spec.upgrade_to_v4``). Start submits
the text exactly as it stands, so nothing the editor does not understand (``preemptible``,
``policy.retry``, ``policy.restart``, ``images:``) is lost or rewritten on the way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from aiohttp import web

from fuzzball_core.api.form_body import read_form
from fuzzball_core.api.json_body import parse_json_body
from fuzzball_core.api.openapi import (
    FormField,
    FormOperation,
    JsonOperation,
    Query,
    documented,
)
from fuzzball_core.errors import FuzzballError, InvalidArgument, NotFound
from fuzzball_core.service.contract import OrchestrateService
from fuzzball_core.service.permissions import may_start_workflows
from fuzzball_core.service.views import Principal
from fuzzball_core.spec import field_violations, upgrade_to_v4
from fuzzball_core.spec.loading import load_document
from fuzzball_core.spec.names import MAX_WORKFLOW_NAME, check_printable
from fuzzball_core.webui.context import UI
from fuzzball_core.webui.render import html
from fuzzball_core.webui.session import CSRF_FORM_FIELD, Visitor, page, page_operation
from fuzzball_core.webui.spec_lines import line_of
from fuzzball_core.webui.workflow_pages import WORKFLOW_ID

#: the file a new workflow starts from
HELLO_WORLD = """version: v4
jobs:
  hello:
    image:
      uri: docker://alpine:3.19
    command: [echo, hello world]
    resource:
      cpu:
        cores: 1
      memory:
        size: 64MiB
"""


@dataclass(frozen=True)
class Problem:
    """One thing the server says of a file: where (``line`` None: the whole file)."""

    severity: str  # error or warning
    field: str
    message: str
    line: int | None


def _warning(text: str, warning: str) -> Problem:
    """A warning string (``PATH: TEXT``) as a problem at the path's line."""
    path, _, message = warning.partition(": ")
    if not message:
        path, message = "", warning
    return Problem("warning", path, message, line_of(text, path))


def _errors(text: str, error: InvalidArgument) -> list[Problem]:
    violations = field_violations(error) or [("", error.message)]
    return [
        Problem("error", path, message, line_of(text, path, message))
        for path, message in violations
    ]


def check(who: Principal, service: OrchestrateService, text: str) -> list[Problem]:
    """Every problem the service finds in ``text`` (none: it would be accepted as it is)."""
    try:
        warnings = service.validate_workflow(who, raw_specification=text)
    except InvalidArgument as error:
        return _errors(text, error)
    return [_warning(text, w) for w in warnings]


def declared_version(text: str) -> str | None:
    """The ``version`` a file declares (None: not a YAML mapping saying one)."""
    try:
        document = load_document(text)
    except InvalidArgument:
        return None
    version = document.get("version") if isinstance(document, dict) else None
    return version if isinstance(version, str) else None


def _text_of(body: Any) -> str:
    if not isinstance(body, dict) or not isinstance(body.get("specification"), str):
        raise InvalidArgument("specification: a workflow file's text is required")
    return str(body["specification"])


#: the body of the editor's server calls
_SPECIFICATION = {
    "type": "object",
    "properties": {"specification": {"type": "string", "description": "a workflow file's text"}},
    "required": ["specification"],
}
_PROBLEM = {
    "type": "object",
    "properties": {
        "severity": {"type": "string", "enum": ["error", "warning"]},
        "field": {"type": "string"},
        "message": {"type": "string"},
        "line": {"type": "integer", "nullable": True},
    },
}


def _json_error(error: FuzzballError) -> web.Response:
    return web.json_response(error.to_status(), status=error.http_status)


@documented(
    page_operation(
        "the editor: hello world, or a workflow's file (v1 converted to v4)",
        Query("from", "string", "the id of the workflow whose file to edit"),
    )
)
@page
async def editor(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """The editor: hello world, or the file of the workflow ``?from=ID`` (v1 converted)."""
    text, name, notice = HELLO_WORLD, "hello-world", ""
    source = request.query.get("from")
    if source:
        if not re.fullmatch(WORKFLOW_ID, source):  # never looked up: as if absent
            raise NotFound("workflow not found")
        ui = request.app[UI]
        workflow = await ui.call(ui.service.get_workflow, visitor.who, source)
        text, name = workflow.raw_specification, workflow.name
        if declared_version(text) == "v1":
            try:
                text = upgrade_to_v4(text)
            except InvalidArgument as error:  # no longer valid (a rule added since): as it is
                problems = _errors(text, error)
                return _editor_page(visitor, text, name, problems=problems)
            notice = "This workflow was written for v1; the server converted it to v4."
    return _editor_page(visitor, text, name, notice=notice)


def _editor_page(
    visitor: Visitor,
    text: str,
    name: str,
    *,
    problems: list[Problem] | None = None,
    notice: str = "",
    status: int = 200,
) -> web.Response:
    return html(
        "editor.html",
        status=status,
        visitor=visitor,
        active="/workflows",
        specification=text,
        name=name,
        problems=problems or [],
        notice=notice,
        upgradable=declared_version(text) == "v1",
        lines=max(1, text.count("\n") + 1),
        # Start is offered only to one the server lets start workflows; the others may check
        may_start=may_start_workflows(visitor.who),
    )


@documented(
    JsonOperation(
        "the problems the server finds in a workflow file",
        {
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "problems": {"type": "array", "items": _PROBLEM},
                "upgradable": {"type": "boolean"},
            },
        },
        request=_SPECIFICATION,
        tags=("web ui",),
        signed_in_page=True,
    )
)
@page
async def check_route(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """``{"specification": TEXT}`` -> the problems (``problems``, ``valid``) and whether the
    file is v1 (``upgradable``)."""
    try:
        text = _text_of(parse_json_body(await request.read()))
    except InvalidArgument as error:
        return _json_error(error)
    ui = request.app[UI]
    problems = await ui.call(check, visitor.who, ui.service, text)
    return web.json_response(
        {
            "valid": not any(p.severity == "error" for p in problems),
            "problems": [asdict(p) for p in problems],
            "upgradable": declared_version(text) == "v1",
        }
    )


@documented(
    JsonOperation(
        "a workflow file converted to v4 (its problems, placed, when it cannot be read)",
        _SPECIFICATION,
        request=_SPECIFICATION,
        tags=("web ui",),
        signed_in_page=True,
    )
)
@page
async def upgrade_route(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """``{"specification": TEXT}`` (v1 or v4) -> ``{"specification": V4 TEXT}``; a file that
    cannot be read is 400 with its problems placed at their lines."""
    try:
        text = _text_of(parse_json_body(await request.read()))
    except InvalidArgument as error:
        return _json_error(error)
    try:
        return web.json_response({"specification": upgrade_to_v4(text, source="editor")})
    except InvalidArgument as error:
        body = error.to_status() | {"problems": [asdict(p) for p in _errors(text, error)]}
        return web.json_response(body, status=400)


def _form_text(form: Mapping[str, Any], field: str) -> str:
    value = form.get(field, "")
    if not isinstance(value, str):
        raise InvalidArgument(f"{field}: must be text, not a file")
    return value


@documented(
    FormOperation(
        "start a workflow from the editor's text",
        "to the new workflow's page",
        (
            FormField("specification", {"type": "string"}, "the workflow file", required=True),
            FormField(
                "name",
                {"type": "string", "maxLength": MAX_WORKFLOW_NAME},
                "the workflow's name (surrounding blanks are dropped)",
                required=True,
            ),
            CSRF_FORM_FIELD,
        ),
        refusal="the editor with the problems placed at their lines, or an error page",
    )
)
@page
async def start(request: web.Request, visitor: Visitor) -> web.StreamResponse:
    """Start the text as typed under the name given; back to the editor, problems placed,
    if the server refuses it."""
    form = await read_form(request)
    text = _form_text(form, "specification").replace("\r\n", "\n")  # a form sends CRLF
    name = _form_text(form, "name").strip()
    try:
        check_printable("name", name, limit=MAX_WORKFLOW_NAME)
        if not name:
            raise InvalidArgument("name: a workflow needs a name")
        started = await request.app[UI].service.start_workflow_async(
            visitor.who, raw_specification=text, name=name
        )
    except InvalidArgument as error:
        problems = _errors(text, error)
        return _editor_page(visitor, text, name, problems=problems, status=400)
    return web.Response(status=303, headers={"Location": f"/workflows/{started.id}"})


def add_routes(router: web.UrlDispatcher) -> None:
    """Register the editor and its server calls."""
    router.add_get("/editor", editor)
    router.add_post("/editor/check", check_route)
    router.add_post("/editor/upgrade", upgrade_route)
    router.add_post("/editor/start", start)
