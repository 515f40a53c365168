"""The REST gateway's OpenAPI document, generated from its routes and the proto messages.

Each handler declares what it takes and answers with :func:`documented` (an
:class:`Operation`: its request and reply messages, query parameters, path fields);
:func:`openapi_document` walks the application's route table and writes one operation per
route, with the JSON Schema of every message as the proto3 JSON mapping writes it
(``rest_messages``). Routes whose bodies are plain JSON rather than a ``fuzzball.v1``
message (the identity routes, shaped as Fuzzball's swagger defines them) declare JSON Schemas
instead (:class:`JsonOperation`). The Web UI's actions take HTML forms and answer with
redirects and pages (:class:`FormOperation`). Routes whose request or reply is of another
media type (an HTML page, Prometheus text, a file's bytes, an OAuth form) declare it
(:class:`MediaOperation`, its bodies :class:`Body`). A static folder's route (``add_static``)
is described as its files, ``PREFIX/{filename}``. A route added without a declaration is still
listed, marked as not described, so the document cannot leave a served path out; the gateway
serves it at ``GET /v3/openapi.json``.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from aiohttp import web
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from fuzzball_core.api.http_errors import MAX_BODY_BYTES

# a handler: a function of the request, or a method of the routes object serving it
H = TypeVar("H", bound=Callable[..., Awaitable[web.StreamResponse]])

OPENAPI_VERSION = "3.0.3"
_STATUS = "google.rpc.Status"
_INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
_INT64 = {"type": "string", "format": "int64", "pattern": r"^-?[0-9]{1,19}$"}
_UINT64 = {"type": "string", "format": "uint64", "pattern": r"^[0-9]{1,20}$"}
_UINT32 = {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2**32 - 1}

#: JSON Schemas of the protobuf scalar types, as the proto3 JSON mapping writes them (64-bit
#: integers as decimal strings, bytes as base64).
_SCALARS: dict[int, dict[str, Any]] = {
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "format": "byte"},
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_INT32: _INT32,
    FieldDescriptor.TYPE_SINT32: _INT32,
    FieldDescriptor.TYPE_SFIXED32: _INT32,
    FieldDescriptor.TYPE_UINT32: _UINT32,
    FieldDescriptor.TYPE_FIXED32: _UINT32,
    FieldDescriptor.TYPE_INT64: _INT64,
    FieldDescriptor.TYPE_SINT64: _INT64,
    FieldDescriptor.TYPE_SFIXED64: _INT64,
    FieldDescriptor.TYPE_UINT64: _UINT64,
    FieldDescriptor.TYPE_FIXED64: _UINT64,
}

#: Well-known types, which the JSON mapping writes in their own forms.
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Struct": {"type": "object", "additionalProperties": True},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array", "items": {}},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
}


@dataclass(frozen=True)
class Query:
    """One query parameter of an operation."""

    name: str
    kind: Literal["integer", "boolean", "string"]
    description: str
    #: the values the handler accepts, where it refuses any other (a string's)
    choices: tuple[str, ...] = ()
    #: whether the handler refuses a request without it
    required: bool = False

    def schema(self) -> dict[str, Any]:
        """The parameter's JSON Schema (integers are the wire schema's int32)."""
        if self.kind == "integer":
            return dict(_INT32)
        schema: dict[str, Any] = {"type": self.kind}
        if self.choices:
            schema["enum"] = list(self.choices)
        return schema


@dataclass(frozen=True)
class Operation:
    """What one REST handler takes and answers.

    ``request``: the message its JSON body is (``None``: no body); ``path_fields``: the
    fields of ``request`` the path gives (left out of the body's schema). ``response``: the
    message its reply is; with ``stream`` the reply is newline-delimited
    ``{"result": response}`` objects, one ``{"error": Status}`` possibly last.
    """

    summary: str
    response: type[Message]
    request: type[Message] | None = None
    path_fields: tuple[str, ...] = ()
    query: tuple[Query, ...] = ()
    stream: bool = False
    tags: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class JsonOperation:
    """What a REST handler answering plain JSON takes and answers: the JSON Schemas of its
    body (``request``; ``None``: no body) and of its reply.

    ``signed_in_page``: a Web UI route for signed-in visitors (``webui.session.page``):
    without a valid session it answers a 303 to the sign-in page, and refusals other than its
    body's own (a missing CSRF token, a permission denied) are HTML error pages.

    ``also``: other statuses answered with the same reply (``/readyz``'s 503 while the
    process is not ready), each with what it means."""

    summary: str
    response: dict[str, Any]
    request: dict[str, Any] | None = None
    query: tuple[Query, ...] = ()
    tags: tuple[str, ...] = field(default=())
    signed_in_page: bool = False
    also: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class FormField:
    """One field of a form body: its JSON Schema (as text, the form's values are) and whether
    the route refuses a form without it."""

    name: str
    schema: dict[str, Any]
    description: str
    required: bool = False


@dataclass(frozen=True)
class FormOperation:
    """What a Web UI action takes and answers: an ``application/x-www-form-urlencoded`` body
    of ``fields`` (``multipart/form-data`` is read alike), a 303 to ``redirect`` when done,
    and an HTML page (``refusal``) with a 4xx status when refused.

    ``signed_in_page``: a page for signed-in visitors only (``webui.session.page``): without a
    valid session the 303 leads to the sign-in page instead, and a request without the
    session's CSRF token (the ``csrf`` field or the ``X-CSRF-Token`` header) is refused.
    """

    summary: str
    redirect: str
    fields: tuple[FormField, ...] = ()
    refusal: str = "an error page saying why"
    signed_in_page: bool = True
    tags: tuple[str, ...] = field(default=("web ui",))


#: the schema of a text body, and of a body of bytes
TEXT: dict[str, Any] = {"type": "string"}
BINARY: dict[str, Any] = {"type": "string", "format": "binary"}


@dataclass(frozen=True)
class Body:
    """A body of one media type: ``schema`` is the JSON Schema of its content (:data:`TEXT`
    for text, :data:`BINARY` for bytes, an object's schema for JSON or a form's fields)."""

    media_type: str
    description: str
    schema: dict[str, Any] = field(default_factory=lambda: dict(TEXT))


def form_body(fields: tuple[FormField, ...], description: str = "a form") -> Body:
    """An ``application/x-www-form-urlencoded`` body of ``fields`` (those the route refuses a
    form without are required)."""
    return Body("application/x-www-form-urlencoded", description, _form_schema(fields))


@dataclass(frozen=True)
class MediaOperation:
    """What a route whose request or reply is not (only) JSON takes and answers: a page
    (``text/html``), Prometheus text, a file's bytes, an OAuth form.

    ``reply``: the body of its 200 answer; ``request``: the body it takes (``None``: no body).
    ``refusal``: the body of its refusals (``None``: a ``google.rpc.Status``, as the gateway
    answers an error the handler raises). ``signed_in_page``: a Web UI page for signed-in
    visitors (``webui.session.page``): without a valid session it answers a 303 to the
    sign-in page.
    """

    summary: str
    reply: Body
    request: Body | None = None
    query: tuple[Query, ...] = ()
    refusal: Body | None = None
    signed_in_page: bool = False
    tags: tuple[str, ...] = field(default=())


Declaration = Operation | JsonOperation | FormOperation | MediaOperation

# weak: a handler made per application (a closure) is forgotten with its application
_OPERATIONS: weakref.WeakKeyDictionary[Callable[..., Any], Declaration] = (
    weakref.WeakKeyDictionary()
)


def documented(operation: Declaration) -> Callable[[H], H]:
    """Declare what the decorated handler (a function, or a method of the object whose bound
    method is the route's handler) takes and answers, for the OpenAPI document."""

    def declare(handler: H) -> H:
        _OPERATIONS[handler] = operation
        return handler

    return declare


def openapi_document(
    app: web.Application, *, title: str, version: str, public_paths: Collection[str] = ()
) -> dict[str, Any]:
    """The OpenAPI document of every route ``app`` serves (HEAD routes aside); those of
    ``public_paths`` are declared to need no token (``security: []``)."""
    schemas: dict[str, Any] = {_STATUS: _status_schema()}
    paths: dict[str, dict[str, Any]] = {}
    for route in app.router.routes():
        if route.method == "HEAD" or route.resource is None:
            continue
        path = route.resource.canonical
        # a bound method's declaration is its function's
        operation = _OPERATIONS.get(getattr(route.handler, "__func__", route.handler))
        if isinstance(route.resource, web.StaticResource):
            path, operation = f"{path}/{{filename}}", _STATIC_FILE
        entry = _operation(route.method, path, operation, schemas, _path_patterns(route))
        if path in public_paths:
            entry["security"] = []
        paths.setdefault(path, {})[route.method.lower()] = entry
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": title,
            "version": version,
            "description": (
                "Fuzzball's REST API: bodies are the proto3 JSON mapping of the fuzzball.v1 "
                "messages; every error is a google.rpc.Status. Request bodies are at most "
                f"{MAX_BODY_BYTES} bytes."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }


def _path_patterns(route: web.AbstractRoute) -> dict[str, str]:
    """Each path parameter's regular expression as the router matches it: aiohttp keeps them
    only in the route's compiled pattern, as its named groups."""
    compiled = route.resource.get_info().get("pattern") if route.resource else None
    if compiled is None:
        return {}
    text = compiled.pattern
    patterns = {}
    for group in re.finditer(r"\(\?P<(\w+)>", text):
        end = _group_end(text, group.end())
        patterns[group.group(1)] = text[group.end() : end]
    return patterns


def _group_end(text: str, index: int) -> int:
    """Where the group whose body starts at ``index`` closes (escapes and character classes,
    whose brackets are no group's, skipped)."""
    depth = 1
    while True:
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = text.index("]", index + 2)  # a class's first character may be "]"
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index
        index += 1


def _operation(
    method: str,
    path: str,
    operation: Declaration | None,
    schemas: dict[str, Any],
    patterns: dict[str, str],
) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": _path_schema(patterns.get(name))}
        for name in re.findall(r"\{([^}:]+)\}", path)
    ]
    errors = {"default": _json_content("an error", {"$ref": _ref(_STATUS)})}
    if operation is None:
        return {
            "summary": "(not described)",
            "operationId": _operation_id(method, path),
            "parameters": parameters,
            "responses": {"200": {"description": "the route's reply"}, **errors},
        }
    if isinstance(operation, FormOperation):
        return _form_operation(method, path, operation, parameters)
    parameters += [
        {"name": q.name, "in": "query", "required": q.required, "description": q.description}
        | {"schema": q.schema()}
        for q in operation.query
    ]
    if isinstance(operation, JsonOperation):
        return _json_operation(method, path, operation, parameters, errors)
    if isinstance(operation, MediaOperation):
        return _media_operation(method, path, operation, parameters, errors)
    reply: dict[str, Any] = {"$ref": _ref(_message(operation.response.DESCRIPTOR, schemas))}
    if operation.stream:
        reply = {
            "type": "object",
            "description": "one per line",
            "properties": {"result": reply, "error": {"$ref": _ref(_STATUS)}},
        }
    entry: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": _operation_id(method, path),
        "parameters": parameters,
        "responses": {"200": _json_content(operation.summary, reply), **errors},
    }
    if operation.tags:
        entry["tags"] = list(operation.tags)
    if operation.request is not None:
        body = _message(operation.request.DESCRIPTOR, schemas, skip=operation.path_fields)
        entry["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _ref(body)}}},
        }
    return entry


def _path_schema(pattern: str | None) -> dict[str, Any]:
    """A path parameter's schema: a string the route's pattern matches whole (others are
    answered by the router's 404, before any handler)."""
    if pattern is None:
        return {"type": "string"}
    return {"type": "string", "minLength": 1, "pattern": f"^(?:{pattern})$"}


def _json_operation(
    method: str,
    path: str,
    operation: JsonOperation,
    parameters: list[dict[str, Any]],
    errors: dict[str, Any],
) -> dict[str, Any]:
    """The entry of a route declared with JSON Schemas (written in place)."""
    entry: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": _operation_id(method, path),
        "parameters": parameters,
        "responses": {"200": _json_content(operation.summary, operation.response), **errors},
    }
    for status, meaning in operation.also:
        entry["responses"][str(status)] = _json_content(meaning, operation.response)
    if operation.signed_in_page:
        entry["responses"]["303"] = dict(_SIGN_IN_REDIRECT)
        refusal = entry["responses"]["default"]
        refusal["description"] += " (an HTML error page where it is not the body's)"
        refusal["content"] |= _html_content("")["content"]
    if operation.tags:
        entry["tags"] = list(operation.tags)
    if operation.request is not None:
        entry["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": operation.request}},
        }
    return entry


