"""What another process sends of a revocation (``service/revocation_channel.py``): it reads
back as it was sent, anything else is refused, and a sender with no server to tell says so.

The whole route (the ``revoke-token`` command telling a running proxy, over SQLite and over
PostgreSQL) is tests/endpoints/test_proxy_revocations.py's."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import Connection, create_engine, text

from fuzzball_core.health import Condition, Health
from fuzzball_core.service.accounts import token_digest
from fuzzball_core.service.revocation_channel import (
    APPLICATION_NAME,
    CONDITION,
    RevocationReceiver,
    RevocationSender,
    decode,
    encode,
    listen_conninfo,
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


# -- the PostgreSQL listener: lost, made again, caught up, shown --------------------------------


@dataclasses.dataclass
class _Outside:
    """The test server's own database, acting on the private one (``database``) from
    outside it, as an administrator would."""

    connection: Connection
    database: str

    def terminate_listener(self) -> int:
        """Terminate the receiver's LISTEN backend (found by its application name), as a
        PostgreSQL restart would; how many were terminated."""
        return len(
            self.connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = :database AND application_name = :name"
                ),
                {"database": self.database, "name": APPLICATION_NAME},
            ).all()
        )

    def allow_connections(self, allowed: bool) -> None:
        self.connection.execute(
            text(f'ALTER DATABASE "{self.database}" WITH ALLOW_CONNECTIONS {str(allowed).lower()}')
        )


@pytest.fixture
def outside(postgresql_url, postgresql_server) -> Iterator[_Outside]:
    engine = create_engine(
        postgresql_server.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
    )
    with engine.connect() as connection:
        yield _Outside(connection, postgresql_url.rpartition("/")[2])
    engine.dispose()


async def _until(holds: Callable[[], bool], what: str) -> None:
    for _ in range(600):
        if holds():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within 30 s: {what}")


def _receiver(url: str, data_dir: Path) -> tuple[RevocationReceiver, list[Revocation], Health]:
    revocations = Revocations()
    heard: list[Revocation] = []
    revocations.subscribe(heard.append)
    health = Health("orchestrate")
    return RevocationReceiver(connect(url), data_dir, revocations, health), heard, health


def test_the_listener_listens_again_after_its_backend_is_terminated(
    postgresql_url, outside, data_dir
):
    receiver, heard, _ = _receiver(postgresql_url, data_dir)
    sent = Revocation(account_ids=frozenset({"acct-1"}))

    async def main() -> None:
        await receiver.start()
        try:
            await _until(lambda: receiver.listens == 1, "listening")
            assert outside.terminate_listener() == 1
            await _until(lambda: receiver.listens == 2, "listening again")
            await asyncio.to_thread(RevocationSender(receiver.engine, data_dir), sent)
            await _until(lambda: sent in heard, "the revocation sent after told")
        finally:
            await receiver.close()
            receiver.engine.dispose()

    asyncio.run(main())


def test_everything_kept_is_forgotten_each_time_the_listener_listens_again(
    postgresql_url, outside, data_dir
):
    # a revocation NOTIFYed while it was not listening is lost: forgetting what was kept
    # makes the store answer for it
    receiver, heard, _ = _receiver(postgresql_url, data_dir)

    async def main() -> None:
        await receiver.start()
        try:
            await _until(lambda: receiver.listens == 1, "listening")
            assert heard == [Revocation(everything=True)]  # callers kept from before it listened
            outside.terminate_listener()
            await _until(lambda: receiver.listens == 2, "listening again")
            assert heard == [Revocation(everything=True)] * 2
        finally:
            await receiver.close()
            receiver.engine.dispose()

    asyncio.run(main())


def test_a_lost_listener_shows_in_the_health_condition_until_it_listens_again(
    postgresql_url, outside, data_dir, caplog
):
    receiver, _, health = _receiver(postgresql_url, data_dir)

    async def main() -> tuple[Condition, Condition]:
        await receiver.start()
        try:
            await _until(lambda: health.get(CONDITION).ok, "the condition holding")
            outside.allow_connections(False)
            try:
                outside.terminate_listener()
                await _until(lambda: health.get(CONDITION).failures >= 2, "two failed tries")
                down = dataclasses.replace(health.get(CONDITION))
            finally:
                outside.allow_connections(True)
            await _until(lambda: health.get(CONDITION).ok, "the condition holding again")
            return down, health.get(CONDITION)
        finally:
            await receiver.close()
            receiver.engine.dispose()

    with caplog.at_level(logging.INFO, logger="fuzzball.accounts"):
        down, up = asyncio.run(main())
    assert not down.required  # a lost listener does not make Orchestrate unready
    assert "not listening" in down.message and "kept callers expire" in down.message
    assert up.message == "listening on PostgreSQL channel fuzzball_revocations"
    # once in the log as it was lost (not at every try), once as it listens again
    assert caplog.text.count("listening for revocations failed") == 1
    assert "listening for revocations again after" in caplog.text


def test_the_listen_connection_keeps_tcp_alive_and_names_itself():
    given = conninfo_to_dict(listen_conninfo(connect("postgresql://u:p@db.example/fuzzball")))
    assert given["keepalives"] == "1" and given["keepalives_idle"] == "10"
    assert given["application_name"] == APPLICATION_NAME
    assert (given["host"], given["dbname"], given["password"]) == ("db.example", "fuzzball", "p")


def test_the_urls_own_keepalive_settings_win():
    url = "postgresql://u:p@db.example/fuzzball?keepalives_idle=60&application_name=mine"
    given = conninfo_to_dict(listen_conninfo(connect(url)))
    assert (given["keepalives_idle"], given["application_name"]) == ("60", "mine")


def test_the_socket_answering_shows_in_the_health_condition(data_dir):
    receiver = RevocationReceiver(
        connect(f"sqlite:///{data_dir / 'store.db'}"), data_dir, Revocations(), Health("o")
    )

    async def main() -> Condition:
        await receiver.start()
        try:
            return dataclasses.replace(receiver.health.get(CONDITION))  # type: ignore[union-attr]
        finally:
            await receiver.close()

    condition = asyncio.run(main())
    assert condition.ok and condition.message == f"answering at {socket_path(data_dir)}"
