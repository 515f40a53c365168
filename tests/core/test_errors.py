"""The typed errors: codes, HTTP statuses and the google.rpc.Status body."""

import grpc
import pytest

from fuzzball_core.errors import (
    ALL_ERRORS,
    AlreadyExists,
    FailedPrecondition,
    FuzzballError,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

EXPECTED = [
    (InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT, 400),
    (NotFound, grpc.StatusCode.NOT_FOUND, 404),
    (AlreadyExists, grpc.StatusCode.ALREADY_EXISTS, 409),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED, 403),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, 401),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION, 400),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED, 429),
    (Unavailable, grpc.StatusCode.UNAVAILABLE, 503),
    (Internal, grpc.StatusCode.INTERNAL, 500),
]


@pytest.mark.parametrize(("error_type", "grpc_code", "http_status"), EXPECTED)
def test_each_error_maps_to_its_grpc_code_and_http_status(error_type, grpc_code, http_status):
    error = error_type("boom")
    assert error.grpc_code is grpc_code
    assert error.code == grpc_code.value[0]
    assert error.http_status == http_status


def test_every_error_type_is_covered():
    assert {e for e, _, _ in EXPECTED} == set(ALL_ERRORS)


def test_status_body_is_google_rpc_status_shaped():
    error = InvalidArgument(
        "jobs.a.image.uri: unsupported scheme",
        details=[{"field": "jobs.a.image.uri", "description": "unsupported scheme"}],
    )
    assert error.to_status() == {
        "code": 3,
        "message": "jobs.a.image.uri: unsupported scheme",
        "details": [{"field": "jobs.a.image.uri", "description": "unsupported scheme"}],
    }


def test_status_body_round_trips_to_the_same_error_type():
    body = NotFound("workflow 42 not found").to_status()
    error = FuzzballError.from_status(body)
    assert type(error) is NotFound
    assert error.message == "workflow 42 not found"


def test_unknown_status_code_becomes_internal():
    assert type(FuzzballError.from_status({"code": 99, "message": "?"})) is Internal