#: a signed-in page's answer to a request without a valid session
_SIGN_IN_REDIRECT = {
    "description": "without a valid session: to the sign-in page",
    "headers": {"Location": {"schema": {"type": "string"}}},
}


def _media_operation(
    method: str,
    path: str,
    operation: MediaOperation,
    parameters: list[dict[str, Any]],
    errors: dict[str, Any],
) -> dict[str, Any]:
    """The entry of a route declared with the media types of its bodies."""
    refusal = errors["default"] if operation.refusal is None else _content(operation.refusal)
    entry: dict[str, Any] = {
        "summary": operation.summary,
        "operationId": _operation_id(method, path),
        "parameters": parameters,
        "responses": {"200": _content(operation.reply), "default": refusal},
    }
    if operation.signed_in_page:
        entry["responses"]["303"] = dict(_SIGN_IN_REDIRECT)
    if operation.tags:
        entry["tags"] = list(operation.tags)
    if operation.request is not None:
        entry["requestBody"] = {"required": True} | _content(operation.request)
    return entry


#: what a static folder's route serves (``add_static``): its files, as their types; another
#: name is refused (404, or 403 outside the folder) as the gateway refuses a missing path
_STATIC_FILE = MediaOperation("a file of the folder served here", Body("*/*", "the file", BINARY))


