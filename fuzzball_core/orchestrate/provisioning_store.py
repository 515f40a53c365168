"""Where the provisioning loop keeps its instances: the ``provisioner_instances`` table.

Every change of an instance is written through at once (the loop records an event with
each), so a restarted Orchestrate reads back which instances exist, which it already deleted
and when each was requested.
"""

from __future__ import annotations

from dataclasses import fields

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fuzzball_core.orchestrate.provisioning import InstanceRecord
from fuzzball_core.store.models import ProvisionerInstance
from fuzzball_core.vocabulary import InstanceState

_COLUMNS = [f.name for f in fields(InstanceRecord)]


class SqlInstanceStore:
    """Instance records in Orchestrate's database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def load(self) -> list[InstanceRecord]:
        """Every instance recorded, deleted ones too (their names stay taken)."""
        with self.sessions() as session:
            rows = session.scalars(select(ProvisionerInstance)).all()
            records = []
            for row in rows:
                values = {name: getattr(row, name) for name in _COLUMNS}
                values["state"] = InstanceState(row.state)
                values["annotations"] = dict(row.annotations or {})
                values["requested_for"] = list(row.requested_for or [])
                values["history"] = [tuple(entry) for entry in row.history or []]
                records.append(InstanceRecord(**values))
            return records

    def save(self, record: InstanceRecord) -> None:
        """Write the record as it is now."""
        with self.sessions() as session:
            row = session.get(ProvisionerInstance, record.id) or ProvisionerInstance(id=record.id)
            for name in _COLUMNS:
                value = getattr(record, name)
                if name == "state":
                    value = value.value
                elif name == "history":
                    value = [list(entry) for entry in value]
                elif name in ("annotations", "requested_for"):
                    value = type(value)(value)  # a fresh object: JSON columns see the change
                setattr(row, name, value)
            session.add(row)
            session.commit()
