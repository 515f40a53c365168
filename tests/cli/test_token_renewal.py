"""RenewingBearer, the CLI's auth: the token sent, renewed once on a 401 saying it expired,
and answers other than 401 handed on unread (a followed log streams as it comes)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

from fuzzball_core.cli.sign_in import RenewingBearer


class WatchedBody(httpx.SyncByteStream):
    """A response body that records whether anyone read it."""

    def __init__(self) -> None:
        self.read = False

    def __iter__(self) -> Iterator[bytes]:
        self.read = True
        yield b"line\n"


def client(handler, renewals: list[str]) -> httpx.Client:
    def renew() -> str:
        renewals.append("renewed")
        return f"token-{len(renewals) + 1}"

    return httpx.Client(
        transport=httpx.MockTransport(handler), auth=RenewingBearer("token-1", renew)
    )


def test_an_expired_token_is_renewed_and_the_request_sent_again():
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Authorization"])
        if request.headers["Authorization"] == "Bearer token-1":
            return httpx.Response(
                401, json={"code": 16, "message": "the bearer token expired at X"}
            )
        return httpx.Response(200, json={})

    renewals: list[str] = []
    assert client(handler, renewals).get("http://api/v3/workflows").status_code == 200
    assert seen == ["Bearer token-1", "Bearer token-2"]
    assert renewals == ["renewed"]


def test_a_token_refused_for_another_reason_is_not_renewed():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"code": 16, "message": "the bearer token was revoked"})

    renewals: list[str] = []
    assert client(handler, renewals).get("http://api/v3/workflows").status_code == 401
    assert renewals == []


def test_a_token_is_renewed_at_most_once_per_request():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"code": 16, "message": "the bearer token expired at X"})

    renewals: list[str] = []
    assert client(handler, renewals).get("http://api/v3/workflows").status_code == 401
    assert renewals == ["renewed"]


def test_a_streamed_answer_reaches_the_caller_unread():
    body = WatchedBody()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    with client(handler, []).stream("GET", "http://api/v3/workflows/x:log") as response:
        assert response.status_code == 200
        assert not body.read
        assert response.read() == b"line\n"
