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
server restarting) leaves the kept callers' own expiry, as before.

PostgreSQL does not keep a notification for a listener that is not connected, so the
LISTEN connection, lost (the server restarted, the backend terminated, the network), is made
again every :data:`RELISTEN` seconds, and once it listens again whatever may have been
revoked meanwhile is caught up from the store: everything kept is forgotten
(``Revocation(everything=True)``), so each kept caller's next request reads its token's row
again, which covers every kind of revocation (a deleted account or an ended membership
leaves no "revoked since" to query). The same is announced when it first listens (the proxy
may keep callers from before). Until then the kept callers' expiry (``TOKEN_TTL``, 2 s)
bounds what is missed. The listener's state is the server's ``revocations`` health
condition (informational: ``/readyz`` lists it, readiness does not need it) and its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from fuzzball_core.health import Health, describe
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
#: the server's health condition for the listener (informational)
CONDITION = "revocations"
#: how the LISTEN connection names itself (``pg_stat_activity.application_name``)
APPLICATION_NAME = "fuzzball-revocations"
#: TCP keepalives of the LISTEN connection, unless its URL sets them: a connection that waits
#: for notifications sends nothing, so a peer gone without a word (a network partition, a
#: server's host lost) would otherwise be noticed only by the kernel's two-hour default; here
#: within about 25 s, and then it is made again
KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
}
#: what a thread's announcement of the listener's state is given to (the event loop's)
_Post = Callable[[Callable[[], None]], None]
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

    def __init__(
        self,
        engine: Engine,
        data_dir: Path,
        revocations: Revocations,
        health: Health | None = None,
    ) -> None:
        self.engine = engine
        self.data_dir = Path(data_dir)
        self.revocations = revocations
        #: where the listener's state shows (condition :data:`CONDITION`), when given
        self.health = health
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._post: _Post = lambda change: change()
        #: set once the LISTEN connection listens (PostgreSQL), for whoever waits on it
        self.listening = threading.Event()
        #: times the LISTEN connection was made (the first included), each followed by the
        #: catch-up (PostgreSQL)
        self.listens = 0

    async def start(self) -> None:
        """Listen: a thread of its own on PostgreSQL, the socket on this loop otherwise."""
        if self.health is not None:
            self.health.declare(CONDITION, "not listening yet", required=False)
        if _is_postgresql(self.engine):
            loop = asyncio.get_running_loop()

            def post(change: Callable[[], None]) -> None:
                # the conditions are the loop's: /readyz reads them there
                with contextlib.suppress(RuntimeError):  # the loop closed
                    loop.call_soon_threadsafe(change)

            self._post = post
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
            self._failed(f"not serving: the socket's path is too long ({path})")
            return
        if _answers(path):
            log.warning("another Orchestrate answers revocations at %s: not serving it", path)
            self._failed(f"not serving: another Orchestrate answers at {path}")
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a server that did not stop cleanly
        self._server = await asyncio.start_unix_server(self._answer, path=str(path))
        os.chmod(path, 0o600)
        self._passed(f"answering at {path}")

    def _passed(self, message: str) -> None:
        health = self.health
        if health is not None:
            self._post(lambda: health.passed(CONDITION, message))

    def _failed(self, message: str) -> None:
        health = self.health
        if health is not None:
            self._post(lambda: health.failed(CONDITION, message))

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
        """LISTEN on a connection of its own until closed, making it again after a loss
        (meanwhile the kept callers' expiry bounds what is missed), and catching up on what
        may have been missed each time it listens."""
        import psycopg  # the PostgreSQL driver: imported only where it is used

        conninfo = listen_conninfo(self.engine)
        lost_at: float | None = None
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True) as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    # listening first: a revocation committed from now on is notified, and
                    # one committed before is caught up by forgetting what was kept
                    self.revocations.announce(Revocation(everything=True))
                    self.listens += 1
                    self.listening.set()
                    self._passed(f"listening on PostgreSQL channel {CHANNEL}")
                    if lost_at is not None:
                        log.info(
                            "listening for revocations again after %.1f s; every kept caller"
                            " was forgotten, so what was revoked meanwhile is refused",
                            time.monotonic() - lost_at,
                        )
                        lost_at = None
                    while not self._stop.is_set():
                        for notice in connection.notifies(timeout=0.5):
                            self._announce(notice.payload)
            except Exception as exc:
                # psycopg's message names the server, never the password; anything else
                # (a listener that raised is caught by announce) must not end the thread
                self.listening.clear()
                if self._stop.is_set():
                    break
                first = lost_at is None
                if first:
                    lost_at = time.monotonic()
                said = describe(exc)
                self._failed(
                    f"not listening ({said}); trying again every {RELISTEN:g} s: until then"
                    " another process's revocations take effect as kept callers expire"
                )
                if not isinstance(exc, psycopg.Error):
                    log.exception("listening for revocations failed; trying again")
                elif first:  # once, not at every try: the condition counts them
                    log.warning(
                        "listening for revocations failed (%s); trying again every %g s",
                        said,
                        RELISTEN,
                    )
                self._stop.wait(RELISTEN)

    def _announce(self, payload: str) -> None:
        try:
            revocation = decode(payload)
        except ValueError as exc:
            log.warning("a malformed revocation was notified on %s: %s", CHANNEL, exc)
            return
        self.revocations.announce(revocation)


def listen_conninfo(engine: Engine) -> str:
    """The libpq connection string of ``engine``'s database for the LISTEN connection: named
    :data:`APPLICATION_NAME`, with :data:`KEEPALIVES` where the URL sets none."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    url = engine.url.set(drivername="postgresql")
    conninfo = url.render_as_string(hide_password=False)
    given = conninfo_to_dict(conninfo)
    defaults = {**KEEPALIVES, "application_name": APPLICATION_NAME}
    return make_conninfo(
        conninfo, **{key: value for key, value in defaults.items() if key not in given}
    )


def _answers(path: Path) -> bool:
    """Whether a server answers at ``path`` now."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True
