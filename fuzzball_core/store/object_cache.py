"""The cluster's object cache: images addressed as ``fuzzball://SCOPE/NAME`` (or ``fb://``).

Orchestrate holds it. Each entry (a :class:`CachedObject` row) names one image by its *object
digest* (:mod:`fuzzball_core.image_objects`): the digest of a small document naming the EROFS
content's digest and the config's digest, so two images with one root file system and
different configs (Env, Cmd, Entrypoint, WorkingDir, User) are two objects, pinned and cached
apart. The bytes live once per digest: the content under ``directory/blobs`` (shared by every
object with that content), the configs under ``directory/configs``, the object documents
under ``directory/objects``. ``user`` entries belong to one account, ``group`` entries to one
organization (the owner is the organization's id), so no organization reads or overwrites
another's images. An account of no organization is a group of its own (the owner is its id:
the cluster's service accounts, accounts older than organizations), but for the accounts a
member keeps for a Federate's callers of one organization there, which share the group their
accounts' ``federate_group_id`` names (:mod:`~fuzzball_core.service.forwarded_accounts`).
No two tenants share a group: there is no group of "no organization". An entry with a
``ttl`` expires; an expired entry is never served and is replaced by the next write.

An entry written before image objects names its content digest, and its config was kept
beside the content (``blobs/<hex>.config.json``, one per content, so the last image stored
with that content set it for all): the first lookup turns it into the object of that content
and that config, as the old code served it, and the entry names the object from then on.
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

from fuzzball_core.drivers import ImageConfig
from fuzzball_core.errors import InvalidArgument, NotFound
from fuzzball_core.image_objects import (
    ImageObject,
    check_digest,
    config_document,
    sha256_digest,
)
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
    def checked(
        cls, account_id: str, scope: str, name: str, *, group: str = "", field: str = "image.uri"
    ) -> CacheAddress:
        """The address of ``name`` in ``scope``: the account's (``user``) or the
        organization's (``group``, whose id ``group`` is); InvalidArgument naming ``field``
        (where the address came from: a workflow's ``image.uri``, a request's path) for a
        bad scope or name."""
        if scope not in SCOPES:
            raise InvalidArgument(f"{field}: scope {scope[:40]!r} must be one of user, group")
        if not name or name.startswith("/") or ".." in name.split("/") or len(name) > 300:
            raise InvalidArgument(f"{field}: {name[:300]!r} is not a valid object name")
        return cls(account_id if scope == "user" else group, scope, name)


@dataclass(frozen=True)
class CachedImage:
    """One live entry of the object cache."""

    address: CacheAddress
    #: the object digest (content and config), what pins name
    digest: str
    #: the content's size in bytes
    size: int
    definition_hash: str
    expires_at: float | None
    #: the EROFS content's digest (shared by objects that differ only in config)
    content: str = ""
    #: the config's digest; "" for an image stored without a config
    config: str = ""


class ObjectCache:
    """Entries in the database, content, configs and object documents under ``directory``."""

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
        for kind in ("blobs", "configs", "objects", "incoming"):
            private_directory(directory / kind)

    def group_of(self, account_id: str) -> str:
        """The ``group`` owner of account ``account_id``'s images: its organization's id;
        for an account of no organization the group its Federate's organization has here
        (an account kept for a Federate's caller), else its own id (as for an account that
        no longer exists): never one shared by accounts of different tenants."""
        with self.sessions() as session:
            account = session.get(Account, account_id)
            if account is None:
                return account_id
            return account.organization_id or account.federate_group_id or account.id

    def blob_path(self, digest: str) -> Path:
        """Where the content with ``digest`` (``sha256:<hex>``) is kept."""
        return self._path("blobs", digest)

    def config_path(self, digest: str) -> Path:
        """Where the config document with ``digest`` is kept."""
        return self._path("configs", digest)

    def object_path(self, digest: str) -> Path:
        """Where the image object document with ``digest`` is kept."""
        return self._path("objects", digest)

    def _path(self, kind: str, digest: str) -> Path:
        # checked first: a digest from a request names a file under ``kind`` and nothing else
        return self.directory / kind / check_digest(digest).partition(":")[2]

    def lookup(self, address: CacheAddress) -> CachedImage | None:
        """The live entry at ``address``, or None (missing or expired)."""
        with self.sessions() as session, session.begin():
            row = self._row(session, address)
            if row is None or (row.expires_at is not None and row.expires_at <= self.clock()):
                return None
            held = self._object(row.digest)
            if held is None:
                held = self._upgraded(row)
            if held is None or not self.blob_path(held.content).exists():
                return None
            return CachedImage(
                address,
                row.digest,
                row.size,
                row.definition_hash,
                row.expires_at,
                held.content,
                held.config,
            )

    def _object(self, digest: str) -> ImageObject | None:
        """The object document kept for ``digest``, None when none is."""
        try:
            return ImageObject.parse(self.object_path(digest).read_bytes(), digest)
        except FileNotFoundError:
            return None

    def _upgraded(self, row: CachedObject) -> ImageObject | None:
        """An entry written before image objects (its digest is its content's) turned into
        the object the old code served for it: that content with the config kept beside
        it. None when the content is gone too."""
        legacy = self.blob_path(row.digest)
        if not legacy.exists():
            return None
        try:
            document = json.loads(legacy.with_name(f"{legacy.name}.config.json").read_bytes())
        except FileNotFoundError:
            document = None
        config = ImageConfig.from_oci(document) if isinstance(document, dict) else None
        if config is not None:
            self.store_config(config.as_oci())
        held = self._put_object(ImageObject.of(row.digest, row.size, config))
        row.digest = held.digest
        return held

    def open_blob(self, digest: str) -> Path:
        """The file holding the content ``digest``; NotFound when the cache does not hold it."""
        return self._held(self.blob_path(digest), f"the object cache holds no object {digest}")

    def open_config(self, digest: str) -> Path:
        """The file holding the config document ``digest``; NotFound when not held."""
        return self._held(self.config_path(digest), f"the object cache holds no config {digest}")

    def open_object(self, digest: str) -> Path:
        """The file holding the image object document ``digest``; NotFound when not held."""
        return self._held(self.object_path(digest), f"the object cache holds no image {digest}")

    @staticmethod
    def _held(path: Path, missing: str) -> Path:
        if not path.exists():
            raise NotFound(missing)
        return path

    def store_config(self, config: Mapping[str, Any]) -> str:
        """Keep the image config ``config`` (the OCI ``config`` object, read as nodes read
        it: a malformed field is InvalidArgument) by the digest of its canonical document;
        returns that digest."""
        document = config_document(ImageConfig.from_oci(config))
        digest = sha256_digest(document)
        path = self.config_path(digest)
        if not path.exists():
            self._write(path, document)
        return digest

    def read_config(self, digest: str) -> dict[str, Any] | None:
        """The config document ``digest`` as JSON; None when none is held (or ``digest`` is
        "", an image without a config)."""
        if not digest:
            return None
        try:
            document = json.loads(self.config_path(digest).read_bytes())
        except FileNotFoundError:
            return None
        return document if isinstance(document, dict) else None

    def store(
        self,
        address: CacheAddress,
        chunks: Iterable[bytes],
        *,
        config: str = "",
        definition_hash: str = "",
        ttl: float | None = None,
    ) -> CachedImage:
        """Write the content ``chunks`` and point ``address`` at the object of that content
        and the config document ``config`` (a digest :meth:`store_config` returned; "" for
        none), replacing any entry. NotFound when ``config`` is not held."""
        config_size = self.open_config(config).stat().st_size if config else 0
        incoming = self.directory / "incoming" / uuid.uuid4().hex
        hasher = hashlib.sha256()
        size = 0
        try:
            with open_private(incoming) as out:
                for chunk in chunks:
                    hasher.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
            content = f"sha256:{hasher.hexdigest()}"
            os.replace(incoming, self.blob_path(content))
        finally:
            incoming.unlink(missing_ok=True)
        held = self._put_object(ImageObject(content, size, config, config_size))
        return self.record(address, held, definition_hash=definition_hash, ttl=ttl)

    def _put_object(self, held: ImageObject) -> ImageObject:
        path = self.object_path(held.digest)
        if not path.exists():
            self._write(path, held.document())
        return held

    def _write(self, path: Path, data: bytes) -> None:
        """Write ``data`` to ``path`` atomically (readers see all of it or nothing)."""
        partial = self.directory / "incoming" / uuid.uuid4().hex
        try:
            with open_private(partial) as out:
                out.write(data)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)

    def record(
        self,
        address: CacheAddress,
        held: ImageObject,
        *,
        definition_hash: str = "",
        ttl: float | None = None,
    ) -> CachedImage:
        """Point ``address`` at the object ``held`` (its content already held)."""
        now = self.clock()
        expires_at = now + ttl if ttl else None
        self._put_object(held)
        with self.sessions() as session, session.begin():
            row = self._row(session, address)
            if row is None:
                row = CachedObject(owner=address.owner, scope=address.scope, name=address.name)
                session.add(row)
            row.digest = held.digest
            row.size = held.size
            row.definition_hash = definition_hash
            row.created_at = now
            row.expires_at = expires_at
        return CachedImage(
            address, held.digest, held.size, definition_hash, expires_at, held.content, held.config
        )

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
