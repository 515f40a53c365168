"""Rendering pages: the Jinja2 templates of this package, autoescaped, with the headers
every UI page carries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jinja2
from aiohttp import web

#: scripts and styles from this origin's files only (no inline script, no eval), never
#: framed; forms post back here only
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)

_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("fuzzball_core.webui", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,  # a misspelt name is an error in the tests, not blank
    trim_blocks=True,
    lstrip_blocks=True,
)


def iso_time(seconds: float | None) -> str:
    """``seconds`` since the epoch as ISO 8601 UTC (what ``<time datetime>`` holds)."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def utc_time(seconds: float | None) -> str:
    """``seconds`` as readable UTC, shown until the browser's script puts it in its locale."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_TEMPLATES.filters["iso_time"] = iso_time
_TEMPLATES.filters["utc_time"] = utc_time


def html(template: str, status: int = 200, **context: Any) -> web.Response:
    """``template`` rendered with ``context``, as an HTML page response."""
    body = _TEMPLATES.get_template(template).render(**context)
    return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")


async def ui_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The Web UI's own headers (the gateway adds nosniff, HSTS over HTTPS and the rest).

    Every UI response gets the policy, static files too: a file served here must never run
    inline script either. Pages are not cached: they show who is signed in."""
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    if response.content_type == "text/html":
        response.headers["Cache-Control"] = "no-store"
