"""What another process sends of a revocation (``service/revocation_channel.py``): it reads
back as it was sent, anything else is refused, and a sender with no server to tell says so.

The whole route (the ``revoke-token`` command telling a running proxy, over SQLite and over
PostgreSQL) is tests/endpoints/test_proxy_revocations.py's."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzzball_core.service.accounts import token_digest
from fuzzball_core.service.revocation_channel import (
    RevocationReceiver,
    RevocationSender,
    decode,
    encode,
    socket_path,
)
from fuzzball_core.service.revocations import Revocation, Revocations
from fuzzball_core.store.database import connect


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A data directory short enough for a unix socket's path."""
    made = Path(tempfile.mkdtemp(prefix="fb-"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


def test_a_revocation_reads_back_as_it_was_sent():
    revocation = Revocation(
        token_digests=frozenset({token_digest("a-token")}),
        account_ids=frozenset({"acct-1"}),
        user_ids=frozenset({"user-1"}),
        memberships=frozenset({("user-2", "acct-2")}),
        workflow_ids=frozenset({"wf-1"}),
    )
    assert decode(encode(revocation)) == revocation


@pytest.mark.parametrize(
    "line",
    ['["acct-1"]', '{"account_ids": "acct-1"}', '{"memberships": [["user-1"]]}', "not json"],
    ids=["not-an-object", "not-a-list", "not-a-pair", "not-json"],
)
def test_a_malformed_revocation_is_refused(line):
    with pytest.raises(ValueError):
        decode(line)


def test_the_sender_says_no_server_was_told_when_none_answers(data_dir):
    sender = RevocationSender(connect(f"sqlite:///{data_dir / 'store.db'}"), data_dir)
    sender(Revocation(account_ids=frozenset({"acct-1"})))
    assert sender.told is False


def test_a_malformed_message_on_the_socket_is_told_to_no_listener(data_dir):
    revocations = Revocations()
    heard: list[Revocation] = []
    revocations.subscribe(heard.append)
    receiver = RevocationReceiver(
        connect(f"sqlite:///{data_dir / 'store.db'}"), data_dir, revocations
    )

    def send(line: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(socket_path(data_dir)))
            sock.sendall(line)
            return sock.makefile("rb").readline()

    async def main() -> tuple[bytes, bytes]:
        await receiver.start()
        try:
            bad = await asyncio.to_thread(send, b'{"account_ids": "acct-1"}\n')
            good = await asyncio.to_thread(send, b'{"account_ids": ["acct-1"]}\n')
        finally:
            await receiver.close()
        return bad, good

    assert asyncio.run(main()) == (b'{"told":false}\n', b'{"told":true}\n')
    assert heard == [Revocation(account_ids=frozenset({"acct-1"}))]
    assert not socket_path(data_dir).exists()  # removed as the server stopped
