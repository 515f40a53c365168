"""The declarations of the OIDC issuer's routes, for the OpenAPI document.

Its bodies are OAuth 2.0's: form-encoded requests (RFC 6749 and RFC 8628, each field once),
JSON answers, and JSON errors ``{"error", "error_description"}`` (400, or 401 for an unknown
client) instead of a ``google.rpc.Status``; the device approval page is HTML, its refusals
too. None needs a bearer token.
"""

from __future__ import annotations

from typing import Any

from fuzzball_core.api.openapi import (
    Body,
    FormField,
    JsonOperation,
    MediaOperation,
    Query,
    form_body,
)
from fuzzball_core.service.oidc import ALGORITHM, CLIENT_ID, GRANT_TYPES, SCOPES

_STRING: dict[str, Any] = {"type": "string"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
_INTEGER: dict[str, Any] = {"type": "integer"}
_TAGS = ("oidc",)


def _object(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


def _field(name: str, description: str) -> FormField:
    return FormField(name, _STRING, description)


_CLIENT = _field("client_id", f"the client: {CLIENT_ID}")
_SCOPE = _field("scope", f"space-separated scopes among {', '.join(sorted(SCOPES))}")
_OAUTH_ERROR = Body(
    "application/json",
    "an OAuth 2.0 error (400; 401 for an unknown client)",
    _object({"error": _STRING, "error_description": _STRING}, "error", "error_description"),
)
_TOKENS = _object(
    {
        "access_token": _STRING,
        "token_type": {"type": "string", "enum": ["Bearer"]},
        "expires_in": _INTEGER,
        "scope": _STRING,
        "refresh_token": _STRING,
        "refresh_expires_in": _INTEGER,
        "required_actions": _STRINGS,
    },
    "access_token",
    "token_type",
    "expires_in",
    "scope",
)
_PAGE = Body("text/html", "the page")

DISCOVERY = JsonOperation(
    "the OpenID Provider metadata",
    _object(
        {
            "issuer": _STRING,
            "token_endpoint": _STRING,
            "jwks_uri": _STRING,
            "device_authorization_endpoint": _STRING,
            "end_session_endpoint": _STRING,
            "grant_types_supported": _STRINGS,
            "response_types_supported": _STRINGS,
            "subject_types_supported": _STRINGS,
            "id_token_signing_alg_values_supported": _STRINGS,
            "token_endpoint_auth_methods_supported": _STRINGS,
            "scopes_supported": _STRINGS,
            "claims_supported": _STRINGS,
        },
        "issuer",
        "token_endpoint",
        "jwks_uri",
    ),
    tags=_TAGS,
)
CERTS = JsonOperation(
    "the public keys (JWKS) that verify the access tokens",
    _object(
        {
            "keys": {
                "type": "array",
                "items": _object(
                    {
                        "kty": _STRING,
                        "kid": _STRING,
                        "use": _STRING,
                        "alg": {"type": "string", "enum": [ALGORITHM]},
                        "n": _STRING,
                        "e": _STRING,
                    },
                    "kty",
                    "kid",
                    "n",
                    "e",
                ),
            }
        },
        "keys",
    ),
    tags=_TAGS,
)
TOKEN = MediaOperation(
    "tokens, for a password, a refresh token or an approved device code",
    Body("application/json", "the tokens (RFC 6749 5.1; never cached)", _TOKENS),
    request=form_body(
        (
            FormField(
                "grant_type",
                {"type": "string", "enum": list(GRANT_TYPES)},
                "the grant",
                required=True,
            ),
            _CLIENT,
            _SCOPE,
            _field("username", "the user's email (grant password)"),
            _field("password", "the user's password (grant password)"),
            _field("refresh_token", "the refresh token, used up (grant refresh_token)"),
            _field("device_code", "the device code (grant device_code)"),
        )
    ),
    refusal=_OAUTH_ERROR,
    tags=_TAGS,
)
DEVICE_AUTHORIZATION = MediaOperation(
    "a device code and the user code a person approves it with (RFC 8628 3.2)",
    Body(
        "application/json",
        "the codes and where to approve them",
        _object(
            {
                "device_code": _STRING,
                "user_code": _STRING,
                "verification_uri": _STRING,
                "verification_uri_complete": _STRING,
                "expires_in": _INTEGER,
                "interval": _INTEGER,
            },
            "device_code",
            "user_code",
            "verification_uri",
            "expires_in",
            "interval",
        ),
    ),
    request=form_body((_CLIENT, _SCOPE)),
    refusal=_OAUTH_ERROR,
    tags=_TAGS,
)
LOGOUT = MediaOperation(
    "revoke a refresh token",
    Body("application/json", "nothing: an empty object", {"type": "object", "maxProperties": 0}),
    request=form_body((_CLIENT, _field("refresh_token", "the refresh token to revoke"))),
    refusal=_OAUTH_ERROR,
    tags=_TAGS,
)
APPROVAL_PAGE = MediaOperation(
    "the page where a person approves (or denies) a device's user code",
    _PAGE,
    query=(Query("user_code", "string", "the code the device shows, filled in"),),
    tags=_TAGS,
)
DECIDE = MediaOperation(
    "approve or deny a device's user code, signing in with email and password",
    Body("text/html", "the page saying what was decided"),
    request=form_body(
        (
            _field("user_code", "the code the device shows (any case, with or without a dash)"),
            _field("username", "the user's email"),
            _field("password", "the user's password"),
            FormField(
                "action",
                {"type": "string", "enum": ["approve", "deny"]},
                "what to do",
                required=True,
            ),
        )
    ),
    refusal=Body("text/html", "the form again saying why (400, 401 or 404)"),
    tags=_TAGS,
)
