"""Secrets encrypted at rest: the cluster's secret keys and what they lock.

The keys live in one file of the data directory (``secret-keys``, 0600 from creation, one
Fernet key a line, the first the primary) and never in the database, so a copy of the
database alone reveals no secret. :class:`SecretBox` encrypts with the primary key and
decrypts with any key of the file (``cryptography``'s ``MultiFernet``). :meth:`SecretBox.rotate`
makes a new primary key, re-encrypts every value sealed with it (secrets, the central
configuration's documents: :data:`SEALED`), and only once that transaction committed drops
the old keys from the file: a crash at any point leaves every row readable with the keys
the file holds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import inspect, select
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from fuzzball_core.errors import FailedPrecondition, Internal
from fuzzball_core.store.models import CentralConfigRevision, Secret
from fuzzball_core.store.private_files import FILE_MODE, private_directory

#: the key file's name in the data directory
KEY_FILE = "secret-keys"

#: the columns holding values sealed with the box (NULL where a row has none): a rotation
#: re-encrypts them all
SEALED: tuple[InstrumentedAttribute[Any], ...] = (
    Secret.ciphertext,
    CentralConfigRevision.document_sealed,
)


class SecretBox:
    """Encrypts and decrypts secret values with the keys in ``data_dir/secret-keys``.

    The file is created with a fresh key on first use. Its keys are read again whenever the
    file changed (another process, ``fuzzball-orchestrate secrets rotate-key``, rotated them),
    so a running Orchestrate reads what a rotation re-encrypted.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / KEY_FILE
        self._lock = threading.Lock()
        self._loaded: tuple[tuple[int, int], MultiFernet] | None = None

    def encrypt(self, plaintext: bytes) -> str:
        """``plaintext`` locked with the primary key (a Fernet token, ASCII)."""
        return self._keys().encrypt(plaintext).decode("ascii")

    def decrypt(self, ciphertext: str) -> bytes:
        """What ``ciphertext`` locks; Internal when no key of the file opens it (the key file
        was replaced or lost: the message says so, never the data)."""
        try:
            return self._keys().decrypt(ciphertext.encode("ascii"))
        except (InvalidToken, ValueError):
            raise Internal(
                f"a stored secret cannot be decrypted with the keys in {self.path}"
                " (was the key file replaced?)"
            ) from None

    def rotate(self, sessions: sessionmaker[Session]) -> int:
        """Make a new primary key, re-encrypt every sealed value (:data:`SEALED`) with it,
        then drop the old keys. Returns how many values were re-encrypted."""
        with self._lock:
            old = self._read_keys()
            new = Fernet.generate_key()
            self._write_keys([new, *old])  # readable both ways while rows move over
            both = MultiFernet([Fernet(k) for k in (new, *old)])
            with sessions() as session, session.begin():
                count = 0
                for row, column in _sealed_values(session):
                    self._move(row, column, both, "nothing was rotated")
                    count += 1
            # a value another process wrote with an old key while the rows moved over (it
            # read the key file before the new key was in it) moves over now, before the old
            # keys are dropped
            self._move_stragglers(sessions, Fernet(new), both)
            self._write_keys([new])
            self._loaded = None
            return count

    def _move_stragglers(
        self, sessions: sessionmaker[Session], new: Fernet, both: MultiFernet
    ) -> None:
        with sessions() as session, session.begin():
            for row, column in _sealed_values(session):
                try:
                    new.decrypt(getattr(row, column).encode("ascii"))
                except InvalidToken:
                    self._move(row, column, both, "the old key was kept")

    def _move(self, row: Any, column: str, keys: MultiFernet, outcome: str) -> None:
        """Re-encrypt ``row``'s ``column`` with the primary key of ``keys``."""
        try:
            setattr(row, column, keys.rotate(getattr(row, column).encode("ascii")).decode())
        except InvalidToken:
            identity = ", ".join(str(part) for part in inspect(row).identity or ())
            raise Internal(
                f"{row.__tablename__} {identity}: its {column} cannot be decrypted with the"
                f" keys in {self.path}; {outcome}"
            ) from None

    # -- the key file ------------------------------------------------------------------------

    def _keys(self) -> MultiFernet:
        with self._lock:
            if not self.path.exists():
                self._write_keys([Fernet.generate_key()])
            info = self.path.stat()
            stamp = (info.st_mtime_ns, info.st_ino)
            if self._loaded is None or self._loaded[0] != stamp:
                self._loaded = (stamp, MultiFernet([Fernet(k) for k in self._read_keys()]))
            return self._loaded[1]

    def _read_keys(self) -> list[bytes]:
        if not self.path.exists():
            return []
        keys = [line.strip() for line in self.path.read_bytes().splitlines() if line.strip()]
        if not keys:
            raise FailedPrecondition(f"{self.path} holds no secret key")
        for key in keys:
            try:
                Fernet(key)
            except ValueError:
                raise FailedPrecondition(
                    f"{self.path}: a line is not a Fernet key (32 url-safe base64 bytes)"
                ) from None
        return keys

    def _write_keys(self, keys: list[bytes]) -> None:
        """Replace the key file atomically, 0600 from the moment it exists."""
        private_directory(self.path.parent)
        staging = self.path.with_name(f".{KEY_FILE}.{os.getpid()}.new")
        fd = os.open(staging, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            os.write(fd, b"".join(key + b"\n" for key in keys))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staging, self.path)


def _sealed_values(session: Session) -> Iterator[tuple[Any, str]]:
    """Every row holding a sealed value, with the column holding it."""
    for column in SEALED:
        query = select(column.class_).where(column.is_not(None))
        for row in session.scalars(query):
            yield row, column.key
