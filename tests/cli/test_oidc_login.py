"""``fuzzball context login`` with a password, against a small OIDC server on loopback.

The server implements the two requests the real CLI makes: the OAuth2 password grant at
``{realm}/protocol/openid-connect/token``, and the API's exchange of that access token for
an account's token (``GET /v3/accounts/{id}/token``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from aiohttp import web
from support.live_api import LoopThread

from fuzzball_core.cli.contexts import ContextsFile
from fuzzball_core.errors import Unauthenticated

REALM = "/auth/realms/lab"


def oidc_app(seen_forms: list[dict[str, str]]) -> web.Application:
    async def token(request: web.Request) -> web.Response:
        form = dict(await request.post())
        seen_forms.append(form)
        if form.get("username") == "ada" and form.get("password") == "correct horse":
            return web.json_response({"access_token": "idp-token", "refresh_token": "r"})
        return web.json_response(
            {"error": "invalid_grant", "error_description": "Invalid user credentials"}, status=401
        )

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": "v3.3.0"})

    async def account_token(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer idp-token":
            return web.json_response(
                {"code": 16, "message": "bad token", "details": []}, status=401
            )
        return web.json_response({"token": f"api-token-{request.match_info['id']}"})

    app = web.Application()
    app.router.add_post(f"{REALM}/protocol/openid-connect/token", token)
    app.router.add_get("/v3/version", version)
    app.router.add_get("/v3/accounts/{id}/token", account_token)
    return app


@pytest.fixture
def oidc_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    loop = LoopThread()
    seen: list[dict[str, str]] = []

    async def start() -> web.AppRunner:
        runner = web.AppRunner(oidc_app(seen))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    runner = loop.run(start())
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}", seen
    finally:
        loop.run(runner.cleanup())
        loop.stop()


@pytest.fixture
def oidc_context(fuzzball, oidc_server):
    url, _ = oidc_server
    result = fuzzball(
        "context", "create", "lab", "--address", url, "--oidc-server-url", url + REALM
    )
    assert result.exit_code == 0, result.output
    return fuzzball


def stored_token(fuzzball) -> str:
    document = yaml.safe_load(fuzzball.config_file.read_text())
    return document["contexts"][0]["auth"]["credentials"]["token"]


def test_password_login_sends_the_real_clis_form_and_stores_the_token(oidc_context, oidc_server):
    _, seen = oidc_server
    result = oidc_context("context", "login", "--username", "ada", "--password", "correct horse")
    assert result.exit_code == 0, result.output
    assert seen == [
        {
            "client_id": "fuzzball-cli",
            "grant_type": "password",
            "username": "ada",
            "password": "correct horse",
            "scope": "offline_access",
        }
    ]
    assert stored_token(oidc_context) == "idp-token"


def test_password_login_prompts_and_hides_the_password(oidc_context):
    result = oidc_context("context", "login", input="ada\ncorrect horse\n")
    assert result.exit_code == 0, result.output
    assert "correct horse" not in result.output
    assert stored_token(oidc_context) == "idp-token"


def test_a_refused_login_names_the_reason_but_not_the_password(oidc_context):
    result = oidc_context("context", "login", "--username", "ada", "--password", "wrong pw")
    assert isinstance(result.exception, Unauthenticated)
    assert "Invalid user credentials" in str(result.exception)
    assert "wrong pw" not in str(result.exception)
    assert stored_token(oidc_context) == ""


def test_login_exchanges_the_access_token_for_the_current_accounts_token(oidc_context):
    contexts = ContextsFile.load(oidc_context.config_file)
    contexts.active().entry["currentaccountid"] = "5f0c"
    contexts.save()
    result = oidc_context("context", "login", "--username", "ada", "--password", "correct horse")
    assert result.exit_code == 0, result.output
    assert stored_token(oidc_context) == "api-token-5f0c"
