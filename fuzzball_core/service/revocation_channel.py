"""Revocations made by another process, told to the running server at once.

The server's ``fuzzball-orchestrate revoke-token`` command is a process of its own: it
writes the store and exits, so the running Orchestrate, which keeps authenticated callers
for a while (the endpoint proxy: ``TOKEN_TTL``), would learn of it only when its kept caller
expires. The command sends each revocation it committed (:class:`RevocationSender`,
subscribed to its accounts' revocations) and the server announces it to its own listeners
(:class:`RevocationReceiver`), as if it had been made there:

* over PostgreSQL, by ``NOTIFY`` on :data:`CHANNEL` (the server ``LISTEN``\\ s on a connection
  of its own): it reaches the server wherever the command runs (another pod, a Job);
* over SQLite (one machine), by the unix socket :data:`SOCKET_NAME` in the data directory
  (``0600`` in the private data directory); the command waits for the server's answer, given
  once the endpoint proxy forgot, and says when no server answered.

What is sent is a hint that only makes the server forget what it kept: the store is what
refuses a token (its row is read again), so a forged message cannot let anyone in. It
names tokens by their digest (as the store keeps them), never a token. A message lost (the
server restarting, its listening connection down) leaves the kept callers' own expiry, as
before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from fuzzball_core.service.revocations import Revocation, Revocations

log = logging.getLogger("fuzzball.accounts")

#: the PostgreSQL notification channel
CHANNEL = "fuzzball_revocations"
#: the unix socket in the data directory (SQLite)
SOCKET_NAME = "revocations.sock"
#: seconds the command waits for the server's answer over the socket (the server waits up
#: to FORGET_WAIT, 2 s, for the proxy's processes)
ANSWER_WAIT = 5.0
#: seconds between tries of a lost LISTEN connection
RELISTEN = 1.0
#: the longest path a unix socket's address holds (``sun_path``, less its NUL)
_SOCKET_PATH_LIMIT = 107
_FIELDS = ("token_digests", "account_ids", "user_ids", "workflow_ids")


def encode(revocation: Revocation) -> str:
    """``revocation`` as one line of JSON (sorted, so equal revocations read the same)."""
    message: dict[str, Any] = {name: sorted(getattr(revocation, name)) for name in _FIELDS}
    message["memberships"] = sorted([user, account] for user, account in revocation.memberships)
    return json.dumps(message, separators=(",", ":"))


def decode(line: str | bytes) -> Revocation:
    """The revocation :func:`encode` wrote; ValueError for anything else."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a revocation is a JSON object")

    def strings(name: str) -> frozenset[str]:
        values = message.get(name, [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{name}: a list of strings")
        return frozenset(values)

    pairs = message.get("memberships", [])
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, str) for v in p) for p in pairs
    ):
        raise ValueError("memberships: a list of [user id, account id]")
    return Revocation(
        token_digests=strings("token_digests"),
        account_ids=strings("account_ids"),
        user_ids=strings("user_ids"),
        workflow_ids=strings("workflow_ids"),
        memberships=frozenset((user, account) for user, account in pairs),
    )


def socket_path(data_dir: Path) -> Path:
    """Where the server answers revocations over SQLite."""
    return Path(data_dir) / SOCKET_NAME


