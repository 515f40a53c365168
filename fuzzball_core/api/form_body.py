"""Reading a request's form body: a malformed one is an ``InvalidArgument``, never a 500.

aiohttp's ``request.post()`` raises several exceptions that are no client error to the
caller for a body that is not a well-formed form: ``InvalidHeader`` for a multipart part whose
header line is not a header, ``ValueError`` for a missing or unfound boundary or a part
without a name, ``LookupError`` for an unknown charset, ``RuntimeError`` for an unknown
transfer encoding, ``UnicodeDecodeError`` for bytes that are not text in the body's charset.
:func:`read_form` refuses each naming the body and what is wrong, and never echoes the body's
bytes (a sign-in form carries a password).

The gateway thread reads a form ahead, on the loop that owns the connection
(``gateway_thread.home_loop_middleware``), with :func:`read_form_ahead`: a malformed body is
remembered there, so that the handler's own :func:`read_form` refuses it in the route's own
way (an OAuth error, an error page, a Status), and a handler that reads no form is not
refused for one.
"""

from __future__ import annotations

import contextlib

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from multidict import MultiDictProxy

from fuzzball_core.errors import InvalidArgument

#: the content types whose bodies ``request.post()`` parses
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})

#: where a request keeps the refusal of its malformed form body, read ahead
_REFUSAL = web.RequestKey("form_refusal", str)

_PREFIX = "request body"

FormFields = MultiDictProxy[str | bytes | bytearray | web.FileField]


async def read_form(request: web.Request) -> FormFields:
    """The request's form fields (none for a body of another type); ``InvalidArgument``
    saying what is wrong when the body is not a well-formed form."""
    refused = request.get(_REFUSAL)
    if refused is not None:
        raise InvalidArgument(refused)
    try:
        return await request.post()
    except (HttpProcessingError, ValueError, LookupError, RuntimeError) as exc:
        if isinstance(exc, (KeyError, IndexError)):
            raise  # a fault of the server's, not of the body
        refusal = _refusal(request, exc)
    request[_REFUSAL] = refusal
    # the rest of the body, so that no later read waits on the connection (bounded by the
    # application's client_max_size, like post() itself)
    await request.read()
    raise InvalidArgument(refusal)


async def read_form_ahead(request: web.Request) -> None:
    """Read a form body now, keeping its fields, or its refusal for :func:`read_form`."""
    # a refusal is remembered: the handler's own read_form raises it
    with contextlib.suppress(InvalidArgument):
        await read_form(request)


def _refusal(request: web.Request, exc: Exception) -> str:
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start]
        return (
            f"{_PREFIX}: a form field is not {exc.encoding} text "
            f"(byte 0x{byte:02x} at offset {exc.start})"
        )
    if isinstance(exc, LookupError):
        return f"{_PREFIX}: the form names a charset that is not a known text encoding"
    return f"{_PREFIX}: not a well-formed {request.content_type} body"
