"""The central configuration (``/admin/centralconfig``): a YAML document set by cluster
administrators, kept with every revision, whose ``provisioner.definitions`` the
provisioning loop uses beside the configuration file's, without a restart.

The document holds only what Orchestrate can take while running::

    provisioner:
      definitions:
        - {id: big, driver: local, cores: 8, memory: 16GiB}

Any other key is refused naming it (the file's settings need a restart, so they stay in the
file). A definition is validated exactly as in the file; one whose id the file already has
is refused naming it. The newest revision is in force; setting one replaces the central
definitions as a whole (a revision that adds a definition keeps the earlier ones by
repeating them: append is "the previous document plus one").

Credentials in a definition's ``config`` (the settings its driver reads as secrets:
``secret-access-key``, ``key-content``...; :mod:`~fuzzball_core.orchestrate.
central_config_secrets`) are sealed at rest with the data directory's secret keys and every
read shows them as ``<redacted>``; a document sent back with ``<redacted>`` in such a place
keeps the value the newest revision holds there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import yaml
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.config import ConfigError, ProvisionerDefinitionConfig, parse_config
from fuzzball_core.drivers import Provisioner, secret_fields
from fuzzball_core.errors import FailedPrecondition, FuzzballError, InvalidArgument, NotFound
from fuzzball_core.orchestrate.central_config_secrets import redact, restore
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.store.models import CentralConfigRevision
from fuzzball_core.store.secret_box import SecretBox

#: what a central configuration document may hold, by section
ALLOWED = {"provisioner": frozenset({"definitions"})}

#: a loader of ``fuzzball.provisioners`` drivers by name
DriverLoader = Callable[[str], Provisioner]

#: what a revision whose document cannot be redacted shows instead (one stored before its
#: credentials were sealed, in a shape the redaction cannot follow)
UNSHOWABLE = (
    "# this revision's document cannot be shown without its credentials; it is kept sealed\n"
)


def parse_document(text: str) -> list[ProvisionerDefinitionConfig]:
    """The provisioner definitions of a central configuration document; InvalidArgument
    naming what is wrong (a key it may not hold, a bad value)."""
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"config: not a YAML document ({exc.__class__.__name__})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidArgument("config: expected a mapping of sections")
    for section, value in data.items():
        allowed = ALLOWED.get(str(section))
        if allowed is None:
            raise InvalidArgument(
                f"config: {section}: not held by the central configuration (only"
                f" {', '.join(f'{s}.{k}' for s, keys in ALLOWED.items() for k in sorted(keys))};"
                " the rest is set in the configuration file)"
            )
        if not isinstance(value, dict):
            raise InvalidArgument(f"config: {section}: expected a mapping")
        for key in value:
            if key not in allowed:
                raise InvalidArgument(
                    f"config: {section}.{key}: not held by the central configuration"
                )
    try:
        parsed = parse_config(data, source="centralconfig")
    except ConfigError as exc:
        raise InvalidArgument(f"config: {exc.message}") from None
    return list(parsed.provisioner.definitions)


class CentralConfig:
    """The central configuration's revisions in the database, and the provisioning loop
    they feed (Orchestrate always runs one; None here only where a caller builds none, and
    a document with definitions is then refused). ``box`` seals each revision's document."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        provisioning: Provisioning | None,
        load_driver: DriverLoader | None,
        *,
        box: SecretBox,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.provisioning = provisioning
        self.load_driver = load_driver
        self.box = box
        self.clock = clock
        # one writer at a time: revision numbers are the previous one plus one
        self._lock = threading.Lock()

    def apply_latest(self) -> None:
        """Put the newest stored revision's definitions in force (at start-up)."""
        latest = self.revision(0)
        if latest is not None:
            definitions = parse_document(self._clear(latest))
            self._apply(definitions, self._load_drivers(definitions))

    def seal_clear_revisions(self) -> int:
        """Seal the revisions stored before their credentials were (migration 0022) and
        redact their documents; how many there were. Run at start-up, before any read."""
        with self._lock, self.sessions() as session, session.begin():
            query = select(CentralConfigRevision).where(
                CentralConfigRevision.document_sealed.is_(None)
            )
            rows = list(session.scalars(query))
            for row in rows:
                clear = row.document
                row.document_sealed = self.box.encrypt(clear.encode())
                row.document = self._shown(clear)
        return len(rows)

    def revision(self, number: int) -> CentralConfigRevision | None:
        """Revision ``number`` (0: the newest; None when none was ever set);
        NotFound for a revision that does not exist."""
        with self.sessions() as session:
            if number == 0:
                query = select(CentralConfigRevision).order_by(
                    CentralConfigRevision.revision.desc()
                )
                return session.scalars(query.limit(1)).first()
            found = session.get(CentralConfigRevision, number)
        if found is None:
            raise NotFound(f"central configuration revision {number} does not exist")
        return found

    def document(self, number: int) -> str:
        """Revision ``number``'s document as reads show it, its credentials redacted (""
        when none was ever set); NotFound for a revision that does not exist."""
        found = self.revision(number)
        if found is None:
            return ""
        if found.document_sealed is None:  # stored in the clear, not sealed yet
            return self._shown(found.document)
        return found.document

    def revisions(self) -> list[CentralConfigRevision]:
        """Every revision, oldest first."""
        with self.sessions() as session:
            query = select(CentralConfigRevision).order_by(CentralConfigRevision.revision)
            return list(session.scalars(query))

    def set(self, document: str) -> int:
        """Validate ``document``, put its definitions in force and store it as the next
        revision (sealed; its credentials redacted in what reads show); its number. A
        credential given as ``<redacted>`` keeps the value the newest revision holds."""
        definitions = parse_document(document)
        with self._lock:
            drivers = self._load_drivers(definitions)
            credentials = self._credentials(drivers)
            newest = self.revision(0)
            clear = restore(document, credentials, "" if newest is None else self._clear(newest))
            if clear != document:
                definitions = parse_document(clear)
            shown = redact(clear, credentials)
            self._apply(definitions, drivers)
            with self.sessions() as session, session.begin():
                last = session.scalar(select(func.max(CentralConfigRevision.revision)))
                number = (last or 0) + 1
                session.add(
                    CentralConfigRevision(
                        revision=number,
                        document=shown,
                        document_sealed=self.box.encrypt(clear.encode()),
                        created_at=self.clock(),
                    )
                )
        return number

    def _clear(self, revision: CentralConfigRevision) -> str:
        """A revision's document as it was set, its credentials in the clear."""
        if revision.document_sealed is None:
            return revision.document
        return self.box.decrypt(revision.document_sealed).decode()

    def _shown(self, clear: str) -> str:
        """A document stored in the clear, as reads show it: its credentials redacted, by
        the drivers that can be loaded now (every ``config`` value of a definition whose
        driver cannot is redacted)."""
        try:
            drivers = self._load_drivers(parse_document(clear))
        except FuzzballError:  # a driver gone, or a document no longer valid
            drivers = {}
        try:
            return redact(clear, self._credentials(drivers))
        except InvalidArgument:
            return UNSHOWABLE

    def _credentials(
        self, drivers: Mapping[str, Provisioner]
    ) -> Callable[[str], frozenset[tuple[str, ...]]]:
        """The paths under a definition holding credentials, by its driver's name: the
        definition model's secret fields and its driver's secret settings under ``config``
        (the whole ``config`` for a driver not in ``drivers``)."""
        own = secret_fields(ProvisionerDefinitionConfig)

        def paths(name: str) -> frozenset[tuple[str, ...]]:
            driver = drivers.get(name)
            if driver is None:
                return own | {("config",)}
            return own | {("config", *path) for path in driver.secret_settings()}

        return paths

    def _load_drivers(
        self, definitions: list[ProvisionerDefinitionConfig]
    ) -> dict[str, Provisioner]:
        """The drivers of ``definitions`` by name, loading those the loop does not have;
        FailedPrecondition when there is no loop to give definitions to or no registry to
        load a driver from, InvalidArgument naming a driver that cannot be loaded."""
        if self.provisioning is None:
            if definitions:
                raise FailedPrecondition(
                    "provisioner definitions: this Orchestrate runs no provisioning loop"
                )
            return {}
        drivers: dict[str, Provisioner] = {}
        for name in sorted({d.driver for d in definitions}):
            if name in self.provisioning.drivers:
                drivers[name] = self.provisioning.drivers[name]
                continue
            if self.load_driver is None:
                raise FailedPrecondition(
                    f"provisioner definitions: driver {name} cannot be loaded: this"
                    " Orchestrate was built without its plugin registry"
                )
            try:
                drivers[name] = self.load_driver(name)
            except FuzzballError as exc:  # not installed, or failing to load: say which
                raise InvalidArgument(
                    f"provisioner definitions: driver {name} cannot be loaded: {exc.message}"
                ) from None
        return drivers

    def _apply(
        self, definitions: list[ProvisionerDefinitionConfig], drivers: Mapping[str, Provisioner]
    ) -> None:
        if self.provisioning is not None:
            loaded = {n: d for n, d in drivers.items() if n not in self.provisioning.drivers}
            self.provisioning.set_central_definitions(definitions, loaded)


def revision_json(revision: CentralConfigRevision) -> dict[str, Any]:
    """A CentralConfigRevision as the swagger writes it."""
    created = datetime.fromtimestamp(revision.created_at, UTC).isoformat()
    return {"revision": str(revision.revision), "createdTime": created.replace("+00:00", "Z")}
