"""Typed errors shared by every Fuzzball process.

Each error carries the google.rpc status code it stands for and the HTTP status the REST
gateway answers with (the same table grpc-gateway uses), and serialises to a google.rpc.Status
JSON body: ``{"code": 3, "message": "...", "details": [...]}``.

Messages are shown to users as they are: they name the offending field path and never contain
secret values. A caller that needs to report something secret-adjacent passes a redacted form.
"""

from __future__ import annotations

from typing import Any, ClassVar


class FuzzballError(Exception):
    """Base of every error a Fuzzball process reports to a user or a peer."""

    #: google.rpc.Code number (the same integers as grpc.StatusCode values).
    code: ClassVar[int] = 2
    #: Canonical google.rpc.Code name.
    code_name: ClassVar[str] = "UNKNOWN"
    #: HTTP status the REST gateway returns for this error.
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, *, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: list[dict[str, Any]] = list(details or [])

    def to_status(self) -> dict[str, Any]:
        """Return the google.rpc.Status JSON body for this error."""
        return {"code": self.code, "message": self.message, "details": list(self.details)}

    @property
    def grpc_code(self) -> Any:
        """The matching ``grpc.StatusCode`` (grpcio is imported only when asked)."""
        import grpc

        return next(c for c in grpc.StatusCode if c.value[0] == self.code)

    @classmethod
    def from_status(cls, body: dict[str, Any]) -> FuzzballError:
        """Rebuild the typed error from a google.rpc.Status body (e.g. a REST error reply)."""
        error_type = _BY_CODE.get(int(body.get("code", 2)), Internal)
        return error_type(str(body.get("message", "")), details=body.get("details") or [])

    def __str__(self) -> str:
        return self.message


class InvalidArgument(FuzzballError):
    """The request or a file in it is malformed; the message names the field path."""

    code = 3
    code_name = "INVALID_ARGUMENT"
    http_status = 400


class NotFound(FuzzballError):
    """The named object does not exist (or the caller may not know that it does)."""

    code = 5
    code_name = "NOT_FOUND"
    http_status = 404


class AlreadyExists(FuzzballError):
    """An object with that identity already exists."""

    code = 6
    code_name = "ALREADY_EXISTS"
    http_status = 409


class PermissionDenied(FuzzballError):
    """The caller is known but may not do this."""

    code = 7
    code_name = "PERMISSION_DENIED"
    http_status = 403


class ResourceExhausted(FuzzballError):
    """A quota or capacity limit stops the request."""

    code = 8
    code_name = "RESOURCE_EXHAUSTED"
    http_status = 429


class FailedPrecondition(FuzzballError):
    """The system is not in a state where the request can run (e.g. a plugin is broken)."""

    code = 9
    code_name = "FAILED_PRECONDITION"
    http_status = 400


class Internal(FuzzballError):
    """A bug or an unexpected failure inside Fuzzball."""

    code = 13
    code_name = "INTERNAL"
    http_status = 500


class Unavailable(FuzzballError):
    """A service the request needs cannot be reached right now; retrying may help."""

    code = 14
    code_name = "UNAVAILABLE"
    http_status = 503


class Unauthenticated(FuzzballError):
    """The request carries no valid credentials."""

    code = 16
    code_name = "UNAUTHENTICATED"
    http_status = 401


_BY_CODE: dict[int, type[FuzzballError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        ResourceExhausted,
        FailedPrecondition,
        Internal,
        Unavailable,
        Unauthenticated,
    )
}

ALL_ERRORS: tuple[type[FuzzballError], ...] = tuple(_BY_CODE.values())
