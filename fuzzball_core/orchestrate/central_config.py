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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import yaml
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.config import ConfigError, ProvisionerDefinitionConfig, parse_config
from fuzzball_core.drivers import Provisioner
from fuzzball_core.errors import FailedPrecondition, FuzzballError, InvalidArgument, NotFound
from fuzzball_core.orchestrate.provisioning import Provisioning
from fuzzball_core.store.models import CentralConfigRevision

#: what a central configuration document may hold, by section
ALLOWED = {"provisioner": frozenset({"definitions"})}

#: a loader of ``fuzzball.provisioners`` drivers by name
DriverLoader = Callable[[str], Provisioner]


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
    a document with definitions is then refused)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        provisioning: Provisioning | None,
        load_driver: DriverLoader | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sessions = sessions
        self.provisioning = provisioning
        self.load_driver = load_driver
        self.clock = clock
        # one writer at a time: revision numbers are the previous one plus one
        self._lock = threading.Lock()

    def apply_latest(self) -> None:
        """Put the newest stored revision's definitions in force (at start-up)."""
        latest = self.revision(0)
        if latest is not None:
            self._apply(parse_document(latest.document))

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

    def revisions(self) -> list[CentralConfigRevision]:
        """Every revision, oldest first."""
        with self.sessions() as session:
            query = select(CentralConfigRevision).order_by(CentralConfigRevision.revision)
            return list(session.scalars(query))

    def set(self, document: str) -> int:
        """Validate ``document``, put its definitions in force and store it as the next
        revision; its number."""
        definitions = parse_document(document)
        with self._lock:
            self._apply(definitions)
            with self.sessions() as session, session.begin():
                newest = session.scalar(select(func.max(CentralConfigRevision.revision)))
                number = (newest or 0) + 1
                session.add(
                    CentralConfigRevision(
                        revision=number, document=document, created_at=self.clock()
                    )
                )
        return number

    def _apply(self, definitions: list[ProvisionerDefinitionConfig]) -> None:
        if self.provisioning is None:
            if definitions:
                raise FailedPrecondition(
                    "provisioner definitions: this Orchestrate runs no provisioning loop"
                )
            return
        drivers: dict[str, Provisioner] = {}
        for name in sorted({d.driver for d in definitions} - set(self.provisioning.drivers)):
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
        self.provisioning.set_central_definitions(definitions, drivers)


def document_of(revision: CentralConfigRevision | None) -> str:
    """A revision's document ("" when none was ever set)."""
    return "" if revision is None else revision.document


def revision_json(revision: CentralConfigRevision) -> dict[str, Any]:
    """A CentralConfigRevision as the swagger writes it."""
    created = datetime.fromtimestamp(revision.created_at, UTC).isoformat()
    return {"revision": str(revision.revision), "createdTime": created.replace("+00:00", "Z")}