def _is_postgresql(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


class RevocationSender:
    """The writing process's side: told each revocation committed there (subscribe it to
    the accounts' :class:`Revocations`), it tells the running server. :attr:`told` says
    whether the last one was known to reach it (None: sent by NOTIFY, unanswered)."""

    def __init__(self, engine: Engine, data_dir: Path) -> None:
        self.engine = engine
        self.data_dir = Path(data_dir)
        self.told: bool | None = None

    def __call__(self, revocation: Revocation) -> None:
        if _is_postgresql(self.engine):
            # a transaction of its own: the revocation is committed already, and the
            # notification is delivered as this one commits
            with self.engine.begin() as connection:
                connection.execute(
                    text("SELECT pg_notify(:channel, :message)"),
                    {"channel": CHANNEL, "message": encode(revocation)},
                )
            self.told = None
            return
        path = socket_path(self.data_dir)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(ANSWER_WAIT)
                sock.connect(str(path))
                sock.sendall(encode(revocation).encode() + b"\n")
                answer = sock.makefile("rb").readline()
        except OSError as exc:
            # none serving keeps no callers; one whose socket could not be made warned as
            # it started, and refuses the token once its kept caller expires
            self.told = False
            log.info(
                "no running Orchestrate answered at %s (%s)",
                path,
                exc.strerror or type(exc).__name__,
            )
            return
        self.told = answer.strip() == b'{"told":true}'


class RevocationReceiver:
    """The server's side: announces to ``revocations`` (the server's accounts', whose
    listeners forget what they kept) each revocation another process sent. Start it on the
    server's event loop; close it there."""

    def __init__(self, engine: Engine, data_dir: Path, revocations: Revocations) -> None:
        self.engine = engine
        self.data_dir = Path(data_dir)
        self.revocations = revocations
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: set once the LISTEN connection listens (PostgreSQL), for whoever waits on it
        self.listening = threading.Event()

    async def start(self) -> None:
        """Listen: a thread of its own on PostgreSQL, the socket on this loop otherwise."""
        if _is_postgresql(self.engine):
            self._thread = threading.Thread(
                target=self._listen, name="revocations-listen", daemon=True
            )
            self._thread.start()
            return
        path = socket_path(self.data_dir)
        if len(os.fsencode(path)) > _SOCKET_PATH_LIMIT:
            log.warning(
                "the data directory's path is too long for the revocations socket (%s):"
                " `fuzzball-orchestrate revoke-token` takes effect here within 2 s",
                path,
            )
            return
        if _answers(path):
            log.warning("another Orchestrate answers revocations at %s: not serving it", path)
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a server that did not stop cleanly
        self._server = await asyncio.start_unix_server(self._answer, path=str(path))
        os.chmod(path, 0o600)

    async def close(self) -> None:
        """Stop listening (and remove the socket)."""
        self._stop.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
            with contextlib.suppress(FileNotFoundError):
                socket_path(self.data_dir).unlink()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)
            self._thread = None

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One sender: its line, announced (in a worker thread: the listeners forget on this
        loop, and a revocation told from another thread returns once they did), then the
        answer."""
        try:
            line = await asyncio.wait_for(reader.readline(), ANSWER_WAIT)
            if not line:
                return  # a probe (another server starting) or a sender that gave up
            try:
                revocation = decode(line)
            except ValueError as exc:
                log.warning("a malformed revocation was sent over the socket: %s", exc)
                writer.write(b'{"told":false}\n')
                return
            await asyncio.to_thread(self.revocations.announce, revocation)
            writer.write(b'{"told":true}\n')
            await writer.drain()
        except (OSError, TimeoutError):
            pass  # the sender went away: what it sent, if whole, was announced
        finally:
            writer.close()

    def _listen(self) -> None:
        """LISTEN on a connection of its own until closed, connecting again after a loss
        (meanwhile the kept callers' expiry bounds what is missed)."""
        import psycopg  # the PostgreSQL driver: imported only where it is used

        url = self.engine.url.set(drivername="postgresql")
        conninfo = url.render_as_string(hide_password=False)
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    while not self._stop.is_set():
                        for notice in connection.notifies(timeout=0.5):
                            self._announce(notice.payload)
            except psycopg.Error as exc:
                self.listening.clear()
                # psycopg's message names the server, never the password
                log.warning("listening for revocations failed (%s); trying again", exc)
                self._stop.wait(RELISTEN)

    def _announce(self, payload: str) -> None:
        try:
            revocation = decode(payload)
        except ValueError as exc:
            log.warning("a malformed revocation was notified on %s: %s", CHANNEL, exc)
            return
        self.revocations.announce(revocation)


def _answers(path: Path) -> bool:
    """Whether a server answers at ``path`` now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
