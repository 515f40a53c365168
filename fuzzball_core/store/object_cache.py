"""The cluster's object cache: images addressed as ``fuzzball://SCOPE/NAME`` (or ``fb://``).

Orchestrate holds it. Each entry (a :class:`CachedObject` row) names one EROFS image by its
content digest; the bytes live once per digest under ``directory/blobs``. ``user`` entries
belong to one account, ``group`` entries to one organization (the owner is the
organization's id; accounts of no organization, the cluster's service accounts and accounts
older than organizations, share the group ``""``), so no organization reads or overwrites
another's images. An entry with a ``ttl`` expires; an expired entry is never served and is
replaced by the next write.

An image's config (the OCI ``config`` object: Env, Entrypoint, Cmd, WorkingDir, User) is kept
beside its content, by digest (``blobs/<hex>.config.json``): the node that stored the image
sends it, the nodes that fetch the image read it back, and Orchestrate checks jobs against it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.store.models import Account, CachedObject
from fuzzball_core.store.private_files import open_private, private_directory

SCOPES = ("user", "group")
SCHEMES = ("fuzzball", "fb")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class CacheAddress:
    """Where an object lives: ``fuzzball://SCOPE/NAME`` of one owner."""

    owner: str
    scope: str
    name: str

    @classmethod
    def of(cls, uri: str, account_id: str, *, group: str = "") -> CacheAddress:
        """The address ``uri`` names for the account ``account_id`` of the organization
        ``group`` (its id; "" for none); InvalidArgument if none."""
        scheme, separator, rest = uri.partition("://")
        if not separator or scheme.lower() not in SCHEMES:
            raise InvalidArgument(f"image.uri: {uri!r} is not a fuzzball:// or fb:// URI")
        rest = rest.split("@", 1)[0]
        scope, _, name = rest.partition("/")
        return cls.checked(account_id, scope.lower(), name, group=group)

    @classmethod
    def checked(cls, account_id: str, scope: str, name: str, *, group: str = "") -> CacheAddress:
        """The address of ``name`` in ``scope``: the account's (``user``) or the
        organization's (``group``, whose id ``group`` is); InvalidArgument for a bad scope or
        name."""
        if scope not in SCOPES:
            raise InvalidArgument(f"image.uri: scope {scope!r} must be one of user, group")
        if not name or name.startswith("/") or ".." in name.split("/") or len(name) > 300:
            raise InvalidArgument(f"image.uri: {name!r} is not a valid object name")
        return cls(account_id if scope == "user" else group, scope, name)


@dataclass(frozen=True)
class CachedImage:
    """One live entry of the object cache."""

    address: CacheAddress
    digest: str
    size: int
    definition_hash: str
    expires_at: float | None


class ObjectCache:
    """Entries in the database, content under ``directory``."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.directory = directory
        self.clock = clock
        # images hold what workflows built into them: the service's own only (0700/0600)
        private_directory(directory)
        private_directory(directory / "blobs")
        private_directory(directory / "incoming")

    def group_of(self, account_id: str) -> str:
        """The ``group`` owner of account ``account_id``'s images: its organization's id, or
        "" for an account of no organization (or one that no longer exists)."""
        with self.sessions() as session:
            account = session.get(Account, account_id)
            return (account.organization_id or "") if account is not None else ""

    def blob_path(self, digest: str) -> Path:
        """Where the content with ``digest`` (``sha256:<hex>``) is kept."""
        algorithm, _, hexdigest = digest.partition(":")
        if algorithm != "sha256" or len(hexdigest) != 64 or not _is_hex(hexdigest):
            raise InvalidArgument(f"digest {digest!r} is not a sha256 digest")
        return self.directory / "blobs" / hexdigest

    def lookup(self, address: CacheAddress) -> CachedImage | None:
        """The live entry at ``address``, or None (missing or expired)."""
        with self.sessions() as session:
            row = self._row(session, address)
            if row is None or (row.expires_at is not None and row.expires_at <= self.clock()):
                return None
            if not self.blob_path(row.digest).exists():
                return None
            return CachedImage(address, row.digest, row.size, row.definition_hash, row.expires_at)

    def open_blob(self, digest: str) -> Path:
        """The file holding ``digest``; NotFound when the cache does not hold it."""
        path = self.blob_path(digest)
        if not path.exists():
            raise NotFound(f"the object cache holds no object {digest}")
        return path

    def config_path(self, digest: str) -> Path:
        """Where the config of the content with ``digest`` is kept."""
        blob = self.blob_path(digest)
        return blob.with_name(f"{blob.name}.config.json")

    def store_config(self, digest: str, config: Mapping[str, Any]) -> None:
        """Keep ``config`` for the content ``digest`` (NotFound when that is not held)."""
        self.open_blob(digest)
        path = self.config_path(digest)
        partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        with open_private(partial) as out:
            out.write(json.dumps(dict(config), separators=(",", ":")).encode())
        os.replace(partial, path)

    def read_config(self, digest: str) -> dict[str, Any] | None:
        """The config kept for the content ``digest``; None when none was stored."""
        try:
            document = json.loads(self.config_path(digest).read_text())
        except FileNotFoundError:
            return None
        return document if isinstance(document, dict) else None

    def store(
        self,
        address: CacheAddress,
        chunks: Iterable[bytes],
        *,
        definition_hash: str = "",
        ttl: float | None = None,
    ) -> CachedImage:
        """Write the content ``chunks`` and point ``address`` at it (replacing any entry)."""
        incoming = self.directory / "incoming" / uuid.uuid4().hex
        digest = hashlib.sha256()
        size = 0
        try:
            with open_private(incoming) as out:
                for chunk in chunks:
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            content = f"sha256:{digest.hexdigest()}"
            os.replace(incoming, self.blob_path(content))
        finally:
            incoming.unlink(missing_ok=True)
        return self.record(address, content, size, definition_hash=definition_hash, ttl=ttl)

    def record(
        self,
        address: CacheAddress,
        digest: str,
        size: int,
        *,
        definition_hash: str = "",
        ttl: float | None = None,
    ) -> CachedImage:
        """Point ``address`` at content already held."""
        now = self.clock()
        expires_at = now + ttl if ttl else None
        with self.sessions() as session, session.begin():
            row = self._row(session, address)
            if row is None:
                row = CachedObject(owner=address.owner, scope=address.scope, name=address.name)
                session.add(row)
            row.digest = digest
            row.size = size
            row.definition_hash = definition_hash
            row.created_at = now
            row.expires_at = expires_at
        return CachedImage(address, digest, size, definition_hash, expires_at)

    @staticmethod
    def _row(session: Session, address: CacheAddress) -> CachedObject | None:
        return session.scalars(
            select(CachedObject).where(
                CachedObject.owner == address.owner,
                CachedObject.scope == address.scope,
                CachedObject.name == address.name,
            )
        ).first()


def read_chunks(path: Path) -> Iterable[bytes]:
    """The file's content in chunks of a MiB."""
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            yield chunk


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