def _content(body: Body) -> dict[str, Any]:
    return {"description": body.description, "content": {body.media_type: {"schema": body.schema}}}


def _form_schema(fields: tuple[FormField, ...]) -> dict[str, Any]:
    """The JSON Schema of a form of ``fields``."""
    form: dict[str, Any] = {
        "type": "object",
        "properties": {
            item.name: item.schema | {"description": item.description} for item in fields
        },
    }
    required = [item.name for item in fields if item.required]
    if required:
        form["required"] = required
    return form


def _form_operation(
    method: str, path: str, operation: FormOperation, parameters: list[dict[str, Any]]
) -> dict[str, Any]:
    """The entry of a Web UI action taking a form."""
    redirect = operation.redirect
    if operation.signed_in_page:
        redirect += "; without a valid session, the sign-in page"
    form = _form_schema(operation.fields)
    required = form.get("required", [])
    return {
        "summary": operation.summary,
        "operationId": _operation_id(method, path),
        "tags": list(operation.tags),
        "parameters": parameters,
        "requestBody": {
            "required": bool(required),
            "content": {"application/x-www-form-urlencoded": {"schema": form}},
        },
        "responses": {
            "303": _SIGN_IN_REDIRECT | {"description": redirect},
            "4XX": _html_content(operation.refusal),
        },
    }


