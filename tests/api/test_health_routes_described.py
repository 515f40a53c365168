"""Orchestrate's ``/healthz`` and ``/readyz`` in the OpenAPI document it serves: described,
public (no token), and answering what the document says."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.isolation_stack import IsolationStack
from support.openapi_routes import check_reply, openapi_of, undescribed

HEALTH_OPERATIONS = {"GET /healthz", "GET /readyz"}


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[IsolationStack, dict]]:
    stack = IsolationStack(tmp_path_factory.mktemp("health"))
    try:
        yield stack, openapi_of(stack.rest_url, stack.tenants.admin_token)
    finally:
        stack.close()


def test_the_openapi_document_describes_the_health_routes(served):
    _, document = served
    assert undescribed(document, HEALTH_OPERATIONS) == set()


def test_the_openapi_document_says_the_health_routes_need_no_token(served):
    _, document = served
    assert document["paths"]["/healthz"]["get"]["security"] == []
    assert document["paths"]["/readyz"]["get"]["security"] == []


def test_the_openapi_document_lists_readyz_answering_503_with_its_report(served):
    _, document = served
    answers = document["paths"]["/readyz"]["get"]["responses"]
    assert answers["503"]["content"] == answers["200"]["content"]


def test_the_health_routes_answer_as_the_openapi_document_says(served):
    stack, document = served
    root = stack.rest_url.removesuffix("/v3")
    for operation in sorted(HEALTH_OPERATIONS):
        path = operation.split(" ", 1)[1]
        check_reply(document, operation, httpx.get(f"{root}{path}", timeout=30))
