"""What ``documented`` keeps: a handler made for one application (a closure) is declared for
as long as it is served, and forgotten with it."""

from __future__ import annotations

import gc
import weakref

from aiohttp import web

from fuzzball_core.api.openapi import JsonOperation, documented, openapi_document

OPERATION = JsonOperation("a closure's reply", {"type": "object"})


def _app_with_a_declared_closure() -> web.Application:
    async def handler(_request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/made", documented(OPERATION)(handler))
    return app


def test_a_closure_is_described_while_its_application_serves_it():
    document = openapi_document(_app_with_a_declared_closure(), title="t", version="1")
    assert document["paths"]["/made"]["get"]["summary"] == OPERATION.summary


def test_a_closure_declared_for_an_application_is_not_kept_once_the_application_is_gone():
    app = _app_with_a_declared_closure()
    (route,) = (r for r in app.router.routes() if r.method == "GET")
    handler = weakref.ref(route.handler)
    del app, route
    gc.collect()
    assert handler() is None