def _html_content(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/html": {"schema": {"type": "string"}}}}


def _json_content(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _operation_id(method: str, path: str) -> str:
    return method.lower() + re.sub(r"[^A-Za-z0-9]+", "_", path).rstrip("_")


def _ref(name: str) -> str:
    return f"#/components/schemas/{name}"


def _message(descriptor: Descriptor, schemas: dict[str, Any], *, skip: tuple[str, ...] = ()) -> str:
    """The component name of ``descriptor``'s schema, written into ``schemas`` (with every
    message it refers to) the first time it is met."""
    name = descriptor.full_name + ("." + "_".join(("without", *skip)) if skip else "")
    if name in schemas:
        return name
    schemas[name] = {}  # claimed before the fields are read, for messages that nest
    properties: dict[str, Any] = {}
    required: list[str] = []
    for item in descriptor.fields:
        if item.name in skip:
            continue
        properties[item.json_name] = _field(item, schemas)
        if not item.has_presence:
            required.append(item.json_name)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    # Fields without presence are always written in replies (rest_messages.to_json).
    if required:
        schema["x-always-present"] = required
    schemas[name] = schema
    return name


def _field(item: FieldDescriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    message = item.message_type
    if message is not None and message.GetOptions().map_entry:
        value = message.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single(value, schemas)}
    single = _single(item, schemas)
    return {"type": "array", "items": single} if item.is_repeated else single


def _single(item: FieldDescriptor, schemas: dict[str, Any]) -> dict[str, Any]:
    message = item.message_type
    if message is not None:
        known = _WELL_KNOWN.get(message.full_name)
        return dict(known) if known is not None else {"$ref": _ref(_message(message, schemas))}
    if item.enum_type is not None:
        return {"type": "string", "enum": [value.name for value in item.enum_type.values]}
    return dict(_SCALARS[item.type])


def _status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "code": {"type": "integer", "format": "int32"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["code", "message", "details"],
    }
