"""Every HTTP-level refusal of the REST gateway as a google.rpc.Status body.

Two kinds of error never reach the gateway's handlers as a :class:`FuzzballError`:

- aiohttp's own ``HTTPException``\\ s raised inside a request (a body over
  ``client_max_size`` is ``413``), which the error middleware maps with
  :func:`status_of_http_exception`;
- what aiohttp's HTTP parser refuses before there is a request at all (a URL or a header
  over its limit, a malformed request line). aiohttp answers those itself with a plain-text
  body and logs the parser's traceback; :class:`RestRunner` serves the gateway with a
  connection handler that answers them as a Status instead (414 for a URL, 431 for headers,
  400 for the rest) and logs one line.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from fuzzball_core.errors import (
    FuzzballError,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

log = logging.getLogger(__name__)

#: Largest request body, in bytes (aiohttp's ``client_max_size``; its default, kept).
MAX_BODY_BYTES = 1024 * 1024
#: Longest request line (method, URL, version), in bytes: a longer URL is answered 414.
MAX_REQUEST_LINE = 16 * 1024
#: Longest header field (name and value), in bytes: a longer one is answered 431. It differs
#: from :data:`MAX_REQUEST_LINE` so that the parser's error tells which limit was passed.
MAX_HEADER_FIELD = 8 * 1024
#: Most header fields a request may have.
MAX_HEADERS = 64

#: What an ``Application`` passes to each connection's handler for the limits above.
HANDLER_LIMITS: dict[str, Any] = {
    "max_line_size": MAX_REQUEST_LINE,
    "max_field_size": MAX_HEADER_FIELD,
    "max_headers": MAX_HEADERS,
}


class _HttpRefusal(InvalidArgument):
    """A request refused for its HTTP form: INVALID_ARGUMENT with its own HTTP status."""


class PayloadTooLarge(_HttpRefusal):
    """The body is over :data:`MAX_BODY_BYTES`."""

    http_status = 413


class UriTooLong(_HttpRefusal):
    """The request line is over :data:`MAX_REQUEST_LINE`."""

    http_status = 414


class HeadersTooLarge(_HttpRefusal):
    """A header is over :data:`MAX_HEADER_FIELD`, or there are too many."""

    http_status = 431


class MethodNotAllowed(FuzzballError):
    """The path exists, the method does not (405, UNIMPLEMENTED)."""

    code = 12
    code_name = "UNIMPLEMENTED"
    http_status = 405


#: The Status an HTTP status stands for, where aiohttp raised it (grpc-gateway's table read
#: backwards; what it does not name is INVALID_ARGUMENT or INTERNAL by class).
_BY_HTTP: dict[int, type[FuzzballError]] = {
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    414: UriTooLong,
    429: ResourceExhausted,
    431: HeadersTooLarge,
    503: Unavailable,
}


def status_of_http_exception(exc: web.HTTPException, request: web.Request) -> FuzzballError:
    """The error to answer for an ``HTTPException`` aiohttp raised while serving
    ``request``, with a message saying what was refused."""
    if exc.status == 413:
        return PayloadTooLarge(f"request body: larger than {MAX_BODY_BYTES} bytes")
    if exc.status == 404:
        return NotFound(f"no API path {request.path}")
    if exc.status == 405:
        return MethodNotAllowed(f"method {request.method} is not allowed on {request.path}")
    error_type = _BY_HTTP.get(exc.status)
    if error_type is None:
        error_type = InvalidArgument if exc.status < 500 else Internal
    return error_type(exc.reason or HTTPStatus(exc.status).phrase)


def status_of_parse_error(exc: BaseException | None, status: int) -> FuzzballError:
    """The error to answer for a request aiohttp's parser refused (``exc``, with the
    ``status`` aiohttp chose)."""
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else None
        if limit == MAX_REQUEST_LINE:
            return UriTooLong(f"request line: longer than {MAX_REQUEST_LINE} bytes")
        return HeadersTooLarge(f"request header: a field is longer than {MAX_HEADER_FIELD} bytes")
    if isinstance(exc, BadHttpMessage) and "Too many headers" in exc.message:
        return HeadersTooLarge(f"request headers: more than {MAX_HEADERS} fields")
    if isinstance(exc, HttpProcessingError) or status < 500:
        problem = exc.message if isinstance(exc, HttpProcessingError) else HTTPStatus(status).phrase
        return InvalidArgument(f"malformed HTTP request: {problem}")
    return Internal("internal error; the server log has the details")


class _StatusRequestHandler(RequestHandler):
    """aiohttp's connection handler, answering what its parser refuses as a Status."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        error = status_of_parse_error(exc, status)
        if isinstance(error, Internal):
            return super().handle_error(request, status, exc, message)  # logs its traceback
        # A client's malformed request is its mistake, not the server's: one line, no trace.
        log.info("refused a malformed request from %s: %s", request.remote, error.message)
        if request.writer.output_size > 0:
            raise ConnectionError("the response has begun; the connection is dropped")
        response = web.json_response(error.to_status(), status=error.http_status)
        response.force_close()
        return response


class _StatusServer(web.Server):
    def __call__(self) -> RequestHandler:
        return _StatusRequestHandler(self, loop=self._loop, **self._kwargs)


class RestRunner(web.AppRunner):
    """``web.AppRunner`` for the REST gateway: its connections answer requests aiohttp's
    parser refuses (URL or headers over the limits, malformed HTTP) as google.rpc.Status.

    aiohttp builds its ``Server`` inside the application and offers no option for the
    connection handler's class, so the server it built is given this one's.
    """

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _StatusServer
        return server
